//! The per-rank progress engine (DFCCL: Pan et al., "Comprehensive Deadlock Prevention for GPU
//! Collective Communication", EuroSys 2025), adapted to CPU ranks.
//!
//! One engine thread per rank owns the queue of active collectives of *all* communicators of
//! that rank. In [`Mode::Preemptive`] it runs the head collective for several tries and every
//! other one for one try per round; a head that stays blocked for more than its threshold is
//! preempted (its state stays in its [`StepProgram`](crate::program)), moved to the back, and
//! its threshold is multiplied (stickiness: a collective that keeps failing is given longer
//! next time, so ranks converge on the same collective). After `spin_rounds` idle rounds the
//! thread parks until a message, a submission or `park_interval` wakes it — it never spins;
//! it parks at once when a yield shows that the machine is oversubscribed (`yield_gate`).
//! [`Mode::Ordered`] runs strictly in submission order, as NCCL and MPI do, and reports a
//! [`Deadlock`](crate::CollectiveError::Deadlock) naming the ranks its head waits for.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::completion::OpStats;
use crate::config::{Config, Mode};
use crate::frame::{Frame, FrameKind, OpKind, NOTICE_MISMATCH};
use crate::program::{ActiveOp, Failure};
use crate::transport::Transport;
use crate::CollectiveError;

mod drive;
mod rounds;
mod yield_gate;

pub(crate) use drive::{DriveGuard, Inline};

/// Engine-wide counters of one rank.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Collectives submitted.
    pub submitted: u64,
    /// Collectives completed successfully.
    pub completed: u64,
    /// Collectives that failed.
    pub failed: u64,
    /// Preemptions of a blocked head collective.
    pub context_switches: u64,
    /// Times a thread running this rank's rounds (the engine thread, or a caller waiting for
    /// its operation) parked for lack of work.
    pub parks: u64,
    /// Longest queue of active collectives seen.
    pub max_queue_len: u64,
    /// Yields between idle rounds that took longer than a scheduler time slice: the machine
    /// was oversubscribed, and waiters of this rank parked instead of spinning for a while.
    pub slow_yields: u64,
    /// Mailboxes open now: collectives started on this rank and not finished, and those that
    /// messages arrived for before this rank started them. Frames (failure notices
    /// included) that arrive for a finished collective are dropped, so this does not grow
    /// with the collectives run.
    pub open_mailboxes: usize,
    /// Records of finished collectives kept to drop their late frames: one per stream (a
    /// communicator's collectives, its point-to-point messages with one peer) of the
    /// communicators alive on this rank; a dropped communicator's are removed.
    pub finished_records: usize,
    /// Sends the transport still holds buffers for (MPI: posted, not yet seen finished;
    /// released in batches on the send path, and when the rank goes idle).
    pub pending_sends: usize,
    /// Blocking calls' collectives that finished on the caller's thread, outside the queue
    /// (MPI, an otherwise idle rank: `Engine::run_inline`).
    pub inline: u64,
    /// Blocking calls' collectives run inline that were handed to the engine unfinished (the
    /// busy-poll window passed, another collective was submitted, or the queue was busy).
    pub handed_over: u64,
    /// Frames that a collective running inline took on arrival, straight from the transport's
    /// receive buffer (MPI: the awaited packed frame of the current step, applied without a
    /// pooled copy or the mailbox).
    pub taken_on_arrival: u64,
}

#[derive(Debug, Default)]
struct Counters {
    submitted: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    context_switches: AtomicU64,
    parks: AtomicU64,
    max_queue_len: AtomicU64,
    inline: AtomicU64,
    handed_over: AtomicU64,
    taken_on_arrival: AtomicU64,
}

struct Shared {
    transport: Arc<dyn Transport>,
    config: Config,
    submissions: Mutex<Vec<Box<dyn ActiveOp>>>,
    /// Whether `submissions` may hold any: set under its lock by [`Engine::submit`], cleared
    /// under it by the intake, read without it so that a turn with nothing submitted (most
    /// turns) takes no lock. A submission that the flag misses is taken by the next turn (the
    /// submitter's wake-up brings one).
    submitted: AtomicBool,
    /// The queue of active collectives; whoever holds the lock (the engine thread or a
    /// driving application thread) runs the rounds.
    queue: Mutex<VecDeque<Active>>,
    shutdown: AtomicBool,
    abort: Mutex<Option<String>>,
    aborted: AtomicBool,
    counters: Counters,
    yields: yield_gate::YieldGate,
}

/// A rank's engine; the thread stops when the last reference is dropped.
pub(crate) struct Engine {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Shared ownership of an engine (communicators and pending handles hold one).
pub(crate) type EngineRef = Arc<Engine>;

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("rank", &self.shared.transport.world_rank())
            .finish()
    }
}

