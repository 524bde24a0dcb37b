//! Per-collective mailboxes of one rank, and the pool of reusable message buffers.
//!
//! Every collective instance `(communicator, seq)` has its own mailbox, so data for a
//! collective that this rank has not started yet (or has preempted) waits there without
//! blocking any other collective: the transport never stalls on one collective's unread data.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::Thread;

use crate::dtype::AlignedBuf;
use crate::frame::{Fingerprint, Frame, FrameKind, MailboxKey};
use crate::posts::{Posts, SlotState, Target};

/// Frames of one collective instance, in arrival order (each sender's in its sending order).
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    inner: Mutex<MailboxInner>,
    /// The number of queued data frames, stored under the lock whenever it changes: read
    /// without it by [`holds_frame_from`](Self::holds_frame_from), whose caller took the frame
    /// after every earlier one was queued (see there).
    queued: AtomicUsize,
}

#[derive(Debug, Default)]
struct MailboxInner {
    /// Data frames in arrival order (each sender's in its sending order); a receive takes the
    /// first from its sender (a linear search: the queue holds the frames that came before
    /// their step ran — one per sender and step ahead, e.g. up to about `n / 2` early
    /// all-to-all blocks; a queue per sender cost a second allocation per frame).
    frames: VecDeque<Frame>,
    abort: Option<Frame>,
    /// Receive slots of the collective, when its transport receives directly.
    posts: Option<Posts>,
    /// Data frames routed so far per sender (direct or queued), to map a frame to its step.
    routed: Vec<(usize, usize)>,
}

impl MailboxInner {
    /// Empties the mailbox for reuse by another collective, keeping its queue's capacity.
    fn clear(&mut self) {
        self.frames.clear();
        self.abort = None;
        self.posts = None;
        self.routed.clear();
    }

    /// The first queued data frame from world rank `src`.
    fn pop(&mut self, src: usize) -> Option<Frame> {
        let i = self.frames.iter().position(|f| f.src == src)?;
        self.frames.remove(i)
    }

    fn pop_received(&mut self, src: usize) -> Received {
        match self.pop(src) {
            Some(f) => Received::Frame(f),
            None => self.pending(),
        }
    }

    fn pending(&self) -> Received {
        Received::Pending {
            check: self.abort.is_some() || !self.frames.is_empty(),
        }
    }
}

/// Where an incoming frame goes ([`Inbox::route`]).
pub(crate) enum Route {
    /// Into a posted slot (direct receive): the reader fills the target, then completes it.
    Slot(Arc<Mailbox>, Target),
    /// The ordinary path: the payload is read into a pooled buffer and the frame handed to
    /// [`Inbox::deliver_to`] with this mailbox.
    Queue(Option<Arc<Mailbox>>),
}

/// What a receive step finds in its mailbox.
#[derive(Debug)]
pub(crate) enum Received {
    /// The reader placed the data in the working buffer.
    Direct,
    /// The data came the ordinary way.
    Frame(Frame),
    /// Nothing yet (or the reader is still writing it). `check`: a failure notice or a queued
    /// data frame was there at the same look, so the blocked collective should look for a
    /// reason to fail (a notice, a frame with another fingerprint); otherwise it need not
    /// take the lock again for that.
    Pending { check: bool },
}

impl Mailbox {
    fn push(&self, frame: Frame) {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        if frame.kind != FrameKind::Data {
            g.abort.get_or_insert(frame);
            return;
        }
        g.frames.push_back(frame);
        self.count(&g);
    }

    /// Stores the number of queued data frames (the caller holds the lock).
    fn count(&self, g: &MailboxInner) {
        self.queued.store(g.frames.len(), Ordering::Relaxed);
    }

    /// Whether a data frame from world rank `src` is queued. Without taking the lock when none
    /// is: the caller (the MPI transport's frame taken on arrival) holds the landing buffer's
    /// lock, under which every earlier frame was queued, so their count is visible to it.
    #[cfg(feature = "mpi")]
    pub(crate) fn holds_frame_from(&self, src: usize) -> bool {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let g = self.inner.lock().expect("mailbox poisoned");
        g.frames.iter().any(|f| f.src == src)
    }

    /// Next data frame from world rank `src`.
    pub(crate) fn pop(&self, src: usize) -> Option<Frame> {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        let f = g.pop(src);
        self.count(&g);
        f
    }

    /// Registers the receive slots of the collective (replacing earlier ones).
    pub(crate) fn register_posts(&self, posts: Posts) {
        self.inner.lock().expect("mailbox poisoned").posts = Some(posts);
    }

    /// Posts the given slots (those still waiting): the reader may now fill them.
    pub(crate) fn post(&self, slots: impl IntoIterator<Item = usize>) {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        if let Some(p) = g.posts.as_mut() {
            for i in slots {
                let s = &mut p.slots[i];
                if s.state == SlotState::Waiting {
                    s.state = SlotState::Posted;
                }
            }
        }
    }

