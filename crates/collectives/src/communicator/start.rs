//! Starting the collectives: each `begin_*` function compiles its algorithm's schedule for this
//! rank into a step program (or builds and submits the shared-memory program); the
//! non-blocking methods submit it to the engine at once, the blocking ones
//! ([`blocking`](super::blocking)) run it inline first.

use super::{Communicator, Plan, Started, P2P_BIT, P2P_RANK_SHIFT, SEND_BIT};
use crate::completion::Completion;
use crate::config::{AllReduceAlgorithm, BroadcastAlgorithm};
use crate::dtype::{Element, ReduceOp};
use crate::frame::OpKind;
use crate::handle::Handle;
use crate::program::algo_code;
use crate::schedule::{self, Action, RingPass, Step};
use crate::shm::ShmAllReduce;
use crate::{CollectiveError, Result};

impl Communicator {
    /// Starts an all-reduce with the configured algorithm; the handle yields the reduced vector.
    pub fn iall_reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Handle<T>> {
        self.iall_reduce_with(data, op, self.config().all_reduce)
    }

    /// Starts an all-reduce with an explicit algorithm (all ranks must pass the same).
    pub fn iall_reduce_with<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
        algo: AllReduceAlgorithm,
    ) -> Result<Handle<T>> {
        self.begin_all_reduce(data, op, algo)
            .map(|s| self.handle(s))
    }

    /// Starts a reduce-scatter: `data` holds `world_size` blocks; rank `r` gets reduced block `r`.
    /// A length not divisible by `world_size` is [`CollectiveError::InvalidInput`] here, and
    /// the peers' reduce-scatter fails at once with [`CollectiveError::Mismatch`].
    pub fn ireduce_scatter<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Handle<T>> {
        self.begin_reduce_scatter(data, op).map(|s| self.handle(s))
    }

    /// Starts an all-gather: every rank contributes `data`; the result is all contributions in
    /// rank order.
    pub fn iall_gather<T: Element>(&self, data: Vec<T>) -> Result<Handle<T>> {
        self.begin_all_gather(data).map(|s| self.handle(s))
    }

    /// Starts a broadcast of `root`'s `data` with the configured algorithm; other ranks pass a
    /// vector of the same length. A `root` out of range is [`CollectiveError::InvalidInput`]
    /// here, and the peers' broadcast fails at once with [`CollectiveError::Mismatch`] (the
    /// refused collective still takes its sequence number and tells them).
    pub fn ibroadcast<T: Element>(&self, data: Vec<T>, root: usize) -> Result<Handle<T>> {
        self.ibroadcast_with(data, root, self.config().broadcast)
    }

    /// Starts a broadcast with an explicit algorithm (all ranks must pass the same).
    pub fn ibroadcast_with<T: Element>(
        &self,
        data: Vec<T>,
        root: usize,
        algo: BroadcastAlgorithm,
    ) -> Result<Handle<T>> {
        self.begin_broadcast(data, root, algo)
            .map(|s| self.handle(s))
    }

    /// Starts a reduce to `root`; the root gets the reduced vector, the others an empty one.
    /// A `root` out of range fails as in [`ibroadcast`](Self::ibroadcast).
    pub fn ireduce<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Handle<T>> {
        self.begin_reduce(data, op, root).map(|s| self.handle(s))
    }

    /// Starts an all-to-all: block `j` of `data` goes to rank `j`; the result holds the block
    /// from each rank in rank order. A length not divisible by `world_size` fails as in
    /// [`ireduce_scatter`](Self::ireduce_scatter).
    pub fn iall_to_all<T: Element>(&self, data: Vec<T>) -> Result<Handle<T>> {
        self.begin_all_to_all(data).map(|s| self.handle(s))
    }

    /// Starts a barrier.
    pub fn ibarrier(&self) -> Result<Handle<u8>> {
        self.begin_barrier().map(|s| self.handle(s))
    }

    /// Starts sending `data` to rank `dst` (matched, in order, by `dst`'s receives from us).
    pub fn isend<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<Handle<T>> {
        self.begin_send(data, dst).map(|s| self.handle(s))
    }

    /// Starts receiving `count` elements from rank `src`.
    pub fn irecv<T: Element>(&self, src: usize, count: usize) -> Result<Handle<T>> {
        self.begin_recv(src, count).map(|s| self.handle(s))
    }

    /// [`iall_reduce_with`](Self::iall_reduce_with), not yet handed to the engine.
    pub(super) fn begin_all_reduce<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
        algo: AllReduceAlgorithm,
    ) -> Result<Started<T>> {
        let (n, me, count) = (self.world_size(), self.rank(), data.len());
        let cfg = self.config();
        let bytes = count * std::mem::size_of::<T>();
        let shm = self.shared_memory();
        let algo = match algo {
            AllReduceAlgorithm::Auto => cfg.auto_all_reduce(
                n,
                bytes,
                shm.is_some(),
                self.transport().halving_doubling_bytes(),
            ),
            AllReduceAlgorithm::SharedMemory if shm.is_none() => AllReduceAlgorithm::Ring,
            a => a,
        };
        let (steps, code) = match algo {
            AllReduceAlgorithm::HalvingDoubling => (
                schedule::halving_doubling_all_reduce(n, me, count),
                algo_code::RECURSIVE,
            ),
            AllReduceAlgorithm::RecursiveDoubling => (
                schedule::recursive_doubling_all_reduce(n, me, count),
                algo_code::RECURSIVE_DOUBLING,
            ),
            AllReduceAlgorithm::SharedMemory => (Vec::new(), algo_code::SHARED_MEMORY),
            _ => {
                let pieces = (bytes / n.max(1)).div_ceil(cfg.ring_piece_bytes.max(1));
                let steps = schedule::pipelined_ring_all_reduce(n, me, count, pieces);
                (steps, algo_code::RING)
            }
        };
        let small = matches!(
            algo,
            AllReduceAlgorithm::HalvingDoubling | AllReduceAlgorithm::RecursiveDoubling
        );
        let steps = if small && bytes < cfg.small_piece_limit_bytes {
            schedule::cut_into_pieces(
                steps,
                cfg.small_piece_bytes / std::mem::size_of::<T>().max(1),
            )
        } else {
            steps
        };
        let plan = Plan {
            output: Some(0..count),
            reduce: Some(op),
            algo: code,
            ..Self::plan(OpKind::AllReduce, steps, count)
        };
        if let (AllReduceAlgorithm::SharedMemory, Some(registry)) = (algo, shm) {
            let registry = registry.clone();
            let meta = self.op_meta::<T>(&plan);
            let completion = Completion::new();
            let mailbox = self.mailbox(&meta);
            let program =
                ShmAllReduce::new(meta, me, op, registry, data, mailbox, completion.clone());
            return Ok(Started::Submitted(
                self.start(Box::new(program), completion),
            ));
        }
        Ok(self.step_program(data, plan))
    }

    /// [`ireduce_scatter`](Self::ireduce_scatter), not yet handed to the engine.
    pub(super) fn begin_reduce_scatter<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
    ) -> Result<Started<T>> {
        let block = self.blocks::<T>(data.len(), OpKind::ReduceScatter, Some(op))?;
        let (n, me) = (self.world_size(), self.rank());
        let chunk = |i| i * block..(i + 1) * block;
        let bytes = data.len() * std::mem::size_of::<T>();
        let (steps, algo) = if self.recursive_on_power_of_two(n, bytes) {
            (
                schedule::recursive_halving_reduce_scatter(n, me, chunk, |r| r),
                algo_code::RECURSIVE,
            )
        } else {
            (
                schedule::ring(n, me, chunk, RingPass::ReduceScatter),
                algo_code::PLAIN,
            )
        };
        let plan = Plan {
            output: Some(me * block..(me + 1) * block),
            reduce: Some(op),
            algo,
            ..Self::plan(OpKind::ReduceScatter, steps, block)
        };
        Ok(self.step_program(data, plan))
    }

    /// [`iall_gather`](Self::iall_gather), not yet handed to the engine.
    pub(super) fn begin_all_gather<T: Element>(&self, data: Vec<T>) -> Result<Started<T>> {
        let (n, me, block) = (self.world_size(), self.rank(), data.len());
        let mut buf = vec![T::ZERO; n * block];
        crate::copy::copy_slice(&mut buf[me * block..(me + 1) * block], &data);
        let chunk = |i| i * block..(i + 1) * block;
        let bytes = buf.len() * std::mem::size_of::<T>();
        let (steps, algo) = if self.recursive_on_power_of_two(n, bytes) {
            (
                schedule::recursive_doubling_all_gather(n, me, chunk, |r| r),
                algo_code::RECURSIVE,
            )
        } else {
            (
                schedule::ring(n, me, chunk, RingPass::AllGather),
                algo_code::PLAIN,
            )
        };
        let plan = Plan {
            output: Some(0..n * block),
            algo,
            ..Self::plan(OpKind::AllGather, steps, block)
        };
        Ok(self.step_program(buf, plan))
    }

    /// [`ibroadcast_with`](Self::ibroadcast_with), not yet handed to the engine.
    pub(super) fn begin_broadcast<T: Element>(
        &self,
        data: Vec<T>,
        root: usize,
        algo: BroadcastAlgorithm,
    ) -> Result<Started<T>> {
        let (n, me, count) = (self.world_size(), self.rank(), data.len());
        let cfg = self.config();
        let bytes = count * std::mem::size_of::<T>();
        let pipelined = match algo {
            BroadcastAlgorithm::Auto => bytes >= cfg.pipeline_threshold_bytes,
            BroadcastAlgorithm::Binomial => false,
            BroadcastAlgorithm::Pipelined => true,
        };
        let plan = Plan {
            output: Some(0..count),
            root,
            algo: if pipelined {
                algo_code::PIPELINED_CHAIN
            } else {
                algo_code::PLAIN
            },
            ..Self::plan(OpKind::Broadcast, Vec::new(), count)
        };
        let mut plan = self.check_root::<T>(plan)?;
        let steps = if pipelined {
            let pieces = bytes
                .div_ceil(cfg.pipeline_chunk_bytes.max(1))
                .clamp(1, count.max(1));
            schedule::pipelined_broadcast(n, me, root, count, pieces)
        } else {
            schedule::binomial_broadcast(n, me, root, count)
        };
        // No rank ends unless all agree on the root (`schedule::agreed`).
        plan.steps = schedule::agreed(n, me, steps);
        Ok(self.step_program(data, plan))
    }

    /// [`ireduce`](Self::ireduce), not yet handed to the engine.
    pub(super) fn begin_reduce<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Started<T>> {
        let count = data.len();
        let (n, me) = (self.world_size(), self.rank());
        let plan = Plan {
            output: (me == root).then_some(0..count),
            root,
            reduce: Some(op),
            ..Self::plan(OpKind::Reduce, Vec::new(), count)
        };
        let mut plan = self.check_root::<T>(plan)?;
        // No rank ends unless all agree on the root (`schedule::agreed`).
        plan.steps = schedule::agreed(n, me, schedule::binomial_reduce(n, me, root, count));
        Ok(self.step_program(data, plan))
    }

    /// [`iall_to_all`](Self::iall_to_all), not yet handed to the engine.
    pub(super) fn begin_all_to_all<T: Element>(&self, data: Vec<T>) -> Result<Started<T>> {
        let block = self.blocks::<T>(data.len(), OpKind::AllToAll, None)?;
        let (n, me, len) = (self.world_size(), self.rank(), data.len());
        let mut buf = data;
        buf.resize(2 * len, T::ZERO);
        buf.copy_within(me * block..(me + 1) * block, len + me * block);
        let steps = schedule::pairwise_all_to_all(n, me, block);
        let plan = Plan {
            output: Some(len..2 * len),
            ..Self::plan(OpKind::AllToAll, steps, block)
        };
        Ok(self.step_program(buf, plan))
    }

    /// [`ibarrier`](Self::ibarrier), not yet handed to the engine.
    pub(super) fn begin_barrier(&self) -> Result<Started<u8>> {
        let steps = schedule::dissemination_barrier(self.world_size(), self.rank());
        Ok(self.step_program(Vec::new(), Self::plan(OpKind::Barrier, steps, 0)))
    }

    fn check_peer(&self, peer: usize) -> Result<()> {
        if peer >= self.world_size() || peer == self.rank() {
            return Err(CollectiveError::InvalidInput(format!(
                "peer {peer} is not another rank of this {}-rank communicator (this is rank {})",
                self.world_size(),
                self.rank()
            )));
        }
        Ok(())
    }

    /// [`isend`](Self::isend), not yet handed to the engine.
    pub(super) fn begin_send<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<Started<T>> {
        self.check_peer(dst)?;
        let n = {
            let mut g = self.inner.p2p.lock().expect("p2p poisoned");
            g.0[dst] += 1;
            g.0[dst] - 1
        };
        let seq = (
            P2P_BIT | SEND_BIT | ((dst as u64) << P2P_RANK_SHIFT) | n,
            P2P_BIT | ((self.rank() as u64) << P2P_RANK_SHIFT) | n,
        );
        let count = data.len();
        let steps = vec![Step::send(dst, 0..count)];
        Ok(self.step_program(
            data,
            Plan {
                seq: Some(seq),
                ..Self::plan(OpKind::PointToPoint, steps, count)
            },
        ))
    }

    /// [`irecv`](Self::irecv), not yet handed to the engine.
    pub(super) fn begin_recv<T: Element>(&self, src: usize, count: usize) -> Result<Started<T>> {
        self.check_peer(src)?;
        let n = {
            let mut g = self.inner.p2p.lock().expect("p2p poisoned");
            g.1[src] += 1;
            g.1[src] - 1
        };
        let seq = (
            P2P_BIT | ((src as u64) << P2P_RANK_SHIFT) | n,
            P2P_BIT | SEND_BIT | ((self.rank() as u64) << P2P_RANK_SHIFT) | n,
        );
        let steps = vec![Step::recv(src, 0..count, Action::Copy)];
        let plan = Plan {
            seq: Some(seq),
            output: Some(0..count),
            ..Self::plan(OpKind::PointToPoint, steps, count)
        };
        Ok(self.step_program(vec![T::ZERO; count], plan))
    }
}
