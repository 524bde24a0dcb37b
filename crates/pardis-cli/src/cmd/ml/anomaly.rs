//! `pardis ml anomaly` (issue #27): tabular anomaly detectors on the PCL-AD paper's protocol
//! or ADBench's (`--protocol`), mean ± std over seeds, a table per data set and each detector's
//! average rank.

use std::path::{Path, PathBuf};

use anyhow::Context;

use pardis::ml::anomaly::data::read_labelled;
use pardis::ml::anomaly::eval::{
    average_ranks, mean_std, run_seed_protocol, SeedResult, DETECTORS,
};
use pardis::ml::anomaly::Protocol;

use pardis_datasets::DataRoots;

use crate::output::table;

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
}

#[derive(Debug, serde::Serialize)]
struct Cell {
    data: String,
    detector: String,
    protocol: Protocol,
    max_rows: Option<usize>,
    runs: Vec<SeedResult>,
    error: Option<String>,
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

pub(super) fn run(a: AnomalyArgs, roots: &DataRoots) -> anyhow::Result<()> {
    let detectors: Vec<&str> = if a.detector == "all" {
        DETECTORS.to_vec()
    } else {
        vec![a.detector.as_str()]
    };
    // An unknown name is the user's error, not a detector failing on one data set.
    for d in &detectors {
        pardis::ml::anomaly::eval::detector(d, 0)?;
    }
    let protocol = Protocol::from_name(&a.protocol)?;
    let files = resolve(&a.data, roots)?;
    let mut cells = Vec::new();
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
            for seed in 0..a.seeds.max(1) {
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
        for &det in &detectors {
            let mut runs = Vec::new();
            let mut error = None;
            for seed in 0..a.seeds.max(1) {
                match run_seed_protocol(&data, Some(&name), det, seed, a.max_rows, protocol) {
                    Ok(r) => runs.push(r),
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            if !a.json {
                let (m, s) = mean_std(&runs.iter().map(|r| r.auc_roc).collect::<Vec<_>>());
                eprintln!(
                    "  {det:8} AUC-ROC {m:.4} ± {s:.4}{}",
                    error
                        .as_deref()
                        .map(|e| format!("  ({e})"))
                        .unwrap_or_default()
                );
            }
            cells.push(Cell {
                data: name.clone(),
                detector: det.to_string(),
                protocol,
                max_rows: a.max_rows,
                runs,
                error,
            });
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&cells)?);
        return Ok(());
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
    Ok(())
}