    /// The data of receive slot `slot` (from world rank `src`): placed directly, or the next
    /// queued frame from `src`, or nothing yet. Frames from one sender arrive in step order, so
    /// when the slot was not filled directly, the next queued frame from `src` is its data.
    pub(crate) fn take_received(&self, slot: usize, src: usize) -> Received {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        match g.posts.as_ref().map(|p| p.slots[slot].state) {
            Some(SlotState::Done) => Received::Direct,
            Some(SlotState::InFlight) => g.pending(),
            _ => {
                let r = g.pop_received(src);
                self.count(&g);
                r
            }
        }
    }

    /// The next queued frame from world rank `src` (a collective without posted slots).
    pub(crate) fn pop_received(&self, src: usize) -> Received {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        let r = g.pop_received(src);
        self.count(&g);
        r
    }

    /// Withdraws every post; returns `false` if a reader is still writing into a slot.
    pub(crate) fn withdraw_posts(&self) -> bool {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        g.posts
            .take()
            .is_none_or(|p| p.slots.iter().all(|s| s.state != SlotState::InFlight))
    }

    /// Routes a data frame header from `src`: counts it and claims its slot if it is posted.
    fn route_data(&self, src: usize, fp: &Fingerprint, len: usize) -> Option<Target> {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        let m = match g.routed.iter_mut().find(|(s, _)| *s == src) {
            Some((_, m)) => {
                *m += 1;
                *m - 1
            }
            None => {
                g.routed.push((src, 1));
                0
            }
        };
        let p = g.posts.as_mut()?;
        let slot = p.slot_for(src, m)?;
        p.claim(slot, fp, len)
    }

    /// Marks a claimed slot filled (`ok`) or broken (the connection failed in the middle).
    pub(crate) fn complete(&self, slot: usize, ok: bool) {
        let mut g = self.inner.lock().expect("mailbox poisoned");
        if let Some(p) = g.posts.as_mut() {
            p.slots[slot].state = if ok {
                SlotState::Done
            } else {
                SlotState::Broken
            };
        }
    }

    /// Takes the failure notice, if a peer sent one.
    pub(crate) fn take_abort(&self) -> Option<Frame> {
        self.inner.lock().expect("mailbox poisoned").abort.take()
    }

    /// Calls `f` on every queued data frame (to check fingerprints while blocked).
    pub(crate) fn scan<R>(&self, mut f: impl FnMut(&Frame) -> Option<R>) -> Option<R> {
        let g = self.inner.lock().expect("mailbox poisoned");
        g.frames.iter().find_map(&mut f)
    }
}

/// All mailboxes of one rank plus the handle to wake its progress engine.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    map: Mutex<InboxMap>,
    engine: OnceLock<Thread>,
    /// A transport thread that polls for messages and stands aside while drivers poll
    /// (the MPI receiver thread): unparked when a driver parks or leaves work behind, and by a
    /// wake-up that finds no driver.
    poller: OnceLock<Thread>,
    /// The polling thread is (about to be) asleep standing aside for drivers
    /// ([`poller_stands_aside`](Self::poller_stands_aside)): a wake-up with no driver left
    /// unparks it too.
    poller_aside: AtomicBool,
    /// Number of application threads driving the engine right now (deliveries wake them
    /// instead of the engine thread).
    drivers: AtomicUsize,
    /// The drivers parked or about to park, listed by [`park_driver`](Self::park_driver)
    /// (entering and leaving as a driver takes no lock).
    driver_threads: Mutex<Vec<Thread>>,
    /// Drivers parked or about to park ([`park_driver`](Self::park_driver)): only then does
    /// a delivery take the `driver_threads` lock and unpark them.
    parked_drivers: AtomicUsize,
    /// Counts wake-ups: a driver that is about to park sees whether anything arrived since it
    /// last looked.
    wakes: AtomicU64,
    pool: BufPool,
}

