//! A collective as a resumable state machine: a [`Step`] schedule, a program counter and the
//! working buffer. `poll(budget)` runs at most `budget` steps and returns `Done`, `Progressed`
//! or `Blocked`; preempting a collective costs nothing because all its state lives here.

use std::ops::Range;
use std::sync::Arc;

use crate::completion::{Completion, OpStats};
use crate::direct::{ready_steps, WorkBuf};
use crate::dtype::{as_bytes, AlignedBuf, Element, ReduceOp};
use crate::frame::{Fingerprint, Frame, FrameKind, MailboxKey, OpKind, NOTICE_MISMATCH};
use crate::inbox::{Mailbox, Received};
use crate::schedule::{Action, Step};
use crate::transport::Transport;
use crate::CollectiveError;

/// Outcome of one poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// All steps ran; the output is ready.
    Done,
    /// At least one step (or send) ran, more remain.
    Progressed,
    /// Nothing could run: the current step waits for a peer's message.
    Blocked,
}

/// A failure, and what the notice that every peer is sent about it reports.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) error: CollectiveError,
    /// The notice reports a mismatch whatever `error` is: the collective was refused on this
    /// rank over an argument only this rank checked ([`Refused`]), so for its peers the ranks
    /// disagreed — also when the refused collective's fingerprint happens to equal theirs.
    pub(crate) mismatch_for_peers: bool,
}

impl From<CollectiveError> for Failure {
    fn from(error: CollectiveError) -> Self {
        Failure {
            error,
            mismatch_for_peers: false,
        }
    }
}

/// Identity of a collective instance.
#[derive(Debug, Clone)]
pub(crate) struct OpMeta {
    pub(crate) kind: OpKind,
    pub(crate) key: MailboxKey,
    /// The key its frames carry: the key of the same operation on the receiving rank, which
    /// differs from `key` for point-to-point messages only (`communicator::SEND_BIT`).
    pub(crate) peer_key: MailboxKey,
    /// Sequence number reported to users.
    pub(crate) seq: u64,
    /// World ranks of the communicator.
    pub(crate) group: Arc<[usize]>,
    pub(crate) fp: Fingerprint,
}

/// The algorithm codes of a collective's plan (`Fingerprint::algo`: ranks that run different
/// algorithms for the same collective fail with a mismatch), named by [`OpMeta::algorithm`].
pub(crate) mod algo_code {
    /// The one algorithm of its kind (ring reduce-scatter and all-gather, binomial broadcast
    /// and reduce, pairwise all-to-all, dissemination barrier, point-to-point).
    pub(crate) const PLAIN: u8 = 0;
    /// The pipelined ring all-reduce.
    pub(crate) const RING: u8 = 1;
    /// The recursive algorithms of power-of-two worlds: halving-doubling all-reduce,
    /// recursive-halving reduce-scatter, recursive-doubling all-gather.
    pub(crate) const RECURSIVE: u8 = 2;
    /// Recursive-doubling all-reduce (whole vectors).
    pub(crate) const RECURSIVE_DOUBLING: u8 = 3;
    /// Shared-memory all-reduce.
    pub(crate) const SHARED_MEMORY: u8 = 4;
    /// Pipelined chain broadcast.
    pub(crate) const PIPELINED_CHAIN: u8 = 5;
}

/// A type-erased collective, as the engine sees it.
pub(crate) trait ActiveOp: Send {
    fn poll(&mut self, transport: &dyn Transport, budget: usize) -> Result<Poll, Failure>;
    /// World ranks whose message the current step awaits.
    fn waiting_on(&self) -> Vec<usize>;
    /// World ranks this operation exchanges messages with in any of its steps, sending or
    /// receiving (told when a point-to-point message fails). Default: [`Self::waiting_on`].
    fn counterparts(&self) -> Vec<usize> {
        self.waiting_on()
    }
    fn meta(&self) -> &OpMeta;
    /// Delivers the outcome to the handle.
    fn finish(self: Box<Self>, result: Result<(), CollectiveError>, stats: OpStats);
    /// Takes a data frame (`head`, its payload `data` still in the transport's receive
    /// buffer) that its caller, the thread running this operation, has just received, if it is
    /// the one the current step awaits: applied in place, and the step done. `false` leaves it
    /// to the ordinary path (the frame's mailbox). Default: never.
    #[cfg(feature = "mpi")]
    fn accept(&mut self, _head: &Frame, _data: &[u8]) -> bool {
        false
    }
}

