//! Non-blocking operations as the caller sees them: [`Handle`] (wait / test / wait_timeout /
//! callback) over a [`Completion`] filled by the engine.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::completion::{Completion, OpStats, State};
use crate::engine::{DriveGuard, EngineRef};
use crate::{CollectiveError, Result};

/// A pending non-blocking operation. Dropping it without waiting is allowed: the operation
/// still runs to completion on the engine (peers depend on it).
pub struct Handle<T> {
    completion: Arc<Completion<T>>,
    stats: Option<OpStats>,
    // Keeps this rank's engine alive while the operation is pending; waiters drive it.
    engine: EngineRef,
}

impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("stats", &self.stats)
            .finish()
    }
}

impl<T: Send + 'static> Handle<T> {
    pub(crate) fn new(completion: Arc<Completion<T>>, engine: EngineRef) -> Self {
        Self {
            completion,
            stats: None,
            engine,
        }
    }

    /// Whether the operation has finished (successfully or not); never blocks.
    pub fn test(&self) -> bool {
        !matches!(
            *self.completion.state.lock().expect("completion poisoned"),
            State::Pending(_)
        )
    }

    /// Blocks until the operation finishes and returns its output buffer.
    pub fn wait(mut self) -> Result<Vec<T>> {
        self.wait_until(None).expect("no deadline")
    }

    /// Like [`wait`](Self::wait) but gives up after `timeout`: `Ok(None)` means still running
    /// (the handle stays valid), `Ok(Some(_))` and `Err(_)` are the finished outcomes.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<Option<Vec<T>>> {
        self.wait_until(Some(Instant::now() + timeout)).transpose()
    }

    /// Counters of the finished operation (`None` before it finished and was waited for).
    pub fn stats(&self) -> Option<&OpStats> {
        self.stats.as_ref()
    }

    /// Waits and returns the output together with the operation's counters.
    pub fn wait_with_stats(mut self) -> (Result<Vec<T>>, OpStats) {
        let r = self.wait_until(None).expect("no deadline");
        (r, self.stats.take().unwrap_or_default())
    }

    /// Runs `f` with the outcome when the operation finishes (on the thread running the
    /// engine — the engine thread or a thread waiting for another of this rank's operations —
    /// or right here if it already has). Keep `f` short: it delays this rank's other collectives.
    pub fn on_complete(self, f: impl FnOnce(Result<Vec<T>>, OpStats) + Send + 'static) {
        let mut g = self.completion.state.lock().expect("completion poisoned");
        match std::mem::replace(&mut *g, State::Taken) {
            State::Ready(r, s) => {
                drop(g);
                f(r, s);
            }
            State::Pending(_) => *g = State::Pending(Some(Box::new(f))),
            State::Taken => {}
        }
    }

    /// A channel that receives the outcome when the operation finishes.
    pub fn into_receiver(self) -> crossbeam::channel::Receiver<Result<Vec<T>>> {
        let (tx, rx) = crossbeam::channel::bounded(1);
        self.on_complete(move |r, _| {
            let _ = tx.send(r);
        });
        rx
    }

    /// [`wait`](Self::wait) for a blocking call that registered as driver (`guard`) before it
    /// submitted.
    pub(crate) fn wait_driving(mut self, guard: DriveGuard<'_>) -> Result<Vec<T>> {
        self.wait_until_with(Some(guard), None)
            .expect("no deadline")
    }

    fn wait_until(&mut self, deadline: Option<Instant>) -> Option<Result<Vec<T>>> {
        self.wait_until_with(None, deadline)
    }

    fn wait_until_with(
        &mut self,
        guard: Option<DriveGuard<'_>>,
        deadline: Option<Instant>,
    ) -> Option<Result<Vec<T>>> {
        // Run the engine on this thread while waiting (no hand-off to the engine thread and
        // back); after a bounded number of idle rounds, sleep until the engine thread is done.
        let c = &self.completion;
        self.engine
            .drive(guard, || c.finished.load(Ordering::Acquire), deadline);
        let mut g = self.completion.state.lock().expect("completion poisoned");
        loop {
            match std::mem::replace(&mut *g, State::Taken) {
                State::Ready(r, s) => {
                    self.stats = Some(s);
                    return Some(r);
                }
                State::Taken => {
                    return Some(Err(CollectiveError::InvalidInput(
                        "handle already consumed".into(),
                    )))
                }
                pending => *g = pending,
            }
            let sleepers = &self.completion.sleepers;
            // Counted under the lock (see `Completion::sleepers`).
            sleepers.fetch_add(1, Ordering::Relaxed);
            g = match deadline {
                None => self.completion.cv.wait(g).expect("completion poisoned"),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        sleepers.fetch_sub(1, Ordering::Relaxed);
                        return None;
                    }
                    self.completion
                        .cv
                        .wait_timeout(g, d - now)
                        .expect("completion poisoned")
                        .0
                }
            };
            sleepers.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
