//! The [`Communicator`]: a group of ranks that run collectives together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::{AllReduceAlgorithm, BroadcastAlgorithm, Config};
use crate::dtype::{Element, ReduceOp};
use crate::engine::{AbortHandle, EngineRef, EngineStats};
use crate::frame::{Fingerprint, MailboxKey, OpKind};
use crate::handle::{Completion, Handle};
use crate::program::{OpMeta, StepProgram};
use crate::schedule::{self, Action, RingPass, Step};
use crate::{CollectiveError, Result};

/// Bit that marks point-to-point mailbox keys (collectives use plain sequence numbers).
const P2P_BIT: u64 = 1 << 63;

/// A group of ranks, shaped like timely's and MPI's communicators: [`rank`](Self::rank) in
/// `0..`[`world_size`](Self::world_size), collectives in blocking (`all_reduce`) and
/// non-blocking (`iall_reduce` → [`Handle`]) form, sub-communicators by [`split`](Self::split).
///
/// Ranks must submit the collectives *of one communicator* in the same order (as in MPI);
/// across communicators any order is fine in [`Mode::Preemptive`](crate::Mode::Preemptive).
/// Cloning gives another handle to the same communicator.
#[derive(Debug, Clone)]
pub struct Communicator {
    inner: Arc<CommInner>,
}

#[derive(Debug)]
struct CommInner {
    engine: EngineRef,
    id: u64,
    group: Arc<[usize]>,
    rank: usize,
    seq: AtomicU64,
    /// Per peer: point-to-point messages sent to it / received from it.
    p2p: Mutex<(Vec<u64>, Vec<u64>)>,
}

/// Everything a collective needs besides the data.
struct Plan {
    kind: OpKind,
    steps: Vec<Step>,
    output: Option<std::ops::Range<usize>>,
    reduce: Option<ReduceOp>,
    root: usize,
    algo: u8,
    count: usize,
    seq: Option<u64>,
}

impl Communicator {
    /// The world communicator over `engine`'s transport.
    pub(crate) fn world(engine: EngineRef) -> Self {
        let n = engine.transport().world_size();
        let rank = engine.transport().world_rank();
        Self::new(engine, 0, (0..n).collect(), rank)
    }

    fn new(engine: EngineRef, id: u64, group: Arc<[usize]>, rank: usize) -> Self {
        let n = group.len();
        Self {
            inner: Arc::new(CommInner {
                engine,
                id,
                group,
                rank,
                seq: AtomicU64::new(0),
                p2p: Mutex::new((vec![0; n], vec![0; n])),
            }),
        }
    }

