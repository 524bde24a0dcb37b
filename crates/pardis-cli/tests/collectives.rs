//! `pardis collectives` end to end (issue 30): exit statuses that tell the truth and resource
//! bounds checked before anything runs.
#![cfg(feature = "collectives")]

mod common;
use common::pardis;

/// Runs `args`, expects a failing exit status (1 for errors, 2 for clap's usage errors, never a
/// panic's 101) and returns stderr.
fn fails(args: &[&str]) -> String {
    let out = pardis(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "pardis {args:?}: {:?} {err}",
        out.status
    );
    err
}

#[test]
fn chaos_exit_status_follows_the_ranks() {
    // Preemptive: everybody finishes, exit 0.
    let out = pardis(&[
        "collectives",
        "chaos",
        "--ranks",
        "4",
        "--collectives",
        "4",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["success"], true);

    // Ordered: the deadlock is a failure unless it is expected.
    let ordered = [
        "collectives",
        "chaos",
        "--mode",
        "ordered",
        "--ranks",
        "4",
        "--collectives",
        "4",
        "--seed",
        "1",
        "--deadlock-timeout-ms",
        "200",
    ];
    let err = fails(&ordered);
    assert!(err.contains("did not finish"), "{err}");
    assert!(err.contains("--expect-deadlock"), "{err}");
    let mut expected = ordered.to_vec();
    expected.push("--expect-deadlock");
    let out = pardis(&expected);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("reported a deadlock"));
}

#[test]
fn bad_arguments_are_refused_before_anything_runs() {
    let err = fails(&["collectives", "chaos", "--deadlock-timeout-ms", "0"]);
    assert!(err.contains("deadlock-timeout-ms"), "{err}");
    let err = fails(&["collectives", "chaos", "--elements", "4000000000"]);
    assert!(err.contains("GiB"), "{err}");
    let err = fails(&["collectives", "chaos", "--collectives", "100000"]);
    assert!(err.contains("collectives"), "{err}");
    let err = fails(&["collectives", "chaos", "--ranks", "18446744073709551615"]);
    assert!(err.contains("local ranks"), "{err}");
    let err = fails(&["collectives", "chaos", "--ranks", "0"]);
    assert!(err.contains("local ranks"), "{err}");
    let err = fails(&["collectives", "bench", "--sizes", "1T"]);
    assert!(err.contains("GiB"), "{err}");
    // A range whose last size is too large fails before the first size runs.
    let err = fails(&["collectives", "bench", "--sizes", "1K..1T"]);
    assert!(err.contains("GiB"), "{err}");
    let err = fails(&["collectives", "bench", "--sizes", "0"]);
    assert!(err.contains("4 bytes"), "{err}");
    let err = fails(&["collectives", "bench", "--ranks", "100000", "--sizes", "1K"]);
    assert!(err.contains("local ranks"), "{err}");
    let err = fails(&["collectives", "bench", "--ranks", "0", "--sizes", "1K"]);
    assert!(err.contains("local ranks"), "{err}");
}
