//! What every end-to-end test of the `pardis` binary shares (each test binary uses some of it).
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs the `pardis` binary built for these tests with `args`, capturing its output.
pub(crate) fn pardis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pardis"))
        .args(args)
        .output()
        .expect("run pardis")
}

/// Runs `pardis args`, which must succeed, and parses its standard output as JSON.
pub(crate) fn json_report(args: &[&str]) -> serde_json::Value {
    let out = pardis(args);
    assert!(
        out.status.success(),
        "pardis {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Runs `pardis args`, which must fail with exit status 1 and a message containing `message`,
/// never a panic.
pub(crate) fn fails_with(args: &[&str], message: &str) {
    let out = pardis(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "pardis {args:?}: {err}");
    assert!(err.contains(message), "pardis {args:?}: {err}");
    assert!(!err.contains("panicked"), "pardis {args:?}: {err}");
}