    /// This rank's index in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.rank
    }

    /// Number of ranks in the communicator.
    pub fn world_size(&self) -> usize {
        self.inner.group.len()
    }

    /// This rank's index in the whole job.
    pub fn world_rank(&self) -> usize {
        self.inner.group[self.inner.rank]
    }

    /// World ranks of the members, in communicator order.
    pub fn group(&self) -> &[usize] {
        &self.inner.group
    }

    /// Identifier shared by all members (0 for the world).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The engine settings of this rank.
    pub fn config(&self) -> &Config {
        self.inner.engine.config()
    }

    /// Counters of this rank's progress engine (shared by all its communicators).
    pub fn engine_stats(&self) -> EngineStats {
        self.inner.engine.stats()
    }

    /// A handle that aborts this rank's engine from another thread.
    pub fn abort_handle(&self) -> AbortHandle {
        self.inner.engine.abort_handle()
    }

    /// Aborts every pending and future operation of this rank.
    pub fn abort(&self, reason: &str) {
        self.inner.engine.abort(reason);
    }

    fn submit<T: Element>(&self, data: Vec<T>, plan: Plan) -> Handle<T> {
        let seq = plan
            .seq
            .unwrap_or_else(|| self.inner.seq.fetch_add(1, Ordering::Relaxed));
        let key = MailboxKey {
            comm: self.inner.id,
            seq,
        };
        let engine = &self.inner.engine;
        let fp = Fingerprint {
            kind: plan.kind as u8,
            dtype: T::DTYPE as u8,
            reduce: plan.reduce.map_or(0, |r| r as u8),
            algo: plan.algo,
            root: plan.root as u32,
            count: plan.count as u64,
        };
        let completion = Completion::new();
        let program = StepProgram {
            meta: OpMeta {
                kind: plan.kind,
                key,
                seq: seq & !P2P_BIT,
                group: self.inner.group.clone(),
                fp,
            },
            steps: plan.steps,
            pc: 0,
            sent: false,
            buf: data,
            output: plan.output,
            reduce: plan.reduce.unwrap_or(ReduceOp::Sum),
            mailbox: engine.transport().inbox().open(key),
            completion: completion.clone(),
        };
        engine.submit(Box::new(program));
        Handle::new(completion, engine.clone())
    }

    fn plan(kind: OpKind, steps: Vec<Step>, count: usize) -> Plan {
        Plan {
            kind,
            steps,
            output: None,
            reduce: None,
            root: 0,
            algo: 0,
            count,
            seq: None,
        }
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.world_size() {
            return Err(CollectiveError::InvalidInput(format!(
                "root {root} out of range for a communicator of {} ranks",
                self.world_size()
            )));
        }
        Ok(())
    }

    fn blocks(&self, len: usize, what: &str) -> Result<usize> {
        let n = self.world_size();
        if len % n != 0 {
            return Err(CollectiveError::InvalidInput(format!(
                "{what}: buffer of {len} elements is not divisible by the {n} ranks"
            )));
        }
        Ok(len / n)
    }

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
        let (n, me, count) = (self.world_size(), self.rank(), data.len());
        let algo = match algo {
            AllReduceAlgorithm::Auto
                if count * std::mem::size_of::<T>() < self.config().small_message_bytes =>
            {
                AllReduceAlgorithm::HalvingDoubling
            }
            AllReduceAlgorithm::Auto => AllReduceAlgorithm::Ring,
            a => a,
        };
        let (steps, code) = match algo {
            AllReduceAlgorithm::HalvingDoubling => {
                (schedule::halving_doubling_all_reduce(n, me, count), 2)
            }
            _ => (schedule::ring_all_reduce(n, me, count), 1),
        };
        let plan = Plan {
            output: Some(0..count),
            reduce: Some(op),
            algo: code,
            ..Self::plan(OpKind::AllReduce, steps, count)
        };
        Ok(self.submit(data, plan))
    }

    /// Starts a reduce-scatter: `data` holds `world_size` blocks; rank `r` gets reduced block `r`.
    pub fn ireduce_scatter<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Handle<T>> {
        let block = self.blocks(data.len(), "reduce-scatter")?;
        let (n, me) = (self.world_size(), self.rank());
        let steps = schedule::ring(
            n,
            me,
            |i| i * block..(i + 1) * block,
            RingPass::ReduceScatter,
        );
        let plan = Plan {
            output: Some(me * block..(me + 1) * block),
            reduce: Some(op),
            ..Self::plan(OpKind::ReduceScatter, steps, block)
        };
        Ok(self.submit(data, plan))
    }

    /// Starts an all-gather: every rank contributes `data`; the result is all contributions in
    /// rank order.
    pub fn iall_gather<T: Element>(&self, data: Vec<T>) -> Result<Handle<T>> {
        let (n, me, block) = (self.world_size(), self.rank(), data.len());
        let mut buf = vec![T::ZERO; n * block];
        buf[me * block..(me + 1) * block].copy_from_slice(&data);
        let steps = schedule::ring(n, me, |i| i * block..(i + 1) * block, RingPass::AllGather);
        let plan = Plan {
            output: Some(0..n * block),
            ..Self::plan(OpKind::AllGather, steps, block)
        };
        Ok(self.submit(buf, plan))
    }

    /// Starts a broadcast of `root`'s `data` with the configured algorithm; other ranks pass a
    /// vector of the same length.
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
        self.check_root(root)?;
        let (n, me, count) = (self.world_size(), self.rank(), data.len());
        let cfg = self.config();
        let bytes = count * std::mem::size_of::<T>();
        let pipelined = match algo {
            BroadcastAlgorithm::Auto => bytes >= cfg.pipeline_threshold_bytes,
            BroadcastAlgorithm::Binomial => false,
            BroadcastAlgorithm::Pipelined => true,
        };
        let (steps, code) = if pipelined {
            let pieces = bytes
                .div_ceil(cfg.pipeline_chunk_bytes.max(1))
                .clamp(1, count.max(1));
            (schedule::pipelined_broadcast(n, me, root, count, pieces), 3)
        } else {
            (schedule::binomial_broadcast(n, me, root, count), 0)
        };
        let plan = Plan {
            output: Some(0..count),
            root,
            algo: code,
            ..Self::plan(OpKind::Broadcast, steps, count)
        };
        Ok(self.submit(data, plan))
    }

    /// Starts a reduce to `root`; the root gets the reduced vector, the others an empty one.
    pub fn ireduce<T: Element>(
        &self,
        data: Vec<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<Handle<T>> {
        self.check_root(root)?;
        let count = data.len();
        let steps = schedule::binomial_reduce(self.world_size(), self.rank(), root, count);
        let output = (self.rank() == root).then_some(0..count);
        let plan = Plan {
            output,
            root,
            reduce: Some(op),
            ..Self::plan(OpKind::Reduce, steps, count)
        };
        Ok(self.submit(data, plan))
    }

    /// Starts an all-to-all: block `j` of `data` goes to rank `j`; the result holds the block
    /// from each rank in rank order.
    pub fn iall_to_all<T: Element>(&self, data: Vec<T>) -> Result<Handle<T>> {
        let block = self.blocks(data.len(), "all-to-all")?;
        let (n, me, len) = (self.world_size(), self.rank(), data.len());
        let mut buf = data;
        buf.resize(2 * len, T::ZERO);
        buf.copy_within(me * block..(me + 1) * block, len + me * block);
        let steps = schedule::pairwise_all_to_all(n, me, block);
        let plan = Plan {
            output: Some(len..2 * len),
            ..Self::plan(OpKind::AllToAll, steps, block)
        };
        Ok(self.submit(buf, plan))
    }

    /// Starts a barrier.
    pub fn ibarrier(&self) -> Result<Handle<u8>> {
        let steps = schedule::dissemination_barrier(self.world_size(), self.rank());
        Ok(self.submit(Vec::new(), Self::plan(OpKind::Barrier, steps, 0)))
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

    /// Starts sending `data` to rank `dst` (matched, in order, by `dst`'s receives from us).
    pub fn isend<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<Handle<T>> {
        self.check_peer(dst)?;
        let n = {
            let mut g = self.inner.p2p.lock().expect("p2p poisoned");
            g.0[dst] += 1;
            g.0[dst] - 1
        };
        let seq = P2P_BIT | ((self.rank() as u64) << 40) | n;
        let count = data.len();
        let steps = vec![Step::send(dst, 0..count)];
        Ok(self.submit(
            data,
            Plan {
                seq: Some(seq),
                ..Self::plan(OpKind::PointToPoint, steps, count)
            },
        ))
    }

    /// Starts receiving `count` elements from rank `src`.
    pub fn irecv<T: Element>(&self, src: usize, count: usize) -> Result<Handle<T>> {
        self.check_peer(src)?;
        let n = {
            let mut g = self.inner.p2p.lock().expect("p2p poisoned");
            g.1[src] += 1;
            g.1[src] - 1
        };
        let seq = P2P_BIT | ((src as u64) << 40) | n;
        let steps = vec![Step::recv(src, 0..count, Action::Copy)];
        let plan = Plan {
            seq: Some(seq),
            output: Some(0..count),
            ..Self::plan(OpKind::PointToPoint, steps, count)
        };
        Ok(self.submit(vec![T::ZERO; count], plan))
    }

    /// Blocking [`iall_reduce`](Self::iall_reduce).
    pub fn all_reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.iall_reduce(data, op)?.wait()
    }

    /// Blocking [`ireduce_scatter`](Self::ireduce_scatter).
    pub fn reduce_scatter<T: Element>(&self, data: Vec<T>, op: ReduceOp) -> Result<Vec<T>> {
        self.ireduce_scatter(data, op)?.wait()
    }

    /// Blocking [`iall_gather`](Self::iall_gather).
    pub fn all_gather<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.iall_gather(data)?.wait()
    }

    /// Blocking [`ibroadcast`](Self::ibroadcast).
    pub fn broadcast<T: Element>(&self, data: Vec<T>, root: usize) -> Result<Vec<T>> {
        self.ibroadcast(data, root)?.wait()
    }

    /// Blocking [`ireduce`](Self::ireduce).
    pub fn reduce<T: Element>(&self, data: Vec<T>, op: ReduceOp, root: usize) -> Result<Vec<T>> {
        self.ireduce(data, op, root)?.wait()
    }

    /// Blocking [`iall_to_all`](Self::iall_to_all).
    pub fn all_to_all<T: Element>(&self, data: Vec<T>) -> Result<Vec<T>> {
        self.iall_to_all(data)?.wait()
    }

    /// Blocking [`ibarrier`](Self::ibarrier).
    pub fn barrier(&self) -> Result<()> {
        self.ibarrier()?.wait().map(drop)
    }

    /// Blocking [`isend`](Self::isend) (returns once the data is handed to the transport).
    pub fn send<T: Element>(&self, data: Vec<T>, dst: usize) -> Result<()> {
        self.isend(data, dst)?.wait().map(drop)
    }

    /// Blocking [`irecv`](Self::irecv).
    pub fn recv<T: Element>(&self, src: usize, count: usize) -> Result<Vec<T>> {
        self.irecv(src, count)?.wait()
    }

    /// Splits into sub-communicators (collective over this communicator, like `MPI_Comm_split`):
    /// ranks passing the same `colour` form one, ordered by `key` then by current rank. Like
    /// every collective of one communicator, call it from one thread at a time per rank.
    pub fn split(&self, colour: u64, key: i64) -> Result<Communicator> {
        let seq = self.inner.seq.load(Ordering::Relaxed);
        let all = self.all_gather(vec![colour as i64, key])?;
        let mut members: Vec<(i64, usize)> = (0..self.world_size())
            .filter(|&r| all[2 * r] as u64 == colour)
            .map(|r| (all[2 * r + 1], r))
            .collect();
        members.sort_unstable();
        let rank = members
            .iter()
            .position(|&(_, r)| r == self.rank())
            .expect("self is a member");
        let group: Arc<[usize]> = members.iter().map(|&(_, r)| self.inner.group[r]).collect();
        let id = mix(mix(mix(self.inner.id) ^ seq) ^ colour) | 1;
        Ok(Communicator::new(
            self.inner.engine.clone(),
            id,
            group,
            rank,
        ))
    }

    /// A new communicator with the same members (`split(0, rank)`).
    pub fn dup(&self) -> Result<Communicator> {
        self.split(0, self.rank() as i64)
    }
}

/// SplitMix64 finaliser: derives sub-communicator identifiers that all members agree on.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
