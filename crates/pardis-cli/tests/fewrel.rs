//! `pardis ml fewrel` end to end with the tiny encoder on a few episodes (skipped, with the
//! reason printed, when the FewRel files are absent): the JSON report's shape, and bad
//! arguments or bad data rejected with a message and exit status 1, never a panic.
#![cfg(feature = "ml")]

mod common;
use common::{fails_with, pardis};

/// A short, capped run with the default (tiny) encoder: the arguments every test below starts
/// from.
const QUICK: [&str; 10] = [
    "ml",
    "fewrel",
    "--steps",
    "3",
    "--episodes",
    "4",
    "--max-train-instances",
    "12",
    "--max-test-instances",
    "12",
];

/// Whether FewRel is in a data root; prints why the caller skips when it is not.
fn fewrel_present() -> bool {
    let out = pardis(&[&QUICK[..], &["--method", "proto", "--json"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("not found") {
        println!("skipping: FewRel is not in any data root ({err})");
        return false;
    }
    true
}

#[test]
fn fewrel_json_report_has_one_row_per_method_and_setting() {
    if !fewrel_present() {
        return;
    }
    let args = [
        &QUICK[..],
        &["--method", "proto,pohrl", "--k", "1,2", "--json"],
    ]
    .concat();
    let out = pardis(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pardis {args:?}: {err}");
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(rep["relations"], serde_json::json!([25, 8]), "{rep}");
    assert_eq!(rep["cache_seconds"], 0.0, "the tiny encoder caches nothing");
    let rows = rep["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "2 settings × 2 methods");
    let mut seen = Vec::new();
    for r in rows {
        let (n, k, q) = (&r["shape"]["n"], &r["shape"]["k"], &r["shape"]["q"]);
        assert_eq!((n, q), (&5.into(), &5.into()), "{r}");
        seen.push((
            r["method"].as_str().unwrap().to_string(),
            k.as_u64().unwrap(),
        ));
        let acc = &r["accuracy"];
        assert_eq!(acc["episodes"], 4);
        let mean = acc["mean"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&mean), "{r}");
        assert!(acc["ci95"].as_f64().unwrap() >= 0.0, "{r}");
        assert_eq!(r["train_steps"], 3);
        assert_eq!(r["fine_tuned_encoder"], true, "the tiny encoder trains");
        assert!(r["final_loss"].as_f64().unwrap().is_finite(), "{r}");
        for t in ["train_seconds", "encode_seconds", "eval_seconds"] {
            assert!(r[t].as_f64().unwrap() >= 0.0, "{t}: {r}");
        }
    }
    seen.sort();
    let want: Vec<(String, u64)> = [("pohrl", 1), ("pohrl", 2), ("proto", 1), ("proto", 2)]
        .iter()
        .map(|(m, k)| (m.to_string(), *k))
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn fewrel_text_header_says_the_tiny_encoder_trains() {
    if !fewrel_present() {
        return;
    }
    let out = pardis(&[&QUICK[..], &["--method", "proto"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("encoder tiny, trained with each method"),
        "{text}"
    );
    assert!(!text.contains("frozen"), "{text}");
}

/// [`QUICK`] followed by `extra`.
fn quick<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    [&QUICK[..], extra].concat()
}

#[test]
fn fewrel_rejects_bad_flags_and_data_with_a_message() {
    // Flags checked before any data is read.
    fails_with(
        &["ml", "fewrel", "--encoder-lr", "0"],
        "--encoder-lr must be a positive number",
    );
    fails_with(
        &[
            "ml",
            "fewrel",
            "--encoder",
            "minilm",
            "--encoder-lr",
            "1e-4",
        ],
        "--fine-tune-layers",
    );
    // Huge counts: typed errors, not an overflow panic or an allocation abort.
    let huge = "18446744073709551615";
    fails_with(&["ml", "fewrel", "--k", huge], "overflows");
    fails_with(&["ml", "fewrel", "--steps", huge], "--steps");
    fails_with(&["ml", "fewrel", "--episodes", huge], "--episodes");
    fails_with(&["ml", "fewrel", "--steps", "10000001"], "allowed");
    let out = pardis(&["ml", "fewrel", "--k", "one"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--k"));
    if !fewrel_present() {
        return;
    }
    fails_with(&quick(&["--method", "bogus"]), "unknown method `bogus`");
    fails_with(&quick(&["--encoder", "bogus"]), "unknown --encoder bogus");
    fails_with(
        &quick(&["--fine-tune-layers", "1"]),
        "--fine-tune-layers is for",
    );
    // The default test set has 8 relations: 10-way cannot run, and says so before training.
    fails_with(
        &quick(&["--n", "10"]),
        "10-way episodes need at least 10 relations",
    );
    // A missing --data file names itself.
    let missing =
        std::env::temp_dir().join(format!("pardis-fewrel-none-{}.json", std::process::id()));
    let m = missing.to_str().unwrap();
    fails_with(&quick(&["--data", m]), m);
    // Hostile FewRel data is a typed error naming the relation and the instance.
    let dir = std::env::temp_dir().join(format!("pardis-fewrel-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("empty-tokens.json");
    std::fs::write(
        &bad,
        r#"{"X1": [{"tokens": [], "h": ["a", "Q1", [[0]]], "t": ["b", "Q2", [[1]]]}]}"#,
    )
    .unwrap();
    fails_with(
        &quick(&["--data", bad.to_str().unwrap()]),
        "relation X1, instance 0: no tokens",
    );
    std::fs::write(&bad, r#"{"X1": [{"tokens": ["a"]"#).unwrap();
    fails_with(
        &quick(&["--data", bad.to_str().unwrap()]),
        "malformed fewrel data",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