impl Engine {
    /// Starts the engine thread of a rank; an error if the thread cannot be spawned (thread or
    /// memory limit), after which the rank counts as lost for its peers.
    pub(crate) fn start(transport: Arc<dyn Transport>, config: Config) -> crate::Result<EngineRef> {
        // The launchers check before connecting anything; this catches any other path.
        config.validate()?;
        let shared = Arc::new(Shared {
            transport,
            config,
            submissions: Mutex::new(Vec::new()),
            submitted: AtomicBool::new(false),
            queue: Mutex::new(VecDeque::new()),
            shutdown: AtomicBool::new(false),
            abort: Mutex::new(None),
            aborted: AtomicBool::new(false),
            counters: Counters::default(),
            yields: yield_gate::YieldGate::default(),
        });
        let s = shared.clone();
        let rank = shared.transport.world_rank();
        let thread = match std::thread::Builder::new()
            .name(format!("pardis-engine-{rank}"))
            .spawn(move || drive::run(&s))
        {
            Ok(t) => t,
            Err(e) => {
                shared.transport.mark_self_lost();
                return Err(CollectiveError::io(
                    format!("spawning the progress engine thread of rank {rank}"),
                    e,
                ));
            }
        };
        shared.transport.inbox().set_engine(thread.thread().clone());
        Ok(Arc::new(Engine {
            shared,
            thread: Some(thread),
        }))
    }

    pub(crate) fn transport(&self) -> &Arc<dyn Transport> {
        &self.shared.transport
    }

    pub(crate) fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Whether a collective being submitted may send its first frame before it is queued
    /// ([`send_first`](crate::program::send_first)): in preemptive mode, where collectives
    /// progress independently (the order in which they first send is no order the engine
    /// keeps), unless the engine was aborted.
    pub(crate) fn sends_before_queueing(&self) -> bool {
        self.shared.config.mode == Mode::Preemptive && !self.shared.aborted.load(Ordering::SeqCst)
    }

    /// Whether a blocking call may run its collective on its own thread before handing it to
    /// the engine ([`run_inline`](Self::run_inline), which checks again under the queue lock):
    /// in preemptive mode with waiting callers driving and busy-polling, on a transport polled
    /// by its drivers (MPI), while no other collective of this rank is submitted and the engine
    /// was not aborted.
    pub(crate) fn runs_inline(&self) -> bool {
        let s = &self.shared;
        s.config.mode == Mode::Preemptive
            && s.config.caller_drives
            && !s.config.busy_poll.is_zero()
            && s.transport.receives_in_progress()
            && !s.aborted.load(Ordering::SeqCst)
            && !s.submitted.load(Ordering::SeqCst)
    }

    /// Books a collective that [`run_inline`](Self::run_inline) finished: counted as submitted
    /// and completed, its mailbox closed.
    pub(crate) fn finish_inline(&self, key: crate::frame::MailboxKey) {
        let c = &self.shared.counters;
        c.submitted.fetch_add(1, Ordering::Relaxed);
        c.completed.fetch_add(1, Ordering::Relaxed);
        c.inline.fetch_add(1, Ordering::Relaxed);
        self.shared.transport.inbox().close(key);
    }

    /// Fails a collective that failed while [`run_inline`](Self::run_inline) ran it, as a
    /// round would have (its peers are told, its handle gets the error).
    pub(crate) fn fail_inline(&self, op: Box<dyn ActiveOp>, f: Failure) {
        self.shared
            .counters
            .submitted
            .fetch_add(1, Ordering::Relaxed);
        let a = Active::new(&self.shared, op, Instant::now(), 1);
        fail(&self.shared, a, f);
    }

    /// Queues a collective; fails it at once if the engine was aborted.
    pub(crate) fn submit(&self, op: Box<dyn ActiveOp>) {
        self.shared
            .counters
            .submitted
            .fetch_add(1, Ordering::Relaxed);
        if self.shared.aborted.load(Ordering::SeqCst) {
            let reason = self
                .shared
                .abort
                .lock()
                .expect("abort poisoned")
                .clone()
                .unwrap_or_default();
            self.shared.counters.failed.fetch_add(1, Ordering::Relaxed);
            self.shared.transport.inbox().close(op.meta().key);
            op.finish(Err(CollectiveError::Aborted(reason)), OpStats::default());
            return;
        }
        {
            let mut subs = self
                .shared
                .submissions
                .lock()
                .expect("submissions poisoned");
            subs.push(op);
            self.shared.submitted.store(true, Ordering::SeqCst);
        }
        self.shared.transport.inbox().wake();
    }

    pub(crate) fn abort(&self, reason: &str) {
        abort_shared(&self.shared, reason);
    }