impl<T: Element> StepProgram<T> {
    /// The output of a collective whose every step ran (one that a blocking call ran inline,
    /// never handed to the engine).
    pub(crate) fn into_output(self) -> Vec<T> {
        output_of(self.buf, self.output)
    }

    /// The program boxed for the engine, with the completion its outcome goes to.
    pub(crate) fn for_engine(mut self) -> (Box<dyn ActiveOp>, Arc<Completion<T>>) {
        let completion = self.completion.get_or_insert_with(Completion::new).clone();
        (Box::new(self), completion)
    }
}

/// The part `output` of a finished collective's buffer (`None`: an empty vector).
fn output_of<T: Element>(buf: WorkBuf<T>, output: Option<Range<usize>>) -> Vec<T> {
    match output {
        Some(r) => {
            let mut buf = buf.into_vec();
            buf.truncate(r.end);
            buf.drain(..r.start);
            buf
        }
        None => Vec::new(),
    }
}

/// Sends `range` of `buf` to group member `peer` of collective `meta`.
fn send_range<T: Element>(
    transport: &dyn Transport,
    buf: &WorkBuf<T>,
    meta: &OpMeta,
    peer: usize,
    range: Range<usize>,
) -> crate::Result<()> {
    // The transport copies into a pooled buffer (local, MPI) or writes straight from `buf`
    // (TCP, large MPI payloads).
    let data = as_bytes(buf.slice(range));
    let head = Frame {
        kind: FrameKind::Data,
        src: transport.world_rank(),
        key: meta.peer_key,
        fp: meta.fp,
        aux: 0,
        payload: AlignedBuf::default(),
    };
    transport.send_slice(meta.group[peer], head, data)
}

/// Sends the first step's frame of a collective being submitted (before its mailbox, handle
/// and queue entry exist: on a small collective's critical path, the first round would come
/// after all of them and a clock reading) where the transport sends it without waiting
/// ([`Transport::sends_at_once`]). Returns whether it went out; whatever fails is left for the
/// first [`poll`](ActiveOp::poll) to meet again. Only for a preemptive engine, where
/// collectives progress independently (the caller checks).
pub(crate) fn send_first<T: Element>(
    transport: &dyn Transport,
    steps: &[Step],
    buf: &WorkBuf<T>,
    meta: &OpMeta,
) -> bool {
    let Some(Step {
        send: Some((peer, range)),
        ..
    }) = steps.first()
    else {
        return false;
    };
    transport.sends_at_once(range.len() * std::mem::size_of::<T>())
        && send_range(transport, buf, meta, *peer, range.clone()).is_ok()
}

/// The step-schedule state machine over a typed working buffer.
pub(crate) struct StepProgram<T: Element> {
    pub(crate) meta: OpMeta,
    pub(crate) steps: Vec<Step>,
    pub(crate) pc: usize,
    pub(crate) sent: bool,
    pub(crate) buf: WorkBuf<T>,
    /// Receive slots posted for the transport's reader ([`crate::direct`]), if it has one.
    pub(crate) direct: Option<DirectPosts>,
    /// Part of `buf` returned to the caller (`None`: an empty vector).
    pub(crate) output: Option<Range<usize>>,
    pub(crate) reduce: ReduceOp,
    pub(crate) mailbox: Arc<Mailbox>,
    /// Where the outcome goes; made when the program is handed to the engine
    /// ([`for_engine`](Self::for_engine)): a blocking call that runs its collective inline to
    /// the end takes the output itself and needs none.
    pub(crate) completion: Option<Arc<Completion<T>>>,
}

/// When to post which receive slot of a step program.
#[derive(Debug)]
pub(crate) struct DirectPosts {
    /// Slot of each step's receive (slots are numbered in step order).
    slot_of_step: Vec<Option<usize>>,
    /// `(half-step position from which it may be posted, slot)`, sorted (see
    /// [`ready_steps`]: `2 pc`, plus 1 once the step's send went out).
    order: Vec<(usize, usize)>,
    /// Entries of `order` posted so far.
    next: usize,
    /// Receives the reader filled directly.
    filled: u64,
}