#[derive(Debug, Default)]
struct InboxMap {
    /// Open mailboxes. There is no cap on those that peers' frames open for operations this
    /// rank has not started (an honest peer may run any number of blocking sends ahead of
    /// its receiver): with no flow control, a hostile peer can exhaust this rank's memory
    /// with such frames (a known limitation).
    open: HashMap<MailboxKey, OpenMailbox, KeyHash>,
    /// Collectives finished here (completed or failed): late frames for them — failure
    /// notices that peers send or pass on after this rank finished — are dropped instead of
    /// opening a mailbox that nothing would ever read or remove. One record per stream (a
    /// communicator's collectives, its point-to-point messages with one peer in one direction), kept while
    /// the communicator lives: it grows with the operations in flight, not with those run,
    /// and [`forget_comm`](Inbox::forget_comm) removes a dropped communicator's records.
    /// Keyed by communicator first (then by the stream's high bits), so that forgetting one
    /// communicator touches only its own records.
    closed: HashMap<u64, HashMap<u64, Finished, KeyHash>, KeyHash>,
    /// The last [`DROPPED_COMMS_KEPT`] communicators dropped on this rank (their records gone):
    /// a late frame for one of them, with no mailbox open, is dropped too. Late frames come
    /// within moments of a collective's end (failure notices), so remembering the recent
    /// ones bounds this record without letting them open mailboxes.
    dropped: HashSet<u64, KeyHash>,
    /// `dropped` in the order they were dropped (the oldest is forgotten first).
    dropped_order: VecDeque<u64>,
    /// Mailboxes of finished collectives, at most [`RETIRED_MAILBOXES`], reused by the next
    /// collectives once nothing else holds them (their frame queues keep their capacity):
    /// two allocations fewer per collective.
    retired: Vec<Arc<Mailbox>>,
}

/// An open mailbox, and whether a frame opened it while this rank has not started its
/// collective (`false` once started here).
#[derive(Debug)]
struct OpenMailbox {
    mailbox: Arc<Mailbox>,
    unstarted: bool,
}

/// Hashing of the inbox's keys: foldhash, seeded at random per map, in its `quality` variant
/// (folded multiplies plus a final avalanche, so keys that differ only in high bits — the
/// peer and direction bits of point-to-point keys — still spread over the low bits that pick
/// a bucket; the `fast` variant put 128 such keys (64 peers, both directions) in as few as 6 buckets for some
/// seeds), and a peer does not know the seed to aim its keys at one bucket. The maps are
/// looked up three to four times per collective; SipHash, the default, cost about 40 ns of a
/// 1 KiB all-reduce's engine work in `perf`.
type KeyHash = foldhash::quality::RandomState;

/// How many mailboxes of finished collectives an inbox keeps for reuse ([`InboxMap::retired`]).
const RETIRED_MAILBOXES: usize = 8;

/// How many dropped communicators an inbox remembers ([`InboxMap::dropped`]).
const DROPPED_COMMS_KEPT: usize = 1024;

/// Bits of a mailbox key's sequence number that count within its stream: a communicator's
/// collectives are one stream (sequence numbers 0, 1, 2, ...), its point-to-point messages
/// with one peer in one direction another (the high bits name the peer and the direction, see
/// `communicator::SEND_BIT`).
const STREAM_INDEX_BITS: u32 = 40;

/// The finished instances of one stream of sequence numbers: every index below `below`, and
/// those in `ahead` (finished while an earlier one was still running). Each instance of a
/// stream is submitted and eventually finishes, so `ahead` holds only indices above one that
/// is still running: its size is bounded by the collectives in flight, not by how many ran.
#[derive(Debug, Default)]
struct Finished {
    below: u64,
    ahead: BTreeSet<u64>,
}

impl Finished {
    fn contains(&self, i: u64) -> bool {
        i < self.below || self.ahead.contains(&i)
    }

    fn insert(&mut self, i: u64) {
        if i == self.below {
            self.below += 1;
            while self.ahead.remove(&self.below) {
                self.below += 1;
            }
        } else if i > self.below {
            self.ahead.insert(i);
        }
    }
}

/// A key's stream and its index within the stream.
fn stream_of(key: &MailboxKey) -> ((u64, u64), u64) {
    (
        (key.comm, key.seq >> STREAM_INDEX_BITS),
        key.seq & ((1 << STREAM_INDEX_BITS) - 1),
    )
}

impl InboxMap {
    /// Whether the collective `key` finished on this rank (or its communicator was dropped).
    fn finished(&self, key: &MailboxKey) -> bool {
        let ((comm, stream), i) = stream_of(key);
        self.closed
            .get(&comm)
            .and_then(|c| c.get(&stream))
            .is_some_and(|f| f.contains(i))
            || self.dropped.contains(&comm)
    }

    /// The open mailbox of `key` for a frame; a new one unless the collective finished.
    /// Frames for an open mailbox are kept even when its communicator was dropped: a
    /// collective still running needs them.
    fn mailbox_for(&mut self, key: MailboxKey) -> Option<Arc<Mailbox>> {
        if let Some(m) = self.open.get(&key) {
            return Some(m.mailbox.clone());
        }
        if self.finished(&key) {
            return None;
        }
        let mailbox = self.new_mailbox();
        self.open.insert(
            key,
            OpenMailbox {
                mailbox: mailbox.clone(),
                unstarted: true,
            },
        );
        Some(mailbox)
    }

