//! Collectives on an oversubscribed machine (issue 24): 1 MiB f32 all-reduces (ring,
//! halving-doubling, shared memory) on 2, 4 and 8 local ranks, first alone, then while
//! `BUSY` threads of this process spin (busy loops in the same scheduling group, the worst
//! case: with autogroup, busy processes of other sessions take only their group's share).
//! Prints the wall time per all-reduce, the mean time of one `yield_now` (under load EEVDF
//! answers a yield with a whole time slice of another thread) and the engines' counters: slow
//! yields seen (the yield gate closed) and parks.
//!
//! `cargo run --release -p collectives-bench --example oversubscribed -- [BUSY (default 16)] [ITERS (default 5)]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use collectives::{run_local, AllReduceAlgorithm, EngineStats, ReduceOp};

const ALGOS: [AllReduceAlgorithm; 3] = [
    AllReduceAlgorithm::Ring,
    AllReduceAlgorithm::HalvingDoubling,
    AllReduceAlgorithm::SharedMemory,
];

/// Mean duration of one `yield_now` over 20.
fn yield_time() -> Duration {
    let start = Instant::now();
    for _ in 0..20 {
        std::thread::yield_now();
    }
    start.elapsed() / 20
}

/// Wall time per all-reduce on `n` ranks, and the engines' counters summed over the ranks.
fn all_reduces(n: usize, iters: usize) -> collectives::Result<(Duration, EngineStats)> {
    let len = (1 << 20) / 4;
    let start = Instant::now();
    let stats = run_local(n, |comm| -> collectives::Result<EngineStats> {
        for _ in 0..iters {
            for algo in ALGOS {
                let data = vec![comm.rank() as f32; len];
                let got = comm.iall_reduce_with(data, ReduceOp::Sum, algo)?.wait()?;
                assert_eq!(got[0], (n * (n - 1) / 2) as f32);
            }
        }
        Ok(comm.engine_stats())
    })?;
    let per_op = start.elapsed() / (iters * ALGOS.len()) as u32;
    let mut sum = EngineStats::default();
    for s in stats {
        let s = s?;
        sum.slow_yields += s.slow_yields;
        sum.parks += s.parks;
    }
    Ok((per_op, sum))
}

fn main() -> collectives::Result<()> {
    let mut args = std::env::args().skip(1);
    let busy: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let iters: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    println!("1 MiB f32 all-reduce (ring, halving-doubling, shared memory), {iters} of each");
    println!(
        "{:>5} {:>6} {:>12} {:>10} {:>12} {:>8}",
        "busy", "ranks", "ms/all-red.", "yield µs", "slow yields", "parks"
    );
    for b in [0, busy] {
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..b)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        for n in [2, 4, 8] {
            let y = yield_time();
            let (t, s) = all_reduces(n, iters)?;
            println!(
                "{b:>5} {n:>6} {:>12.2} {:>10.1} {:>12} {:>8}",
                t.as_secs_f64() * 1e3,
                y.as_secs_f64() * 1e6,
                s.slow_yields,
                s.parks
            );
        }
        stop.store(true, Ordering::Relaxed);
        spinners
            .into_iter()
            .for_each(|t| t.join().expect("busy thread"));
    }
    Ok(())
}
