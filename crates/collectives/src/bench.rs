//! Measurement helpers shared by the `pardis collectives bench` command, the criterion
//! benches and `scripts/compare-collectives`, with the nccl-tests definitions of bandwidth
//! (<https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md>):
//! `algbw = size / time` and `busbw = algbw × factor`, where the factor is `2(n−1)/n` for
//! all-reduce, `(n−1)/n` for all-gather, reduce-scatter and all-to-all, and 1 for broadcast
//! and reduce. `size` is the bytes of the full buffer (the output of all-gather, the input of
//! reduce-scatter).

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::tcp::run_tcp_local;
use crate::{run_local_with, CollectiveError, Communicator, Config, OpKind, ReduceOp, Result};

/// Where the ranks of a benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchTransport {
    /// Threads over the shared-memory transport.
    Local,
    /// Threads over loopback TCP.
    Tcp,
}

/// One benchmark point.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Transport.
    pub transport: BenchTransport,
    /// Number of ranks.
    pub ranks: usize,
    /// Collective (point-to-point is not benchmarked).
    pub op: OpKind,
    /// Buffer size in bytes (nccl-tests `size`), of f32 elements.
    pub bytes: usize,
    /// Timed iterations.
    pub iters: usize,
    /// Untimed iterations first.
    pub warmup: usize,
    /// Engine settings (mode, algorithm).
    pub engine: Config,
}

impl BenchConfig {
    /// A point with `warmup = max(iters / 10, 1)`.
    pub fn new(
        transport: BenchTransport,
        ranks: usize,
        op: OpKind,
        bytes: usize,
        iters: usize,
        engine: Config,
    ) -> Self {
        Self {
            transport,
            ranks,
            op,
            bytes,
            iters,
            warmup: (iters / 10).max(1),
            engine,
        }
    }
}

/// Result of one benchmark point.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// Buffer size in bytes.
    pub bytes: usize,
    /// Mean time per iteration of the slowest rank.
    pub time: Duration,
    /// Algorithm bandwidth, GB/s (10^9 bytes per second).
    pub algbw_gbs: f64,
    /// Bus bandwidth, GB/s.
    pub busbw_gbs: f64,
}

/// nccl-tests bus-bandwidth factor of `op` on `n` ranks.
pub fn bus_factor(op: OpKind, n: usize) -> f64 {
    let n = n as f64;
    match op {
        OpKind::AllReduce => 2.0 * (n - 1.0) / n,
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll => (n - 1.0) / n,
        _ => 1.0,
    }
}

/// Runs one benchmark point.
pub fn run_bench(cfg: &BenchConfig) -> Result<BenchResult> {
    if cfg.ranks == 0 || cfg.iters == 0 {
        return Err(CollectiveError::InvalidInput(
            "bench needs ranks >= 1 and iters >= 1".into(),
        ));
    }
    let body =
        |comm: Communicator| bench_communicator(&comm, cfg.op, cfg.bytes, cfg.iters, cfg.warmup);
    let outcomes = match cfg.transport {
        BenchTransport::Local => run_local_with(&cfg.engine, cfg.ranks, body),
        BenchTransport::Tcp => run_tcp_local(&cfg.engine, cfg.ranks, body),
    };
    let mut slowest = Duration::ZERO;
    for o in outcomes {
        slowest = slowest.max(o??);
    }
    let time = slowest / cfg.iters as u32;
    let algbw = cfg.bytes as f64 / time.as_secs_f64().max(1e-12) / 1e9;
    Ok(BenchResult {
        bytes: cfg.bytes,
        time,
        algbw_gbs: algbw,
        busbw_gbs: algbw * bus_factor(cfg.op, cfg.ranks),
    })
}

/// This rank's part of a benchmark point on `comm` (any transport): `warmup` untimed then
/// `iters` timed runs of `op` over `bytes` bytes of f32; returns this rank's time for the timed
/// runs (the slowest rank's time is the point's time).
pub fn bench_communicator(
    comm: &Communicator,
    op: OpKind,
    bytes: usize,
    iters: usize,
    warmup: usize,
) -> Result<Duration> {
    let n = comm.world_size();
    let count = bytes / 4;
    let per_rank = count / n;
    let mut buf = vec![1.0f32; count];
    let once = |buf: Vec<f32>| -> Result<Vec<f32>> {
        match op {
            OpKind::AllReduce => comm.all_reduce(buf, ReduceOp::Sum),
            OpKind::ReduceScatter => comm
                .reduce_scatter(buf[..per_rank * n].to_vec(), ReduceOp::Sum)
                .map(|_| buf),
            OpKind::AllGather => comm.all_gather(vec![1.0; per_rank]),
            OpKind::AllToAll => comm.all_to_all(buf[..per_rank * n].to_vec()).map(|_| buf),
            OpKind::Broadcast => comm.broadcast(buf, 0),
            OpKind::Reduce => comm.reduce(buf, ReduceOp::Sum, 0).map(|_| vec![1.0; count]),
            OpKind::Barrier => comm.barrier().map(|()| buf),
            OpKind::PointToPoint => Err(CollectiveError::InvalidInput(
                "point-to-point is not a collective benchmark".into(),
            )),
        }
    };
    for _ in 0..warmup {
        buf = once(buf)?;
    }
    comm.barrier()?;
    let start = Instant::now();
    for _ in 0..iters {
        buf = once(buf)?;
    }
    Ok(start.elapsed())
}

/// Bandwidth of `copy_from_slice` between two `bytes`-sized buffers, GB/s (the physical limit
/// of a shared-memory transport).
pub fn memcpy_bandwidth(bytes: usize, iters: usize) -> f64 {
    let src = vec![1u8; bytes.max(1)];
    let mut dst = vec![0u8; bytes.max(1)];
    dst.copy_from_slice(&src);
    let start = Instant::now();
    for _ in 0..iters.max(1) {
        dst.copy_from_slice(std::hint::black_box(&src));
    }
    std::hint::black_box(&dst);
    bytes as f64 * iters.max(1) as f64 / start.elapsed().as_secs_f64().max(1e-12) / 1e9
}

/// Throughput of one loopback TCP stream moving `bytes` `iters` times, GB/s (the physical limit
/// of the TCP transport on one host).
pub fn loopback_bandwidth(bytes: usize, iters: usize) -> Result<f64> {
    let io = |e| CollectiveError::io("loopback baseline", e);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let total = bytes * iters.max(1);
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 1 << 20];
        let mut left = total;
        while left > 0 {
            let k = s.read(&mut buf[..left.min(1 << 20)])?;
            if k == 0 {
                break;
            }
            left -= k;
        }
        s.write_all(&[1])
    });
    let mut s = std::net::TcpStream::connect(addr).map_err(io)?;
    s.set_nodelay(true).map_err(io)?;
    let data = vec![1u8; bytes];
    let start = Instant::now();
    for _ in 0..iters.max(1) {
        s.write_all(&data).map_err(io)?;
    }
    let mut ack = [0u8];
    s.read_exact(&mut ack).map_err(io)?;
    let secs = start.elapsed().as_secs_f64();
    reader
        .join()
        .map_err(|_| CollectiveError::InvalidInput("loopback reader panicked".into()))?
        .map_err(io)?;
    Ok(total as f64 / secs.max(1e-12) / 1e9)
}
