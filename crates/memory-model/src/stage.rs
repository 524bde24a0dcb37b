//! One pipeline stage's per-device memory from its operators, each under its own sharding:
//! the operator categories of [`crate::sharding`] plus communication buffers, transient peaks
//! and overhead. [`crate::estimate`] (uniform Megatron-style shardings) and the parallel
//! planner (a sharding per operator) both compute a stage through [`stage_memory`], so the two
//! agree to the byte wherever they describe the same configuration.

use crate::breakdown::DeviceBreakdown;
use crate::error::Result;
use crate::operator::Operator;
use crate::setup::{Recompute, TrainingSetup};
use crate::sharding::{operator_memory, Categories, OperatorMemory, OperatorSharding};

/// One operator as placed on a stage.
#[derive(Debug, Clone, Copy)]
pub struct PlacedOperator<'a> {
    /// The operator.
    pub op: &'a Operator,
    /// Its sharding.
    pub sharding: OperatorSharding,
    /// Identical copies on the stage (e.g. the stage's layers for a layer operator).
    pub copies: u64,
    /// Activation sets held at the stage's peak, over all copies (e.g. layers × micro-batches
    /// in flight).
    pub activation_sets: u64,
    /// A transformer-layer operator: the recomputation transient is one layer's worth of these.
    pub in_layer: bool,
    /// Data-parallel replicas its gradients are reduced over (devices that process different
    /// samples or sequence chunks); gradient buckets are held only when this exceeds 1.
    pub data_parallel: u64,
}

/// Stage tensors whose per-device size follows from the stage's layout, bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTensors {
    /// One micro-batch's activation crossing a stage boundary on one device (0 without
    /// pipelining); a send and a receive buffer of this size are held.
    pub pipeline_boundary_bytes: u64,
    /// The fp32 logits (and their gradient, computed in place) on one device of the last stage
    /// (0 on other stages).
    pub logits_bytes: u64,
}

/// A stage's per-device memory and its cluster-wide operator bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageMemory {
    /// Bytes on one device, every category.
    pub device: DeviceBreakdown,
    /// Operator bytes on all devices of the stage.
    pub cluster: Categories,
    /// Distinct operator bytes among them.
    pub unique: Categories,
    /// Bytes one device offloads to host memory.
    pub host: Categories,
}

/// The per-device memory terms of a stage that are not sums over its operators: buffers held
/// once per ZeRO mode and transient peaks. Each term's value is
/// `min(cap, max(Σ sum values, largest value))` over the stage's operators (see [`StageTerm`]);
/// a planner that chooses a sharding per operator models them the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StageTermKind {
    /// Plain data parallelism: two DDP buckets, at most twice its gradients.
    DdpBuckets,
    /// ZeRO-1/2: the reduce bucket, at most the unsharded gradients.
    Zero12ReduceBucket,
    /// ZeRO-1/2: the all-gather bucket, at most the parameters.
    Zero12GatherBucket,
    /// ZeRO-3: the reduce bucket, at most the unsharded gradients.
    Zero3ReduceBucket,
    /// ZeRO-3: the prefetch bucket, at most the largest gathered operator.
    Zero3PrefetchBucket,
    /// Pipelining: a send and a receive buffer of the stage's boundary activation.
    PipelineBuffers,
    /// Twice the largest operator gathered by ZeRO-3 (the one computing, the one prefetched).
    GatheredTransient,
    /// The larger of one layer's recomputed activations (when recomputing) and the logits.
    RecomputeOrLogits,
}

/// Number of [`StageTermKind`]s.
pub const STAGE_TERMS: usize = 8;

impl StageTermKind {
    /// Every kind, in index order.
    pub const ALL: [StageTermKind; STAGE_TERMS] = [
        StageTermKind::DdpBuckets,
        StageTermKind::Zero12ReduceBucket,
        StageTermKind::Zero12GatherBucket,
        StageTermKind::Zero3ReduceBucket,
        StageTermKind::Zero3PrefetchBucket,
        StageTermKind::PipelineBuffers,
        StageTermKind::GatheredTransient,
        StageTermKind::RecomputeOrLogits,
    ];

