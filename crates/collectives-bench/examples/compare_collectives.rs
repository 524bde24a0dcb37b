//! Bandwidth tables behind `scripts/compare-collectives`: (1) all-reduce busbw (nccl-tests
//! definitions) of pardis over the local and TCP transports next to the physical references,
//! memcpy bandwidth and loopback-TCP throughput, alone and with the concurrency of `n` ranks
//! (`n` threads copying at once; `n` sockets in a ring streaming at once — the like-for-like
//! limits of busbw, see the `collectives_bench` crate docs) and the same ring all-reduce written directly on
//! raw sockets (its speed of light), every row measured in rounds that run all its
//! columns back to back so that they share the load; (2) preemptive against ordered engine mode,
//! measured interleaved (alternating runs, many pairs, median and quartiles of the ratio), with
//! blocking calls and with several non-blocking all-reduces in flight; (3) broadcast busbw,
//! binomial tree against the pipelined chain; (4) issue 31's TCP goal (TCP all-reduce ≥ 90 % of
//! `ar-n` from 1 MiB; pardis's ring against `ar-n`, and halving-doubling where `Auto` runs it
//! against `hd-n`, the same on raw sockets) as paired ratios: many pairs of a TCP figure and a
//! raw-socket figure taken back to back, in alternating order, each the median of a few
//! samples, and the median ratio
//! with its 95 % interval (the table's best-of-9 figures swing by ±40 % on a noisy host). The
//! MPI columns come from `compare_collectives_mpi` (feature `mpi`, run under `mpirun`).
//!
//! `cargo run --release -p collectives-bench --example compare_collectives -- [MAX_BYTES] [RANKS,..] [MIN_BYTES] [PAIRS] [all|table,modes,broadcast,goal]`

use std::time::Instant;

use bench_timing::{median_ci, quantile};
use collectives::{
    bus_factor, run_local_with, AllReduceAlgorithm, BroadcastAlgorithm, CollectiveError,
    Communicator, Config, Mode, OpKind, ReduceOp, Result, DEFAULT_TCP_HALVING_DOUBLING_BYTES,
};
use collectives_bench::{
    all_reduce_rate, loopback_bandwidth, loopback_halving_doubling_all_reduce,
    loopback_ring_all_reduce, loopback_ring_bandwidth, memcpy_bandwidth_concurrent, run_bench,
    BenchConfig, BenchTransport,
};

/// Rounds (runs per pardis figure); the best is reported.
const REPEATS: usize = 3;
/// Timed samples per reference figure and round.
const SAMPLES: usize = 3;
/// Timed samples per figure of a goal pair (their median is the figure).
const GOAL_SAMPLES: usize = 5;
/// Issue 31's goal: TCP all-reduce busbw at least this share of `ar-n`'s, from 1 MiB.
const GOAL_TCP_OF_AR: f64 = 0.9;

fn best(mut f: impl FnMut() -> Result<f64>) -> Result<f64> {
    (0..REPEATS).try_fold(0.0f64, |b, _| Ok(b.max(f()?)))
}

fn iters_for(bytes: usize) -> usize {
    ((256 << 20) / bytes).clamp(3, 1000)
}

fn point(transport: BenchTransport, op: OpKind, n: usize, bytes: usize, e: &Config) -> Result<f64> {
    let cfg = BenchConfig::new(transport, n, op, bytes, iters_for(bytes), e.clone());
    Ok(run_bench(&cfg)?.busbw_gbs)
}

fn busbw(
    transport: BenchTransport,
    op: OpKind,
    ranks: usize,
    bytes: usize,
    engine: &Config,
) -> Result<f64> {
    best(|| point(transport, op, ranks, bytes, engine))
}

/// All-reduce busbw on `n` local ranks when every rank keeps `k` non-blocking all-reduces of
/// `bytes` in flight (submitted in the same order everywhere, then all waited for), buffers
/// reused; the slowest rank's time.
fn in_flight(n: usize, bytes: usize, k: usize, engine: &Config) -> Result<f64> {
    let batches = (iters_for(bytes) / k).max(2);
    let body = |comm: Communicator| -> Result<std::time::Duration> {
        let mut bufs: Vec<Vec<f32>> = (0..k).map(|_| vec![1.0f32; bytes / 4]).collect();
        let batch = |bufs: &mut Vec<Vec<f32>>| -> Result<()> {
            let handles = bufs
                .drain(..)
                .map(|b| comm.iall_reduce(b, ReduceOp::Sum))
                .collect::<Result<Vec<_>>>()?;
            for h in handles {
                bufs.push(h.wait()?);
            }
            Ok(())
        };
        batch(&mut bufs)?;
        comm.barrier()?;
        let start = Instant::now();
        for _ in 0..batches {
            batch(&mut bufs)?;
        }
        Ok(start.elapsed())
    };
    let mut slowest = std::time::Duration::ZERO;
    for t in run_local_with(engine, n, body) {
        slowest = slowest.max(t??);
    }
    let algbw = (bytes * k * batches) as f64 / slowest.as_secs_f64().max(1e-12) / 1e9;
    Ok(algbw * bus_factor(OpKind::AllReduce, n))
}