impl DirectPosts {
    /// Registers the receive slots of `steps` over `buf` in `mailbox`; `None` when no slot
    /// could ever be posted.
    pub(crate) fn register<T: Element>(
        buf: &mut WorkBuf<T>,
        mailbox: &Arc<Mailbox>,
        steps: &[Step],
        meta: &OpMeta,
        op: ReduceOp,
    ) -> Option<Self> {
        let ready = ready_steps(steps);
        let mut order: Vec<(usize, usize)> = ready
            .iter()
            .enumerate()
            .filter_map(|(slot, &(_, pc))| pc.map(|pc| (pc, slot)))
            .collect();
        if order.is_empty() {
            return None;
        }
        order.sort_unstable();
        let mut slot_of_step = vec![None; steps.len()];
        for (slot, &(step, _)) in ready.iter().enumerate() {
            slot_of_step[step] = Some(slot);
        }
        buf.register(mailbox, steps, &meta.group, meta.fp, op);
        Some(Self {
            slot_of_step,
            order,
            next: 0,
            filled: 0,
        })
    }
}

impl OpMeta {
    /// The name reported in statistics and errors: the collective's, and for a point-to-point
    /// message its direction on this rank (`send` or `recv`; the sequence number alone, the
    /// peer's rank and the count in that direction, is the same for the `n`-th send to a rank
    /// and the `n`-th receive from it).
    pub(crate) fn name(&self) -> &'static str {
        match self.kind {
            OpKind::PointToPoint if self.key.seq & crate::communicator::SEND_BIT != 0 => "send",
            OpKind::PointToPoint => "recv",
            kind => kind.name(),
        }
    }

    /// The algorithm the collective runs, from its fingerprint's [`algo_code`].
    pub(crate) fn algorithm(&self) -> &'static str {
        use algo_code::*;
        match (self.kind, self.fp.algo) {
            (OpKind::AllReduce, RECURSIVE) => "halving-doubling",
            (OpKind::AllReduce, RECURSIVE_DOUBLING) => "recursive-doubling",
            (OpKind::AllReduce, SHARED_MEMORY) => "shared-memory",
            (OpKind::AllReduce, _) => "ring",
            (OpKind::ReduceScatter, RECURSIVE) => "recursive-halving",
            (OpKind::AllGather, RECURSIVE) => "recursive-doubling",
            (OpKind::ReduceScatter | OpKind::AllGather, _) => "ring",
            (OpKind::Broadcast, PIPELINED_CHAIN) => "pipelined",
            (OpKind::Broadcast | OpKind::Reduce, _) => "binomial",
            (OpKind::AllToAll, _) => "pairwise",
            (OpKind::Barrier, _) => "dissemination",
            (OpKind::PointToPoint, _) => "point-to-point",
        }
    }

    pub(crate) fn lost(&self, rank: usize) -> CollectiveError {
        CollectiveError::PeerLost {
            rank,
            op: self.name(),
            seq: self.seq,
        }
    }

    pub(crate) fn mismatch(&self, rank: usize, detail: String) -> CollectiveError {
        CollectiveError::Mismatch {
            rank,
            op: self.name(),
            seq: self.seq,
            detail,
        }
    }
}

/// Why a blocked collective cannot go on, as far as its mailbox tells: a failure notice from a
/// peer, or a frame whose fingerprint differs from ours.
pub(crate) fn blocked_failure(meta: &OpMeta, mailbox: &Mailbox) -> Option<Failure> {
    if let Some(f) = mailbox.take_abort() {
        let error = match f.kind {
            FrameKind::AbortLost => meta.lost(f.aux as usize),
            // The notice's header carries its sender's fingerprint: a different one is a
            // mismatch with the sender itself, whatever made the sender fail.
            _ => {
                let reason = String::from_utf8_lossy(f.payload.as_bytes()).into_owned();
                match meta.fp.difference(&f.fp) {
                    Some(detail) => meta.mismatch(f.src, detail),
                    None if f.aux == NOTICE_MISMATCH => {
                        meta.mismatch(f.src, format!("reported by rank {}: {reason}", f.src))
                    }
                    None => CollectiveError::Remote {
                        rank: f.src,
                        op: meta.name(),
                        seq: meta.seq,
                        reason,
                    },
                }
            }
        };
        // Passed on: a peer waiting on this rank alone learns the cause from it before this
        // rank's connection closes (the notice arrives before the end of the stream), rather
        // than seeing only the loss while the original notice is still in flight.
        return Some(error.into());
    }
    let fp = meta.fp;
    mailbox
        .scan(|f| fp.difference(&f.fp).map(|d| (f.src, d)))
        .map(|(src, d)| meta.mismatch(src, d).into())
}