    /// Counted as transient (else as buffers) in a [`DeviceBreakdown`].
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            StageTermKind::GatheredTransient | StageTermKind::RecomputeOrLogits
        )
    }
}

/// One stage term: its kind and its cap (bytes; `None` for no cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageTerm {
    /// What the term holds.
    pub kind: StageTermKind,
    /// Upper bound of the term, bytes (a bucket never exceeds its configured size).
    pub cap: Option<u64>,
}

impl StageTerm {
    /// The term's bytes given the sum of its operators' sum values and their largest value.
    pub fn value(&self, sum: u64, largest: u64) -> u64 {
        let v = sum.max(largest);
        self.cap.map_or(v, |c| v.min(c))
    }
}

/// The stage terms of `setup`, indexed by [`StageTermKind`] (caps from its [`BufferConfig`]).
///
/// [`BufferConfig`]: crate::BufferConfig
pub fn stage_terms(setup: &TrainingSetup) -> [StageTerm; STAGE_TERMS] {
    let b = &setup.buffers;
    let reduce = b.zero_reduce_bucket_elements * setup.grad_bytes();
    let param_bytes = setup.precision.param_bytes();
    StageTermKind::ALL.map(|kind| StageTerm {
        kind,
        cap: match kind {
            StageTermKind::DdpBuckets => Some(2 * b.ddp_bucket_bytes),
            StageTermKind::Zero12ReduceBucket | StageTermKind::Zero3ReduceBucket => Some(reduce),
            StageTermKind::Zero12GatherBucket => {
                Some(b.zero_allgather_bucket_elements * param_bytes)
            }
            StageTermKind::Zero3PrefetchBucket => Some(b.zero3_prefetch_elements * param_bytes),
            StageTermKind::PipelineBuffers
            | StageTermKind::GatheredTransient
            | StageTermKind::RecomputeOrLogits => None,
        },
    })
}

/// What one placed operator contributes to each [`StageTermKind`]: to its sum, and to its
/// largest value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct TermValues {
    /// Contribution to each term's sum, bytes.
    pub sum: [u64; STAGE_TERMS],
    /// Candidate for each term's largest value, bytes.
    pub largest: [u64; STAGE_TERMS],
}

impl TermValues {
    /// Every value of `self` is at most the same value of `other`.
    pub fn all_le(&self, other: &TermValues) -> bool {
        self.sum.iter().zip(&other.sum).all(|(a, b)| a <= b)
            && self.largest.iter().zip(&other.largest).all(|(a, b)| a <= b)
    }
}

/// A placed operator's bytes (see [`placed_memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacedMemory {
    /// [`operator_memory`] of one copy.
    pub operator: OperatorMemory,
    /// Its categories on a device: model states times `copies`, activations times
    /// `activation_sets`.
    pub placed: Categories,
    /// Its contributions to the stage terms (the pipeline buffers and the logits belong to the
    /// stage's boundary tensors and are not included).
    pub terms: TermValues,
}

