//! Blocking forms of the collectives: start, then wait (the calling thread drives this rank's
//! engine while it waits, see [`Handle::wait`]).

use std::cell::Cell;

use super::Communicator;
use crate::dtype::{Element, ReduceOp};
use crate::handle::Handle;
use crate::Result;

thread_local! {
    /// Set while a blocking call on this thread starts its collective: a step program submitted
    /// then may be handed back unsubmitted, for the call to run inline first
    /// ([`Handle::deferred`]).
    static STARTING_BLOCKING: Cell<bool> = const { Cell::new(false) };
}

/// Whether the collective being submitted on this thread belongs to a blocking call.
pub(super) fn starting_blocking() -> bool {
    STARTING_BLOCKING.with(Cell::get)
}

/// Marks the start of a blocking call's collective on this thread while it lives (restoring
/// the mark it found, also when unwinding).
struct StartingBlocking {
    before: bool,
}

impl StartingBlocking {
    fn enter() -> Self {
        Self {
            before: STARTING_BLOCKING.with(|s| s.replace(true)),
        }
    }
}

impl Drop for StartingBlocking {
    fn drop(&mut self) {
        STARTING_BLOCKING.with(|s| s.set(self.before));
    }
}

impl Communicator {
    /// Starts an operation and waits for it, registered as the engine's driver from before the
    /// submission (so that submitting does not wake the engine thread).
    fn blocking<T: Element>(&self, start: impl FnOnce() -> Result<Handle<T>>) -> Result<Vec<T>> {
        let driving = self.inner.engine.driving();
        let handle = {
            let _starting = StartingBlocking::enter();
            start()?
        };
        handle.wait_driving(driving)
    }

    /// Blocking [`iall_reduce`](Self::iall_reduce).
    pub fn all_reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.blocking(|| self.iall_reduce(data, op))
    }

    /// Blocking [`ireduce_scatter`](Self::ireduce_scatter).
    pub fn reduce_scatter<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.blocking(|| self.ireduce_scatter(data, op))
    }

    /// Blocking [`iall_gather`](Self::iall_gather).
    pub fn all_gather<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.blocking(|| self.iall_gather(data))
    }

    /// Blocking [`ibroadcast`](Self::ibroadcast).
    pub fn broadcast<T: Element>(&self, data: Vec<T>, root: usize) -> Result<Vec<T>> {
        self.blocking(|| self.ibroadcast(data, root))
    }

    /// Blocking [`ireduce`](Self::ireduce).
    pub fn reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp, root: usize) -> Result<Vec<T>> {
        self.blocking(|| self.ireduce(data, op, root))
    }

    /// Blocking [`iall_to_all`](Self::iall_to_all).
    pub fn all_to_all<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.blocking(|| self.iall_to_all(data))
    }

    /// Blocking [`ibarrier`](Self::ibarrier).
    pub fn barrier(&self) -> Result<()> {
        self.blocking(|| self.ibarrier()).map(drop)
    }

    /// Blocking [`isend`](Self::isend) (returns once the data is handed to the transport).
    pub fn send<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<()> {
        self.blocking(|| self.isend(data, dst)).map(drop)
    }

    /// Blocking [`irecv`](Self::irecv).
    pub fn recv<T: Element>(&self, src: usize, count: usize) -> Result<Vec<T>> {
        self.blocking(|| self.irecv(src, count))
    }
}