impl<T: Element> StepProgram<T> {
    /// Sends `range` of the buffer to group member `peer`.
    fn send(
        &mut self,
        transport: &dyn Transport,
        peer: usize,
        range: Range<usize>,
    ) -> Result<(), Failure> {
        let dst = self.meta.group[peer];
        if let Err(e) = send_range(transport, &self.buf, &self.meta, peer, range) {
            if !transport.is_lost(dst) {
                return Err(e.into());
            }
            // A peer that failed (e.g. on a root mismatch) may have closed its connection right
            // after telling us why; its notice, delivered before it was marked lost, is the
            // cause to report.
            if let Some(f) = blocked_failure(&self.meta, &self.mailbox) {
                return Err(f);
            }
            return Err(self.meta.lost(dst).into());
        }
        Ok(())
    }

    /// Applies a received frame to `range`.
    fn apply(
        &mut self,
        frame: &Frame,
        range: Range<usize>,
        action: Action,
    ) -> Result<(), CollectiveError> {
        if let Some(d) = self.meta.fp.difference(&frame.fp) {
            return Err(self.meta.mismatch(frame.src, d));
        }
        let data = frame
            .payload
            .as_slice::<T>()
            .filter(|d| d.len() == range.len())
            .ok_or_else(|| {
                self.meta.mismatch(
                    frame.src,
                    format!(
                        "message size: expected {} elements, got {} bytes",
                        range.len(),
                        frame.payload.len_bytes()
                    ),
                )
            })?;
        match action {
            Action::Copy => crate::copy::copy_slice(self.buf.slice_mut(range), data),
            Action::Reduce => T::reduce_into(self.reduce, self.buf.slice_mut(range), data),
        }
        Ok(())
    }

    /// Posts the receive slots that became safe to fill at the current position (the step, and
    /// whether its send went out).
    fn post_ready(&mut self) {
        let Some(d) = self.direct.as_mut() else {
            return;
        };
        let start = d.next;
        let at = 2 * self.pc + usize::from(self.sent);
        while d.order.get(d.next).is_some_and(|&(pos, _)| pos <= at) {
            d.next += 1;
        }
        if d.next > start {
            self.mailbox
                .post(d.order[start..d.next].iter().map(|&(_, slot)| slot));
        }
    }

    /// The data of the current step's receive from world rank `src`.
    fn received(&self, src: usize) -> Received {
        match self.direct.as_ref().and_then(|d| d.slot_of_step[self.pc]) {
            Some(slot) => self.mailbox.take_received(slot, src),
            None => self.mailbox.pop_received(src),
        }
    }

    /// Why a blocked program cannot go on, if it can tell: a failure notice from a peer, a
    /// frame with a different fingerprint, or the awaited peer being dead.
    /// `check`: the mailbox held a notice or frames at the look that found nothing for this
    /// step (otherwise there is nothing to check there).
    fn check_blocked(
        &self,
        transport: &dyn Transport,
        peer: usize,
        check: bool,
    ) -> Result<Option<Frame>, Failure> {
        if check {
            if let Some(f) = blocked_failure(&self.meta, &self.mailbox) {
                return Err(f);
            }
        }
        if transport.is_lost(peer) {
            // Frames sent before the peer died are delivered before it is marked lost: its data,
            // or the notice of why it failed (which may have arrived since the check above).
            if let Some(f) = self.mailbox.pop(peer) {
                return Ok(Some(f));
            }
            if let Some(f) = blocked_failure(&self.meta, &self.mailbox) {
                return Err(f);
            }
            return Err(self.meta.lost(peer).into());
        }
        Ok(None)
    }
}

impl<T: Element> ActiveOp for StepProgram<T> {
    fn poll(&mut self, transport: &dyn Transport, budget: usize) -> Result<Poll, Failure> {
        let mut progressed = false;
        for _ in 0..budget.max(1) {
            self.post_ready();
            let Some(step) = self.steps.get(self.pc) else {
                return Ok(Poll::Done);
            };
            let step = step.clone();
            if !self.sent {
                if let Some((peer, range)) = step.send {
                    self.send(transport, peer, range)?;
                }
                self.sent = true;
                progressed = true;
                self.post_ready();
            }
            if let Some((peer, range, action)) = step.recv {
                let src = self.meta.group[peer];
                let frame = match self.received(src) {
                    Received::Direct => {
                        if let Some(d) = self.direct.as_mut() {
                            d.filled += 1;
                        }
                        None
                    }
                    Received::Frame(f) => Some(f),
                    Received::Pending { check } => {
                        match self.check_blocked(transport, src, check)? {
                            Some(f) => Some(f),
                            None => {
                                return Ok(if progressed {
                                    Poll::Progressed
                                } else {
                                    Poll::Blocked
                                })
                            }
                        }
                    }
                };
                if let Some(frame) = frame {
                    let r = self.apply(&frame, range, action);
                    transport.inbox().pool().give(frame.payload);
                    r?;
                }
            }
            self.pc += 1;
            self.sent = false;
            progressed = true;
        }
        Ok(if self.pc == self.steps.len() {
            Poll::Done
        } else {
            Poll::Progressed
        })
    }

