//! Transports move frames between ranks and report lost peers.
//!
//! A transport only delivers: frames go into the destination rank's inbox, whose
//! per-collective mailboxes the progress engine reads.

pub(crate) mod local;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod tcp;

use std::fmt::Debug;
use std::sync::Arc;

use crate::frame::Frame;
use crate::inbox::Inbox;
use crate::shm::ShmRegistry;
use crate::Result;

/// What the engine needs from a transport.
pub(crate) trait Transport: Send + Sync + Debug {
    /// This rank in the world.
    fn world_rank(&self) -> usize;
    /// Number of ranks in the world.
    fn world_size(&self) -> usize;
    /// Delivers `frame` to world rank `dst` (never to self).
    fn send(&self, dst: usize, frame: Frame) -> Result<()>;
    /// Delivers `head` with `data` as its payload to world rank `dst` (never to self). When it
    /// returns the transport is done with `data` (copied or written out): the caller may
    /// overwrite it at once, which direct receive relies on ([`crate::direct::ready_steps`]).
    /// The default copies `data` into a pooled buffer and calls [`send`](Self::send); a
    /// transport that can write straight from `data` overrides it.
    fn send_slice(&self, dst: usize, head: Frame, data: &[u8]) -> Result<()> {
        send_copied(self, dst, head, data)
    }
    /// Whether the transport fills posted receive slots directly ([`crate::direct`]).
    fn direct_receive(&self) -> bool {
        false
    }
    /// Whether a frame of `bytes` payload bytes goes out without waiting for its destination
    /// ([`send_slice`](Self::send_slice) returns at once, whatever the peer does): then a
    /// collective may send its first frame when it is submitted
    /// ([`send_first`](crate::program::send_first)). Default: false.
    fn sends_at_once(&self, _bytes: usize) -> bool {
        false
    }
    /// Whether world rank `rank` is known to be dead.
    fn is_lost(&self, rank: usize) -> bool;
    /// Declares this rank dead (its thread is panicking): peers must stop waiting for it.
    fn mark_self_lost(&self);
    /// This rank's mailboxes.
    fn inbox(&self) -> &Arc<Inbox>;
    /// Called by the thread running this rank's rounds after a round that made no progress: a
    /// transport that can move incoming messages into the inbox from this thread does so here
    /// (saving a hand-off between threads). Never blocks.
    fn progress(&self) {}
    /// Like [`progress`](Self::progress), for a waiter busy-polling between rounds: takes at
    /// most one message (the waiter runs a round as soon as one came). Default: `progress`.
    fn progress_one(&self) {
        self.progress();
    }
    /// Like [`progress_one`](Self::progress_one), from the thread running `op` inline: a
    /// message that `op` [accepts](crate::program::ActiveOp::accept) is applied to it from the
    /// receive buffer instead of going through its mailbox. Returns whether `op` took one.
    /// Default: `progress_one`, and never.
    fn progress_one_into(&self, _op: &mut dyn crate::program::ActiveOp) -> bool {
        self.progress_one();
        false
    }
    /// Called by the engine thread when this rank has no operation left (before it naps):
    /// releases what finished sends still hold (buffers, requests), which the send path
    /// releases only in batches. Never blocks. Default: nothing.
    fn reap_idle(&self) {}
    /// Sends whose buffers the transport still holds (see [`reap_idle`](Self::reap_idle)).
    /// Default: none.
    fn pending_sends(&self) -> usize {
        0
    }
    /// Whether [`progress`](Self::progress) takes incoming messages itself, so that a waiter
    /// polling it makes progress without another thread of this rank running (MPI). Only then
    /// does a waiter busy-poll ([`Config::busy_poll`](crate::Config::busy_poll)).
    fn receives_in_progress(&self) -> bool {
        false
    }
    /// The shared-memory rendezvous when all ranks share this address space (local transport).
    fn shared_memory(&self) -> Option<&Arc<ShmRegistry>> {
        None
    }
    /// [`Config::halving_doubling_bytes`](crate::Config::halving_doubling_bytes) where the
    /// config leaves it to the transport: 0, no halving-doubling beyond the small messages.
    fn halving_doubling_bytes(&self) -> usize {
        0
    }
}

/// [`Transport::send_slice`] by copy: `data` into a pooled buffer, then [`Transport::send`].
pub(crate) fn send_copied<T: Transport + ?Sized>(
    t: &T,
    dst: usize,
    mut head: Frame,
    data: &[u8],
) -> Result<()> {
    let mut payload = t.inbox().pool().take(data.len());
    crate::copy::copy_slice(payload.as_bytes_mut(), data);
    head.payload = payload;
    t.send(dst, head)
}
