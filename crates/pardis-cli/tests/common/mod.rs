//! What every end-to-end test of the `pardis` binary shares.

use std::process::{Command, Output};

/// Runs the `pardis` binary built for these tests with `args`, capturing its output.
pub(crate) fn pardis(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pardis"))
        .args(args)
        .output()
        .expect("run pardis")
}