    fn waiting_on(&self) -> Vec<usize> {
        match self.steps.get(self.pc).and_then(|s| s.recv.as_ref()) {
            Some((peer, _, _)) => vec![self.meta.group[*peer]],
            None => Vec::new(),
        }
    }

    fn counterparts(&self) -> Vec<usize> {
        let mut ranks: Vec<usize> = self
            .steps
            .iter()
            .flat_map(|s| {
                let sent = s.send.as_ref().map(|(peer, _)| *peer);
                let received = s.recv.as_ref().map(|(peer, _, _)| *peer);
                sent.into_iter().chain(received)
            })
            .map(|peer| self.meta.group[peer])
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    fn meta(&self) -> &OpMeta {
        &self.meta
    }

    /// The awaited frame of the current step, straight from the receive buffer: from the
    /// step's peer, for this collective, with this rank's fingerprint and the step's length,
    /// after the step's send, with no earlier frame of that peer queued in the mailbox (frames
    /// of one peer come in step order, so a queued one is this step's), and only without
    /// direct-receive slots. Anything else (a mismatch to report included) takes the ordinary
    /// path, which `poll` handles as before.
    #[cfg(feature = "mpi")]
    fn accept(&mut self, head: &Frame, data: &[u8]) -> bool {
        if self.direct.is_some() || !self.sent || head.kind != FrameKind::Data {
            return false;
        }
        let Some((peer, range, action)) = self.steps.get(self.pc).and_then(|s| s.recv.clone())
        else {
            return false;
        };
        if head.key != self.meta.key
            || head.src != self.meta.group[peer]
            || self.meta.fp.difference(&head.fp).is_some()
        {
            return false;
        }
        let Some(data) = crate::dtype::elements_of::<T>(data).filter(|d| d.len() == range.len())
        else {
            return false;
        };
        if self.mailbox.holds_frame_from(head.src) {
            return false;
        }
        match action {
            Action::Copy => crate::copy::copy_slice(self.buf.slice_mut(range), data),
            Action::Reduce => T::reduce_into(self.reduce, self.buf.slice_mut(range), data),
        }
        self.pc += 1;
        self.sent = false;
        true
    }

    fn finish(self: Box<Self>, result: Result<(), CollectiveError>, mut stats: OpStats) {
        let this = *self;
        stats.direct_receives = this.direct.as_ref().map_or(0, |d| d.filled);
        let out = result.map(|()| output_of(this.buf, this.output));
        // Always there: the engine gets its programs from `for_engine`.
        if let Some(completion) = this.completion {
            completion.complete(out, stats);
        }
    }
}

/// A collective refused on this rank before it could run (an argument only this rank can
/// check, like an out-of-range root): it fails at its first poll, and the engine tells every
/// peer (the failure notice carries this rank's fingerprint), so peers that started the
/// collective fail at once instead of waiting for `op_timeout`.
pub(crate) struct Refused<T: Element> {
    pub(crate) meta: OpMeta,
    pub(crate) error: Option<CollectiveError>,
    pub(crate) completion: Arc<Completion<T>>,
}

impl<T: Element> ActiveOp for Refused<T> {
    fn poll(&mut self, _: &dyn Transport, _: usize) -> Result<Poll, Failure> {
        let error = self.error.take().unwrap_or_else(|| {
            CollectiveError::InvalidInput(format!("{} refused on this rank", self.meta.kind))
        });
        Err(Failure {
            error,
            mismatch_for_peers: true,
        })
    }

    fn waiting_on(&self) -> Vec<usize> {
        Vec::new()
    }

    fn meta(&self) -> &OpMeta {
        &self.meta
    }

    fn finish(self: Box<Self>, result: Result<(), CollectiveError>, stats: OpStats) {
        self.completion.complete(result.map(|()| Vec::new()), stats);
    }
}
