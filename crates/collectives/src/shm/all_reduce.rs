//! The per-rank state machine of the shared-memory all-reduce: publish, reduce the own chunk
//! piece by piece, wait until every rank is done, take the buffer back.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{store_fence, stream_copy, Published, RawBuf, ShmRegistry, Slot};
use crate::completion::{Completion, OpStats};
use crate::dtype::{Element, ReduceOp};
use crate::inbox::Mailbox;
use crate::program::{blocked_failure, ActiveOp, Failure, OpMeta, Poll};
use crate::schedule::part;
use crate::transport::Transport;
use crate::CollectiveError;

/// Bytes reduced per piece (the accumulated piece stays in L1/L2 while it is copied out).
const PIECE_BYTES: usize = 32 << 10;
/// Pieces per poll step (a poll of budget `b` handles `b * PIECES_PER_STEP` pieces).
const PIECES_PER_STEP: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Publish,
    /// Reducing the own chunk; elements before `next` (relative to the chunk) are done.
    Reduce {
        next: usize,
    },
    /// Waiting until every rank finished its chunk.
    Drain,
    Done,
}

/// The shared-memory all-reduce program of one rank.
pub(crate) struct ShmAllReduce<T: Element> {
    meta: OpMeta,
    /// This rank in the communicator.
    rank: usize,
    reduce: ReduceOp,
    registry: Arc<ShmRegistry>,
    stage: Stage,
    buf: Vec<T>,
    slot: Option<Arc<Slot<T>>>,
    mailbox: Arc<Mailbox>,
    completion: Arc<Completion<T>>,
}

impl<T: Element> ShmAllReduce<T> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        meta: OpMeta,
        rank: usize,
        reduce: ReduceOp,
        registry: Arc<ShmRegistry>,
        buf: Vec<T>,
        mailbox: Arc<Mailbox>,
        completion: Arc<Completion<T>>,
    ) -> Self {
        Self {
            meta,
            rank,
            reduce,
            registry,
            stage: Stage::Publish,
            buf,
            slot: None,
            mailbox,
            completion,
        }
    }

    fn n(&self) -> usize {
        self.meta.group.len()
    }

    fn publish(&mut self) -> Result<(), CollectiveError> {
        let me = self.meta.group[self.rank];
        let slot = self
            .registry
            .slot::<T>(self.meta.key, self.n(), me)
            .map_err(|creator| {
                self.meta.mismatch(
                    creator,
                    format!("dtype: here {}, peer another type", T::DTYPE),
                )
            })?;
        let len = self.buf.len();
        let ptr = RawBuf(self.buf.as_mut_ptr());
        // Moving the vector does not move its heap buffer: `ptr` stays valid while the slot
        // owns it.
        slot.owned.lock().expect("shm slot poisoned")[self.rank] =
            Some(std::mem::take(&mut self.buf));
        let fp = self.meta.fp;
        if slot.published[self.rank]
            .set(Published { ptr, len, fp })
            .is_err()
        {
            return Err(CollectiveError::InvalidInput(
                "shared-memory slot published twice".into(),
            ));
        }
        slot.ready.fetch_add(1, Ordering::AcqRel);
        self.registry.wake(&self.meta.group);
        self.slot = Some(slot);
        Ok(())
    }

    /// Once all have published: checks that everybody submitted the same collective.
    fn check_peers(&self, slot: &Slot<T>) -> Result<(), CollectiveError> {
        for (p, b) in slot.published.iter().enumerate() {
            let b = b.get().expect("all published");
            if let Some(d) = self.meta.fp.difference(&b.fp) {
                return Err(self.meta.mismatch(self.meta.group[p], d));
            }
        }
        Ok(())
    }

    /// Reduces up to `pieces` pieces of the own chunk; returns whether the chunk is done.
    fn reduce_pieces(&mut self, slot: &Slot<T>, next: &mut usize, pieces: usize) -> bool {
        let n = self.n();
        let count = slot.published[self.rank].get().expect("published").len;
        let chunk = part(count, n, self.rank);
        let piece = (PIECE_BYTES / size_of::<T>().max(1)).max(1);
        for _ in 0..pieces {
            let start = chunk.start + *next;
            let end = (start + piece).min(chunk.end);
            if start >= end {
                break;
            }
            let len = end - start;
            // SAFETY: all ranks published (checked by the caller); chunk `self.rank` of every
            // buffer is read and written by this rank only until it announces `finished`, and
            // the buffers are distinct allocations. The piece is reduced in place in rank 0's
            // buffer (in rank order, like the serial fold) and streamed to the others.
            unsafe {
                let acc = std::slice::from_raw_parts_mut(slot.at(0, start), len);
                for p in 1..n {
                    let src = std::slice::from_raw_parts(slot.at(p, start), len);
                    T::reduce_into(self.reduce, acc, src);
                }
                for p in 1..n {
                    stream_copy(slot.at(p, start), acc.as_ptr(), len);
                }
            }
            *next = end - chunk.start;
        }
        // Streamed stores must be visible before `finished` is, and before another thread
        // resumes this program.
        store_fence();
        chunk.start + *next >= chunk.end
    }

    /// Ranks of the communicator (world numbering) the current stage waits for.
    fn waiting(&self) -> Vec<usize> {
        let Some(slot) = &self.slot else {
            return Vec::new();
        };
        let pending = |p: usize| match self.stage {
            Stage::Reduce { .. } => slot.published[p].get().is_none(),
            Stage::Drain => !slot.finished[p].load(Ordering::Acquire),
            _ => false,
        };
        (0..self.n())
            .filter(|&p| pending(p))
            .map(|p| self.meta.group[p])
            .collect()
    }

    fn blocked(&self, transport: &dyn Transport, progressed: bool) -> Result<Poll, Failure> {
        if progressed {
            return Ok(Poll::Progressed);
        }
        if let Some(f) = blocked_failure(&self.meta, &self.mailbox) {
            return Err(f);
        }
        if let Some(&r) = self.waiting().iter().find(|&&r| transport.is_lost(r)) {
            return Err(self.meta.lost(r).into());
        }
        Ok(Poll::Blocked)
    }
}