    /// An empty mailbox: a retired one that nothing else holds any more, else a new one.
    fn new_mailbox(&mut self) -> Arc<Mailbox> {
        for i in 0..self.retired.len() {
            if let Some(m) = Arc::get_mut(&mut self.retired[i]) {
                // Unique: no program, transport thread or map entry can reach it.
                m.inner
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clear();
                *m.queued.get_mut() = 0;
                return self.retired.swap_remove(i);
            }
        }
        Arc::default()
    }

    /// Keeps a finished collective's mailbox for reuse (unless enough are kept).
    fn retire(&mut self, mailbox: Arc<Mailbox>) {
        if self.retired.len() < RETIRED_MAILBOXES {
            self.retired.push(mailbox);
        }
    }
}

impl Inbox {
    /// Stores a frame in its collective's mailbox (creating it) and wakes the engine.
    pub(crate) fn deliver(&self, frame: Frame) {
        {
            let mut g = self.map.lock().expect("inbox poisoned");
            let Some(mailbox) = g.mailbox_for(frame.key) else {
                drop(g);
                self.pool.give(frame.payload);
                return;
            };
            mailbox.push(frame);
        }
        self.wake();
    }

    /// For a transport that receives directly: where a frame with this header goes — the
    /// posted slot a data frame belongs to (counting the frame either way), else its
    /// collective's mailbox (one lookup for both).
    pub(crate) fn route(&self, head: &Frame, len: usize) -> Route {
        let mailbox = self
            .map
            .lock()
            .expect("inbox poisoned")
            .mailbox_for(head.key);
        let Some(mailbox) = mailbox else {
            return Route::Queue(None);
        };
        if head.kind == FrameKind::Data {
            if let Some(target) = mailbox.route_data(head.src, &head.fp, len) {
                return Route::Slot(mailbox, target);
            }
        }
        Route::Queue(Some(mailbox))
    }

    /// The mailbox a frame with this header is queued in (opened if its collective has not
    /// started here); `None` if its collective finished here. For a transport that does not
    /// receive directly; see [`route`](Self::route) for one that does.
    #[cfg(feature = "mpi")]
    pub(crate) fn mailbox_of(&self, head: &Frame) -> Option<Arc<Mailbox>> {
        self.map
            .lock()
            .expect("inbox poisoned")
            .mailbox_for(head.key)
    }

    /// Stores a frame that [`route`](Self::route) or [`mailbox_of`](Self::mailbox_of) sent to
    /// `mailbox` (`None`: its collective finished here, the frame is dropped) and wakes the
    /// engine.
    pub(crate) fn deliver_to(&self, mailbox: Option<Arc<Mailbox>>, frame: Frame) {
        match mailbox {
            Some(m) => {
                m.push(frame);
                self.wake();
            }
            None => self.pool.give(frame.payload),
        }
    }

    /// The mailbox of a collective, created if no frame has arrived for it yet.
    pub(crate) fn open(&self, key: MailboxKey) -> Arc<Mailbox> {
        let mut g = self.map.lock().expect("inbox poisoned");
        if let Some(m) = g.open.get_mut(&key) {
            m.unstarted = false;
            return m.mailbox.clone();
        }
        let mailbox = g.new_mailbox();
        g.open.insert(
            key,
            OpenMailbox {
                mailbox: mailbox.clone(),
                unstarted: false,
            },
        );
        mailbox
    }

    /// Removes a finished (completed or failed) collective's mailbox; frames that arrive for
    /// it later are discarded.
    pub(crate) fn close(&self, key: MailboxKey) {
        let mut g = self.map.lock().expect("inbox poisoned");
        if let Some(m) = g.open.remove(&key) {
            g.retire(m.mailbox);
        }
        if !g.dropped.is_empty() && g.dropped.contains(&key.comm) {
            // A collective of a dropped communicator that was still running: nothing to record.
            return;
        }
        let ((comm, stream), i) = stream_of(&key);
        g.closed
            .entry(comm)
            .or_default()
            .entry(stream)
            .or_default()
            .insert(i);
    }

    /// Forgets the records of communicator `comm`, dropped on this rank: its finished-stream
    /// records, and the mailboxes that only late frames opened (no collective of it will
    /// start any more; those still running hold their own mailbox and keep receiving).
    /// Takes the lock even if a panicking thread poisoned it (it runs from `Drop`, maybe
    /// while unwinding).
    pub(crate) fn forget_comm(&self, comm: u64) {
        let mut g = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        let g = &mut *g;
        g.closed.remove(&comm);
        // Mailboxes that frames opened and this rank never started: only those are dropped
        // (open mailboxes are the operations in flight, a handful).
        g.open.retain(|k, m| k.comm != comm || !m.unstarted);
        if g.dropped.insert(comm) {
            g.dropped_order.push_back(comm);
            if g.dropped_order.len() > DROPPED_COMMS_KEPT {
                let oldest = g.dropped_order.pop_front().expect("not empty");
                g.dropped.remove(&oldest);
            }
        }
    }

