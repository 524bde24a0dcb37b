//! `pardis collectives` (issue #7): bandwidth benchmarks and the chaos-order deadlock demo.

use std::time::Duration;

use anyhow::Context;
use collectives_bench::chaos::{self, ChaosConfig};
use collectives_bench::{self as bench, BenchConfig, BenchTransport};
use pardis::collectives::{AllReduceAlgorithm, CollectiveError, Config, Mode, OpKind};
use serde_json::json;

use crate::output;

/// Arguments of `pardis collectives`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Sub,
    /// Emit machine-readable JSON on stdout.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Bandwidth and latency of one collective over a size sweep (nccl-tests algbw/busbw).
    Bench(BenchArgs),
    /// Ranks submit collectives (all-reduce, broadcast, reduce) on sub-communicators in random
    /// orders: deadlock or not?
    ///
    /// Exit status 0 when every rank completed every collective correctly; 1 otherwise —
    /// including ordered mode's deadlock, unless `--expect-deadlock` says it is expected.
    Chaos(ChaosArgs),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TransportArg {
    Local,
    Tcp,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum OpArg {
    AllReduce,
    ReduceScatter,
    AllGather,
    Broadcast,
    Reduce,
    AllToAll,
    Barrier,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Preemptive,
    Ordered,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum AlgoArg {
    Auto,
    Ring,
    HalvingDoubling,
    RecursiveDoubling,
    /// Zero-copy shared memory (local transport; ring elsewhere).
    SharedMemory,
}

#[derive(Debug, clap::Args)]
struct BenchArgs {
    /// Transport between the ranks (all ranks are threads of this process).
    #[arg(long, value_enum, default_value = "local")]
    transport: TransportArg,
    /// Number of ranks.
    #[arg(long, default_value_t = 4)]
    ranks: usize,
    /// Collective to measure.
    #[arg(long, value_enum, default_value = "all-reduce")]
    op: OpArg,
    /// Sizes as `MIN..MAX` (multiplied by --factor) or a comma list, e.g. `1K..64M`, `1M,64M`.
    #[arg(long, default_value = "1K..64M")]
    sizes: String,
    /// Multiplier between consecutive sizes of a range.
    #[arg(long, default_value_t = 4)]
    factor: u64,
    /// Timed iterations per size (default: enough for ~256 MiB of traffic, 5..=1000).
    #[arg(long)]
    iters: Option<usize>,
    /// Engine mode.
    #[arg(long, value_enum, default_value = "preemptive")]
    mode: ModeArg,
    /// All-reduce algorithm.
    #[arg(long, value_enum, default_value = "auto")]
    algo: AlgoArg,
}

#[derive(Debug, clap::Args)]
struct ChaosArgs {
    /// Number of ranks.
    #[arg(long, default_value_t = 8)]
    ranks: usize,
    /// Number of sub-communicators (one collective each: all-reduce, broadcast, reduce in turn).
    #[arg(long, default_value_t = 8)]
    collectives: usize,
    /// Engine mode: `ordered` is NCCL/MPI semantics and deadlocks.
    #[arg(long, value_enum, default_value = "preemptive")]
    mode: ModeArg,
    /// Seed of the per-rank submission orders.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// f64 elements per collective.
    #[arg(long, default_value_t = 1024)]
    elements: usize,
    /// Ordered mode: report a deadlock after this many milliseconds without progress (≥ 1).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    deadlock_timeout_ms: u64,
    /// Exit with status 0 when the ranks that did not finish stopped on a reported deadlock
    /// (ordered mode's expected outcome: NCCL/MPI semantics). Without it, any rank that does
    /// not complete every collective correctly makes the exit status 1.
    #[arg(long)]
    expect_deadlock: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Sub::Bench(b) => run_bench(&b, args.json),
        Sub::Chaos(c) => run_chaos(&c, args.json),
    }
}

fn engine(mode: ModeArg, algo: AlgoArg) -> Config {
    Config {
        mode: match mode {
            ModeArg::Preemptive => Mode::Preemptive,
            ModeArg::Ordered => Mode::Ordered,
        },
        all_reduce: match algo {
            AlgoArg::Auto => AllReduceAlgorithm::Auto,
            AlgoArg::Ring => AllReduceAlgorithm::Ring,
            AlgoArg::HalvingDoubling => AllReduceAlgorithm::HalvingDoubling,
            AlgoArg::RecursiveDoubling => AllReduceAlgorithm::RecursiveDoubling,
            AlgoArg::SharedMemory => AllReduceAlgorithm::SharedMemory,
        },
        ..Config::default()
    }
}

/// Prints `v` as pretty JSON on stdout.
fn print_json(v: serde_json::Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(())
}

/// The lower-case name of a clap value (e.g. `preemptive`).
fn lower(v: impl std::fmt::Debug) -> String {
    format!("{v:?}").to_lowercase()
}

/// Sizes of `--sizes` (each at least 4 bytes, one f32; bounds against the rank count are the
/// library's, [`BenchConfig::validate`]).
fn parse_sizes(spec: &str, factor: u64) -> anyhow::Result<Vec<usize>> {
    let parse = |s: &str| output::parse_bytes(s).map_err(anyhow::Error::msg);
    let sizes: Vec<u64> = if let Some((lo, hi)) = spec.split_once("..") {
        let (lo, hi) = (parse(lo)?, parse(hi)?);
        anyhow::ensure!(
            lo > 0 && lo <= hi && factor >= 2,
            "sizes `{spec}`: need 0 < MIN <= MAX and --factor >= 2"
        );
        std::iter::successors(Some(lo), |&s| s.checked_mul(factor).filter(|&t| t <= hi)).collect()
    } else {
        spec.split(',').map(parse).collect::<anyhow::Result<_>>()?
    };
    if let Some(s) = sizes.iter().find(|&&s| s < 4) {
        anyhow::bail!("sizes `{spec}`: {s} bytes is below one f32 element (4 bytes)");
    }
    sizes
        .into_iter()
        .map(|s| usize::try_from(s).map_err(|_| anyhow::anyhow!("size {s} bytes: too large here")))
        .collect()
}

fn run_bench(a: &BenchArgs, json: bool) -> anyhow::Result<()> {
    let op = match a.op {
        OpArg::AllReduce => OpKind::AllReduce,
        OpArg::ReduceScatter => OpKind::ReduceScatter,
        OpArg::AllGather => OpKind::AllGather,
        OpArg::Broadcast => OpKind::Broadcast,
        OpArg::Reduce => OpKind::Reduce,
        OpArg::AllToAll => OpKind::AllToAll,
        OpArg::Barrier => OpKind::Barrier,
    };
    let transport = match a.transport {
        TransportArg::Local => BenchTransport::Local,
        TransportArg::Tcp => BenchTransport::Tcp,
    };
    let sizes = parse_sizes(&a.sizes, a.factor)?;
    let iters = |bytes: usize| {
        a.iters
            .unwrap_or_else(|| ((256 << 20) / bytes.max(1)).clamp(5, 1000))
    };
    let configs: Vec<BenchConfig> = sizes
        .iter()
        .map(|&bytes| {
            let e = engine(a.mode, a.algo);
            BenchConfig::new(transport, a.ranks, op, bytes, iters(bytes), e)
        })
        .collect();
    // Every point is checked before the first one runs (a bad last size fails at once).
    for cfg in &configs {
        cfg.validate()?;
    }
    let pb = output::progress(sizes.len() as u64, "benchmarking");
    let mut rows = Vec::new();
    for cfg in &configs {
        let (bytes, iters) = (cfg.bytes, cfg.iters);
        let r = bench::run_bench(cfg)
            .with_context(|| format!("benchmark at {}", output::bytes(bytes as u64)))?;
        let limit_iters = ((64 << 20) / bytes.max(1)).clamp(3, 200);
        let limit = match transport {
            BenchTransport::Local => bench::memcpy_bandwidth(bytes, limit_iters),
            BenchTransport::Tcp => bench::loopback_bandwidth(bytes, limit_iters)?,
        };
        rows.push((r, iters, limit));
        pb.inc(1);
    }
    pb.finish_and_clear();
    let limit_name = match transport {
        BenchTransport::Local => "memcpy",
        BenchTransport::Tcp => "loopback",
    };
    if json {
        let points: Vec<_> = rows
            .iter()
            .map(|(r, iters, limit)| {
                json!({"bytes": r.bytes, "iters": iters, "time_us": r.time.as_secs_f64() * 1e6,
                       "algbw_gbs": r.algbw_gbs, "busbw_gbs": r.busbw_gbs, "limit_gbs": limit})
            })
            .collect();
        let out = json!({"op": op.name(), "ranks": a.ranks, "transport": lower(a.transport),
                         "mode": lower(a.mode), "limit": limit_name, "points": points});
        return print_json(out);
    }
    let mut t = output::table([
        "size",
        "iters",
        "time (µs)",
        "algbw (GB/s)",
        "busbw (GB/s)",
        &format!("{limit_name} (GB/s)"),
        "busbw / limit",
    ]);
    for (r, iters, limit) in &rows {
        t.add_row([
            output::bytes(r.bytes as u64),
            iters.to_string(),
            format!("{:.1}", r.time.as_secs_f64() * 1e6),
            format!("{:.3}", r.algbw_gbs),
            format!("{:.3}", r.busbw_gbs),
            format!("{limit:.3}"),
            if *limit > 0.0 {
                format!("{:.0}%", 100.0 * r.busbw_gbs / limit)
            } else {
                "-".into()
            },
        ]);
    }
    println!(
        "{} on {} ranks ({:?} transport, {:?} mode)",
        op.name(),
        a.ranks,
        a.transport,
        a.mode
    );
    println!("{t}");
    Ok(())
}

fn run_chaos(a: &ChaosArgs, json: bool) -> anyhow::Result<()> {
    let mut engine = engine(a.mode, AlgoArg::Auto);
    engine.deadlock_timeout = Duration::from_millis(a.deadlock_timeout_ms);
    let cfg = ChaosConfig {
        ranks: a.ranks,
        collectives: a.collectives,
        elements: a.elements,
        seed: a.seed,
        engine,
    };
    let ranks = chaos::run_chaos(&cfg)?;
    let finished = ranks
        .iter()
        .filter(|r| r.first_error.is_none() && r.correct == a.collectives)
        .count();
    // Ranks that stopped on a deadlock: the one that reported it, and those failed because of
    // it (told by a peer, or aborted behind a deadlocked collective).
    let stopped_by_deadlock = ranks
        .iter()
        .filter(|r| {
            matches!(
                r.first_error,
                Some(
                    CollectiveError::Deadlock { .. }
                        | CollectiveError::Remote { .. }
                        | CollectiveError::Aborted(_)
                )
            )
        })
        .count();
    let reported = ranks
        .iter()
        .any(|r| matches!(r.first_error, Some(CollectiveError::Deadlock { .. })));
    let success = finished == ranks.len()
        || (a.expect_deadlock && reported && finished + stopped_by_deadlock == ranks.len());
    let verdict = if finished == ranks.len() {
        format!(
            "all {} ranks completed {} collectives with correct results: no deadlock",
            ranks.len(),
            a.collectives
        )
    } else {
        let dead = ranks
            .iter()
            .filter(|r| matches!(r.first_error, Some(CollectiveError::Deadlock { .. })))
            .count();
        format!(
            "{} of {} ranks did not finish; {dead} reported a deadlock",
            ranks.len() - finished,
            ranks.len()
        )
    };
    if json {
        let per_rank: Vec<_> = ranks
            .iter()
            .map(|r| {
                json!({"rank": r.rank, "order": r.order, "correct": r.correct,
                       "context_switches": r.engine.context_switches, "parks": r.engine.parks,
                       "max_queue_len": r.engine.max_queue_len,
                       "blocked_ms": r.ops.iter().map(|o| o.blocked.as_secs_f64() * 1e3).sum::<f64>(),
                       "elapsed_ms": r.elapsed.as_secs_f64() * 1e3,
                       "error": r.first_error.as_ref().map(|e| e.to_string())})
            })
            .collect();
        let out = json!({"mode": lower(a.mode), "seed": a.seed, "verdict": verdict,
                         "success": success, "ranks": per_rank});
        print_json(out)?;
        return chaos_status(success, &verdict, a);
    }
    let mut t = output::table([
        "rank",
        "submission order",
        "correct",
        "context switches",
        "max queue",
        "blocked, Σ ops (ms)",
        "elapsed (ms)",
        "error",
    ]);
    for r in &ranks {
        t.add_row([
            r.rank.to_string(),
            format!("{:?}", r.order),
            format!("{}/{}", r.correct, a.collectives),
            r.engine.context_switches.to_string(),
            r.engine.max_queue_len.to_string(),
            format!(
                "{:.2}",
                r.ops
                    .iter()
                    .map(|o| o.blocked.as_secs_f64() * 1e3)
                    .sum::<f64>()
            ),
            format!("{:.2}", r.elapsed.as_secs_f64() * 1e3),
            r.first_error
                .as_ref()
                .map_or_else(|| "-".to_string(), |e| e.to_string()),
        ]);
    }
    println!(
        "chaos order: {} ranks × {} collectives on {} sub-communicators, {:?} mode, seed {}",
        a.ranks, a.collectives, a.collectives, a.mode, a.seed
    );
    println!("{t}");
    println!("{verdict}");
    chaos_status(success, &verdict, a)
}

/// The exit status of `chaos`: an error (exit status 1) unless every rank finished, or the
/// deadlock was expected (`--expect-deadlock`) and is all that stopped the others.
fn chaos_status(success: bool, verdict: &str, a: &ChaosArgs) -> anyhow::Result<()> {
    if success {
        return Ok(());
    }
    let hint = if matches!(a.mode, ModeArg::Ordered) && !a.expect_deadlock {
        " (ordered mode: pass --expect-deadlock if a deadlock is the expected outcome)"
    } else {
        ""
    };
    anyhow::bail!("chaos: {verdict}{hint}")
}
