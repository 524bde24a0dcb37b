//! Blocking forms of the collectives: start, then wait (the calling thread drives this rank's
//! engine while it waits, see [`Handle::wait`]).

use super::{Communicator, Started};
use crate::dtype::{Element, ReduceOp};
use crate::engine::Inline;
use crate::handle::Handle;
use crate::Result;

impl Communicator {
    /// Starts an operation and waits for it, registered as the engine's driver from before the
    /// submission (so that submitting does not wake the engine thread). A step program runs
    /// inline first where the engine allows it
    /// ([`Engine::run_inline`](crate::engine::Engine::run_inline)): one that finishes there
    /// never gets a box, a completion or a handle.
    fn blocking<T: Element>(&self, start: impl FnOnce() -> Result<Started<T>>) -> Result<Vec<T>> {
        let engine = &self.inner.engine;
        let driving = engine.driving();
        let mut program = match start()? {
            Started::Submitted(handle) => return handle.wait_driving(driving),
            Started::Program(program) => program,
        };
        if engine.runs_inline() {
            match engine.run_inline(&mut program) {
                Inline::Done => {
                    engine.finish_inline(program.meta.key);
                    drop(driving);
                    return Ok(program.into_output());
                }
                Inline::Failed(f) => {
                    let (op, completion) = program.for_engine();
                    engine.fail_inline(op, f);
                    return Handle::new(completion, engine.clone()).wait_driving(driving);
                }
                Inline::Handover => {}
            }
        }
        self.handle(Started::Program(program)).wait_driving(driving)
    }

    /// Blocking [`iall_reduce`](Self::iall_reduce).
    pub fn all_reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.blocking(|| self.begin_all_reduce(data, op, self.config().all_reduce))
    }

    /// Blocking [`ireduce_scatter`](Self::ireduce_scatter).
    pub fn reduce_scatter<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.blocking(|| self.begin_reduce_scatter(data, op))
    }

    /// Blocking [`iall_gather`](Self::iall_gather).
    pub fn all_gather<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.blocking(|| self.begin_all_gather(data))
    }

    /// Blocking [`ibroadcast`](Self::ibroadcast).
    pub fn broadcast<T: Element>(&self, data: Vec<T>, root: usize) -> Result<Vec<T>> {
        self.blocking(|| self.begin_broadcast(data, root, self.config().broadcast))
    }

    /// Blocking [`ireduce`](Self::ireduce).
    pub fn reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp, root: usize) -> Result<Vec<T>> {
        self.blocking(|| self.begin_reduce(data, op, root))
    }

    /// Blocking [`iall_to_all`](Self::iall_to_all).
    pub fn all_to_all<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.blocking(|| self.begin_all_to_all(data))
    }

    /// Blocking [`ibarrier`](Self::ibarrier).
    pub fn barrier(&self) -> Result<()> {
        self.blocking(|| self.begin_barrier()).map(drop)
    }

    /// Blocking [`isend`](Self::isend) (returns once the data is handed to the transport).
    pub fn send<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<()> {
        self.blocking(|| self.begin_send(data, dst)).map(drop)
    }

    /// Blocking [`irecv`](Self::irecv).
    pub fn recv<T: Element>(&self, src: usize, count: usize) -> Result<Vec<T>> {
        self.blocking(|| self.begin_recv(src, count))
    }
}
