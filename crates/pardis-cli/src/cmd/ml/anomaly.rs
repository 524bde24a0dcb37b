//! `pardis ml anomaly` (issue #27): tabular anomaly detectors on the PCL-AD paper's protocol
//! or ADBench's (`--protocol`), mean ± std over seeds, a table per data set and each detector's
//! average rank.

use std::path::{Path, PathBuf};

use anyhow::Context;

use pardis::ml::anomaly::data::read_labelled;
use pardis::ml::anomaly::eval::{
    average_ranks, mean_std, run_seed_protocol, run_seed_with, SeedResult, DETECTORS,
};
use pardis::ml::anomaly::{Aggregation, EcdfRows, Ecod, EcodConfig, Protocol};

use pardis_datasets::DataRoots;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pardis::ml::anomaly::data::Labelled;

use crate::output::{progress, table};

/// The most seeds one command runs (each is a whole protocol run per set and detector; the
/// bound keeps `--seeds` from sizing allocations).
const MAX_SEEDS: u64 = 1000;

/// Arguments of `pardis ml anomaly`.
#[derive(Debug, clap::Args)]
pub(super) struct AnomalyArgs {
    /// A `.npz` (ADBench: `X`, `y`) or `.csv` (label last) file; a name matched against
    /// tabular-ad/adbench/*.npz and tabular-ad/pclad/*.csv under the data roots (`thyroid`,
    /// `38_thyroid`, `01thyroid`); or `all` for every file there. PCL-AD takes the authors'
    /// per-set settings (partition count m, ...) for the file's stem where they have any.
    #[arg(long)]
    data: String,
    /// pcl, iforest, ecod, knn, icl, neutral, or all.
    #[arg(long, default_value = "all")]
    detector: String,
    /// Seeds 0..n of the split (each detector is seeded alike).
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
    /// pclad: the PCL-AD paper's split (fit on half of the normals; test on the rest plus every
    /// anomaly). adbench: ADBench's unsupervised setting (stratified 70/30 split of all rows;
    /// fit on the 70 %, anomalies included, labels unused; score the 30 %).
    #[arg(long, default_value = "pclad", value_parser = ["pclad", "adbench"])]
    protocol: String,
    /// Subsample a set of more rows to this many before splitting (stratified, seeded; ADBench
    /// caps at 10000). Default: the whole set.
    #[arg(long)]
    max_rows: Option<usize>,
    /// Write each seed's split as `<DIR>/<data>.seed<k>.txt` (train rows, then test rows, one
    /// line each) for scripts/compare-anomaly's peers.
    #[arg(long, hide = true)]
    dump_splits: Option<PathBuf>,
    /// (set, detector, seed) runs at once, each on its own thread (default: the machine's
    /// cores; at least 1). The AUCs do not depend on it, but with more than 1 the reported
    /// fit/score seconds include the other runs' contention, and memory holds up to this many
    /// runs' splits (and their sets) at once.
    #[arg(long)]
    jobs: Option<usize>,
    /// ECOD's ECDFs: on the training rows (a row's score depends only on itself), or on the
    /// training rows plus every scored row, as PyOD's decision_function (transductive: scores
    /// depend on the test split as a whole).
    #[arg(long, default_value = "training", value_parser = ecdf_rows, value_name = "training|training+scored")]
    ecod_ecdf: EcdfRows,
    /// ECOD's aggregation: sum of per-feature max(U_skew, (U_l+U_r)/2) (feature-mean), sum of
    /// per-feature max(U_skew, U_l, U_r) (feature-max, PyOD 3.x), or the paper's max of the
    /// left, right and skewness-picked sums (paper).
    #[arg(long, default_value = "feature-mean", value_parser = aggregation, value_name = "feature-mean|feature-max|paper")]
    ecod_aggregate: Aggregation,
}

fn ecdf_rows(s: &str) -> Result<EcdfRows, String> {
    EcdfRows::from_name(s).ok_or_else(|| format!("`{s}`: expected training or training+scored"))
}

