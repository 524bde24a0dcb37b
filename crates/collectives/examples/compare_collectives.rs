//! Bandwidth tables behind `scripts/compare-collectives`: all-reduce busbw (nccl-tests
//! definitions) of pardis over the local and TCP transports, next to memcpy and loopback-TCP
//! bandwidth as physical limits; then broadcast busbw, binomial tree against the pipelined
//! chain. Every figure is the best of [`REPEATS`] runs (the machine may be shared). The MPI
//! columns come from `compare_collectives_mpi` (feature `mpi`, run under `mpirun`).
//!
//! `cargo run --release -p collectives --example compare_collectives -- [MAX_BYTES] [RANKS,..] [MIN_BYTES]`

use collectives::bench::{
    loopback_bandwidth, memcpy_bandwidth, run_bench, BenchConfig, BenchTransport,
};
use collectives::{BroadcastAlgorithm, Config, Mode, OpKind, Result};

/// Runs per figure; the best is reported.
const REPEATS: usize = 3;

fn best(mut f: impl FnMut() -> Result<f64>) -> Result<f64> {
    (0..REPEATS).try_fold(0.0f64, |b, _| Ok(b.max(f()?)))
}

fn busbw(
    transport: BenchTransport,
    op: OpKind,
    ranks: usize,
    bytes: usize,
    engine: &Config,
) -> Result<f64> {
    let iters = ((256 << 20) / bytes).clamp(3, 1000);
    let cfg = BenchConfig::new(transport, ranks, op, bytes, iters, engine.clone());
    best(|| Ok(run_bench(&cfg)?.busbw_gbs))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let max: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256 << 20);
    let ranks: Vec<usize> = args
        .next()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![2, 4]);
    let min: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(1 << 10);
    let sizes: Vec<usize> = std::iter::successors(Some(min.max(1)), |b| Some(b * 4))
        .take_while(|&b| b <= max)
        .collect();
    let (pre, ord) = (Config::default(), Config::with_mode(Mode::Ordered));
    let (local, tcp) = (BenchTransport::Local, BenchTransport::Tcp);
    let all_reduce = OpKind::AllReduce;

    println!("all-reduce busbw in GB/s (nccl-tests: algbw * 2(n-1)/n); f32 sum; best of {REPEATS}");
    println!(
        "{:>10} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
        "bytes",
        "ranks",
        "local",
        "local-ord",
        "tcp",
        "memcpy",
        "loopback",
        "loc/mcpy",
        "ord/pre",
        "tcp/loop"
    );
    for &bytes in &sizes {
        let iters = ((256 << 20) / bytes).clamp(3, 200);
        let mem = best(|| Ok(memcpy_bandwidth(bytes, iters)))?;
        let lo = best(|| loopback_bandwidth(bytes, iters))?;
        for &n in &ranks {
            let l = busbw(local, all_reduce, n, bytes, &pre)?;
            let o = busbw(local, all_reduce, n, bytes, &ord)?;
            let t = busbw(tcp, all_reduce, n, bytes, &pre)?;
            println!(
                "{bytes:>10} {n:>5} {l:>9.3} {o:>9.3} {t:>9.3} {mem:>9.3} {lo:>9.3} {:>7.0}% {:>7.0}% {:>7.0}%",
                100.0 * l / mem,
                100.0 * o / l,
                100.0 * t / lo
            );
        }
    }

    println!();
    println!("broadcast busbw in GB/s (= algbw), root 0: binomial tree vs pipelined chain");
    println!(
        "{:>10} {:>5} {:>9} {:>9} {:>9} {:>9}",
        "bytes", "ranks", "local-bin", "local-pipe", "tcp-bin", "tcp-pipe"
    );
    let with = |broadcast| Config {
        broadcast,
        ..Config::default()
    };
    let (bin, pipe) = (
        with(BroadcastAlgorithm::Binomial),
        with(BroadcastAlgorithm::Pipelined),
    );
    for &bytes in sizes.iter().filter(|&&b| b >= 1 << 20) {
        for &n in ranks.iter().filter(|&&n| n > 2) {
            let bc = OpKind::Broadcast;
            println!(
                "{bytes:>10} {n:>5} {:>9.3} {:>9.3} {:>9.3} {:>9.3}",
                busbw(local, bc, n, bytes, &bin)?,
                busbw(local, bc, n, bytes, &pipe)?,
                busbw(tcp, bc, n, bytes, &bin)?,
                busbw(tcp, bc, n, bytes, &pipe)?
            );
        }
    }
    Ok(())
}
