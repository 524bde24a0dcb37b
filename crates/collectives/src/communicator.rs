//! The [`Communicator`]: a group of ranks that run collectives together.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::completion::Completion;
use crate::config::Config;
use crate::direct::WorkBuf;
use crate::dtype::{Element, ReduceOp};
use crate::engine::{AbortHandle, EngineRef, EngineStats};
use crate::frame::{Fingerprint, MailboxKey, OpKind};
use crate::handle::Handle;
use crate::inbox::Mailbox;
use crate::program::{self, ActiveOp, DirectPosts, OpMeta, Refused, StepProgram};
use crate::schedule::Step;
use crate::shm::ShmRegistry;
use crate::transport::Transport;
use crate::{CollectiveError, Result};

mod blocking;
mod start;

/// Bit that marks point-to-point mailbox keys (collectives use plain sequence numbers).
const P2P_BIT: u64 = 1 << 63;
/// Bit that marks the sending side's key of a point-to-point message. Each side keys the
/// message by the *other* party's rank and the count of messages between the two in that
/// direction: the receiver by (sender, n), the sender by (`SEND_BIT`, destination, n), so
/// that sends to different destinations never share a mailbox or a finished-stream record.
/// Frames carry the key of the side they go to ([`OpMeta::peer_key`](crate::program::OpMeta)).
pub(crate) const SEND_BIT: u64 = 1 << 62;
/// Where the peer's rank starts in a point-to-point key (below it: the message count; the
/// inbox's streams use the same split).
const P2P_RANK_SHIFT: u32 = 40;

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

impl Drop for CommInner {
    /// The communicator is gone on this rank (its last clone dropped): no collective of it
    /// starts any more, so the inbox forgets its finished-collective records (they would
    /// otherwise grow with every `dup`/`split`).
    fn drop(&mut self) {
        self.engine.transport().inbox().forget_comm(self.id);
    }
}

/// A collective started on this rank: with the engine already (shared memory), or a step
/// program not yet submitted — a blocking call runs it inline first
/// ([`Engine::run_inline`](crate::engine::Engine::run_inline)), and only a collective that
/// must be handed to the engine gets a box, a completion and a handle.
enum Started<T: Element> {
    Submitted(Handle<T>),
    Program(StepProgram<T>),
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
    /// Point-to-point: this side's key and the other party's (see [`SEND_BIT`]).
    seq: Option<(u64, u64)>,
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

    /// Identity and fingerprint of a new collective (takes the next sequence number).
    fn op_meta<T: Element>(&self, plan: &Plan) -> OpMeta {
        let (seq, peer_seq) = plan.seq.unwrap_or_else(|| {
            let s = self.inner.seq.fetch_add(1, Ordering::Relaxed);
            (s, s)
        });
        let comm = self.inner.id;
        OpMeta {
            kind: plan.kind,
            key: MailboxKey { comm, seq },
            peer_key: MailboxKey {
                comm,
                seq: peer_seq,
            },
            seq: seq & !(P2P_BIT | SEND_BIT),
            group: self.inner.group.clone(),
            fp: Fingerprint {
                kind: plan.kind as u8,
                dtype: T::DTYPE as u8,
                reduce: plan.reduce.map_or(0, |r| r as u8),
                algo: plan.algo,
                // An out-of-range root (refused, see `check_root`) still differs from every
                // valid one.
                root: u32::try_from(plan.root).unwrap_or(u32::MAX),
                count: plan.count as u64,
            },
        }
    }

    /// The mailbox of collective `meta` on this rank.
    fn mailbox(&self, meta: &OpMeta) -> Arc<Mailbox> {
        self.inner.engine.transport().inbox().open(meta.key)
    }

    /// The shared-memory rendezvous, when all ranks share this address space.
    fn shared_memory(&self) -> Option<&Arc<ShmRegistry>> {
        self.transport().shared_memory()
    }

    /// This rank's transport.
    fn transport(&self) -> &Arc<dyn Transport> {
        self.inner.engine.transport()
    }

    /// [`Config::recursive_on_power_of_two`] with this transport's default.
    fn recursive_on_power_of_two(&self, n: usize, bytes: usize) -> bool {
        self.config()
            .recursive_on_power_of_two(n, bytes, self.transport().halving_doubling_bytes())
    }

