//! Small-message latency over loopback TCP, for `scripts/compare-collectives-mpi`: µs per
//! all-reduce of `BYTES` f32 bytes on `RANKS` TCP ranks (threads of this process, slowest rank)
//! next to one raw loopback round trip of the same size between two threads
//! (`collectives_bench::loopback_round_trip`), measured back to back in each of `ROUNDS` rounds
//! (paired: the ratio of a round compares figures taken under the same load). Variants:
//! `new` = `Config::default()` (recursive doubling below `Config::recursive_doubling_bytes`);
//! `old` = halving-doubling (the choice before issue 31).
//! Prints every round, then the medians and the median of the per-round ratios.
//!
//! `cargo run --release -p collectives-bench --example tcp_latency -- [BYTES (1024)] [RANKS (2)]
//! [ROUNDS (7)] [ITERS (2000)]`

use collectives::{AllReduceAlgorithm, Config, OpKind};
use collectives_bench::{loopback_round_trip, run_bench, BenchConfig, BenchTransport};

fn main() -> collectives::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|s| {
            s.parse().map_err(|_| {
                collectives::CollectiveError::InvalidInput(format!(
                    "arguments are whole numbers (BYTES RANKS ROUNDS ITERS), not `{s}`"
                ))
            })
        })
        .collect::<collectives::Result<_>>()?;
    let arg = |i: usize, d: usize| args.get(i).copied().unwrap_or(d);
    let (bytes, ranks, rounds, iters) = (arg(0, 1024), arg(1, 2), arg(2, 7).max(1), arg(3, 2000));
    let variants = [
        Config::default(),
        Config {
            all_reduce: AllReduceAlgorithm::HalvingDoubling,
            ..Config::default()
        },
    ];
    println!(
        "{bytes} B all-reduce on {ranks} TCP ranks vs raw loopback round trip, µs per operation"
    );
    println!(
        "{:>5} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "round", "raw-rtt", "new", "old", "new/rtt", "old/rtt", "old/new"
    );
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); 6];
    for round in 0..rounds {
        let rtt = loopback_round_trip(bytes, iters)?.as_secs_f64() * 1e6;
        let mut row = vec![rtt];
        for cfg in &variants {
            let b = BenchConfig::new(
                BenchTransport::Tcp,
                ranks,
                OpKind::AllReduce,
                bytes,
                iters,
                cfg.clone(),
            );
            row.push(run_bench(&b)?.time.as_secs_f64() * 1e6);
        }
        row.extend([row[1] / rtt, row[2] / rtt, row[2] / row[1]]);
        println!(
            "{round:>5} {:>8.1} {:>8.1} {:>8.1} {:>8.2} {:>8.2} {:>8.2}",
            row[0], row[1], row[2], row[3], row[4], row[5]
        );
        for (c, v) in cols.iter_mut().zip(row) {
            c.push(v);
        }
    }
    let m: Vec<f64> = cols
        .iter()
        .map(|c| bench_timing::median(c.clone()))
        .collect();
    println!(
        "{:>5} {:>8.1} {:>8.1} {:>8.1} {:>8.2} {:>8.2} {:>8.2}",
        "med", m[0], m[1], m[2], m[3], m[4], m[5]
    );
    println!("(medians over rounds; ratios: the median of the rounds' ratios)");
    Ok(())
}
