//! Small-message latency between threads: microseconds per 1 KiB f32 all-reduce on local
//! ranks (slowest rank, 5000 iterations), for the preemptive engine with waiting threads
//! driving it (the default), ordered mode, and preemptive with `caller_drives: false` (every
//! operation handed to the engine thread and back). Three rounds, so the noise shows.
//!
//! `cargo run --release -p collectives-bench --example latency_probe -- [RANKS (default 2)]`

use collectives::{Config, Mode, OpKind};
use collectives_bench::{run_bench, BenchConfig, BenchTransport};

fn main() -> collectives::Result<()> {
    let ranks: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let variants = [
        ("preemptive", Config::default()),
        ("ordered", Config::with_mode(Mode::Ordered)),
        (
            "engine-thread-only",
            Config {
                caller_drives: false,
                ..Config::default()
            },
        ),
    ];
    println!("1 KiB all-reduce, {ranks} local ranks: µs per operation");
    for _ in 0..3 {
        for (name, cfg) in &variants {
            let bench = BenchConfig::new(
                BenchTransport::Local,
                ranks,
                OpKind::AllReduce,
                1024,
                5000,
                cfg.clone(),
            );
            let r = run_bench(&bench)?;
            print!("{name} {:.1}  ", r.time.as_secs_f64() * 1e6);
        }
        println!();
    }
    Ok(())
}
