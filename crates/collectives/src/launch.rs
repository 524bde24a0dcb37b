//! Launchers: `run_local` runs ranks as threads of this process.

use std::sync::Arc;

use crate::communicator::Communicator;
use crate::config::Config;
use crate::engine::Engine;
use crate::transport::local::{LocalTransport, LocalWorld};
use crate::{CollectiveError, Result};

/// Most ranks [`run_local`] and [`run_local_with`] start: 1024 (each rank is two threads of this
/// process, its own and its progress engine's).
pub const MAX_LOCAL_RANKS: usize = 1024;

/// `Ok` if `n` local ranks can be started: 1 to [`MAX_LOCAL_RANKS`].
pub fn check_local_ranks(n: usize) -> Result<()> {
    if n == 0 || n > MAX_LOCAL_RANKS {
        return Err(CollectiveError::InvalidInput(format!(
            "{n} local ranks: need 1 to {MAX_LOCAL_RANKS} (each rank is two threads of this process)"
        )));
    }
    Ok(())
}

/// Runs `f` on `n` ranks, each a thread of this process with its own progress engine, over the
/// local (shared-memory) transport, with the default [`Config`]. Returns each rank's result in
/// rank order, or the first rank's error: [`CollectiveError::RankPanicked`] if its closure
/// panicked, [`CollectiveError::InvalidInput`] if `n` is 0 or above [`MAX_LOCAL_RANKS`],
/// [`CollectiveError::Io`] if a thread could not be spawned.
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
/// [`CollectiveError::PeerLost`] in the collectives that needed it). A rank whose thread or
/// progress engine cannot be spawned yields [`CollectiveError::Io`] and is lost for the
/// others. If `n` is 0 or above [`MAX_LOCAL_RANKS`] the result is a single
/// [`CollectiveError::InvalidInput`] and nothing runs.
pub fn run_local_with<R, F>(config: &Config, n: usize, f: F) -> Vec<Result<R>>
where
    R: Send,
    F: Fn(Communicator) -> R + Send + Sync,
{
    if let Err(e) = check_local_ranks(n).and_then(|()| config.validate()) {
        return vec![Err(e)];
    }
    let world = LocalWorld::new(n);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|rank| {
                let (w, f, config) = (world.clone(), &f, config.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("pardis-rank-{rank}"))
                    .spawn_scoped(s, move || {
                        let transport = Arc::new(LocalTransport::new(w, rank));
                        Engine::start(transport, config).map(|e| f(Communicator::world(e)))
                    });
                spawned.map_err(|e| {
                    // The others must not wait for it.
                    world.mark_lost(rank);
                    CollectiveError::io(format!("spawning the thread of rank {rank}"), e)
                })
            })
            .collect();
        join_ranks(threads)
    })
}

/// Every rank's outcome, in rank order, from the threads spawned for ranks `0..n` (or the
/// error of spawning one): a rank whose closure panicked yields
/// [`CollectiveError::RankPanicked`] with the panic's message.
pub(crate) fn join_ranks<R>(
    threads: Vec<Result<std::thread::ScopedJoinHandle<'_, Result<R>>>>,
) -> Vec<Result<R>> {
    threads
        .into_iter()
        .enumerate()
        .map(|(rank, t)| {
            t?.join().unwrap_or_else(|p| {
                Err(CollectiveError::RankPanicked {
                    rank,
                    message: panic_message(&*p),
                })
            })
        })
        .collect()
}

/// The message of a panic payload (`panic!` with a literal or a formatted message).
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}
