//! `pardis spmm` (issue #5): parallel sparse × dense multiplication on a matrix file or a
//! generated matrix, checked once against the reference, then timed.

use crate::output;
use anyhow::{bail, Context};
use pardis::sparse::{
    gen, io, max_relative_error, set_simd_limit, simd_level_for_row_bytes, spmm_reference,
    AlignedVec, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par, RowPairs, RowStats, Scalar,
    SimdLimit, SpmmPlan,
};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `pardis spmm`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Matrix file: Matrix Market (`.mtx`, optionally gzip) or DLMC (`.smtx`).
    #[arg(long, conflicts_with = "gen", required_unless_present = "gen")]
    matrix: Option<PathBuf>,
    /// Generated matrix: kron:SCALE, rmat:SCALE:EF, stencil27:N, stencil5:N, uniform:ROWS:PER_ROW,
    /// arrow:N:DENSE, banded:N:HALF_WIDTH, striped:N:SPACING.
    #[arg(long)]
    gen: Option<String>,
    /// Number of columns of B and C, 1 to 65536.
    #[arg(long, default_value_t = 64)]
    k: usize,
    /// Kernel: auto, lssm, row, merge, rode, pairs (rows in pairs sharing their loads of B) or
    /// reference.
    #[arg(long, default_value = "auto")]
    kernel: String,
    /// Worker threads, at most 1024 (0 or omitted: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Element type: f32 or f64.
    #[arg(long, default_value = "f64", value_parser = ["f32", "f64"])]
    precision: String,
    /// LSSM block size in nonzeros per task (default: chosen from the row profile and K).
    #[arg(long)]
    block: Option<usize>,
    /// LSSM writes C with streaming (non-temporal) stores: auto (when C is larger than the
    /// last-level cache), on or off.
    #[arg(long, default_value = "auto", value_parser = ["auto", "on", "off"])]
    stream: String,
    /// Widest SIMD level the kernels may use: widest (AVX-512 where the CPU has it) or avx2.
    #[arg(long, default_value = "widest", value_parser = ["widest", "avx2"])]
    simd: String,
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Seed of generated matrices, DLMC values and B.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// The widest B and C `--k` asks for.
const MAX_K: usize = 1 << 16;

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if !(1..=MAX_K).contains(&args.k) {
        bail!("--k must be 1 to {MAX_K}, not {}", args.k);
    }
    if args.block == Some(0) {
        bail!("--block must be at least 1");
    }
    if args.reps == 0 {
        bail!("--reps must be at least 1");
    }
    let pool = super::thread_pool(args.threads)?;
    set_simd_limit(match args.simd.as_str() {
        "avx2" => SimdLimit::Avx2,
        _ => SimdLimit::Widest,
    });
    pool.install(|| match args.precision.as_str() {
        "f32" => run_typed::<f32>(&args),
        _ => run_typed::<f64>(&args),
    })
}

fn load<T: Scalar>(args: &Args) -> anyhow::Result<(String, CsrMatrix<T, u32>)> {
    match (&args.matrix, &args.gen) {
        (Some(path), _) => {
            let a = io::read_matrix(path, args.seed)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok((path.display().to_string(), a))
        }
        (None, Some(spec)) => Ok((spec.clone(), gen::from_spec(spec, args.seed)?)),
        (None, None) => bail!("give --matrix FILE or --gen SPEC"),
    }
}

/// Refuses dense operands that cannot fit: B (`cols × k`), C and the reference result (each
/// `rows × k`) against the memory the system reports available (Linux `/proc/meminfo`;
/// elsewhere only against overflow).
fn check_dense_memory<T: Scalar>(rows: usize, cols: usize, k: usize) -> anyhow::Result<()> {
    let elements = (cols as u128 + 2 * rows as u128) * k as u128;
    let need = elements * std::mem::size_of::<T>() as u128;
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: u128 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    if need > usize::MAX as u128 || available.is_some_and(|a| need > a) {
        bail!(
            "B ({cols} × {k}), C and the reference result ({rows} × {k} each) need {}{}; \
             lower --k",
            output::bytes(u64::try_from(need).unwrap_or(u64::MAX)),
            available.map_or(String::new(), |a| format!(
                ", more than the {} available",
                output::bytes(u64::try_from(a).unwrap_or(u64::MAX))
            ))
        );
    }
    Ok(())
}