    /// Finished-stream records kept ([`InboxMap::closed`]).
    pub(crate) fn finished_records(&self) -> usize {
        let g = self.map.lock().expect("inbox poisoned");
        g.closed.values().map(HashMap::len).sum()
    }

    /// Mailboxes open on this rank: collectives started and not finished, and those that
    /// frames arrived for before this rank started them.
    pub(crate) fn open_mailboxes(&self) -> usize {
        self.map.lock().expect("inbox poisoned").open.len()
    }

    /// Registers the engine thread to wake on delivery.
    pub(crate) fn set_engine(&self, t: Thread) {
        let _ = self.engine.set(t);
    }

    /// Registers the transport's polling thread (see [`drivers_polling`](Self::drivers_polling)).
    #[cfg(feature = "mpi")]
    pub(crate) fn set_poller(&self, t: Thread) {
        let _ = self.poller.set(t);
    }

    /// Whether an application thread is driving this rank's rounds and not parked: it polls
    /// the transport itself, so a polling thread may stand aside (it is unparked when the
    /// last polling driver parks or leaves work behind; otherwise its own nap ends the wait).
    #[cfg(feature = "mpi")]
    pub(crate) fn drivers_polling(&self) -> bool {
        self.drivers.load(Ordering::SeqCst) > self.parked_drivers.load(Ordering::SeqCst)
    }

    /// Puts the polling thread to sleep for at most `nap` while drivers poll; `false` (at once)
    /// when none polls. A wake-up ([`wake`](Self::wake)) that finds no driver unparks it, so a
    /// submission or a delivery after the last driver left does not wait for the nap; a driver
    /// that parks or leaves work behind unparks it too. Only a driver that leaves nothing
    /// pending lets the nap run out (a message that then comes waits for the next driver,
    /// the engine thread, or the end of the nap).
    #[cfg(feature = "mpi")]
    pub(crate) fn poller_stands_aside(&self, nap: std::time::Duration) -> bool {
        self.poller_aside.store(true, Ordering::SeqCst);
        // A waker either sees the flag (and unparks) or left its mark in `drivers` before this
        // look (both sides `SeqCst`).
        let polling = self.drivers_polling();
        if polling {
            std::thread::park_timeout(nap);
        }
        self.poller_aside.store(false, Ordering::SeqCst);
        polling
    }

    /// Unparks the transport's polling thread (see [`drivers_polling`](Self::drivers_polling)).
    pub(crate) fn wake_poller(&self) {
        if let Some(t) = self.poller.get() {
            t.unpark();
        }
    }

    /// Wakes whoever runs this rank's rounds: the engine thread (if parked), or, while
    /// application threads drive the engine, those threads (if parked) instead — waking the
    /// idle engine thread would cost a context switch on the critical path. A driver that stops
    /// wakes the engine thread itself.
    pub(crate) fn wake(&self) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        if self.drivers.load(Ordering::SeqCst) == 0 {
            self.wake_engine();
            if self.poller_aside.load(Ordering::SeqCst) {
                self.wake_poller();
            }
        } else if self.parked_drivers.load(Ordering::SeqCst) > 0 {
            // Drivers that are not parking poll again without being told (no lock, no
            // system call on the delivering thread's path).
            self.wake_drivers();
        }
    }

    /// The wake-up count, read by a driver before it looks for work; pass it to
    /// [`park_driver`](Self::park_driver).
    pub(crate) fn wakes(&self) -> u64 {
        self.wakes.load(Ordering::SeqCst)
    }

    /// Parks the calling driver for at most `nap` unless a wake-up came after it read `seen`
    /// from [`wakes`](Self::wakes). A waker either sees this driver counted as parking (and
    /// unparks it) or bumped the count before the driver's second look (both sides
    /// `SeqCst`), so no delivery is missed.
    pub(crate) fn park_driver(&self, seen: u64, nap: std::time::Duration) {
        let me = std::thread::current();
        let id = me.id();
        // Listed before it counts as parking: a waker that sees the count finds it listed.
        self.driver_threads.lock().expect("inbox poisoned").push(me);
        self.parked_drivers.fetch_add(1, Ordering::SeqCst);
        self.wake_poller();
        if self.wakes.load(Ordering::SeqCst) == seen {
            std::thread::park_timeout(nap);
        }
        self.parked_drivers.fetch_sub(1, Ordering::SeqCst);
        let mut g = self.driver_threads.lock().expect("inbox poisoned");
        if let Some(i) = g.iter().position(|t| t.id() == id) {
            g.swap_remove(i);
        }
    }

    /// Wakes the engine thread and the drivers (abort, shutdown, lost peers).
    pub(crate) fn wake_always(&self) {
        self.wake_engine();
        self.wake_drivers();
    }

    /// Wakes the engine thread (if parked).
    pub(crate) fn wake_engine(&self) {
        if let Some(t) = self.engine.get() {
            t.unpark();
        }
    }

    fn wake_drivers(&self) {
        // `unpark` of a thread that is not parked only leaves it a token (no system call).
        let g = self.driver_threads.lock().expect("inbox poisoned");
        g.iter().for_each(Thread::unpark);
    }

    /// Whether application threads drive the engine right now.
    pub(crate) fn has_drivers(&self) -> bool {
        self.drivers.load(Ordering::SeqCst) > 0
    }

    /// Registers the calling thread as a driver; returns the number of drivers before.
    pub(crate) fn enter_driver(&self) -> usize {
        self.drivers.fetch_add(1, Ordering::SeqCst)
    }

    /// Unregisters the calling thread as a driver; returns the number of drivers left. It does
    /// not wake the transport's polling thread: with nothing pending (a loop of blocking
    /// calls, between two of them) that thread's own nap bounds how long a message waits
    /// (`MpiConfig::stand_aside_sleep`; the next submission or delivery ends it, see
    /// [`poller_stands_aside`](Self::poller_stands_aside)), and a driver that leaves work
    /// behind wakes it with the engine thread ([`wake_poller`](Self::wake_poller)). Waking it
    /// on every leave cost a `futex` wake-up and a thread that competes for MPI's locks with
    /// the next call's driver.
    pub(crate) fn leave_driver(&self) -> usize {
        self.drivers.fetch_sub(1, Ordering::SeqCst) - 1
    }

    pub(crate) fn pool(&self) -> &BufPool {
        &self.pool
    }
}