/// One all-reduce row: pardis busbw and the references, each the best sample over [`REPEATS`]
/// rounds of [`SAMPLES`] samples of at least 32 MiB per link (pardis through
/// [`all_reduce_rate`], sampled like the references, so every figure is the same statistic);
/// every round measures all of them back to back, so they share the load conditions.
#[derive(Default)]
struct Row {
    local: f64,
    tcp: f64,
    tcp_staged: f64,
    memcpy: f64,
    memcpy_one: f64,
    ring: f64,
    ring_all_reduce: f64,
    single_stream: f64,
}

fn row(bytes: usize, n: usize, engine: &Config) -> Result<Row> {
    let mut r = Row::default();
    let stream_iters = ((64 << 20) / bytes).clamp(3, 1 << 16);
    let staged = Config {
        direct_receive: false,
        ..engine.clone()
    };
    let rate = |t, e: &Config| {
        Ok::<f64, CollectiveError>(all_reduce_rate(t, n, bytes, e.clone(), SAMPLES)?.best)
    };
    for _ in 0..REPEATS {
        r.memcpy_one = r
            .memcpy_one
            .max(memcpy_bandwidth_concurrent(bytes, 1, SAMPLES).best);
        r.memcpy = r
            .memcpy
            .max(memcpy_bandwidth_concurrent(bytes, n, SAMPLES).best);
        r.local = r.local.max(rate(BenchTransport::Local, engine)?);
        r.ring = r
            .ring
            .max(loopback_ring_bandwidth(bytes, n.max(2), SAMPLES)?.best);
        r.ring_all_reduce = r
            .ring_all_reduce
            .max(loopback_ring_all_reduce(bytes, n.max(2), SAMPLES)?.best);
        r.single_stream = r
            .single_stream
            .max(loopback_bandwidth(bytes, stream_iters)?);
        r.tcp = r.tcp.max(rate(BenchTransport::Tcp, engine)?);
        r.tcp_staged = r.tcp_staged.max(rate(BenchTransport::Tcp, &staged)?);
    }
    Ok(r)
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
    let pairs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(15);
    // Sections to run: `all` (default) or a comma-separated subset of table, modes, broadcast,
    // goal.
    let only = args.next().unwrap_or_else(|| "all".into());
    let run = |section: &str| only == "all" || only.split(',').any(|s| s == section);
    let sizes: Vec<usize> = std::iter::successors(Some(min.max(1)), |b| Some(b * 4))
        .take_while(|&b| b <= max)
        .collect();
    let (pre, ord) = (Config::default(), Config::with_mode(Mode::Ordered));
    let (local, tcp) = (BenchTransport::Local, BenchTransport::Tcp);
    let all_reduce = OpKind::AllReduce;

    if run("table") {
        println!("all-reduce busbw in GB/s (nccl-tests: algbw * 2(n-1)/n); f32 sum; every figure the best of");
        println!(
        "{REPEATS} rounds, each round measuring all columns of the row back to back (same load)"
    );
        println!("  mcpy-n: per-thread memcpy GB/s with n threads copying at once (best of {SAMPLES} samples a round);");
        println!(
        "  mcpy-1: one thread alone; ring-n: per-stream GB/s of n loopback sockets in a ring, all"
    );
        println!("  streaming at once; loop-1: one stream alone; ar-n: the same ring all-reduce as pardis written");
        println!("  directly on raw loopback sockets (collectives_bench::loopback_ring_all_reduce: no engine, the");
        println!("  speed of light of a ring all-reduce here). pardis figures are sampled like the references");
        println!("  (collectives_bench::all_reduce_rate).");
        println!("  loc/mc = local / mcpy-n; tcp/rg = tcp / ring-n; tcp/ar = tcp / ar-n (the transport's own");
        println!("  overhead; the goal since issue 31: >= 90 % from 1 MiB); ar/rg = ar-n / ring-n (what any ring");
        println!("  all-reduce loses to the raw sockets here);");
        println!("  tcp: pardis's default algorithm (Auto: halving-doubling below 4 MiB on 4, 8, ... ranks over TCP,");
        println!("  so tcp/ar compares two algorithms there; the ring elsewhere from 64 KiB);");
        println!("  tcp: direct receive into the collective's buffer (default); tcp-stg: staged through message");
        println!("  buffers (Config::direct_receive = false), measured in the same rounds; dir/st = tcp / tcp-stg");
        println!(
        "{:>10} {:>5} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}",
        "bytes",
        "ranks",
        "local",
        "mcpy-n",
        "mcpy-1",
        "loc/mc",
        "tcp",
        "tcp-stg",
        "ring-n",
        "ar-n",
        "loop-1",
        "tcp/rg",
        "tcp/ar",
        "ar/rg",
        "dir/st"
    );
        for &bytes in sizes.iter().filter(|_| run("table")) {
            for &n in &ranks {
                let r = row(bytes, n, &pre)?;
                println!(
                "{bytes:>10} {n:>5} {:>7.2} {:>7.2} {:>7.2} {:>7} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>7} {:>7} {:>7} {:>7}",
                r.local,
                r.memcpy,
                r.memcpy_one,
                pct(r.local / r.memcpy),
                r.tcp,
                r.tcp_staged,
                r.ring,
                r.ring_all_reduce,
                r.single_stream,
                pct(r.tcp / r.ring),
                pct(r.tcp / r.ring_all_reduce),
                pct(r.ring_all_reduce / r.ring),
                pct(r.tcp / r.tcp_staged)
            );
            }
        }
    }
    if run("modes") {
        println!();
        println!(
            "preemptive vs ordered (local, same submission order on every rank), {pairs} interleaved pairs"
        );
        println!(
            "({} up to 1 MiB; which mode runs first alternates); in-flight k: each rank keeps k non-blocking",
            3 * pairs
        );
        println!(
            "all-reduces of `bytes` in flight (k = 1: blocking calls); pre, ord = median busbw;"
        );
        println!("pre/ord = busbw ratio of a pair: median, 95% confidence interval of the median (order statistics),");
        println!("quartiles, min..max");
        println!(
            "{:>10} {:>5} {:>9} {:>9} {:>9} {:>9} {:>12} {:>12} {:>12}",
            "bytes",
            "ranks",
            "in-flight",
            "pre",
            "ord",
            "pre/ord",
            "95% CI",
            "quartiles",
            "min..max"
        );
        let mode_sizes = sizes.iter().filter(|&&b| b <= 64 << 20 && run("modes"));
        for &bytes in mode_sizes.step_by(2) {
            for &n in &ranks {
                for k in [1, 4] {
                    let measure = |e: &Config| {
                        if k == 1 {
                            point(local, all_reduce, n, bytes, e)
                        } else {
                            in_flight(n, bytes, k, e)
                        }
                    };
                    // Small sizes are cheap: more pairs, a tighter interval.
                    let pairs_here = if bytes <= 1 << 20 { 3 * pairs } else { pairs };
                    let r = Paired::measure(pairs_here, || measure(&pre), || measure(&ord))?;
                    println!(
                        "{bytes:>10} {n:>5} {k:>9} {:>9.3} {:>9.3} {:>9} {:>12} {:>12} {:>12}",
                        r.median_a(),
                        r.median_b(),
                        pct(r.ratio()),
                        r.interval(),
                        r.quartiles(),
                        r.range()
                    );
                }
            }
        }
    }
    if run("goal") {
        goal(&sizes, &ranks, pairs, &pre)?;
    }
    if run("broadcast") {
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
        for &bytes in sizes.iter().filter(|&&b| b >= 1 << 20 && run("broadcast")) {
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
    }
    Ok(())
}

/// Section (4): TCP against the raw-socket references in `pairs` alternated pairs for every
/// size from 1 MiB: the ring against `ar-n` (the same ring: the transport's overhead, the
/// goal), and where `Auto` takes halving-doubling instead (4, 8, … ranks below
/// [`DEFAULT_TCP_HALVING_DOUBLING_BYTES`]) that against `hd-n` (the same halving-doubling).
fn goal(sizes: &[usize], ranks: &[usize], pairs: usize, engine: &Config) -> Result<()> {
    println!();
    println!(
        "issue 31's TCP goal, paired: tcp / ar-n >= {:.0} % from 1 MiB; {pairs} pairs per row (a TCP figure and an",
        100.0 * GOAL_TCP_OF_AR
    );
    println!(
        "ar-n figure back to back, the order alternating), each figure the median busbw of {GOAL_SAMPLES} samples;"
    );
    println!("ratio = median over pairs of tcp / ar-n, with its 95% interval (order statistics) and quartiles;");
    println!("algo: ring = pardis's ring against ar-n (the same ring on raw sockets: the goal's like-for-like);");
    println!("hd = pardis's halving-doubling, what Auto runs there (below 4 MiB on 4, 8, ... ranks), against hd-n");
    println!("(the same halving-doubling on raw sockets, collectives_bench::loopback_halving_doubling_all_reduce);");
    println!("raw = ar-n or hd-n; ratio = tcp / raw");
    println!(
        "{:>10} {:>5} {:>5} {:>9} {:>9} {:>7} {:>12} {:>12} {:>8}",
        "bytes", "ranks", "algo", "tcp", "raw", "ratio", "95% CI", "quartiles", "goal"
    );
    for &bytes in sizes.iter().filter(|&&b| b >= 1 << 20) {
        for &n in ranks.iter().filter(|&&n| n >= 2) {
            let mut algos = vec![("ring", AllReduceAlgorithm::Ring)];
            let hd_bytes = engine
                .halving_doubling_bytes
                .unwrap_or(DEFAULT_TCP_HALVING_DOUBLING_BYTES);
            if n >= 4 && n.is_power_of_two() && bytes < hd_bytes {
                algos.push(("hd", AllReduceAlgorithm::HalvingDoubling));
            }
            for (name, algo) in algos {
                let cfg = Config {
                    all_reduce: algo,
                    ..engine.clone()
                };
                let tcp =
                    || all_reduce_rate(BenchTransport::Tcp, n, bytes, cfg.clone(), GOAL_SAMPLES);
                let raw = || match algo {
                    AllReduceAlgorithm::Ring => loopback_ring_all_reduce(bytes, n, GOAL_SAMPLES),
                    _ => loopback_halving_doubling_all_reduce(bytes, n, GOAL_SAMPLES),
                };
                let r = Paired::measure(pairs, || Ok(tcp()?.median), || Ok(raw()?.median))?;
                println!(
                    "{bytes:>10} {n:>5} {name:>5} {:>9.3} {:>9.3} {:>7} {:>12} {:>12} {:>8}",
                    r.median_a(),
                    r.median_b(),
                    pct(r.ratio()),
                    r.interval(),
                    r.quartiles(),
                    if r.ratio() >= GOAL_TCP_OF_AR {
                        "met"
                    } else {
                        "not met"
                    }
                );
            }
        }
    }
    Ok(())
}

/// A percentage, rounded.
fn pct(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// Figures of two contenders taken in pairs, back to back, the order alternating; each
/// vector sorted.
struct Paired {
    a: Vec<f64>,
    b: Vec<f64>,
    /// `a / b` of each pair.
    ratios: Vec<f64>,
}

impl Paired {
    /// `pairs` (at least one) pairs of `a()` and `b()`.
    fn measure(
        pairs: usize,
        mut a: impl FnMut() -> Result<f64>,
        mut b: impl FnMut() -> Result<f64>,
    ) -> Result<Self> {
        let mut p = Self {
            a: Vec::new(),
            b: Vec::new(),
            ratios: Vec::new(),
        };
        for i in 0..pairs.max(1) {
            let (x, y) = if i % 2 == 0 {
                let x = a()?;
                (x, b()?)
            } else {
                let y = b()?;
                (a()?, y)
            };
            p.ratios.push(x / y);
            p.a.push(x);
            p.b.push(y);
        }
        for v in [&mut p.ratios, &mut p.a, &mut p.b] {
            v.sort_by(f64::total_cmp);
        }
        Ok(p)
    }

    fn median_a(&self) -> f64 {
        quantile(&self.a, 0.5)
    }

    fn median_b(&self) -> f64 {
        quantile(&self.b, 0.5)
    }

    /// The median ratio.
    fn ratio(&self) -> f64 {
        quantile(&self.ratios, 0.5)
    }

    /// The median ratio's 95 % confidence interval (order statistics).
    fn interval(&self) -> String {
        let (lo, hi) = median_ci(self.ratios.len());
        format!("{}..{}", pct(self.ratios[lo]), pct(self.ratios[hi]))
    }

    fn quartiles(&self) -> String {
        let q = |x| pct(quantile(&self.ratios, x));
        format!("{}..{}", q(0.25), q(0.75))
    }

    fn range(&self) -> String {
        let r = &self.ratios;
        format!("{}..{}", pct(r[0]), pct(r[r.len() - 1]))
    }
}