/// A placed operator's bytes: its categories and its contributions to the stage terms.
///
/// # Errors
/// Any error of [`operator_memory`].
pub fn placed_memory(setup: &TrainingSetup, p: &PlacedOperator<'_>) -> Result<PlacedMemory> {
    use StageTermKind as K;
    let m = operator_memory(p.op, &p.sharding, setup)?;
    let placed = m.device.scaled(p.copies, p.activation_sets);
    let mut t = TermValues::default();
    let sh = &p.sharding;
    if p.in_layer && setup.recompute != Recompute::None {
        let plain = TrainingSetup {
            recompute: Recompute::None,
            ..setup.clone()
        };
        let kept_all = operator_memory(p.op, &p.sharding, &plain)?;
        t.sum[K::RecomputeOrLogits as usize] = kept_all.device.activations - m.device.activations;
    }
    if sh.zero.shards_parameters() {
        t.largest[K::GatheredTransient as usize] = 2 * m.gathered_parameters;
    }
    if p.data_parallel > 1 {
        let unsharded = if sh.zero.shards_gradients() {
            sh.zero_group
        } else {
            1
        };
        let gradients_full = placed.gradients * unsharded;
        if sh.zero.shards_parameters() {
            t.sum[K::Zero3ReduceBucket as usize] = gradients_full;
            t.largest[K::Zero3PrefetchBucket as usize] = m.gathered_parameters;
        } else if sh.zero.shards_optimizer() {
            t.sum[K::Zero12ReduceBucket as usize] = gradients_full;
            t.sum[K::Zero12GatherBucket as usize] = placed.parameters;
        } else {
            t.sum[K::DdpBuckets as usize] = 2 * placed.gradients;
        }
    }
    Ok(PlacedMemory {
        operator: m,
        placed,
        terms: t,
    })
}

/// Per-device memory of a stage holding `ops`, with `tensors` at its boundaries.
///
/// - Operators: [`operator_memory`] of each, model states times `copies`, activations times
///   `activation_sets`.
/// - Buffers ([`StageTermKind`]), per ZeRO mode among operators with more than one
///   data-parallel replica: plain data parallelism holds two DDP buckets (at most its
///   gradients); ZeRO-1/2 a reduce bucket (at most the unsharded gradients) and an all-gather
///   bucket (at most the parameters); ZeRO-3 a reduce bucket and a prefetch bucket (at most
///   the largest gathered operator). Pipelining adds a send and a receive buffer of
///   [`StageTensors::pipeline_boundary_bytes`].
/// - Transient: twice the largest operator gathered by ZeRO-3 (the one computing and the one
///   prefetched), plus the larger of one layer's recomputed activations (when recomputing)
///   and the logits.
/// - Overhead: [`TrainingSetup::overhead_bytes`].
///
/// # Errors
/// Any error of [`operator_memory`].
pub fn stage_memory(
    setup: &TrainingSetup,
    ops: &[PlacedOperator<'_>],
    tensors: &StageTensors,
) -> Result<StageMemory> {
    use StageTermKind as K;
    let mut out = StageMemory::default();
    let mut dev = Categories::default();
    let mut sum = [0u64; STAGE_TERMS];
    let mut largest = [0u64; STAGE_TERMS];
    for p in ops {
        let PlacedMemory {
            operator: m,
            placed,
            terms: t,
        } = placed_memory(setup, p)?;
        out.cluster
            .add(&m.cluster.scaled(p.copies, p.activation_sets));
        out.unique
            .add(&m.unique.scaled(p.copies, p.activation_sets));
        out.host.add(&m.host.scaled(p.copies, 0));
        dev.add(&placed);
        for k in 0..STAGE_TERMS {
            sum[k] += t.sum[k];
            largest[k] = largest[k].max(t.largest[k]);
        }
    }
    sum[K::PipelineBuffers as usize] += 2 * tensors.pipeline_boundary_bytes;
    let logits = &mut largest[K::RecomputeOrLogits as usize];
    *logits = (*logits).max(tensors.logits_bytes);
    let (mut buffers, mut transient) = (0, 0);
    for (k, term) in stage_terms(setup).iter().enumerate() {
        let v = term.value(sum[k], largest[k]);
        if term.kind.is_transient() {
            transient += v;
        } else {
            buffers += v;
        }
    }
    out.device = DeviceBreakdown {
        parameters: dev.parameters,
        gradients: dev.gradients,
        optimizer_states: dev.optimizer_states,
        activations: dev.activations,
        buffers,
        transient,
        overhead: setup.overhead_bytes,
    };
    Ok(out)
}