    /// Submits a program whose outcome `completion` receives.
    fn start<T: Element>(
        &self,
        op: Box<dyn ActiveOp>,
        completion: Arc<Completion<T>>,
    ) -> Handle<T> {
        self.inner.engine.submit(op);
        Handle::new(completion, self.inner.engine.clone())
    }

    /// The handle of a started collective, its step program submitted if it is not yet.
    fn handle<T: Element>(&self, started: Started<T>) -> Handle<T> {
        match started {
            Started::Submitted(handle) => handle,
            Started::Program(program) => {
                let (op, completion) = program.for_engine();
                self.start(op, completion)
            }
        }
    }

    /// The step program of `plan` over the working buffer `data`, its first send made where
    /// the transport sends at once; not yet submitted.
    fn step_program<T: Element>(&self, data: Vec<T>, plan: Plan) -> Started<T> {
        let meta = self.op_meta::<T>(&plan);
        let mut buf = WorkBuf::new(data);
        let engine = &self.inner.engine;
        let sent = engine.sends_before_queueing()
            && program::send_first(&**engine.transport(), &plan.steps, &buf, &meta);
        let mailbox = self.mailbox(&meta);
        let reduce = plan.reduce.unwrap_or(ReduceOp::Sum);
        let direct = (self.config().direct_receive && engine.transport().direct_receive())
            .then(|| DirectPosts::register(&mut buf, &mailbox, &plan.steps, &meta, reduce))
            .flatten();
        Started::Program(StepProgram {
            mailbox,
            meta,
            steps: plan.steps,
            pc: 0,
            sent,
            buf,
            direct,
            output: plan.output,
            reduce,
            completion: None,
        })
    }

    fn plan(kind: OpKind, steps: Vec<Step>, count: usize) -> Plan {
        Plan {
            kind,
            steps,
            output: None,
            reduce: None,
            root: 0,
            algo: program::algo_code::PLAIN,
            count,
            seq: None,
        }
    }

    /// `plan` when its root is in range; otherwise the collective is refused
    /// ([`refuse`](Self::refuse)) and the error returned.
    fn check_root<T: Element>(&self, plan: Plan) -> Result<Plan> {
        if plan.root >= self.world_size() {
            let msg = format!(
                "root {} out of range for a communicator of {} ranks",
                plan.root,
                self.world_size()
            );
            return Err(self.refuse::<T>(plan, msg));
        }
        Ok(plan)
    }

    /// Refuses a collective on this rank (an argument only this rank can check): returns
    /// [`CollectiveError::InvalidInput`] with `msg` for the caller, and still submits the
    /// collective, as one that fails at once — it takes its sequence number like any other (the
    /// communicator's sequence numbers stay aligned with the peers'), and the engine sends its
    /// failure notice to every peer, so peers that started the collective fail promptly too
    /// (with [`CollectiveError::Mismatch`] when the notice's fingerprint differs from theirs, as
    /// it does for a root that only this rank got wrong) instead of waiting for `op_timeout`.
    fn refuse<T: Element>(&self, plan: Plan, msg: String) -> CollectiveError {
        let op = Refused::<T> {
            meta: self.op_meta::<T>(&plan),
            error: Some(CollectiveError::InvalidInput(msg.clone())),
            completion: Completion::new(),
        };
        self.inner.engine.submit(Box::new(op));
        CollectiveError::InvalidInput(msg)
    }

    /// `len / world_size` when `len` divides into blocks, one per rank; otherwise the
    /// collective (`kind`, with `reduce`) is refused ([`refuse`](Self::refuse): its peers are
    /// told, and fail at once instead of waiting for `op_timeout`) and the error returned.
    fn blocks<T: Element>(
        &self,
        len: usize,
        kind: OpKind,
        reduce: Option<ReduceOp>,
    ) -> Result<usize> {
        let n = self.world_size();
        if !len.is_multiple_of(n) {
            let msg = format!("{kind}: buffer of {len} elements is not divisible by the {n} ranks");
            // The whole length where peers send their block length: a different fingerprint.
            let plan = Plan {
                reduce,
                ..Self::plan(kind, Vec::new(), len)
            };
            return Err(self.refuse::<T>(plan, msg));
        }
        Ok(len / n)
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
