//! `pardis-fuzz [--seconds S] [--target NAME] [--seed N]`: fuzzes every parser for `S` seconds
//! in all (shared equally; default 50), prints the inputs tried per target, and exits 1 with the
//! failing input (as escaped bytes) when a parser panics. Run it under a memory cap
//! (`ulimit -v`), as `cargo xtask test` does, so that an allocation sized by a header aborts.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let seconds: f64 = value("--seconds")
        .and_then(|s| s.parse().ok())
        .unwrap_or(50.0);
    let seed: u64 = value("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
    let only = value("--target");
    let corpus_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let targets: Vec<_> = pardis_fuzz::targets()
        .into_iter()
        .filter(|t| only.as_deref().is_none_or(|o| o == t.name))
        .collect();
    if targets.is_empty() {
        eprintln!("error: no target named {only:?}");
        return ExitCode::FAILURE;
    }
    // Panics are caught and reported below; keep the default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    let budget = Duration::from_secs_f64(seconds.max(0.0) / targets.len() as f64);
    let mut failed = false;
    println!("target\tcorpus\tinputs\tslowest_ms\tresult");
    for t in &targets {
        let corpus = pardis_fuzz::corpus(&corpus_dir, t);
        let out = pardis_fuzz::fuzz_until(t, &corpus, u64::MAX, Some(budget), seed);
        let result = match &out.failure {
            None => "ok".to_string(),
            Some(f) => {
                failed = true;
                format!(
                    "PANIC: {} on input {:?}",
                    f.message,
                    String::from_utf8_lossy(&f.input[..f.input.len().min(512)])
                )
            }
        };
        println!(
            "{}\t{}\t{}\t{:.1}\t{}",
            t.name,
            corpus.len(),
            out.inputs,
            out.slowest.as_secs_f64() * 1e3,
            result
        );
    }
    pardis_fuzz::remove_scratch();
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
