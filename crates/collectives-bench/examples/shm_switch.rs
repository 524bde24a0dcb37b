//! Tuning data for [`Config::shared_memory_bytes`]: local all-reduce busbw of the ring against
//! the shared-memory algorithm, per world size and size, measured as interleaved pairs (ring,
//! shm, ring, shm, ...) so both see the same load; prints the median shm/ring ratio.
//!
//! `cargo run --release -p collectives-bench --example shm_switch -- [RANKS,..] [MIN] [MAX] [PAIRS]`

use bench_timing::median;
use collectives::{AllReduceAlgorithm, Config, Result};
use collectives_bench::{all_reduce_busbw, BenchTransport};

fn busbw(algo: AllReduceAlgorithm, n: usize, bytes: usize) -> Result<f64> {
    let engine = Config {
        all_reduce: algo,
        ..Config::default()
    };
    all_reduce_busbw(BenchTransport::Local, n, bytes, engine)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ranks: Vec<usize> = args
        .first()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![2, 3, 4, 8]);
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (min, max, pairs) = (num(1, 64 << 10), num(2, 16 << 20), num(3, 7).max(1));
    println!("local all-reduce busbw GB/s (f32 sum), median of {pairs} interleaved pairs");
    println!(
        "{:>10} {:>5} {:>8} {:>8} {:>9}",
        "bytes", "ranks", "ring", "shm", "shm/ring"
    );
    for &n in &ranks {
        let mut bytes = min;
        while bytes <= max {
            let (mut ring, mut shm, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..pairs {
                let r = busbw(AllReduceAlgorithm::Ring, n, bytes)?;
                let s = busbw(AllReduceAlgorithm::SharedMemory, n, bytes)?;
                ring.push(r);
                shm.push(s);
                ratio.push(s / r);
            }
            println!(
                "{bytes:>10} {n:>5} {:>8.3} {:>8.3} {:>8.0}%",
                median(ring),
                median(shm),
                100.0 * median(ratio)
            );
            bytes *= 4;
        }
    }
    Ok(())
}
