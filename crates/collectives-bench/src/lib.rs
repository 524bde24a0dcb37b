//! # collectives-bench
//!
//! The measurements of the `collectives` crate, kept out of the library (not published; the
//! pattern of rayon-demo and sprs-benches): the `pardis collectives bench` and `chaos`
//! commands, the criterion benches, `scripts/compare-collectives` and this crate's examples
//! (the comparison and tuning drivers) use it. Bandwidths follow the nccl-tests definitions
//! (<https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md>):
//! `algbw = size / time` and `busbw = algbw × factor`, the factor being
//! [`collectives::bus_factor`] (`2(n−1)/n` for all-reduce, `(n−1)/n` for all-gather,
//! reduce-scatter and all-to-all, 1 for broadcast and reduce). `size` is the bytes of the full
//! buffer (the output of all-gather, the input of reduce-scatter).
//!
//! ```
//! use collectives::{Config, OpKind};
//! use collectives_bench::{run_bench, BenchConfig, BenchTransport};
//!
//! let cfg = BenchConfig::new(BenchTransport::Local, 2, OpKind::AllReduce, 4096, 3, Config::default());
//! let r = run_bench(&cfg).unwrap();
//! assert!(r.busbw_gbs > 0.0 && r.busbw_gbs <= r.algbw_gbs);
//! ```
//!
//! **References.** busbw of a ring all-reduce is the rate at which every rank moves data over
//! its own link, all ranks at once. On one host the ranks' "links" share the cores and the
//! memory bus, so the like-for-like limits are *concurrent* ones:
//! [`memcpy_bandwidth_concurrent`] (per-thread memcpy rate while `n` threads copy at once) and
//! [`loopback_ring_bandwidth`] (per-stream rate of `n` loopback sockets in a ring, all
//! streaming at once — what a ring all-reduce's sockets do, from cache-resident buffers;
//! [`loopback_ring_bandwidth_in_memory`] moves a message-sized buffer of memory instead, as the
//! all-reduce must). [`memcpy_bandwidth`] and
//! [`loopback_bandwidth`] (one thread, one stream) are the limits of a single rank alone; with
//! more ranks than cores they overstate what each rank can get.
//!
//! **The algorithm's own limit.** [`loopback_ring_all_reduce`] runs the same pipelined ring
//! all-reduce as the TCP transport directly on raw loopback sockets (no engine): what any ring
//! all-reduce can reach here. pardis's ratio to it is the transport's overhead; its ratio to
//! [`loopback_ring_bandwidth`] is what the all-reduce itself costs (reducing, and reading and
//! writing a message that lives in memory). [`loopback_halving_doubling_all_reduce`] is the
//! same for the halving-doubling that `Auto` runs on 4, 8, … TCP ranks below 4 MiB.
//! [`all_reduce_rate`] samples pardis the way the references are sampled, so that a ratio
//! compares the same statistic.
//!
//! **Chaos.** [`chaos`] runs the DFCCL paper's random-order workload (the deadlock-freedom
//! demonstration behind `pardis collectives chaos` and the collectives' tests).

use std::time::{Duration, Instant};

use collectives::tcp::run_tcp_local;
use collectives::{
    bus_factor, run_local_with, CollectiveError, Communicator, Config, OpKind, ReduceOp, Result,
};

pub mod chaos;
mod ideal;
pub mod mpirun;
mod reference;
mod sampled;

pub use ideal::{loopback_halving_doubling_all_reduce, loopback_ring_all_reduce};
pub use sampled::all_reduce_rate;

pub use reference::{
    loopback_bandwidth, loopback_ring_bandwidth, loopback_ring_bandwidth_in_memory,
    loopback_round_trip, memcpy_bandwidth, memcpy_bandwidth_concurrent, Rate,
};

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

/// Most bytes of buffers a benchmark point may hold, summed over its ranks (ranks × size): 8 GiB.
pub const MAX_BENCH_BYTES: u64 = 8 << 30;

impl BenchConfig {
    /// Checks the point before anything runs: 1 to [`MAX_LOCAL_RANKS`](collectives::MAX_LOCAL_RANKS)
    /// ranks (over TCP also within the open-file limit, checked when it starts), at least
    /// one iteration, a size of at least one f32 (4 bytes), and ranks × size at most
    /// [`MAX_BENCH_BYTES`].
    pub fn validate(&self) -> Result<()> {
        collectives::__private::check_local_ranks(self.ranks)?;
        let bad = |m: String| Err(CollectiveError::InvalidInput(m));
        if self.iters == 0 {
            return bad("a benchmark needs at least one iteration".into());
        }
        if self.bytes < 4 {
            return bad(format!(
                "size {} bytes: need at least 4 (one f32 element)",
                self.bytes
            ));
        }
        let total = (self.ranks as u128) * (self.bytes as u128);
        if total > u128::from(MAX_BENCH_BYTES) {
            return bad(format!(
                "{} ranks × {} bytes would hold {:.1} GiB of buffers, above the limit of {} GiB",
                self.ranks,
                self.bytes,
                total as f64 / (1u64 << 30) as f64,
                MAX_BENCH_BYTES >> 30
            ));
        }
        Ok(())
    }
}

/// Runs one benchmark point; invalid parameters ([`BenchConfig::validate`]) are an error
/// before anything runs.
pub fn run_bench(cfg: &BenchConfig) -> Result<BenchResult> {
    cfg.validate()?;
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

/// Bus bandwidth (GB/s) of an all-reduce of `bytes` bytes of f32 on `ranks` ranks with the
/// settings `engine`, timed over enough iterations to move about 64 MiB per rank (3 to 400).
pub fn all_reduce_busbw(
    transport: BenchTransport,
    ranks: usize,
    bytes: usize,
    engine: Config,
) -> Result<f64> {
    let iters = ((64 << 20) / bytes.max(1)).clamp(3, 400);
    let cfg = BenchConfig::new(transport, ranks, OpKind::AllReduce, bytes, iters, engine);
    Ok(run_bench(&cfg)?.busbw_gbs)
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
