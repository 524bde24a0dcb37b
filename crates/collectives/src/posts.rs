//! The receive slots a collective posts for direct receive (see [`crate::direct`]): one
//! [`Slot`] per receive step, the collective's [`Posts`] registered in its mailbox, and the
//! [`Target`] a transport's reader claims and fills. Below both the mailboxes (`inbox`), which
//! hold the posts, and the working buffers (`direct`), which register them.

use crate::dtype::{Element, ReduceOp};
use crate::frame::Fingerprint;
use crate::schedule::Action;

/// Reduces `src` (bytes of whole elements, 8-byte aligned) into the elements at `dst`.
pub(crate) type ReduceBytes = unsafe fn(ReduceOp, *mut u8, &[u8]);

/// [`ReduceBytes`] for element type `T`.
///
/// # Safety
/// `dst` points to `src.len() / size_of::<T>()` initialised elements of `T` that nothing else
/// accesses during the call; `src` is aligned for `T` and its length a multiple of its size.
pub(crate) unsafe fn reduce_bytes<T: Element>(op: ReduceOp, dst: *mut u8, src: &[u8]) {
    let n = src.len() / std::mem::size_of::<T>();
    // SAFETY: the caller's contract; `T` is plain old data (sealed `Element`), so any bytes
    // read from the wire are valid elements.
    let (dst, src) = unsafe {
        (
            std::slice::from_raw_parts_mut(dst.cast::<T>(), n),
            std::slice::from_raw_parts(src.as_ptr().cast::<T>(), n),
        )
    };
    T::reduce_into(op, dst, src);
}

/// Where a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Not posted: its frame takes the ordinary path.
    Waiting,
    /// Posted: the reader may claim it.
    Posted,
    /// A reader is writing into its region.
    InFlight,
    /// Its data is in the buffer.
    Done,
    /// The reader failed in the middle of it (the connection broke): its region is garbage.
    Broken,
}

/// One receive step: a region of the working buffer.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: usize,
    pub(crate) action: Action,
    pub(crate) state: SlotState,
}

/// The receive slots of one collective, registered in its mailbox.
#[derive(Debug)]
pub(crate) struct Posts {
    pub(crate) fp: Fingerprint,
    pub(crate) op: ReduceOp,
    pub(crate) reduce: ReduceBytes,
    pub(crate) slots: Vec<Slot>,
    /// Per sender (world rank), its slot indices in step order.
    pub(crate) by_src: Vec<(usize, Vec<usize>)>,
}

// SAFETY: the raw pointers of the slots point into a `WorkBuf` that outlives every posted slot
// (see the `direct` module docs); they are only dereferenced by the thread that moved the slot to
// `InFlight`, under the protocol of the mailbox's lock.
unsafe impl Send for Posts {}

impl Posts {
    /// The slot the `m`-th data frame from `src` belongs to, if a receive step exists for it.
    pub(crate) fn slot_for(&self, src: usize, m: usize) -> Option<usize> {
        self.by_src
            .iter()
            .find(|(s, _)| *s == src)
            .and_then(|(_, v)| v.get(m).copied())
    }

    /// Claims slot `i` for a frame with fingerprint `fp` and `len` payload bytes, if it is
    /// posted and the frame fits it exactly.
    pub(crate) fn claim(&mut self, i: usize, fp: &Fingerprint, len: usize) -> Option<Target> {
        let (own_fp, op, reduce) = (self.fp, self.op, self.reduce);
        let s = &mut self.slots[i];
        if s.state != SlotState::Posted || *fp != own_fp || len != s.bytes {
            return None;
        }
        s.state = SlotState::InFlight;
        Some(Target {
            slot: i,
            ptr: s.ptr,
            bytes: s.bytes,
            action: s.action,
            op,
            reduce,
        })
    }
}

/// A claimed slot, handed to the reader thread.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) slot: usize,
    ptr: *mut u8,
    bytes: usize,
    action: Action,
    op: ReduceOp,
    reduce: ReduceBytes,
}

// SAFETY: see `Posts`: the region stays allocated while the slot is `InFlight`, and only the
// thread holding the `Target` writes it.
unsafe impl Send for Target {}

/// Bytes of the scratch through which a TCP reader reduces incoming data (stays in L2).
pub(crate) const SCRATCH_BYTES: usize = 64 << 10;

