//! Direct receive: a transport's reader thread (TCP; not MPI, where it measured no faster at
//! any size and slower from 128 KiB: benches/README.md) places a collective's incoming data
//! straight into the collective's working buffer — copying it in, or reducing it in through a
//! small cache-resident scratch — instead of into a pooled message buffer that the progress
//! engine later copies or reduces from.
//!
//! Not on the local transport: there the sending thread would do the receiver's copy or
//! reduction itself, straight between the two buffers; tried, that was slower than staging (the
//! receiver waits while the sender works on its buffer: benches/README.md, collectives,
//! "Measurements behind code defaults"),
//! so threads keep the staged path (and the shared-memory all-reduce from 4 MiB).
//!
//! On one host a TCP all-reduce is CPU-bound: every byte is copied by the kernel on the way in
//! and out, and the staging buffer added a third pass over memory (the all-gather's copy, the
//! reduce-scatter's read of the payload). Direct receive removes that pass.
//!
//! **Posts.** A collective registers one slot per receive step of its schedule ([`Posts`], in
//! [`crate::posts`]) and
//! *posts* a slot once no earlier step can still touch its region ([`ready_steps`]): every
//! earlier receive into an overlapping region has completed, and every send of one (its own
//! step's included) has gone out — as soon as the send went out, not when its step's receive
//! completes, so that a peer that answers quickly finds the slot posted. Until then, and
//! whenever a frame arrives before its slot is posted, the frame takes the ordinary path (a
//! pooled buffer in the mailbox), so posting is an optimisation that never changes the result.
//! Frames of one collective from one sender arrive in the sender's step order (one connection
//! per sender and receiver), so the `m`-th data frame from `src` belongs to
//! the `m`-th receive step from `src`.
//!
//! **Ownership.** A posted slot holds a raw pointer into the collective's [`WorkBuf`]; the
//! buffer is never moved or freed while a slot is posted: dropping it first withdraws every post,
//! and if the reader is in the middle of writing one (possible only when the collective fails),
//! the buffer's memory is leaked rather than freed under the writer.

use std::mem::ManuallyDrop;
use std::ops::Range;
use std::sync::Arc;

use crate::dtype::{Element, ReduceOp};
use crate::frame::Fingerprint;
use crate::inbox::Mailbox;
use crate::posts::{reduce_bytes, Posts, Slot, SlotState};
use crate::schedule::Step;

/// Longest schedule whose receives are posted: [`ready_steps`] compares every receive with the
/// steps before it (quadratic: up to ~8 million range comparisons at this length); longer
/// schedules (a ring over many GiB in 1 MiB pieces, or tiny configured pieces) take the staged
/// path.
pub(crate) const MAX_POSTED_STEPS: usize = 4096;

/// For each receive step of `steps` (in order): the position from which its slot may be
/// posted, in half-steps (`2 k` before step `k` runs, `2 k + 1` once step `k`'s send went out) —
/// just past the last earlier access to an overlapping region: past that step's send when only
/// its send touches the region (a transport is done with a region when
/// [`send_slice`](crate::transport::Transport::send_slice) returns), past the whole step when it
/// receives into it; its own step's overlapping send counts too. `None` when the schedule is
/// longer than [`MAX_POSTED_STEPS`] or the region is empty (never posted).
pub(crate) fn ready_steps(steps: &[Step]) -> Vec<(usize, Option<usize>)> {
    let overlaps = |a: &Range<usize>, b: &Range<usize>| a.start < b.end && b.start < a.end;
    let sends = |st: &Step, r: &Range<usize>| st.send.as_ref().is_some_and(|(_, s)| overlaps(s, r));
    let too_long = steps.len() > MAX_POSTED_STEPS;
    let mut out = Vec::new();
    for (j, step) in steps.iter().enumerate() {
        let Some((_, r, _)) = &step.recv else {
            continue;
        };
        if r.is_empty() || too_long {
            out.push((j, None));
            continue;
        }
        if sends(step, r) {
            out.push((j, Some(2 * j + 1)));
            continue;
        }
        let last = steps[..j].iter().enumerate().rev().find_map(|(k, st)| {
            if st.recv.as_ref().is_some_and(|(_, q, _)| overlaps(q, r)) {
                Some(2 * k + 2)
            } else {
                sends(st, r).then_some(2 * k + 1)
            }
        });
        out.push((j, Some(last.unwrap_or(0))));
    }
    out
}

