//! `pardis ml cil` end to end on the digits split (skipped, with the reason printed, when the
//! shared data set is absent): the JSON report's shape and ranges, replay beating plain
//! fine-tuning, the plot written once and never replaced without `--force`, and bad arguments
//! rejected with a message and exit status 1.
#![cfg(feature = "ml")]

mod common;
use common::{fails_with, pardis};

#[test]
fn cil_reports_curves_and_replay_beats_finetuning() {
    let args = [
        "ml",
        "cil",
        "--method",
        "finetune,er",
        "--orders",
        "1",
        "--steps",
        "30",
        "--json",
    ];
    let out = pardis(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("not found") {
        println!("skipping: the digits data set is not in any data root ({err})");
        return;
    }
    assert!(out.status.success(), "pardis {args:?}: {err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let mut finals = Vec::new();
    for (run, method) in runs.iter().zip(["finetune", "er"]) {
        assert_eq!(run["method"], method);
        let curve: Vec<f64> = run["curve"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(curve.len(), 5, "5 tasks by default");
        assert!(curve.iter().all(|a| (0.0..=1.0).contains(a)), "{curve:?}");
        let per_task = run["per_task"].as_array().unwrap();
        for (t, row) in per_task.iter().enumerate() {
            assert_eq!(
                row.as_array().unwrap().len(),
                t + 1,
                "task {t} sees tasks 0..={t}"
            );
        }
        let last = run["final_accuracy"].as_f64().unwrap();
        assert_eq!(last, *curve.last().unwrap());
        finals.push(last);
    }
    // Without replay the first tasks are forgotten; experience replay keeps most of them.
    assert!(
        finals[1] > finals[0] + 0.2,
        "ER {} vs fine-tuning {}",
        finals[1],
        finals[0]
    );
}

#[test]
fn cil_plot_is_never_replaced_without_force() {
    let dir = std::env::temp_dir().join(format!("pardis-cil-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join("curve.png");
    std::fs::write(&png, b"the user's file").unwrap();
    let p = png.to_str().unwrap();
    fails_with(&["ml", "cil", "--steps", "5", "--plot", p], "--force");
    assert_eq!(std::fs::read(&png).unwrap(), b"the user's file");
    let out = pardis(&[
        "ml", "cil", "--method", "finetune", "--steps", "5", "--plot", p, "--force",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("not found") {
        println!("skipping the --force half: the digits data set is absent ({err})");
    } else {
        assert!(out.status.success(), "{err}");
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every one of these is refused before the data set is read, so the test needs no data.
#[test]
fn cil_bad_arguments_are_clean_errors() {
    fails_with(&["ml", "cil", "--tasks", "0"], "tasks");
    fails_with(&["ml", "cil", "--method", "bogus"], "unknown method");
    fails_with(&["ml", "cil", "--label-ratio", "1.5"], "label ratio");
    fails_with(&["ml", "cil", "--arch", "transformer"], "--arch");
    fails_with(&["ml", "cil", "--data", "cifar"], "cifar");
    fails_with(&["ml", "cil", "--jobs", "0"], "--jobs");
    fails_with(&["ml", "cil", "--orders", "0"], "class order");
    fails_with(
        &["ml", "cil", "--orders", "18446744073709551615"],
        "more than 1000",
    );
    fails_with(&["ml", "cil", "--steps", "0"], "steps");
}

#[test]
fn replay_only_changes_the_temporal_method_and_nothing_else() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "ml",
            "cil",
            "--method",
            "er,temporal",
            "--orders",
            "1",
            "--steps",
            "20",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = pardis(&args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() && err.contains("not found") {
            return None;
        }
        assert!(out.status.success(), "pardis {args:?}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
        Some(v["runs"].as_array().unwrap().clone())
    };
    let Some(plain) = run(&[]) else {
        println!("skipping: the digits data set is not in any data root");
        return;
    };
    let only = run(&["--replay-only"]).unwrap();
    assert_eq!(plain[0]["curve"], only[0]["curve"], "ER is unaffected");
    assert_ne!(plain[1]["curve"], only[1]["curve"], "temporal changes");
}