impl Target {
    /// Fills the slot's region with its payload: `read(buf)` must fill `buf` with the next
    /// `buf.len()` payload bytes. A copying step reads straight into the region; a reducing
    /// step reads through `scratch` (8-byte aligned) in pieces of its size and reduces each in.
    pub(crate) fn receive(
        &self,
        mut read: impl FnMut(&mut [u8]) -> std::io::Result<()>,
        scratch: &mut [u64],
    ) -> std::io::Result<()> {
        match self.action {
            Action::Copy => {
                // SAFETY: the slot is `InFlight` and owned by this thread: its `bytes` bytes at
                // `ptr` are allocated, initialised and accessed by nobody else until it is
                // completed; any bytes are valid elements (plain old data).
                let region = unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) };
                read(region)
            }
            Action::Reduce => {
                // SAFETY: the words are initialised u64s viewed as bytes (alignment 1).
                let scratch = unsafe {
                    std::slice::from_raw_parts_mut(
                        scratch.as_mut_ptr().cast::<u8>(),
                        std::mem::size_of_val(scratch),
                    )
                };
                assert!(!scratch.is_empty(), "empty reduce scratch");
                let mut done = 0;
                while done < self.bytes {
                    let n = (self.bytes - done).min(scratch.len());
                    read(&mut scratch[..n])?;
                    // SAFETY: as above for the region; `n` and `done` are multiples of the
                    // element size (the scratch length is a multiple of 8 and `bytes` of the
                    // element size) and the scratch is 8-byte aligned.
                    unsafe { (self.reduce)(self.op, self.ptr.add(done), &scratch[..n]) };
                    done += n;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::dtype::Element;

    /// A target over `region` (the test keeps it alive and otherwise untouched meanwhile).
    fn target(region: &mut [i32], action: Action, op: ReduceOp) -> Target {
        Target {
            slot: 0,
            ptr: region.as_mut_ptr().cast(),
            bytes: std::mem::size_of_val(region),
            action,
            op,
            reduce: reduce_bytes::<i32>,
        }
    }

    /// A slot is claimed only while posted, by a frame of its collective's fingerprint and
    /// exactly its length.
    #[test]
    fn claims_need_a_posted_slot_the_fingerprint_and_the_length() {
        let mut region = [0i32; 4];
        let fp = Fingerprint {
            kind: 1,
            dtype: 2,
            reduce: 1,
            algo: 3,
            root: 0,
            count: 4,
        };
        let mut posts = Posts {
            fp,
            op: ReduceOp::Sum,
            reduce: reduce_bytes::<i32>,
            slots: vec![Slot {
                ptr: region.as_mut_ptr().cast(),
                bytes: 16,
                action: Action::Reduce,
                state: SlotState::Waiting,
            }],
            by_src: vec![(1, vec![0])],
        };
        assert!(
            posts.claim(0, &fp, 16).is_none(),
            "claimed while not posted"
        );
        posts.slots[0].state = SlotState::Posted;
        assert!(
            posts.claim(0, &fp, 12).is_none(),
            "claimed with a wrong length"
        );
        let other = Fingerprint { count: 5, ..fp };
        assert!(
            posts.claim(0, &other, 16).is_none(),
            "claimed with another fingerprint"
        );
        let t = posts
            .claim(0, &fp, 16)
            .expect("a posted slot of the right size");
        assert_eq!(t.slot, 0);
        assert_eq!(posts.slots[0].state, SlotState::InFlight);
        assert!(posts.claim(0, &fp, 16).is_none(), "claimed twice");
    }

    proptest! {
        /// `receive` (copy straight into the region, or reduce in through a scratch smaller
        /// than the payload) against the serial reference, the reader's bytes taken exactly.
        #[test]
        fn receive_matches_the_reference(
            pairs in prop::collection::vec((any::<i32>(), any::<i32>()), 1..300),
            reduce in any::<bool>(),
            offset in 0usize..2,
            op_code in 1u8..=4,
        ) {
            let op = match op_code {
                1 => ReduceOp::Sum,
                2 => ReduceOp::Prod,
                3 => ReduceOp::Min,
                _ => ReduceOp::Max,
            };
            let (mut region, incoming): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
            let before = region.clone();
            // The payload at a byte offset of 4 (`offset` 1) is not 8-byte aligned.
            let mut words = vec![0u64; incoming.len() / 2 + 2];
            // SAFETY: the words are initialised u64s viewed as bytes (alignment 1).
            let bytes: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8)
            };
            let at = 4 * offset;
            for (k, v) in incoming.iter().enumerate() {
                bytes[at + 4 * k..at + 4 * k + 4].copy_from_slice(&v.to_ne_bytes());
            }
            let data = &bytes[at..at + 4 * incoming.len()];
            let action = if reduce { Action::Reduce } else { Action::Copy };
            let mut scratch = vec![0u64; 3];
            let t = target(&mut region, action, op);
            let mut read_at = 0;
            let r = t.receive(
                |buf| {
                    buf.copy_from_slice(&data[read_at..read_at + buf.len()]);
                    read_at += buf.len();
                    Ok(())
                },
                &mut scratch,
            );
            prop_assert!(r.is_ok());
            prop_assert_eq!(read_at, data.len());
            let want: Vec<i32> = if reduce {
                before.iter().zip(&incoming).map(|(&a, &b)| i32::combine(op, a, b)).collect()
            } else {
                incoming.clone()
            };
            prop_assert_eq!(region, want);
        }
    }
}