fn aggregation(s: &str) -> Result<Aggregation, String> {
    Aggregation::from_name(s)
        .ok_or_else(|| format!("`{s}`: expected feature-mean, feature-max or paper"))
}

#[derive(Debug, serde::Serialize)]
struct Cell {
    data: String,
    detector: String,
    protocol: Protocol,
    max_rows: Option<usize>,
    /// The `--jobs` of the run: with more than 1, each run's `fit_s` and `score_s` were
    /// measured while other runs competed for the CPU, so they are not fair timings
    /// (scripts/compare-anomaly passes `--jobs 1`).
    jobs: usize,
    runs: Vec<SeedResult>,
    error: Option<String>,
    /// ECOD's settings (`--ecod-ecdf`, `--ecod-aggregate`), in ECOD's cells only.
    #[serde(skip_serializing_if = "Option::is_none")]
    ecod: Option<EcodSettings>,
}

/// ECOD's variant choices as the CLI spells them.
#[derive(Debug, serde::Serialize)]
struct EcodSettings {
    ecdf: &'static str,
    aggregation: &'static str,
}

/// One seed of one cell: not run yet, its result, or its error message.
type Outcome = Option<Result<SeedResult, String>>;

/// One data set of the report: its name, file and shape (rows after the cap), and its data
/// while any of its runs is in flight.
struct Set {
    name: String,
    path: PathBuf,
    rows: usize,
    cols: usize,
    slot: Mutex<Slot>,
}

/// A set's data (read by its first run) and how many of its runs have not ended.
struct Slot {
    data: Option<Arc<Labelled>>,
    left: usize,
}

impl Set {
    /// One run on the set's data: `f`'s result, a panic in it (or in reading the set) turned
    /// into an error rather than the end of every result, and the set released either way.
    fn run<T>(&self, f: impl FnOnce(&Labelled) -> Result<T, String>) -> Result<T, String> {
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| f(&*self.acquire()?)))
            .unwrap_or_else(|p| Err(panic_message(p.as_ref())));
        self.release();
        r
    }

    /// The set's data, read from its file by the first run that asks (the others wait for it).
    fn acquire(&self) -> Result<Arc<Labelled>, String> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = &slot.data {
            return Ok(Arc::clone(d));
        }
        let d = Arc::new(read_labelled(&self.path).map_err(|e| e.to_string())?);
        slot.data = Some(Arc::clone(&d));
        Ok(d)
    }

    /// One run of the set has ended (after dropping its `acquire`d data): the last one drops
    /// the set.
    fn release(&self) {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        slot.left = slot.left.saturating_sub(1);
        if slot.left == 0 {
            slot.data = None;
        }
    }
}

/// A panic's message, as the run's error.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".into());
    format!("panicked: {msg}")
}

/// A cell's runs in seed order up to its first failure, and that failure.
fn collect(seeds: &[Outcome]) -> (Vec<SeedResult>, Option<String>) {
    let mut runs = Vec::new();
    for r in seeds.iter().flatten() {
        match r {
            Ok(r) => runs.push(*r),
            Err(e) => return (runs, Some(e.clone())),
        }
    }
    (runs, None)
}

/// The data files `spec` names.
fn resolve(spec: &str, roots: &DataRoots) -> anyhow::Result<Vec<PathBuf>> {
    let p = Path::new(spec);
    if p.is_file() {
        return Ok(vec![p.to_path_buf()]);
    }
    let mut found = Vec::new();
    for dir in ["tabular-ad/adbench", "tabular-ad/pclad"] {
        let Some(d) = roots.dirs().map(|(_, r)| r.join(dir)).find(|d| d.is_dir()) else {
            continue;
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(&d)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| matches!(f.extension().and_then(|e| e.to_str()), Some("npz" | "csv")))
            .collect();
        files.sort_by_key(|f| (set_number(f), f.clone()));
        found.extend(files.into_iter().filter(|f| {
            let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
            let bare = stem.trim_start_matches(|c: char| c.is_ascii_digit() || c == '_');
            spec == "all" || stem.eq_ignore_ascii_case(spec) || bare.eq_ignore_ascii_case(spec)
        }));
    }
    if found.is_empty() {
        let searched: Vec<_> = roots.dirs().map(|(_, r)| r.display().to_string()).collect();
        anyhow::bail!("no data file matches `{spec}` (searched tabular-ad/ under {searched:?})");
    }
    Ok(found)
}

