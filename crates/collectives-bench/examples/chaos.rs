//! The chaos-order workload: 8 ranks submit 8 collectives (all-reduces, broadcasts, reduces) on
//! 8 sub-communicators, each rank in
//! its own random order. The preemptive engine completes it; ordered mode (NCCL/MPI semantics)
//! reports a deadlock.
//!
//! `cargo run -p collectives-bench --example chaos --release`

use std::time::Duration;

use collectives::{Config, Mode};
use collectives_bench::chaos::{run_chaos, ChaosConfig};

fn main() -> Result<(), collectives::CollectiveError> {
    for mode in [Mode::Preemptive, Mode::Ordered] {
        let engine = Config {
            deadlock_timeout: Duration::from_millis(500),
            ..Config::with_mode(mode)
        };
        let ranks = run_chaos(&ChaosConfig {
            seed: 7,
            engine,
            ..ChaosConfig::default()
        })?;
        println!("{mode:?}:");
        for r in ranks {
            let outcome = r
                .first_error
                .map_or_else(|| "ok".to_string(), |e| e.to_string());
            println!(
                "  rank {} order {:?}: {}/8 correct, {} context switches — {outcome}",
                r.rank, r.order, r.correct, r.engine.context_switches
            );
        }
    }
    Ok(())
}