/// Free message buffers of one rank: senders take, receivers give back after consuming,
/// so steady-state traffic allocates nothing.
#[derive(Debug)]
pub(crate) struct BufPool {
    free: Mutex<FreeBufs>,
    /// [`POOL_MAX_BYTES`] (smaller in tests).
    max_bytes: usize,
}

impl Default for BufPool {
    fn default() -> Self {
        Self {
            free: Mutex::default(),
            max_bytes: POOL_MAX_BYTES,
        }
    }
}

#[derive(Debug, Default)]
struct FreeBufs {
    bufs: Vec<AlignedBuf>,
    /// Capacity of `bufs` in bytes.
    bytes: usize,
}

/// Most buffers a pool keeps.
const POOL_CAP: usize = 64;

/// Most bytes a pool keeps: a buffer that would take it past this is freed instead (one
/// all-to-all of large blocks, staged, would otherwise stay in memory for the rest of the
/// process).
const POOL_MAX_BYTES: usize = 256 << 20;

impl BufPool {
    /// A buffer of at least `len` bytes: the smallest free one that fits, else the largest.
    pub(crate) fn take(&self, len: usize) -> AlignedBuf {
        let mut g = self.free.lock().expect("pool poisoned");
        let cap = |i: usize| g.bufs[i].capacity_bytes();
        let best = (0..g.bufs.len())
            .filter(|&i| cap(i) >= len)
            .min_by_key(|&i| cap(i))
            .or_else(|| (0..g.bufs.len()).max_by_key(|&i| cap(i)));
        let mut b = match best {
            Some(i) => {
                let b = g.bufs.swap_remove(i);
                g.bytes -= b.capacity_bytes();
                b
            }
            None => AlignedBuf::default(),
        };
        drop(g);
        b.set_len_bytes(len);
        b
    }

    /// Returns a buffer for reuse (freed instead when the pool is full, by count or bytes).
    pub(crate) fn give(&self, b: AlignedBuf) {
        let cap = b.capacity_bytes();
        let mut g = self.free.lock().expect("pool poisoned");
        if g.bufs.len() < POOL_CAP && g.bytes + cap <= self.max_bytes {
            g.bytes += cap;
            g.bufs.push(b);
        }
    }

