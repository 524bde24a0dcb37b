//! `pardis bfs` end to end: a small generated graph as JSON, `--threads 0` as all cores, and
//! hostile input (endless lines, oversized generators, absurd thread counts) refused with a
//! message and exit status 1 rather than a crash or an exhausted machine.

mod common;
use common::pardis;

#[test]
fn json_report_and_threads_zero() {
    let out = pardis(&[
        "bfs",
        "--gen",
        "kron:8",
        "--roots",
        "2",
        "--threads",
        "0",
        "--validate",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(r["graph"]["vertices"], 256);
    assert!(r["threads"].as_u64().unwrap() >= 1);
    assert_eq!(r["runs"].as_array().unwrap().len(), 2);
    // Graph500 TEPS counts the generator's tuples (duplicates, self loops): above the
    // deduplicated figure on a Kronecker graph.
    for run in r["runs"].as_array().unwrap() {
        assert!(run["input_tuples"].as_u64().unwrap() > run["edges"].as_u64().unwrap());
    }
    let (g500, dedup) = (
        r["graph500_harmonic_mean_teps"].as_f64().unwrap(),
        r["harmonic_mean_teps"].as_f64().unwrap(),
    );
    assert!(g500 > dedup, "{g500} vs {dedup}");
}

#[test]
fn hostile_input_fails_with_a_message() {
    for args in [
        &["bfs", "--graph", "/dev/zero", "--roots", "1"][..],
        &["bfs", "--gen", "er:10:1000000000000", "--roots", "1"],
        &["bfs", "--gen", "kron:40", "--roots", "1"],
        &[
            "bfs",
            "--gen",
            "kron:8",
            "--threads",
            "18446744073709551615",
        ],
    ] {
        let out = pardis(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "pardis {args:?}: {stderr}");
        assert!(stderr.contains("error"), "pardis {args:?}: {stderr}");
    }
}