impl<T: Element> ActiveOp for ShmAllReduce<T> {
    fn poll(&mut self, transport: &dyn Transport, budget: usize) -> Result<Poll, Failure> {
        let mut progressed = false;
        loop {
            match self.stage {
                Stage::Publish => {
                    self.publish()?;
                    self.stage = Stage::Reduce { next: 0 };
                    progressed = true;
                }
                Stage::Reduce { mut next } => {
                    let slot = self.slot.clone().expect("published");
                    if slot.ready.load(Ordering::Acquire) < self.n() {
                        return self.blocked(transport, progressed);
                    }
                    if next == 0 {
                        self.check_peers(&slot)?;
                    }
                    let finished =
                        self.reduce_pieces(&slot, &mut next, budget.max(1) * PIECES_PER_STEP);
                    progressed = true;
                    self.stage = Stage::Reduce { next };
                    if !finished {
                        return Ok(Poll::Progressed);
                    }
                    slot.finished[self.rank].store(true, Ordering::Release);
                    slot.done.fetch_add(1, Ordering::AcqRel);
                    self.registry.wake(&self.meta.group);
                    self.stage = Stage::Drain;
                }
                Stage::Drain => {
                    let slot = self.slot.clone().expect("published");
                    if slot.done.load(Ordering::Acquire) < self.n() {
                        return self.blocked(transport, progressed);
                    }
                    let mine = slot.owned.lock().expect("shm slot poisoned")[self.rank].take();
                    self.buf = mine.expect("own buffer in the slot");
                    self.stage = Stage::Done;
                }
                Stage::Done => return Ok(Poll::Done),
            }
        }
    }

    fn waiting_on(&self) -> Vec<usize> {
        self.waiting()
    }

    fn meta(&self) -> &OpMeta {
        &self.meta
    }

    fn finish(mut self: Box<Self>, result: Result<(), CollectiveError>, stats: OpStats) {
        let out = result.map(|()| std::mem::take(&mut self.buf));
        self.completion.complete(out, stats);
    }
}

impl<T: Element> Drop for ShmAllReduce<T> {
    fn drop(&mut self) {
        // The last rank to leave removes the slot from the registry; buffers of ranks that
        // failed stay alive until the last reference to the slot is gone.
        if let Some(slot) = self.slot.take() {
            if slot.left.fetch_add(1, Ordering::AcqRel) + 1 == self.n() {
                self.registry
                    .slots
                    .lock()
                    .expect("shm registry poisoned")
                    .remove(&self.meta.key);
            }
        }
    }
}
