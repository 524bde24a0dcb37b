//! Who runs the rounds: the engine thread, or an application thread that waits for one of
//! its collectives and drives the engine itself meanwhile.
//!
//! A blocking collective handed to the engine thread costs two thread hand-offs (wake the
//! engine thread, wake the caller when done), each a context switch on a machine with few
//! cores. So a waiting caller takes the queue lock and runs the same rounds — preemption,
//! stickiness and timeouts included — on its own thread; deliveries do not wake the idle engine
//! thread meanwhile ([`Inbox::wake`](crate::inbox::Inbox::wake)). The caller yields between
//! idle rounds and stops after [`Config::spin_rounds`](crate::Config::spin_rounds) of them
//! (bounded spinning: on 2 cores a spinning thread starves the others), or at once when a yield
//! was slow or recently has been (the machine is oversubscribed: [`yield_gate`](super::yield_gate));
//! it then parks, still the driver: deliveries and submissions wake it, not the engine thread,
//! which stands aside while any application thread drives. When its collective is done the
//! caller stops driving and, if work is left, wakes the engine thread.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use super::rounds::{round_ordered, round_preemptive};
use super::{fail, Active, Engine, Shared};
use crate::config::Mode;
use crate::program::{ActiveOp, Failure, Poll};
use crate::CollectiveError;

/// Outcome of one turn.
struct Turn {
    progressed: bool,
    /// No collective active or submitted.
    idle: bool,
}

fn lock_queue(shared: &Shared) -> Option<MutexGuard<'_, VecDeque<Active>>> {
    match shared.queue.try_lock() {
        Ok(g) => Some(g),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}

/// Takes submissions, fails everything after an abort, and runs one round; `now`: the
/// caller's clock reading for this turn.
fn turn(shared: &Shared, queue: &mut VecDeque<Active>, now: Instant) -> Turn {
    intake(shared, queue, now);
    if shared.aborted.load(Ordering::SeqCst) {
        let reason = shared
            .abort
            .lock()
            .expect("abort poisoned")
            .clone()
            .unwrap_or_default();
        for a in queue.drain(..) {
            fail(shared, a, CollectiveError::Aborted(reason.clone()).into());
        }
    }
    if queue.is_empty() {
        return Turn {
            progressed: false,
            idle: true,
        };
    }
    let progressed = match shared.config.mode {
        Mode::Preemptive => round_preemptive(shared, queue, now),
        Mode::Ordered => round_ordered(shared, queue, now),
    };
    // After a round that made no progress, not before every round: a round that follows a
    // delivery finds it in the mailbox (the transport's own wake-up brought the driver here),
    // a new collective's first round sends before this look at the transport rather than
    // after it, and a round that progressed (a collective that just finished above all) is
    // followed by another turn or by the caller's return, not by a look at the transport (on
    // MPI each look is an `MPI_Test` of the posted receive, about 0.1 µs here under
    // `MPI_THREAD_MULTIPLE`).
    if !progressed {
        shared.transport.progress();
    }
    Turn {
        progressed,
        idle: false,
    }
}

/// Clock reads in [`spin_for_arrival`]: one per this many transport polls.
const SPIN_POLLS_PER_CLOCK: u32 = 16;

/// Busy-polls the transport alone (it takes incoming messages in `progress`) until a delivery,
/// submission or lost peer bumps the inbox's wake-up count past `seen`, the engine aborts,
/// `ready()` (the caller's collective was completed by another thread's round: no message
/// bumps the count for that), or `until` passes; the caller then runs a full round. A full round (queue, submissions,
/// every collective's mailbox, timeouts) between two looks at the transport cost several
/// times a look, and the time from a message's arrival to its look is on a small
/// collective's critical path. Returns its latest clock reading, `last` if it made none (then
/// fewer than [`SPIN_POLLS_PER_CLOCK`] polls newer than `last`): the round that follows uses it
/// rather than read the clock again (a read costs about 40 ns on this VM, the round's
/// timestamps serve timeouts of seconds and the blocked-time statistics); the driver reuses a
/// reading for one turn only.
fn spin_for_arrival(
    shared: &Shared,
    seen: u64,
    last: Instant,
    until: Instant,
    ready: &impl Fn() -> bool,
) -> Instant {
    let inbox = shared.transport.inbox();
    let mut polls = 0u32;
    let mut latest = last;
    loop {
        if inbox.wakes() != seen || shared.aborted.load(Ordering::SeqCst) || ready() {
            return latest;
        }
        shared.transport.progress_one();
        polls += 1;
        if polls.is_multiple_of(SPIN_POLLS_PER_CLOCK) {
            latest = Instant::now();
            if latest >= until {
                return latest;
            }
        }
        std::hint::spin_loop();
    }
}