fn set_number(f: &Path) -> usize {
    let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let digits: String = stem.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(usize::MAX)
}

/// Estimated CPU milliseconds of one seed of `det` on `rows × cols` (rows after the cap), used
/// only to start the longest cells first. Fitted by eye to seed 0 of every set at the 10 000-row
/// cap (benches/README.md, "Where the whole table's time goes"): ICL ≈ P·(d + 150)/1 300 ms per
/// row with P ≤ 64 window pairs (24_mnist 48 s, 5_campaign 37 s), NeuTraL-AD ≈ 0.7 + 0.012·d,
/// PCL-AD ≈ 0.6 + 0.003·d; the classical detectors are a few seconds for all sets together.
fn cost(det: &str, rows: usize, cols: usize) -> f64 {
    let (n, d) = (rows as f64, cols as f64);
    match det {
        "icl" => n * d.min(64.0) * (d + 150.0) / 1300.0,
        "neutral" => n * (0.7 + 0.012 * d),
        "pcl" => n * (0.6 + 0.003 * d),
        "knn" => n * n * d * 2e-8,
        _ => n * d * 1e-4,
    }
}

/// Keeps freed memory in glibc's heap instead of handing it back to the kernel after each
/// step. The deep detectors allocate and free the same large activation buffers on every
/// optimiser step; with glibc's defaults those buffers are fresh `mmap`s (or trimmed heap) each
/// time, and the page faults and zeroing cost ICL about a quarter of its CPU time (26_optdigits
/// at the 10 000-row cap, seed 0: 20.0 s user + 8.3 s system before, 21.9 + 0.45 after). The
/// same as `MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=2000000000
/// MALLOC_TOP_PAD_=67108864`; scores do not change. Only this command sets it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // glibc's <malloc.h>: M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD.
    const TRIM: std::ffi::c_int = -1;
    const TOP_PAD: std::ffi::c_int = -2;
    const MMAP: std::ffi::c_int = -3;
    extern "C" {
        fn mallopt(param: std::ffi::c_int, value: std::ffi::c_int) -> std::ffi::c_int;
    }
    for (param, value) in [(MMAP, 32 << 20), (TRIM, 2_000_000_000), (TOP_PAD, 64 << 20)] {
        // SAFETY: `mallopt` is glibc's (this build targets linux-gnu), takes two ints, and only
        // changes allocator tuning; it is called before this command starts any thread. A
        // refused setting (return 0) leaves glibc's default, which is only slower.
        unsafe {
            mallopt(param, value);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

pub(super) fn run(a: AnomalyArgs, roots: &DataRoots) -> anyhow::Result<()> {
    keep_freed_memory();
    let detectors: Vec<&str> = if a.detector == "all" {
        DETECTORS.to_vec()
    } else {
        vec![a.detector.as_str()]
    };
    // An unknown name is the user's error, not a detector failing on one data set.
    for d in &detectors {
        pardis::ml::anomaly::eval::detector(d, 0)?;
    }
    let jobs = match a.jobs {
        Some(0) => anyhow::bail!("--jobs must be at least 1"),
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let protocol = Protocol::from_name(&a.protocol)?;
    let ecod = EcodConfig {
        ecdf: a.ecod_ecdf,
        aggregation: a.ecod_aggregate,
    };
    let files = resolve(&a.data, roots)?;
    if a.seeds > MAX_SEEDS {
        anyhow::bail!("--seeds {} is more than {MAX_SEEDS}", a.seeds);
    }
    let seeds = a.seeds.max(1);
    // Each set is read once here, one at a time, for its shape (and `--dump-splits`), and
    // dropped; the runs read it again when the first of them starts and drop it when the last
    // ends (`Set::acquire`, `Set::release`), so memory holds only the sets in flight.
    let mut sets = Vec::with_capacity(files.len());
    for f in &files {
        let name = f
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("?")
            .to_string();
        let data = read_labelled(f)?;
        if !a.json {
            eprintln!(
                "{name}: {} × {}, {} anomalies",
                data.x.rows,
                data.x.cols,
                data.anomalies()
            );
        }
        if let Some(dir) = &a.dump_splits {
            std::fs::create_dir_all(dir)?;
            for seed in 0..seeds {
                let s = protocol.split(&data, seed, a.max_rows)?;
                let line =
                    |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(" ");
                let text = format!("{}\n{}\n", line(&s.train_rows), line(&s.test_rows));
                // Never overwrite a file the user did not name: refuse an existing one.
                let path = dir.join(format!("{name}.seed{seed}.txt"));
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .with_context(|| {
                        format!(
                            "writing {} (an existing file is not replaced)",
                            path.display()
                        )
                    })?;
                std::io::Write::write_all(&mut file, text.as_bytes())?;
            }
        }
        sets.push(Set {
            name,
            path: f.clone(),
            rows: a.max_rows.map_or(data.x.rows, |m| data.x.rows.min(m)),
            cols: data.x.cols,
            slot: Mutex::new(Slot {
                data: None,
                left: detectors.len() * seeds as usize,
            }),
        });
    }
    // Every (set, detector, seed) is an independent, fully seeded computation, so they run on
    // `--jobs` worker threads and the report is the same for any number of jobs (test
    // `jobs_do_not_change_the_report`). Longest first (by `cost`), but a set at a time: sets
    // by their total cost, then that set's runs by theirs, so at most `jobs` sets are loaded
    // at once.
    let nd = detectors.len();
    let cells_n = sets.len() * nd;
    let cell_cost = |c: usize| {
        let set = &sets[c / nd];
        cost(detectors[c % nd], set.rows, set.cols)
    };
    let set_cost: Vec<f64> = (0..sets.len())
        .map(|k| (0..nd).map(|d| cell_cost(k * nd + d)).sum())
        .collect();
    let mut order: Vec<(usize, u64)> = (0..cells_n)
        .flat_map(|c| (0..seeds).map(move |s| (c, s)))
        .collect();
    order.sort_by(|p, q| {
        let (sp, sq) = (p.0 / nd, q.0 / nd);
        set_cost[sq]
            .total_cmp(&set_cost[sp])
            .then(sp.cmp(&sq))
            .then(cell_cost(q.0).total_cmp(&cell_cost(p.0)))
            .then(p.cmp(q))
    });
    let jobs = jobs.min(order.len().max(1));
    let bar = progress(order.len() as u64, "anomaly");
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Vec<Outcome>>> = Mutex::new(vec![vec![None; seeds as usize]; cells_n]);
    let left = Mutex::new(vec![seeds; cells_n]);
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(c, seed)) = order.get(i) else {
                    break;
                };
                let set = &sets[c / nd];
                let name = &set.name;
                let det = detectors[c % nd];
                bar.set_message(format!("{name} {det} seed {seed}"));
                let r = set.run(|data| {
                    if det == "ecod" {
                        let mut e = Ecod::with_config(ecod);
                        run_seed_with(data, &mut e, seed, a.max_rows, protocol)
                    } else {
                        run_seed_protocol(data, Some(name), det, seed, a.max_rows, protocol)
                    }
                    .map_err(|e| e.to_string())
                });
                let mut res = results.lock().unwrap_or_else(|e| e.into_inner());
                res[c][seed as usize] = Some(r);
                let mut left = left.lock().unwrap_or_else(|e| e.into_inner());
                left[c] -= 1;
                if left[c] == 0 && !a.json {
                    let (runs, error) = collect(&res[c]);
                    let (m, s) = mean_std(&runs.iter().map(|r| r.auc_roc).collect::<Vec<_>>());
                    let line = format!(
                        "  {name} {det:8} AUC-ROC {m:.4} ± {s:.4}{}",
                        error.map(|e| format!("  ({e})")).unwrap_or_default()
                    );
                    // Not `bar.println`: it prints nothing while the bar is hidden (stderr not
                    // a terminal), and the failure reasons would be lost.
                    bar.suspend(|| eprintln!("{line}"));
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let cells: Vec<Cell> = results
        .iter()
        .enumerate()
        .map(|(c, seeds)| {
            let (runs, error) = collect(seeds);
            Cell {
                data: sets[c / nd].name.clone(),
                detector: detectors[c % nd].to_string(),
                protocol,
                max_rows: a.max_rows,
                jobs,
                runs,
                error,
                ecod: (detectors[c % nd] == "ecod").then(|| EcodSettings {
                    ecdf: ecod.ecdf.name(),
                    aggregation: ecod.aggregation.name(),
                }),
            }
        })
        .collect();
    // A failed cell is in the report ("failed", its reason on stderr) and fails the command.
    let failed = cells.iter().filter(|c| c.error.is_some()).count();
    let outcome = || {
        if failed == 0 {
            Ok(())
        } else {
            anyhow::bail!("{failed} of {} cells failed (reasons above)", cells.len())
        }
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cells)?);
        return outcome();
    }
    if ecod != EcodConfig::default() && detectors.contains(&"ecod") {
        println!(
            "ecod: ECDFs on {:?} rows, {:?} aggregation",
            ecod.ecdf, ecod.aggregation
        );
    }
    for (metric, pick) in [("AUC-ROC", 0), ("AUC-PR", 1)] {
        let value = |r: &SeedResult| if pick == 0 { r.auc_roc } else { r.auc_pr };
        let mut header = vec!["data".to_string()];
        header.extend(detectors.iter().map(|d| d.to_string()));
        let mut t = table(header);
        let mut means = Vec::new();
        for chunk in cells.chunks(detectors.len()) {
            let mut row = vec![chunk[0].data.clone()];
            let mut mrow = Vec::new();
            for c in chunk {
                let v: Vec<f64> = c.runs.iter().map(value).collect();
                if c.error.is_some() || v.is_empty() {
                    row.push("failed".into());
                    mrow.push(None);
                } else {
                    let (m, s) = mean_std(&v);
                    row.push(format!("{m:.3} ± {s:.3}"));
                    mrow.push(Some(m));
                }
            }
            t.add_row(row);
            means.push(mrow);
        }
        let mut avg = vec!["mean".to_string()];
        let mut rank = vec!["avg rank".to_string()];
        for (c, r) in average_ranks(&means).iter().enumerate() {
            let col: Vec<f64> = means.iter().filter_map(|m| m[c]).collect();
            avg.push(format!("{:.3}", mean_std(&col).0));
            rank.push(format!("{r:.2}"));
        }
        t.add_row(avg);
        t.add_row(rank);
        println!(
            "{metric} (mean ± std over {} seeds, {} protocol)\n{t}",
            a.seeds.max(1),
            protocol.name()
        );
    }
    outcome()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A set of two runs: read by the first, kept for the second, dropped after it; a panic in
    /// a run is its error and still releases the set.
    #[test]
    fn a_set_lives_from_its_first_run_to_its_last_and_survives_a_panic() {
        let dir = std::env::temp_dir().join(format!("pardis-anomaly-set-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.csv");
        std::fs::write(&path, "a,label\n0.5,0\n0.25,0\n9,1\n").unwrap();
        let set = Set {
            name: "s".into(),
            path,
            rows: 3,
            cols: 1,
            slot: Mutex::new(Slot {
                data: None,
                left: 2,
            }),
        };
        let loaded = |set: &Set| set.slot.lock().unwrap().data.is_some();
        assert!(!loaded(&set));
        let r = set.run(|d| -> Result<usize, String> { panic!("boom at {} rows", d.x.rows) });
        assert_eq!(r, Err("panicked: boom at 3 rows".to_string()));
        assert!(loaded(&set), "one run left");
        assert_eq!(set.run(|d| Ok(d.anomalies())), Ok(1));
        assert!(!loaded(&set), "dropped after the last run");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