fn run_typed<T: Scalar>(args: &Args) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let (name, a) = load::<T>(args)?;
    let load_s = t0.elapsed().as_secs_f64();
    let stats = RowStats::of(&a);
    let k = args.k;
    let kernel = match args.kernel.as_str() {
        "auto" => Kernel::choose(&stats, k),
        other => Kernel::from_name(other).with_context(|| {
            format!("unknown kernel `{other}` (auto, lssm, row, merge, rode, pairs, reference)")
        })?,
    };
    let config = LssmConfig {
        block_nnz: args.block,
        streaming_stores: match args.stream.as_str() {
            "on" => Some(true),
            "off" => Some(false),
            _ => None, // the plan's rule: C larger than the last-level cache
        },
        ..LssmConfig::default()
    };
    check_dense_memory::<T>(a.nrows(), a.ncols(), k)?;
    let t1 = Instant::now();
    let plan = SpmmPlan::new(&a, k, &config);
    let plan_s = t1.elapsed().as_secs_f64();
    // The row pairs' inspector (a repacked copy of A), like the plan, outside the timing.
    let t2 = Instant::now();
    let pairs = (kernel == Kernel::RowPairs).then(|| RowPairs::new(&a, k));
    let pairs_s = t2.elapsed().as_secs_f64();

    let b = gen::dense::<T>(a.ncols(), k, args.seed);
    let b = DenseRef::contiguous(&b, a.ncols(), k);
    let mut c = AlignedVec::<T>::zeroed(a.nrows() * k);
    let multiply = |c: &mut [T]| -> anyhow::Result<()> {
        let c = DenseMut::contiguous(c, a.nrows(), k);
        match (&pairs, kernel) {
            (Some(pairs), _) => pairs.execute(b, c, Par::Current)?,
            (None, Kernel::Lssm) => plan.execute(&a, b, c, Par::Current)?,
            (None, other) => other.run(&a, b, c, Par::Current)?,
        }
        Ok(())
    };
    // Check once against the serial reference.
    multiply(&mut c)?;
    let mut expected = vec![T::ZERO; a.nrows() * k];
    spmm_reference(&a, b, DenseMut::contiguous(&mut expected, a.nrows(), k));
    let err = max_relative_error(
        DenseRef::contiguous(&c, a.nrows(), k),
        DenseRef::contiguous(&expected, a.nrows(), k),
    );
    let tolerance = if T::NAME == "f64" { 1e-12 } else { 1e-5 };
    if err > tolerance {
        bail!(
            "kernel {kernel} disagrees with the reference: relative error {err:e} > {tolerance:e}"
        );
    }
    drop(expected);

    let reps = args.reps;
    let bar = output::progress(reps as u64, "timing");
    if args.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        multiply(&mut c)?;
        times.push(s.elapsed().as_secs_f64());
        bar.inc(1);
    }
    bar.finish_and_clear();
    let median = bench_timing::median(times.clone());
    let fastest = times.iter().copied().fold(f64::INFINITY, f64::min);
    let flops = 2.0 * a.nnz() as f64 * k as f64;
    let elem = std::mem::size_of::<T>() as f64;
    let bytes = a.nnz() as f64 * (elem + 4.0)
        + (a.nrows() + 1) as f64 * 4.0
        + (a.ncols() + a.nrows()) as f64 * k as f64 * elem;
    let gflops = flops / median / 1e9;
    let gbs = bytes / median / 1e9;
    let threads = rayon::current_num_threads();
    let simd = simd_level_for_row_bytes(k * std::mem::size_of::<T>());

    if args.json {
        let out = json!({
            "matrix": name, "rows": a.nrows(), "cols": a.ncols(), "nnz": a.nnz(),
            "profile": {"mean": stats.mean, "cv": stats.cv, "max": stats.max, "min": stats.min,
                        "empty_rows": stats.empty_rows, "class": stats.class().to_string()},
            "plan": {"block_nnz": plan.block_nnz(), "long_rows": plan.num_long_rows(),
                     "short_rows": plan.num_short_rows(), "tasks": plan.num_tasks(), "units": plan.num_units(),
                     "segments": plan.num_segments(), "scratch_bytes": plan.scratch_len() as f64 * elem,
                     "serial": plan.is_serial(), "prefetch": plan.prefetches(),
                     "streaming_stores": plan.streams_c(), "chunk_bytes": plan.chunk_bytes(),
                     "sweep": plan.sweep().map(|(period, band)| json!({"period_rows": period, "band_rows": band})),
                     "shift_pairs": plan.shift_pairs(),
                     "narrow_pairs": plan.narrow_pairs(),
                     "lead_prefetch": plan.lead_prefetch(),
                     "plan_seconds": plan_s},
            "row_pairs": pairs.as_ref().map(|p| json!({
                "paired_rows": p.paired_rows(), "shared_fraction": p.shared_fraction(),
                "inspector_seconds": pairs_s})),
            "kernel": kernel.name(), "k": k, "precision": T::NAME, "threads": threads,
            "simd": simd, "load_seconds": load_s, "max_relative_error": err,
            "seconds_median": median, "seconds_min": fastest, "reps": reps,
            "gflops": gflops, "effective_gbs": gbs,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let mut t = output::table(["", "value"]);
    t.add_row(vec!["matrix".to_string(), name]);
    t.add_row(vec![
        "shape".into(),
        format!("{} × {}, {} nonzeros", a.nrows(), a.ncols(), a.nnz()),
    ]);
    t.add_row(vec![
        "row lengths".into(),
        format!(
            "mean {:.2}, cv {:.2}, max {}, min {}, {} empty ({})",
            stats.mean,
            stats.cv,
            stats.max,
            stats.min,
            stats.empty_rows,
            stats.class()
        ),
    ]);
    t.add_row(vec![
        "LSSM plan".into(),
        format!(
            "block {} nnz, {} long rows ({} segments), {} short rows, {} tasks in {} units, scratch {}{}{}{}{}",
            plan.block_nnz(),
            plan.num_long_rows(),
            plan.num_segments(),
            plan.num_short_rows(),
            plan.num_tasks(),
            plan.num_units(),
            output::bytes((plan.scratch_len() as f64 * elem) as u64),
            if plan.is_serial() { ", serial" } else { "" },
            plan.sweep().map_or(String::new(), |(period, band)| format!(
                ", swept in bands of {band} rows (planes of {period})"
            )),
            if plan.shift_pairs() { ", shift pairs" } else { "" },
            if plan.narrow_pairs() { ", narrow pairs" } else { "" },
        ),
    ]);
    t.add_row(vec![
        "LSSM memory".into(),
        format!(
            "B {}prefetched, long rows in chunks of {} of it; C written with {} stores",
            if plan.prefetches() {
                ""
            } else if plan.lead_prefetch() {
                "lead rows "
            } else {
                "not "
            },
            output::bytes(plan.chunk_bytes() as u64),
            if plan.streams_c() {
                "streaming (--stream)"
            } else {
                "ordinary"
            }
        ),
    ]);
    if let Some(p) = &pairs {
        t.add_row(vec![
            "row pairs".into(),
            format!(
                "{} of {} rows paired, {:.0} % of the nonzeros in shared columns, inspector {:.3} ms",
                p.paired_rows(),
                a.nrows(),
                100.0 * p.shared_fraction(),
                pairs_s * 1e3
            ),
        ]);
    }
    t.add_row(vec![
        "kernel".into(),
        format!(
            "{kernel} ({}, K = {k}, {threads} threads, SIMD {simd})",
            T::NAME
        ),
    ]);
    t.add_row(vec![
        "check".into(),
        format!("max relative error vs reference {err:.2e}"),
    ]);
    t.add_row(vec![
        "time".into(),
        format!(
            "median {:.3} ms, min {:.3} ms over {reps} runs",
            median * 1e3,
            fastest * 1e3
        ),
    ]);
    t.add_row(vec![
        "throughput".into(),
        format!("{gflops:.2} GFLOP/s, {gbs:.2} GB/s effective"),
    ]);
    println!("{t}");
    Ok(())
}
