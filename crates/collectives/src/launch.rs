//! Launchers: `run_local` runs ranks as threads of this process.

use std::sync::Arc;

use crate::communicator::Communicator;
use crate::config::Config;
use crate::engine::Engine;
use crate::transport::local::{LocalTransport, LocalWorld};
use crate::{CollectiveError, Result};

/// Runs `f` on `n` ranks, each a thread of this process with its own progress engine, over the
/// local (shared-memory) transport, with the default [`Config`]. Returns each rank's result in
/// rank order, or the first rank's panic as [`CollectiveError::RankPanicked`].
///
/// # Panics
/// If `n == 0`.
pub fn run_local<R, F>(n: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(Communicator) -> R + Send + Sync,
{
    run_local_with(&Config::default(), n, f)
        .into_iter()
        .collect()
}

/// Like [`run_local`] with explicit settings, returning every rank's outcome (a rank whose
/// closure panicked yields [`CollectiveError::RankPanicked`]; the other ranks see it as
/// [`CollectiveError::PeerLost`] in the collectives that needed it).
///
/// # Panics
/// If `n == 0`.
pub fn run_local_with<R, F>(config: &Config, n: usize, f: F) -> Vec<Result<R>>
where
    R: Send,
    F: Fn(Communicator) -> R + Send + Sync,
{
    assert!(n > 0, "run_local needs at least one rank");
    let world = LocalWorld::new(n);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|rank| {
                let (world, f, config) = (world.clone(), &f, config.clone());
                std::thread::Builder::new()
                    .name(format!("pardis-rank-{rank}"))
                    .spawn_scoped(s, move || {
                        let transport = Arc::new(LocalTransport::new(world, rank));
                        f(Communicator::world(Engine::start(transport, config)))
                    })
                    .expect("spawning a rank thread")
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                t.join().map_err(|p| CollectiveError::RankPanicked {
                    rank,
                    message: panic_message(&*p),
                })
            })
            .collect()
    })
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
