//! What the engine hands back when a collective finishes: its outcome, delivered once through a
//! [`Completion`] (to a waiting [`Handle`](crate::Handle) or a callback), and its counters
//! [`OpStats`]. Below the engine, the programs and the handles, which all use it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::Result;

/// Counters of one collective, filled by the progress engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpStats {
    /// Name of the collective; for a point-to-point message its direction on this rank,
    /// `send` or `recv`.
    pub op: &'static str,
    /// The algorithm it ran: `ring`, `halving-doubling`, `recursive-doubling` or
    /// `shared-memory` (all-reduce); `ring`, `recursive-halving` (reduce-scatter) or
    /// `recursive-doubling` (all-gather); `binomial` or `pipelined` (broadcast); `binomial`
    /// (reduce); `pairwise` (all-to-all); `dissemination` (barrier); `point-to-point`.
    pub algorithm: &'static str,
    /// Sequence number on its communicator. For a point-to-point message: the other rank
    /// (from bit 40) and the count of messages before it in that direction, so that the `n`-th
    /// send to a rank and the `n`-th receive from it share the number and differ in
    /// [`op`](Self::op).
    pub seq: u64,
    /// How often the engine preempted it (switched away while it was blocked).
    pub context_switches: u64,
    /// How often it was polled.
    pub polls: u64,
    /// Total time it spent blocked waiting for peers.
    pub blocked: Duration,
    /// Active collectives on the engine when it was submitted (itself included).
    pub queue_len_at_submit: usize,
    /// Longest engine queue seen while it was active.
    pub max_queue_len: usize,
    /// Time from submission to completion, as the engine's clock saw it: the engine reads the
    /// clock once per scheduling round (a clock read costs about as much as polling an idle
    /// collective), so this is the time to the start of the round that completed it — short
    /// by at most that round, which for a large collective includes its last piece of work.
    pub elapsed: Duration,
    /// Receives whose data the transport's reader placed straight into the collective's buffer
    /// (TCP with [`Config::direct_receive`](crate::Config::direct_receive)); the others
    /// were staged in a message buffer.
    pub direct_receives: u64,
}

pub(crate) type Callback<T> = Box<dyn FnOnce(Result<Vec<T>>, OpStats) + Send>;

pub(crate) enum State<T> {
    Pending(Option<Callback<T>>),
    Ready(Result<Vec<T>>, OpStats),
    Taken,
}

/// Shared between the engine (producer) and the [`Handle`] (consumer).
pub(crate) struct Completion<T> {
    pub(crate) state: Mutex<State<T>>,
    pub(crate) cv: Condvar,
    /// Set once the outcome is delivered (a lock-free check for driving waiters).
    pub(crate) finished: AtomicBool,
    /// Threads asleep (or about to sleep) on `cv`, counted under the `state` lock: `complete`
    /// notifies only when there is one. A waiter that drove the engine to the end finds the
    /// outcome without sleeping, and `Condvar::notify_all` is a `futex` system call even with
    /// nobody waiting (one per blocking call before, about 0.3 µs on this VM).
    pub(crate) sleepers: AtomicUsize,
}

impl<T> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Completion")
    }
}

impl<T> Completion<T> {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::Pending(None)),
            cv: Condvar::new(),
            finished: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
        })
    }

    /// Delivers the result: runs the callback if one is registered, else wakes waiters.
    pub(crate) fn complete(&self, result: Result<Vec<T>>, stats: OpStats) {
        let mut g = self.state.lock().expect("completion poisoned");
        self.finished.store(true, Ordering::Release);
        match std::mem::replace(&mut *g, State::Taken) {
            State::Pending(Some(cb)) => {
                drop(g);
                cb(result, stats);
            }
            State::Pending(None) => {
                *g = State::Ready(result, stats);
                // Waiters change `sleepers` only under the lock held here, and look at the
                // state under it before they sleep: none can be missed.
                if self.sleepers.load(Ordering::Relaxed) > 0 {
                    self.cv.notify_all();
                }
            }
            other => *g = other,
        }
    }
}
