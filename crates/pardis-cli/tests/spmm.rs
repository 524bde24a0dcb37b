//! `pardis spmm` end to end: the JSON report of a small generated matrix, the SIMD cap, and
//! bad input rejected with a message and a failing exit status.

mod common;
use common::{json_report, pardis};

#[test]
fn json_report_of_a_generated_matrix() {
    let r = json_report(&[
        "spmm",
        "--gen",
        "kron:8",
        "--k",
        "24",
        "--threads",
        "2",
        "--reps",
        "2",
        "--json",
    ]);
    assert_eq!(r["rows"], 256);
    assert_eq!(r["k"], 24);
    assert_eq!(r["threads"], 2);
    assert!(r["nnz"].as_u64().unwrap() > 256);
    assert!(r["max_relative_error"].as_f64().unwrap() < 1e-12);
    assert!(r["gflops"].as_f64().unwrap() > 0.0);
    let simd = r["simd"].as_str().unwrap();
    assert!(
        ["avx512", "avx2", "sse2", "native"].contains(&simd),
        "{simd}"
    );
}

#[test]
fn simd_cap_and_f32() {
    let r = json_report(&[
        "spmm",
        "--gen",
        "arrow:300:2",
        "--k",
        "33",
        "--precision",
        "f32",
        "--simd",
        "avx2",
        "--reps",
        "1",
        "--json",
    ]);
    assert_ne!(r["simd"], "avx512");
    assert_eq!(r["precision"], "f32");
    assert!(r["max_relative_error"].as_f64().unwrap() < 1e-5);
}

#[test]
fn bad_input_fails_with_a_message() {
    for args in [
        &["spmm", "--gen", "kron:8", "--k", "0"][..],
        &["spmm", "--gen", "kron:8", "--k", "100000000000"],
        &["spmm", "--gen", "stencil27:1626"],
        &["spmm", "--gen", "stencil5:65536"],
        &[
            "spmm",
            "--gen",
            "kron:8",
            "--threads",
            "18446744073709551615",
        ],
        &["spmm", "--matrix", "/dev/zero"],
        &["spmm", "--gen", "kron:8", "--reps", "0"],
        &["spmm", "--gen", "nosuch:3"],
        &["spmm", "--matrix", "/nonexistent/a.mtx"],
        &["spmm", "--gen", "kron:8", "--simd", "avx9"],
    ] {
        let out = pardis(args);
        assert!(!out.status.success(), "pardis {args:?} succeeded");
        assert!(!out.stderr.is_empty(), "pardis {args:?}: no message");
        assert!(
            matches!(out.status.code(), Some(1 | 2)),
            "pardis {args:?}: an error, not a crash ({:?})",
            out.status
        );
    }
}

#[test]
fn threads_zero_means_all_cores() {
    let r = json_report(&[
        "spmm",
        "--gen",
        "kron:6",
        "--k",
        "8",
        "--threads",
        "0",
        "--reps",
        "1",
        "--json",
    ]);
    assert!(r["threads"].as_u64().unwrap() >= 1);
}

#[test]
fn row_pairs_kernel_reports_its_pairs_and_a_true_minimum() {
    let r = json_report(&[
        "spmm",
        "--gen",
        "stencil27:8",
        "--kernel",
        "pairs",
        "--threads",
        "2",
        "--reps",
        "3",
        "--json",
    ]);
    assert_eq!(r["kernel"], "pairs");
    assert_eq!(r["row_pairs"]["paired_rows"], 512);
    let shared = r["row_pairs"]["shared_fraction"].as_f64().unwrap();
    assert!((0.6..=0.8).contains(&shared), "{shared}");
    assert!(r["max_relative_error"].as_f64().unwrap() < 1e-12);
    // Another kernel has no pairs to report.
    let lssm = json_report(&["spmm", "--gen", "stencil27:8", "--reps", "1", "--json"]);
    assert!(lssm["row_pairs"].is_null());
    // The table's "min" is the fastest run, never above the median (it once printed the first).
    let out = pardis(&[
        "spmm",
        "--gen",
        "stencil27:8",
        "--kernel",
        "pairs",
        "--reps",
        "9",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let ms = |key: &str| -> f64 {
        let at = text
            .find(key)
            .unwrap_or_else(|| panic!("no `{key}` in\n{text}"))
            + key.len();
        text[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(ms("ms, min ") <= ms("median "), "{text}");
}

/// `--stream`: on and off as asked, and auto off for a C far smaller than any last-level cache;
/// streamed or not, the product checks against the reference.
#[test]
fn stream_flag_sets_the_stores_of_c() {
    for (flag, expected) in [("on", true), ("off", false), ("auto", false)] {
        let r = json_report(&[
            "spmm",
            "--gen",
            "arrow:2000:3",
            "--k",
            "64",
            "--threads",
            "2",
            "--reps",
            "1",
            "--stream",
            flag,
            "--json",
        ]);
        assert_eq!(r["plan"]["streaming_stores"], expected, "--stream {flag}");
        assert!(r["max_relative_error"].as_f64().unwrap() < 1e-12);
        // The arrow's 3 long rows in tasks, each in a unit with the short rows at its columns;
        // its rows of B (2000 × 64 f64) fit any cache: the L1-sized chunks.
        let plan = &r["plan"];
        assert!(plan["units"].as_u64().unwrap() >= plan["long_rows"].as_u64().unwrap());
        assert!(plan["units"].as_u64().unwrap() < plan["tasks"].as_u64().unwrap());
        assert_eq!(plan["chunk_bytes"], 16384);
    }
}

/// A grid whose three planes of B do not fit two per-core caches is swept band by band
/// (`stencil27:32`: planes of 1024 rows; at K = 256 `f64` three planes of B take 6 MiB) and
/// reports its bands and shift pairs, a power-law graph is not; the product checks either way.
#[test]
fn json_plan_reports_the_sweep_of_a_grid() {
    let run = |spec: &str| {
        json_report(&[
            "spmm",
            "--gen",
            spec,
            "--k",
            "256",
            "--threads",
            "2",
            "--reps",
            "1",
            "--json",
        ])
    };
    let grid = run("stencil27:32");
    assert!(grid["max_relative_error"].as_f64().unwrap() < 1e-12);
    // Whether it is swept depends on the per-core cache (512 KiB: bands of 3 lines); where
    // it is, in whole lines of 32 rows.
    let sweep = &grid["plan"]["sweep"];
    if !sweep.is_null() {
        assert_eq!(sweep["period_rows"], 1024, "{sweep}");
        let band = sweep["band_rows"].as_u64().unwrap();
        assert!(band > 0 && band <= 1024 && band % 32 == 0, "{band}");
    }
    // A grid's lines pair up; a graph's rows do not.
    assert_eq!(grid["plan"]["shift_pairs"], true);
    let graph = run("kron:10");
    assert!(graph["plan"]["sweep"].is_null());
    assert_eq!(graph["plan"]["shift_pairs"], false);
}