/// The working buffer of a step program: a `Vec` taken apart so that regions of it can be
/// written by a reader thread (through posted slots) while the program works on other regions.
/// Every access goes through the one base pointer.
pub(crate) struct WorkBuf<T> {
    vec: ManuallyDrop<Vec<T>>,
    base: *mut T,
    /// The mailbox holding this buffer's posts, once registered.
    posts: Option<Arc<Mailbox>>,
}

// SAFETY: `WorkBuf` owns its elements like the `Vec` it came from (`T: Send`); the pointers
// shared with a reader thread are governed by the posting protocol (module docs).
unsafe impl<T: Send> Send for WorkBuf<T> {}

impl<T: Element> WorkBuf<T> {
    pub(crate) fn new(mut vec: Vec<T>) -> Self {
        let base = vec.as_mut_ptr();
        Self {
            vec: ManuallyDrop::new(vec),
            base,
            posts: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.vec.len()
    }

    /// Elements `r` (in bounds).
    pub(crate) fn slice(&self, r: Range<usize>) -> &[T] {
        assert!(
            r.start <= r.end && r.end <= self.len(),
            "region out of bounds"
        );
        // SAFETY: in bounds of the live allocation; no posted slot overlaps a region the
        // program reads (a slot is posted only when no step up to its own reads its region).
        unsafe { std::slice::from_raw_parts(self.base.add(r.start), r.len()) }
    }

    /// Elements `r` (in bounds), mutably.
    pub(crate) fn slice_mut(&mut self, r: Range<usize>) -> &mut [T] {
        assert!(
            r.start <= r.end && r.end <= self.len(),
            "region out of bounds"
        );
        // SAFETY: as in `slice`: posted slots never overlap the region of the current step.
        unsafe { std::slice::from_raw_parts_mut(self.base.add(r.start), r.len()) }
    }

    /// Registers one slot per receive step of `steps` in `mailbox` (all `Waiting`).
    pub(crate) fn register(
        &mut self,
        mailbox: &Arc<Mailbox>,
        steps: &[Step],
        group: &[usize],
        fp: Fingerprint,
        op: ReduceOp,
    ) {
        let size = std::mem::size_of::<T>();
        let mut by_src: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut slots = Vec::new();
        for (peer, r, action) in steps.iter().filter_map(|s| s.recv.as_ref()) {
            assert!(r.end <= self.len(), "receive region out of bounds");
            let src = group[*peer];
            let i = slots.len();
            match by_src.iter_mut().find(|(s, _)| *s == src) {
                Some((_, v)) => v.push(i),
                None => by_src.push((src, vec![i])),
            }
            slots.push(Slot {
                // SAFETY: `r.start <= len`: in bounds of the allocation.
                ptr: unsafe { self.base.add(r.start) }.cast::<u8>(),
                bytes: r.len() * size,
                action: *action,
                state: SlotState::Waiting,
            });
        }
        mailbox.register_posts(Posts {
            fp,
            op,
            reduce: reduce_bytes::<T>,
            slots,
            by_src,
        });
        self.posts = Some(mailbox.clone());
    }

    /// The vector back (posts withdrawn). Empty if a reader was still writing into it (only
    /// after a failure): its memory is then leaked, not freed under the writer.
    pub(crate) fn into_vec(mut self) -> Vec<T> {
        if !self.withdraw() {
            self.vec = ManuallyDrop::new(Vec::new());
            return Vec::new();
        }
        // SAFETY: the vector is taken out exactly once; `Drop` then sees an empty one.
        let v = unsafe { ManuallyDrop::take(&mut self.vec) };
        self.vec = ManuallyDrop::new(Vec::new());
        v
    }
}

impl<T> WorkBuf<T> {
    /// Withdraws every post; returns whether the buffer can be freed (no reader is writing).
    fn withdraw(&mut self) -> bool {
        self.posts.take().is_none_or(|m| m.withdraw_posts())
    }
}

impl<T> Drop for WorkBuf<T> {
    fn drop(&mut self) {
        if self.withdraw() {
            // SAFETY: dropped exactly once, here; no reader can touch it any more.
            unsafe { ManuallyDrop::drop(&mut self.vec) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Action;

    #[test]
    fn ready_steps_of_a_ring() {
        // Two ranks, ring all-reduce of 4 elements: step 0 sends [2,4) and reduces into
        // [0,2); step 1 sends [0,2) and copies into [2,4), which step 0 sent: posted as soon as
        // step 0's send went out (half-step 1), before step 0's receive completes.
        let steps = crate::schedule::ring_all_reduce(2, 0, 4);
        assert_eq!(steps.len(), 2);
        assert_eq!(ready_steps(&steps), vec![(0, Some(0)), (1, Some(1))]);
        // A swap of one region with itself: posted once its own send went out.
        let swap = vec![Step::swap(1, 0..4, 0..4, Action::Copy)];
        assert_eq!(ready_steps(&swap), vec![(0, Some(1))]);
        // Later receives wait for the earlier steps that touch their region only: past a send,
        // or past a whole step that receives into it.
        let steps = vec![
            Step::send(1, 0..2),
            Step::recv(1, 4..6, Action::Copy),
            Step::recv(1, 1..3, Action::Reduce),
            Step::recv(1, 5..8, Action::Copy),
            Step::exchange(1, 8..9, 1, 2..3, Action::Copy),
            Step::recv(1, 8..10, Action::Copy),
        ];
        assert_eq!(
            ready_steps(&steps),
            vec![
                (1, Some(0)),
                (2, Some(1)),
                (3, Some(4)),
                (4, Some(6)),
                (5, Some(9))
            ]
        );
        assert_eq!(
            ready_steps(&[Step::recv(1, 3..3, Action::Copy)]),
            vec![(0, None)]
        );
        let long = vec![Step::recv(1, 0..1, Action::Copy); MAX_POSTED_STEPS + 1];
        assert!(ready_steps(&long).iter().all(|&(_, r)| r.is_none()));
    }

    /// A receive whose slot is not posted keeps its place, so the `m`-th frame from a sender
    /// still maps to its `m`-th receive step: here the first frame (its slot not posted) takes
    /// the mailbox path and the second lands in the second step's slot.
    #[test]
    fn unposted_receives_keep_the_frame_to_step_mapping() {
        use crate::dtype::AlignedBuf;
        use crate::frame::{Frame, FrameKind, MailboxKey};
        use crate::inbox::{Inbox, Route};

        let steps = vec![
            Step::recv(1, 0..2, Action::Copy),
            Step::recv(1, 2..10, Action::Copy),
        ];
        let fp = Fingerprint {
            kind: 0,
            dtype: 0,
            reduce: 0,
            algo: 0,
            root: 0,
            count: 10,
        };
        let key = MailboxKey { comm: 1, seq: 0 };
        let inbox = Inbox::default();
        let mailbox = inbox.open(key);
        let mut buf = WorkBuf::new(vec![0.0f32; 10]);
        buf.register(&mailbox, &steps, &[0, 1], fp, ReduceOp::Sum);
        mailbox.post([1]);
        let head = Frame {
            kind: FrameKind::Data,
            src: 1,
            key,
            fp,
            aux: 0,
            payload: AlignedBuf::default(),
        };
        assert!(matches!(inbox.route(&head, 8), Route::Queue(Some(_))));
        match inbox.route(&head, 32) {
            Route::Slot(m, target) => {
                assert_eq!(target.slot, 1);
                m.complete(target.slot, true);
            }
            Route::Queue(_) => panic!("the second frame missed the posted second slot"),
        }
    }
}
