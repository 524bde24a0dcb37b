//! Bandwidth table behind `scripts/compare-collectives`: all-reduce busbw (nccl-tests
//! definitions) of pardis over the local and TCP transports for 2 and 4 ranks, next to memcpy
//! and loopback-TCP bandwidth as physical limits.
//!
//! `cargo run --release -p collectives --example compare_collectives -- [MAX_BYTES] [RANKS,..]`

use collectives::bench::{
    loopback_bandwidth, memcpy_bandwidth, run_bench, BenchConfig, BenchTransport,
};
use collectives::{Config, Mode, OpKind};

fn point(
    transport: BenchTransport,
    ranks: usize,
    bytes: usize,
    mode: Mode,
) -> collectives::Result<f64> {
    let iters = ((512 << 20) / bytes).clamp(3, 2000);
    let cfg = BenchConfig::new(
        transport,
        ranks,
        OpKind::AllReduce,
        bytes,
        iters,
        Config::with_mode(mode),
    );
    Ok(run_bench(&cfg)?.busbw_gbs)
}

fn main() -> collectives::Result<()> {
    let mut args = std::env::args().skip(1);
    let max: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256 << 20);
    let ranks: Vec<usize> = args
        .next()
        .map(|s| s.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_else(|| vec![2, 4]);
    println!("all-reduce busbw in GB/s (nccl-tests definition: algbw * 2(n-1)/n); f32 sum");
    println!(
        "{:>10} {:>5} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9}",
        "bytes", "ranks", "local", "local-ord", "tcp", "memcpy", "loopback", "loc/mcpy", "tcp/loop"
    );
    let mut bytes = 1 << 10;
    while bytes <= max {
        let iters = ((256 << 20) / bytes).clamp(3, 200);
        let mem = memcpy_bandwidth(bytes, iters);
        let lo = loopback_bandwidth(bytes, iters)?;
        for &n in &ranks {
            let local = point(BenchTransport::Local, n, bytes, Mode::Preemptive)?;
            let ordered = point(BenchTransport::Local, n, bytes, Mode::Ordered)?;
            let tcp = point(BenchTransport::Tcp, n, bytes, Mode::Preemptive)?;
            println!(
                "{bytes:>10} {n:>5} {local:>12.3} {ordered:>12.3} {tcp:>12.3} {mem:>10.3} {lo:>10.3} {:>8.0}% {:>8.0}%",
                100.0 * local / mem,
                100.0 * tcp / lo
            );
        }
        bytes *= 4;
    }
    println!("MPI columns: not built (the `mpi` feature is not implemented in this crate yet)");
    Ok(())
}
