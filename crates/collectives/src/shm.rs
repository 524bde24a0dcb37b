//! Zero-copy all-reduce for ranks that share one address space (the local transport).
//!
//! Every rank *publishes* its buffer in a per-collective [`Slot`]. Once all have, rank `r`
//! reduces chunk `r` (its `1/n` share) of all buffers straight from the peers' memory, in rank
//! order like the serial reference (in place in rank 0's buffer, piece by cache-sized piece),
//! and copies each reduced piece into chunk `r` of every other buffer with streaming stores.
//! Each rank reads `n` chunks and writes `n` chunks: every byte of every buffer is read once
//! and written once — one large `memcpy` worth of memory traffic — where the ring copies each
//! chunk into a message, out of it and back through the mailboxes `2(n - 1)` times. There is
//! no message at all; the only synchronisation is two counters.
//!
//! **Handshake.** Publishing *moves* the buffer into the slot, which owns it until the owner
//! takes it back; the owner does so only after every rank has announced that it finished its
//! chunk (`done == n`, release/acquire), so no peer touches the memory afterwards. The slot is
//! reference counted by every participant: a rank that fails, aborts or is preempted half-way
//! leaves its buffer in the slot, so a peer still reading or writing it never touches freed or
//! reused memory. While published, every access (the owner's included) goes through the raw
//! pointer, to disjoint chunk regions only.
//!
//! The state machine has three stages — publish, reduce own chunk (in pieces, so a poll stays
//! short), wait for all — and is preempted like any other collective while it waits, so
//! deadlock freedom, `Mismatch` (fingerprints are published with the buffers), `PeerLost` and
//! abort work as for the message-based algorithms.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};

use crate::dtype::Element;
use crate::frame::{Fingerprint, MailboxKey};
use crate::inbox::Inbox;

mod all_reduce;

pub(crate) use all_reduce::ShmAllReduce;

/// A [`Slot`] of some element type.
type AnySlot = Arc<dyn Any + Send + Sync>;

/// Slots of the collectives of one local world that use shared memory, and the engines to
/// wake when a slot changes.
#[derive(Debug)]
pub(crate) struct ShmRegistry {
    /// Per collective: the world rank that created the slot and the slot (type-erased).
    slots: Mutex<HashMap<MailboxKey, (usize, AnySlot)>>,
    inboxes: Vec<Arc<Inbox>>,
}

impl ShmRegistry {
    pub(crate) fn new(inboxes: Vec<Arc<Inbox>>) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            inboxes,
        }
    }

    /// The slot of collective `key` on `n` ranks, created by the first rank to ask; `Err` with
    /// the creator's world rank if that rank created it for another element type.
    fn slot<T: Element>(
        &self,
        key: MailboxKey,
        n: usize,
        me: usize,
    ) -> Result<Arc<Slot<T>>, usize> {
        let mut g = self.slots.lock().expect("shm registry poisoned");
        let (creator, any) = g
            .entry(key)
            .or_insert_with(|| (me, Arc::new(Slot::<T>::new(n))))
            .clone();
        drop(g);
        any.downcast::<Slot<T>>().map_err(|_| creator)
    }

    fn wake(&self, group: &[usize]) {
        group.iter().for_each(|&w| self.inboxes[w].wake());
    }
}

/// A published buffer: where it is and what its owner submitted.
struct Published<T> {
    ptr: RawBuf<T>,
    len: usize,
    fp: Fingerprint,
}

/// Raw pointer to a published buffer.
struct RawBuf<T>(*mut T);

// SAFETY: the pointer is only dereferenced for disjoint chunk regions while the slot owns the
// buffer (see the module docs); `T: Element` is plain `Send + Sync` data.
unsafe impl<T: Element> Send for RawBuf<T> {}
// SAFETY: as above — concurrent accesses through it touch disjoint regions.
unsafe impl<T: Element> Sync for RawBuf<T> {}

/// The rendezvous of one shared-memory all-reduce.
struct Slot<T> {
    published: Vec<OnceLock<Published<T>>>,
    ready: AtomicUsize,
    /// The published buffers, owned here until their owners take them back.
    owned: Mutex<Vec<Option<Vec<T>>>>,
    finished: Vec<AtomicBool>,
    done: AtomicUsize,
    left: AtomicUsize,
}

impl<T: Element> Slot<T> {
    fn new(n: usize) -> Self {
        Self {
            published: (0..n).map(|_| OnceLock::new()).collect(),
            ready: AtomicUsize::new(0),
            owned: Mutex::new((0..n).map(|_| None).collect()),
            finished: (0..n).map(|_| AtomicBool::new(false)).collect(),
            done: AtomicUsize::new(0),
            left: AtomicUsize::new(0),
        }
    }

    /// Pointer to rank `p`'s element `i`.
    ///
    /// # Safety
    /// `p` has published and `i` is within its buffer (or one past the end).
    unsafe fn at(&self, p: usize, i: usize) -> *mut T {
        let b = self.published[p].get().expect("published");
        debug_assert!(i <= b.len);
        // SAFETY: in bounds of the live buffer (caller).
        unsafe { b.ptr.0.add(i) }
    }
}

/// Copies `len` elements from `src` to `dst` with streaming (non-temporal) stores where the
/// CPU has them (x86-64): the destination lines are not read for ownership, so the copy costs
/// one read and one write per byte, like glibc's large `memcpy`. Callers must
/// [`store_fence`] before announcing the data.
///
/// # Safety
/// `src` readable and `dst` writable for `len` elements, not overlapping.
unsafe fn stream_copy<T>(dst: *mut T, src: *const T, len: usize) {
    let (dst, src, bytes) = (dst.cast::<u8>(), src.cast::<u8>(), len * size_of::<T>());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every access stays within `bytes` of `src`/`dst` (caller); SSE2 is part of
    // x86-64; the streamed stores are 16-byte aligned.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(16).min(bytes);
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 16 <= bytes {
            let v = _mm_loadu_si128(src.add(i).cast::<__m128i>());
            _mm_stream_si128(dst.add(i).cast::<__m128i>(), v);
            i += 16;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), bytes - i);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: as above.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, bytes)
    }
}

/// Orders earlier streaming stores before later stores (x86-64 `sfence`).
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions (SSE is part of x86-64).
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}
