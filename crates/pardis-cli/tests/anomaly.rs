//! `pardis ml anomaly` end to end: the JSON report of one fast detector on a small ADBench set
//! (skipped, with the reason printed, when the shared data set is absent) and on a generated
//! CSV, the ADBench protocol's split, and bad input (a missing file, an invalid label, an
//! unknown detector) rejected with a message and exit status 1, never a panic.
#![cfg(feature = "ml")]

use std::path::{Path, PathBuf};

mod common;
use common::{fails_with, json_report};

/// Checks one cell of the report: fields, one run per seed, metrics in range.
fn check_cell(cell: &serde_json::Value, data: &str, detector: &str, seeds: u64) {
    assert_eq!(cell["data"], data);
    assert_eq!(cell["detector"], detector);
    assert!(cell["error"].is_null(), "{cell}");
    let runs = cell["runs"].as_array().unwrap();
    assert_eq!(runs.len() as u64, seeds);
    for (k, r) in runs.iter().enumerate() {
        assert_eq!(r["seed"].as_u64(), Some(k as u64));
        for field in ["auc_roc", "auc_pr"] {
            let v = r[field].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{field} = {v}");
        }
        for field in ["fit_s", "score_s"] {
            assert!(r[field].as_f64().unwrap() >= 0.0);
        }
    }
}