/// What [`Engine::run_inline`] came to.
#[derive(Debug)]
pub(crate) enum Inline {
    /// Every step ran.
    Done,
    /// The collective failed (the caller fails it through the engine).
    Failed(Failure),
    /// Not finished within the busy-poll window, or something else needs the engine: the
    /// caller hands the collective to the engine.
    Handover,
}

/// The engine thread.
pub(super) fn run(shared: &Shared) {
    let cfg = &shared.config;
    let mut idle_rounds = 0u32;
    loop {
        // While application threads drive, they run the rounds (deliveries wake them, not us);
        // the last one to stop wakes us if work is left.
        let queue = if shared.transport.inbox().has_drivers() {
            None
        } else {
            lock_queue(shared)
        };
        let Some(mut queue) = queue else {
            std::thread::park_timeout(cfg.park_interval);
            continue;
        };
        let t = turn(shared, &mut queue, Instant::now());
        drop(queue);
        if t.idle {
            if shared.shutdown.load(Ordering::SeqCst) {
                if no_submissions(shared) {
                    return;
                }
                continue;
            }
            // Idle: sends that finished since the last round would hold their buffers until
            // the next operation's sends (the send path reaps in batches).
            shared.transport.reap_idle();
            std::thread::park_timeout(Duration::from_millis(100));
        } else if t.progressed {
            idle_rounds = 0;
        } else {
            idle_rounds += 1;
            if idle_rounds > cfg.spin_rounds || !shared.yields.try_yield() {
                shared.counters.parks.fetch_add(1, Ordering::Relaxed);
                std::thread::park_timeout(cfg.park_interval);
            }
        }
    }
}

fn no_submissions(shared: &Shared) -> bool {
    !shared.submitted.load(Ordering::SeqCst)
}

fn intake(shared: &Shared, queue: &mut VecDeque<Active>, now: Instant) {
    if no_submissions(shared) {
        return;
    }
    let mut subs = shared.submissions.lock().expect("submissions poisoned");
    shared.submitted.store(false, Ordering::SeqCst);
    if subs.is_empty() {
        return;
    }
    for op in subs.drain(..) {
        let a = Active::new(shared, op, now, queue.len() + 1);
        queue.push_back(a);
    }
    let len = queue.len();
    shared
        .counters
        .max_queue_len
        .fetch_max(len as u64, Ordering::Relaxed);
    queue
        .iter_mut()
        .for_each(|a| a.stats.max_queue_len = a.stats.max_queue_len.max(len));
}

/// An application thread registered as driver: submissions and deliveries do not wake the
/// engine thread while it lives; dropping the last one hands pending work back to it.
#[derive(Debug)]
pub(crate) struct DriveGuard<'a> {
    engine: &'a Engine,
}

impl Drop for DriveGuard<'_> {
    fn drop(&mut self) {
        let shared = &self.engine.shared;
        if shared.transport.inbox().leave_driver() > 0 {
            return;
        }
        // Wake the engine thread only if something is left for it (saves a context switch
        // per blocking call); a busy queue lock means someone is running rounds — wake anyway.
        let pending = lock_queue(shared).is_none_or(|q| !q.is_empty()) || !no_submissions(shared);
        if pending {
            shared.transport.inbox().wake_engine();
            shared.transport.inbox().wake_poller();
        }
    }
}

