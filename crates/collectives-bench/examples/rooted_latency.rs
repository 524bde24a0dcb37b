//! Small rooted collectives: microseconds per 1 KiB f32 reduce and broadcast (root 0) and, for
//! scale, barrier and all-reduce, on 2 and 4 local ranks and 2 loopback-TCP ranks (mean of the
//! slowest rank over 2000 iterations, three rounds so the noise shows). Measures what the
//! agreement rounds of rooted collectives (`ceil(log2 n)` empty exchanges woven into the
//! schedule, so that ranks disagreeing on the root get `Mismatch` instead of a wrong result)
//! cost.
//!
//! `cargo run --release -p collectives-bench --example rooted_latency -- [ITERS (default 2000)]`

use collectives::{Config, OpKind};
use collectives_bench::{run_bench, BenchConfig, BenchTransport};

fn main() -> collectives::Result<()> {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000);
    let points = [
        (BenchTransport::Local, 2),
        (BenchTransport::Local, 4),
        (BenchTransport::Tcp, 2),
    ];
    let ops = [
        ("reduce", OpKind::Reduce),
        ("broadcast", OpKind::Broadcast),
        ("barrier", OpKind::Barrier),
        ("all-reduce", OpKind::AllReduce),
    ];
    println!("1 KiB, µs per operation (slowest rank), {iters} iterations, 3 rounds");
    for (transport, ranks) in points {
        for (name, op) in ops {
            print!("{transport:?} {ranks} ranks {name:<10}");
            for _ in 0..3 {
                let bench = BenchConfig::new(transport, ranks, op, 1024, iters, Config::default());
                let r = run_bench(&bench)?;
                print!(" {:7.1}", r.time.as_secs_f64() * 1e6);
            }
            println!();
        }
    }
    Ok(())
}