#[test]
fn json_report_on_a_shared_adbench_set() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets/tabular-ad/adbench/42_WBC.npz");
    if !p.is_file() {
        eprintln!("skipped: {} is not present", p.display());
        return;
    }
    let path = p.to_str().unwrap();
    let r = json_report(&[
        "ml",
        "anomaly",
        "--data",
        path,
        "--detector",
        "iforest",
        "--seeds",
        "2",
        "--json",
    ]);
    let cells = r.as_array().unwrap();
    assert_eq!(cells.len(), 1);
    check_cell(&cells[0], "42_WBC", "iforest", 2);
    assert!(cells[0]["max_rows"].is_null());
    // WBC's 10 anomalies are easy for an isolation forest (about 0.99 AUC-ROC).
    for run in cells[0]["runs"].as_array().unwrap() {
        assert!(run["auc_roc"].as_f64().unwrap() > 0.8, "{run}");
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("pardis-anomaly-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CSV (label last) of 200 normals on a line and 10 points far off it.
fn write_csv(dir: &Path, name: &str, bad_label: bool) -> String {
    let mut text = String::from("a,b,c,label\n");
    for i in 0..210 {
        let t = (i % 50) as f64 / 50.0;
        let (row, y) = if i < 200 {
            ([t, 2.0 * t, 1.0 - t], 0)
        } else {
            ([t, -3.0 - t, 4.0 + t], 1)
        };
        let y = if bad_label && i == 7 { 2 } else { y };
        text.push_str(&format!("{},{},{},{y}\n", row[0], row[1], row[2]));
    }
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn json_report_on_a_generated_csv_with_a_row_cap() {
    let dir = TempDir::new("ok");
    let path = write_csv(&dir.0, "line.csv", false);
    let r = json_report(&[
        "ml",
        "anomaly",
        "--data",
        &path,
        "--detector",
        "ecod",
        "--seeds",
        "1",
        "--max-rows",
        "100",
        "--json",
    ]);
    let cell = &r.as_array().unwrap()[0];
    check_cell(cell, "line", "ecod", 1);
    assert_eq!(cell["max_rows"], 100);
    assert!(cell["runs"][0]["auc_roc"].as_f64().unwrap() > 0.9, "{cell}");
}

#[test]
fn bad_input_is_a_clean_error() {
    fails_with(
        &[
            "ml",
            "anomaly",
            "--data",
            "/nonexistent/dir/x.npz",
            "--detector",
            "iforest",
        ],
        "no data file matches",
    );
    let dir = TempDir::new("bad");
    let path = write_csv(&dir.0, "bad.csv", true);
    fails_with(
        &["ml", "anomaly", "--data", &path, "--detector", "iforest"],
        "label 7 is 2",
    );
    let good = write_csv(&dir.0, "good.csv", false);
    fails_with(
        &["ml", "anomaly", "--data", &good, "--detector", "bogus"],
        "unknown detector `bogus`",
    );
    fails_with(
        &["ml", "anomaly", "--data", &good, "--jobs", "0"],
        "--jobs must be at least 1",
    );
    fails_with(
        &[
            "ml",
            "anomaly",
            "--data",
            &good,
            "--seeds",
            "18446744073709551615",
        ],
        "more than 1000",
    );
}

/// A cell that fails (a row cap too small for a split) is "failed" in the table, its reason is
/// on stderr even when stderr is not a terminal (a pipe here, so the progress bar is hidden),
/// and the command exits with an error.
#[test]
fn a_failing_cell_reports_its_reason_on_a_piped_stderr() {
    let dir = TempDir::new("fail");
    let path = write_csv(&dir.0, "line.csv", false);
    let out = common::pardis(&[
        "ml",
        "anomaly",
        "--data",
        &path,
        "--detector",
        "ecod",
        "--seeds",
        "1",
        "--max-rows",
        "2",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stdout.contains("failed"), "{stdout}");
    assert!(stderr.contains("1 of 1 cells failed"), "{stderr}");
    assert!(
        stderr.contains("line ecod")
            && stderr.contains("a row cap of 2 leaves no room for 2 normals and an anomaly"),
        "{stderr}"
    );
}

/// `--protocol adbench`: the report says so, and the dumped splits are ADBench's — disjoint,
/// covering all 210 rows, 30 % of each class tested (60 of 200 normals, 3 of 10 anomalies), the
/// other anomalies in the training rows; the default protocol trains on normals only.
#[test]
fn adbench_protocol_splits_all_rows_stratified() {
    let dir = TempDir::new("adbench");
    let path = write_csv(&dir.0, "line.csv", false);
    let splits = dir.0.join("splits");
    let args = |protocol: &'static str, splits: &'static str| {
        vec![
            "ml".to_string(),
            "anomaly".into(),
            "--data".into(),
            path.clone(),
            "--detector".into(),
            "knn".into(),
            "--seeds".into(),
            "2".into(),
            "--protocol".into(),
            protocol.into(),
            "--dump-splits".into(),
            dir.0.join(splits).to_str().unwrap().into(),
            "--json".into(),
        ]
    };
    let run = |a: Vec<String>| json_report(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let r = run(args("adbench", "splits"));
    let cell = &r.as_array().unwrap()[0];
    check_cell(cell, "line", "knn", 2);
    assert_eq!(cell["protocol"], "adbench");
    let read = |dir: &Path, seed: u64| -> (Vec<usize>, Vec<usize>) {
        let text = std::fs::read_to_string(dir.join(format!("line.seed{seed}.txt"))).unwrap();
        let mut lines = text.lines().map(|l| {
            l.split_whitespace()
                .map(|v| v.parse::<usize>().unwrap())
                .collect::<Vec<_>>()
        });
        (lines.next().unwrap(), lines.next().unwrap())
    };
    let (train0, test0) = read(&splits, 0);
    let anomalies = |rows: &[usize]| rows.iter().filter(|&&i| i >= 200).count();
    assert_eq!((test0.len(), anomalies(&test0)), (63, 3));
    assert_eq!((train0.len(), anomalies(&train0)), (147, 7));
    let mut all: Vec<usize> = train0.iter().chain(&test0).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..210).collect::<Vec<_>>());
    assert_ne!(read(&splits, 1).1, test0, "seeds differ");
    let r = run(args("pclad", "pclad"));
    assert_eq!(r[0]["protocol"], "pclad");
    let (train, _) = read(&dir.0.join("pclad"), 0);
    assert_eq!((train.len(), anomalies(&train)), (100, 0));
}

/// `--jobs`: every (set, detector, seed) is seeded on its own, so running them on one thread or
/// several (in another order, each set read when its first run starts and dropped after its
/// last) gives the same report, deep detectors included. Two sets, found by name under
/// `$PARDIS_DATA`.
#[test]
fn jobs_do_not_change_the_report() {
    let dir = TempDir::new("jobs");
    let sets = dir.0.join("tabular-ad/pclad");
    std::fs::create_dir_all(&sets).unwrap();
    write_csv(&sets, "1_line.csv", false);
    // The second set: every third normal row dropped, the anomalies moved close to the line.
    let full = std::fs::read_to_string(write_csv(&sets, "2_line.csv", false)).unwrap();
    let short: String = full
        .lines()
        .enumerate()
        .filter(|&(i, _)| i == 0 || i > 200 || i % 3 != 0)
        .map(|(i, l)| {
            if i > 200 {
                let t = (i - 1) % 50;
                let t = t as f64 / 50.0;
                format!("{t},{},{},1\n", 2.0 * t + 0.05, 1.0 - t)
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(sets.join("2_line.csv"), short).unwrap();
    let run = |jobs: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_pardis"))
            .env("PARDIS_DATA", &dir.0)
            .args([
                "ml",
                "anomaly",
                "--data",
                "line",
                "--detector",
                "all",
                "--seeds",
                "2",
                "--jobs",
                jobs,
                "--json",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    // (data, detector, (AUC-ROC, AUC-PR) per seed) of every cell.
    type Metrics = Vec<(String, String, Vec<(f64, f64)>)>;
    let metrics = |r: &serde_json::Value| -> Metrics {
        r.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert!(c["error"].is_null(), "{c}");
                let runs = c["runs"].as_array().unwrap();
                assert_eq!(runs.len(), 2, "{c}");
                (
                    c["data"].as_str().unwrap().to_string(),
                    c["detector"].as_str().unwrap().to_string(),
                    runs.iter()
                        .map(|r| {
                            (
                                r["auc_roc"].as_f64().unwrap(),
                                r["auc_pr"].as_f64().unwrap(),
                            )
                        })
                        .collect(),
                )
            })
            .collect()
    };
    let one = metrics(&run("1"));
    assert_eq!(one.len(), 12);
    let cells: Vec<(&str, &str)> = one.iter().map(|c| (c.0.as_str(), c.1.as_str())).collect();
    let dets = ["pcl", "iforest", "ecod", "knn", "icl", "neutral"];
    let want: Vec<(&str, &str)> = ["1_line", "2_line"]
        .iter()
        .flat_map(|s| dets.iter().map(move |d| (*s, *d)))
        .collect();
    assert_eq!(cells, want);
    let aucs =
        |cells: &Metrics| -> Vec<Vec<(f64, f64)>> { cells.iter().map(|c| c.2.clone()).collect() };
    assert_ne!(
        aucs(&one[..6].to_vec()),
        aucs(&one[6..].to_vec()),
        "the two sets differ"
    );
    let three = run("3");
    assert_eq!(one, metrics(&three));
    // The report says how many runs shared the CPU (their seconds include the contention).
    assert!(three.as_array().unwrap().iter().all(|c| c["jobs"] == 3));
}

/// `--ecod-ecdf` / `--ecod-aggregate`: the defaults spelled out give the same report as none,
/// the PyOD mode (transductive ECDFs, per-feature max) runs and still separates the far points,
/// an unknown value is a usage error.
#[test]
fn ecod_modes() {
    let dir = TempDir::new("ecod");
    let path = write_csv(&dir.0, "line.csv", false);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "ml",
            "anomaly",
            "--data",
            &path,
            "--detector",
            "ecod",
            "--seeds",
            "2",
            "--json",
        ];
        args.extend_from_slice(extra);
        let r = json_report(&args);
        let cell = r.as_array().unwrap()[0].clone();
        check_cell(&cell, "line", "ecod", 2);
        let runs = cell["runs"].as_array().unwrap().clone();
        let aucs = runs
            .iter()
            .map(|r| r["auc_roc"].as_f64().unwrap())
            .collect::<Vec<_>>();
        // The cell records the settings it ran with.
        let (ecdf, aggregation) = match extra {
            [] => ("training", "feature-mean"),
            ["--ecod-aggregate", a] => ("training", *a),
            [_, e, _, a] => (*e, *a),
            _ => unreachable!("the cases below"),
        };
        assert_eq!(
            cell["ecod"],
            serde_json::json!({"ecdf": ecdf, "aggregation": aggregation}),
            "{extra:?}"
        );
        aucs
    };
    let default = run(&[]);
    let spelled = run(&[
        "--ecod-ecdf",
        "training",
        "--ecod-aggregate",
        "feature-mean",
    ]);
    assert_eq!(default, spelled);
    let pyod = run(&[
        "--ecod-ecdf",
        "training+scored",
        "--ecod-aggregate",
        "feature-max",
    ]);
    assert!(pyod.iter().all(|&a| a > 0.9), "{pyod:?}");
    let paper = run(&["--ecod-aggregate", "paper"]);
    assert!(paper.iter().all(|&a| a > 0.9), "{paper:?}");
    // A usage error: clap's exit status 2 and message.
    let out = common::pardis(&[
        "ml",
        "anomaly",
        "--data",
        &path,
        "--detector",
        "ecod",
        "--ecod-ecdf",
        "all",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("expected training or training+scored"),
        "{err}"
    );
}