impl Engine {
    /// Runs a blocking call's own collective on the calling thread, outside the queue: polls
    /// it, and between polls busy-polls the transport until a message arrives, for at most
    /// [`Config::busy_poll`](crate::Config::busy_poll). A small collective on an idle rank
    /// finishes here without the submission, the queue's rounds, the completion record and the
    /// hand-back to the caller. It runs only while it holds the queue lock over an empty queue
    /// (so no other collective of this rank waits for rounds meanwhile: other threads' waits
    /// find the queue taken and sleep on their handles, the engine thread stands aside), and it
    /// hands over — the caller queues the collective and waits as usual — when the window
    /// passes (the clock is read every [`SPIN_POLLS_PER_CLOCK`] looks, polls of the
    /// collective included), another collective is submitted on this rank, or the engine is
    /// aborted: preemption and timeouts then apply as to any collective, so nothing waits on
    /// it for much longer than the window. The caller holds a [`DriveGuard`] throughout.
    pub(crate) fn run_inline(&self, op: &mut dyn ActiveOp) -> Inline {
        let r = self.poll_inline(op);
        if matches!(r, Inline::Handover) {
            self.shared
                .counters
                .handed_over
                .fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// [`run_inline`](Self::run_inline) but for its counting.
    fn poll_inline(&self, op: &mut dyn ActiveOp) -> Inline {
        let shared = &self.shared;
        let Some(queue) = lock_queue(shared) else {
            return Inline::Handover;
        };
        if !queue.is_empty() {
            return Inline::Handover;
        }
        let inbox = shared.transport.inbox();
        // The busy-poll window starts at the first clock reading, the [`SPIN_POLLS_PER_CLOCK`]-th
        // look: a collective whose data comes within that many looks (a small one on an idle
        // rank, usually) reads no clock at all (a read costs about 40 ns on this VM, a twentieth
        // of a 1 KiB all-reduce on 2 ranks), and the window is longer by those few looks.
        let mut until: Option<Instant> = None;
        let mut looks = 0u32;
        let mut look = || {
            looks += 1;
            if !looks.is_multiple_of(SPIN_POLLS_PER_CLOCK) {
                return false;
            }
            let now = Instant::now();
            now >= *until.get_or_insert(now + shared.config.busy_poll)
        };
        loop {
            if shared.aborted.load(Ordering::SeqCst) || !no_submissions(shared) {
                return Inline::Handover;
            }
            let seen = inbox.wakes();
            match op.poll(&*shared.transport, shared.config.poll_budget) {
                Ok(Poll::Done) => return Inline::Done,
                Ok(Poll::Progressed) => {
                    if look() {
                        return Inline::Handover;
                    }
                    continue;
                }
                Ok(Poll::Blocked) => {
                    if look() {
                        return Inline::Handover;
                    }
                }
                Err(f) => return Inline::Failed(f),
            }
            // Until something arrives (or is submitted, or the engine aborts); a frame this
            // collective awaits may be applied to it on arrival (`progress_one_into`).
            while inbox.wakes() == seen {
                if shared.aborted.load(Ordering::SeqCst) {
                    return Inline::Handover;
                }
                if shared.transport.progress_one_into(op) {
                    shared
                        .counters
                        .taken_on_arrival
                        .fetch_add(1, Ordering::Relaxed);
                    break;
                }
                if look() {
                    return Inline::Handover;
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Registers the calling thread as a driver (see [`DriveGuard`]).
    pub(crate) fn driving(&self) -> DriveGuard<'_> {
        self.shared.transport.inbox().enter_driver();
        DriveGuard { engine: self }
    }

    /// Runs rounds on the calling thread until `ready()` or the deadline. On a transport that
    /// receives in its `progress`, for [`Config::busy_poll`](crate::Config::busy_poll) after
    /// its last progress it polls without pause; then, between idle rounds, it yields, up to [`Config::spin_rounds`](crate::Config::spin_rounds) times in a row and
    /// only while yields are quick (see [`yield_gate`](super::yield_gate)); then it parks until
    /// a delivery or submission for this rank wakes it (or
    /// [`Config::park_interval`](crate::Config::park_interval) passes) and carries on: one
    /// thread hand-off per wait, not two (engine thread, then caller). It returns early — the
    /// caller then sleeps on its handle — when another thread is running this rank's rounds or
    /// the queue is empty. `guard` (taken by a blocking call before it submitted) is released
    /// before returning.
    pub(crate) fn drive(
        &self,
        guard: Option<DriveGuard<'_>>,
        ready: impl Fn() -> bool,
        deadline: Option<Instant>,
    ) {
        let _guard = guard.unwrap_or_else(|| self.driving());
        let shared = &self.shared;
        if !shared.config.caller_drives {
            return;
        }
        let mut idle_rounds = 0u32;
        let spin = if shared.transport.receives_in_progress() {
            shared.config.busy_poll
        } else {
            Duration::ZERO
        };
        // The first turn's clock reading (one clock read per call fewer: on this VM a read
        // costs ~30 ns, and a small blocking collective makes only a few).
        let mut last_progress: Option<Instant> = None;
        // A clock reading a busy-poll left for the next turn (see `spin_for_arrival`), and
        // whether this turn's reading was such a one: a reused reading is never reused again
        // (it would go stale turn after turn while frames for other collectives keep ending
        // the busy-polls at once, and deadlines and timeouts would never come).
        let mut reading: Option<Instant> = None;
        let mut reused = false;
        while !ready() {
            let seen = shared.transport.inbox().wakes();
            let now = match reading.take() {
                Some(r) if !reused => {
                    reused = true;
                    r
                }
                _ => {
                    reused = false;
                    Instant::now()
                }
            };
            if deadline.is_some_and(|d| now >= d) {
                return;
            }
            let (progressed, busy) = match lock_queue(shared) {
                Some(mut q) => {
                    let t = turn(shared, &mut q, now);
                    if t.idle {
                        // Our collective finished in another thread's round.
                        return;
                    }
                    (t.progressed, false)
                }
                None => (false, true),
            };
            if progressed {
                idle_rounds = 0;
                last_progress = Some(now);
                continue;
            }
            let last = *last_progress.get_or_insert(now);
            if !busy && now.duration_since(last) < spin {
                // Busy-poll window: the answer to a small message usually arrives within
                // microseconds, sooner than a yield or a park comes back. Poll only the
                // transport until something happens, not whole rounds.
                let until = last + spin;
                let until = deadline.map_or(until, |d| d.min(until));
                reading = Some(spin_for_arrival(shared, seen, now, until, &ready));
                continue;
            }
            idle_rounds += 1;
            if idle_rounds <= shared.config.spin_rounds && shared.yields.try_yield() {
                continue;
            }
            if busy {
                // Another driver, or the engine thread finishing a round, holds the queue: it
                // completes our collective or hands the queue on; sleep on the handle.
                return;
            }
            shared.counters.parks.fetch_add(1, Ordering::Relaxed);
            let nap = deadline.map_or(shared.config.park_interval, |d| {
                shared
                    .config
                    .park_interval
                    .min(d.saturating_duration_since(now))
            });
            shared.transport.inbox().park_driver(seen, nap);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::transport::local::{LocalTransport, LocalWorld};
    use crate::Config;

    /// A collective that another thread's round completed ends the busy-poll wait at once:
    /// nothing arrives for it, so only `ready` can tell (without the check this waits until
    /// `until`, a minute away).
    #[test]
    fn spinning_stops_when_the_collective_is_ready() {
        let world = LocalWorld::new(1);
        let engine =
            Engine::start(Arc::new(LocalTransport::new(world, 0)), Config::default()).unwrap();
        let shared = &engine.shared;
        let seen = shared.transport.inbox().wakes();
        let until = Instant::now() + Duration::from_secs(60);
        spin_for_arrival(shared, seen, Instant::now(), until, &|| true);
        assert!(Instant::now() < until);
    }
}