    /// Buffers and bytes the pool keeps.
    #[cfg(test)]
    fn kept(&self) -> (usize, usize) {
        let g = self.free.lock().expect("pool poisoned");
        (g.bufs.len(), g.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(comm: u64, seq: u64) -> MailboxKey {
        MailboxKey { comm, seq }
    }

    fn notice(key: MailboxKey) -> Frame {
        Frame {
            kind: FrameKind::AbortOther,
            src: 1,
            key,
            fp: Fingerprint::default(),
            aux: 0,
            payload: AlignedBuf::default(),
        }
    }

    /// The polling thread standing aside for a driver sleeps until a wake-up that finds no
    /// driver (a submission or delivery after the last driver left), not for its whole nap
    /// (without the unpark in `wake` this waits the minute out).
    #[cfg(feature = "mpi")]
    #[test]
    fn a_wake_up_with_no_driver_ends_the_pollers_nap() {
        use std::time::{Duration, Instant};
        let inbox = Arc::new(Inbox::default());
        inbox.enter_driver();
        let (tx, rx) = std::sync::mpsc::channel();
        let poller = {
            let inbox = Arc::clone(&inbox);
            std::thread::spawn(move || {
                let start = Instant::now();
                let stood_aside = inbox.poller_stands_aside(Duration::from_secs(60));
                tx.send((stood_aside, start.elapsed())).unwrap();
            })
        };
        inbox.set_poller(poller.thread().clone());
        while !inbox.poller_aside.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        inbox.leave_driver();
        inbox.wake();
        let (stood_aside, slept) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("still asleep");
        assert!(stood_aside);
        assert!(slept < Duration::from_secs(30), "{slept:?}");
        poller.join().unwrap();
        // With no driver polling it does not sleep at all.
        assert!(!inbox.poller_stands_aside(Duration::from_secs(60)));
    }

    /// A finished collective's mailbox is reused by a later one only once nothing else holds
    /// it, and then empty: a data frame and a failure notice that reached it before it closed
    /// are gone.
    #[test]
    fn retired_mailboxes_are_reused_empty_once_unshared() {
        let inbox = Inbox::default();
        let first = inbox.open(key(7, 0));
        let data = Frame {
            kind: FrameKind::Data,
            ..notice(key(7, 0))
        };
        inbox.deliver(data);
        inbox.deliver(notice(key(7, 0)));
        inbox.close(key(7, 0));
        // Still held (by its program): not reused.
        let second = inbox.open(key(7, 1));
        assert!(!Arc::ptr_eq(&first, &second));
        let first_at = Arc::as_ptr(&first);
        drop(first);
        let third = inbox.open(key(7, 2));
        assert_eq!(
            Arc::as_ptr(&third),
            first_at,
            "the retired mailbox was not reused"
        );
        assert!(
            third.pop(1).is_none(),
            "a frame of the finished collective was kept"
        );
        assert!(matches!(
            third.pop_received(1),
            Received::Pending { check: false }
        ));
    }

    /// Instances finishing out of order: a stream's record keeps only those above the oldest
    /// one still running, and frames for finished instances open no mailbox.
    #[test]
    fn finished_instances_drop_late_frames_and_compact() {
        let inbox = Inbox::default();
        let p2p = (1u64 << 63) | (3 << STREAM_INDEX_BITS);
        for seq in [0, 2, 3, 5] {
            inbox.open(key(7, seq));
            inbox.close(key(7, seq));
            inbox.close(key(7, p2p | seq));
        }
        for seq in [0, 2, 3, 5] {
            inbox.deliver(notice(key(7, seq)));
            inbox.deliver(notice(key(7, p2p | seq)));
        }
        assert_eq!(inbox.open_mailboxes(), 0);
        // Not finished yet: kept for when the collective starts.
        inbox.deliver(notice(key(7, 1)));
        inbox.deliver(notice(key(8, 0)));
        inbox.deliver(notice(key(7, p2p | 1)));
        assert_eq!(inbox.open_mailboxes(), 3);
        inbox.close(key(7, 1));
        inbox.close(key(7, 4));
        {
            let g = inbox.map.lock().unwrap();
            let f = &g.closed[&7][&0];
            assert_eq!((f.below, f.ahead.len()), (6, 0));
            let f = &g.closed[&7][&(p2p >> STREAM_INDEX_BITS)];
            assert_eq!(
                (f.below, f.ahead.iter().copied().collect::<Vec<_>>()),
                (1, vec![2, 3, 5])
            );
        }
        assert_eq!(inbox.open_mailboxes(), 2);
        // Many instances: the record stays one counter.
        for seq in 6..10_000 {
            inbox.close(key(7, seq));
            inbox.deliver(notice(key(7, seq)));
        }
        assert_eq!(inbox.open_mailboxes(), 2);
        assert!(inbox.map.lock().unwrap().closed[&7][&0].ahead.is_empty());
    }

    /// A dropped communicator's records go; its late frames open no mailbox, while a
    /// collective of it that still runs keeps its mailbox and its frames.
    #[test]
    fn forgetting_a_communicator_reclaims_its_records() {
        let inbox = Inbox::default();
        let p2p = (1u64 << 63) | (2 << STREAM_INDEX_BITS);
        for seq in 0..5 {
            inbox.open(key(9, seq));
            inbox.close(key(9, seq));
            inbox.close(key(9, p2p | seq));
            inbox.close(key(4, seq));
        }
        let running = inbox.open(key(9, 5));
        inbox.deliver(notice(key(9, 7))); // early frame, nobody will start it now
        assert_eq!(inbox.finished_records(), 3);
        assert_eq!(inbox.open_mailboxes(), 2);
        inbox.forget_comm(9);
        assert_eq!(inbox.finished_records(), 1);
        assert_eq!(inbox.open_mailboxes(), 1);
        inbox.deliver(notice(key(9, 2)));
        inbox.deliver(notice(key(9, 8)));
        assert_eq!(inbox.open_mailboxes(), 1);
        inbox.deliver(notice(key(9, 5)));
        assert!(running.take_abort().is_some());
        inbox.close(key(9, 5));
        assert_eq!((inbox.finished_records(), inbox.open_mailboxes()), (1, 0));
        // Only the most recent dropped communicators are remembered.
        for comm in 100..100 + DROPPED_COMMS_KEPT as u64 {
            inbox.forget_comm(comm);
        }
        inbox.deliver(notice(key(9, 9)));
        assert_eq!(inbox.open_mailboxes(), 1);
        assert_eq!(inbox.map.lock().unwrap().dropped.len(), DROPPED_COMMS_KEPT);
    }

    /// Point-to-point keys that differ only in the peer and direction bits (bit 40 and up)
    /// spread over the low bits that pick a bucket (the unmixed multiply put all of an
    /// all-to-all's keys in one bucket).
    #[test]
    fn keys_differing_in_high_bits_spread_over_buckets() {
        use std::hash::BuildHasher;
        // Several seeds (the maps are seeded at random).
        for _ in 0..20 {
            let h = KeyHash::default();
            let mut low = HashSet::new();
            for peer in 0..64u64 {
                // Point-to-point keys (bit 63) of both directions (`SEND_BIT`, bit 62).
                for send in [1u64 << 63, 1 << 63 | crate::communicator::SEND_BIT] {
                    low.insert(h.hash_one(key(3, send | (peer << STREAM_INDEX_BITS) | 5)) & 127);
                }
            }
            // 128 keys into 128 buckets: a random function fills about 81 (the least of 2000
            // seeds measured: 68; foldhash's `fast` variant, without the final mix: 6); the
            // unmixed multiply filled 1.
            assert!(low.len() > 50, "{} buckets", low.len());
        }
    }

    /// Forgetting a communicator drops the mailboxes only frames opened (even while a reader
    /// holds one), not those started here.
    #[test]
    fn forget_comm_drops_only_frame_opened_mailboxes() {
        let inbox = Inbox::default();
        for seq in 0..3 {
            inbox.deliver(notice(key(5, seq)));
        }
        // Starting one here makes it a running collective's mailbox.
        let started = inbox.open(key(5, 0));
        assert!(started.take_abort().is_some());
        let held = inbox.map.lock().unwrap().open[&key(5, 1)].mailbox.clone();
        inbox.forget_comm(5);
        drop(held);
        assert_eq!(inbox.open_mailboxes(), 1);
        inbox.close(key(5, 0));
        assert_eq!(inbox.open_mailboxes(), 0);
    }

    /// A communicator dropped while another thread had panicked holding the inbox lock:
    /// forgetting it takes the poisoned lock (a panic in `Drop` while unwinding would abort).
    #[test]
    fn forgetting_a_communicator_survives_a_poisoned_inbox() {
        let inbox = Arc::new(Inbox::default());
        inbox.close(key(3, 0));
        let i = inbox.clone();
        let r = std::thread::spawn(move || {
            let _g = i.map.lock().unwrap();
            panic!("poisoning the inbox on purpose");
        })
        .join();
        assert!(r.is_err() && inbox.map.is_poisoned());
        inbox.forget_comm(3);
        assert!(inbox
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed
            .is_empty());
    }

    /// The pool keeps buffers up to its byte budget and frees what would exceed it; taking a
    /// buffer gives its bytes back to the budget.
    #[test]
    fn the_pool_keeps_at_most_its_byte_budget() {
        let budget = 1 << 20;
        let pool = BufPool {
            max_bytes: budget,
            ..BufPool::default()
        };
        let mut big = pool.take(budget / 2 + 1);
        assert!(big.capacity_bytes() > budget / 2);
        big.set_len_bytes(8);
        let big_cap = big.capacity_bytes();
        let other = pool.take(budget / 2 + 1);
        pool.give(big);
        assert_eq!(pool.kept(), (1, big_cap));
        // A second buffer of more than half the budget does not fit beside the first.
        pool.give(other);
        assert_eq!(pool.kept(), (1, big_cap));
        let again = pool.take(16);
        assert_eq!(again.capacity_bytes(), big_cap, "the kept buffer is reused");
        assert_eq!(pool.kept(), (0, 0));
        let small = pool.take(1024);
        pool.give(small);
        pool.give(again);
        assert_eq!(pool.kept().0, 2);
    }
}