    pub(crate) fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EngineStats {
            submitted: l(&c.submitted),
            completed: l(&c.completed),
            failed: l(&c.failed),
            context_switches: l(&c.context_switches),
            parks: l(&c.parks),
            max_queue_len: l(&c.max_queue_len),
            slow_yields: self.shared.yields.slow_yields(),
            open_mailboxes: self.shared.transport.inbox().open_mailboxes(),
            finished_records: self.shared.transport.inbox().finished_records(),
            pending_sends: self.shared.transport.pending_sends(),
            inline: l(&c.inline),
            handed_over: l(&c.handed_over),
            taken_on_arrival: l(&c.taken_on_arrival),
        }
    }
}

/// Aborting a rank also makes it lost for its peers: they stop waiting for it.
fn abort_shared(shared: &Shared, reason: &str) {
    shared.transport.mark_self_lost();
    shared
        .abort
        .lock()
        .expect("abort poisoned")
        .get_or_insert_with(|| reason.to_string());
    shared.aborted.store(true, Ordering::SeqCst);
    shared.transport.inbox().wake_always();
}

impl Drop for Engine {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.abort("this rank panicked");
        }
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.transport.inbox().wake_always();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Aborts a rank's engine from any thread: every pending and future operation of that rank
/// fails with [`CollectiveError::Aborted`], and the rank counts as lost for its peers (they get
/// [`CollectiveError::PeerLost`] instead of waiting for it).
#[derive(Debug, Clone)]
pub struct AbortHandle {
    shared: std::sync::Weak<Shared>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EngineShared")
    }
}

impl AbortHandle {
    /// Aborts with `reason` (no effect if the engine is gone).
    pub fn abort(&self, reason: &str) {
        if let Some(s) = self.shared.upgrade() {
            abort_shared(&s, reason);
        }
    }
}

/// A collective in the engine queue with its scheduling state and counters.
struct Active {
    op: Box<dyn ActiveOp>,
    stats: OpStats,
    threshold: u32,
    blocked_tries: u32,
    blocked_since: Option<Instant>,
    last_progress: Instant,
    submitted: Instant,
}

/// Completes `a` in a round that started at `now` (its elapsed time counts to then: no clock
/// read of its own).
impl Active {
    /// `op` as it enters the queue at `now`, as its `queue_len`-th collective.
    fn new(shared: &Shared, op: Box<dyn ActiveOp>, now: Instant, queue_len: usize) -> Self {
        let meta = op.meta();
        let stats = OpStats {
            op: meta.name(),
            algorithm: meta.algorithm(),
            seq: meta.seq,
            queue_len_at_submit: queue_len,
            ..OpStats::default()
        };
        Self {
            op,
            stats,
            threshold: shared.config.initial_threshold,
            blocked_tries: 0,
            blocked_since: None,
            last_progress: now,
            submitted: now,
        }
    }
}

fn complete(shared: &Shared, mut a: Active, now: Instant) {
    a.stats.elapsed = now.saturating_duration_since(a.submitted);
    shared.transport.inbox().close(a.op.meta().key);
    shared.counters.completed.fetch_add(1, Ordering::Relaxed);
    let stats = a.stats;
    a.op.finish(Ok(()), stats);
}

fn fail(shared: &Shared, mut a: Active, f: Failure) {
    a.stats.elapsed = a.submitted.elapsed();
    let meta = a.op.meta().clone();
    let me = shared.transport.world_rank();
    let (kind, aux, text) = match &f.error {
        CollectiveError::PeerLost { rank, .. } => {
            (FrameKind::AbortLost, *rank as u64, String::new())
        }
        e if f.mismatch_for_peers || matches!(e, CollectiveError::Mismatch { .. }) => {
            (FrameKind::AbortOther, NOTICE_MISMATCH, e.to_string())
        }
        e => (FrameKind::AbortOther, 0, e.to_string()),
    };
    // Every member takes part in a collective; a point-to-point message has one other party
    // (a receive's sender, a send's destination), and a notice to any other rank would open a
    // mailbox there that no collective of that rank ever finishes.
    let parties = if meta.kind == OpKind::PointToPoint {
        a.op.counterparts()
    } else {
        meta.group.to_vec()
    };
    for peer in parties
        .into_iter()
        .filter(|&p| p != me && !shared.transport.is_lost(p))
    {
        let mut payload = shared.transport.inbox().pool().take(text.len());
        payload.fill_from(text.as_bytes());
        let frame = Frame {
            kind,
            src: me,
            key: meta.peer_key,
            fp: meta.fp,
            aux,
            payload,
        };
        // Best effort: the peer may be gone as well.
        let _ = shared.transport.send(peer, frame);
    }
    shared.transport.inbox().close(meta.key);
    shared.counters.failed.fetch_add(1, Ordering::Relaxed);
    let stats = a.stats;
    a.op.finish(Err(f.error), stats);
}
