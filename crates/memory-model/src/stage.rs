//! One pipeline stage's per-device memory from its operators, each under its own sharding:
//! the operator categories of [`crate::sharding`] plus communication buffers, transient peaks
//! and overhead. [`crate::estimate`] (uniform Megatron-style shardings) and the parallel
//! planner (a sharding per operator) both compute a stage through [`stage_memory`], so the two
//! agree to the byte wherever they describe the same configuration.

use crate::breakdown::DeviceBreakdown;
use crate::error::Result;
use crate::operator::Operator;
use crate::setup::{Recompute, TrainingSetup};
use crate::sharding::{operator_memory, Categories, OperatorSharding};

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

/// Gradient-synchronisation buckets of one ZeRO mode, summed over its operators.
#[derive(Debug, Default)]
struct SyncGroup {
    present: bool,
    gradients: u64,
    gradients_full: u64,
    parameters: u64,
    gathered: u64,
}

/// Per-device memory of a stage holding `ops`, with `tensors` at its boundaries.
///
/// - Operators: [`operator_memory`] of each, model states times `copies`, activations times
///   `activation_sets`.
/// - Buffers, per ZeRO mode among operators with more than one data-parallel replica: plain data parallelism holds two DDP buckets (at most its
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
    let mut out = StageMemory::default();
    let mut dev = Categories::default();
    let plain = TrainingSetup {
        recompute: Recompute::None,
        ..setup.clone()
    };
    let mut recomputed_layer = 0;
    let (mut zero0, mut zero12, mut zero3) = (
        SyncGroup::default(),
        SyncGroup::default(),
        SyncGroup::default(),
    );
    let mut largest_gathered = 0;
    for p in ops {
        let m = operator_memory(p.op, &p.sharding, setup)?;
        let placed = m.device.scaled(p.copies, p.activation_sets);
        dev.add(&placed);
        out.cluster
            .add(&m.cluster.scaled(p.copies, p.activation_sets));
        out.unique
            .add(&m.unique.scaled(p.copies, p.activation_sets));
        out.host.add(&m.host.scaled(p.copies, 0));
        if p.in_layer && setup.recompute != Recompute::None {
            let kept_all = operator_memory(p.op, &p.sharding, &plain)?;
            recomputed_layer += kept_all.device.activations - m.device.activations;
        }
        let sh = &p.sharding;
        if sh.zero.shards_parameters() {
            largest_gathered = largest_gathered.max(m.gathered_parameters);
        }
        if p.data_parallel <= 1 {
            continue;
        }
        let group = if sh.zero.shards_parameters() {
            &mut zero3
        } else if sh.zero.shards_optimizer() {
            &mut zero12
        } else {
            &mut zero0
        };
        let unsharded = if sh.zero.shards_gradients() {
            sh.zero_group
        } else {
            1
        };
        group.present = true;
        group.gradients += placed.gradients;
        group.gradients_full += placed.gradients * unsharded;
        group.parameters += placed.parameters;
        group.gathered = group.gathered.max(m.gathered_parameters);
    }
    let b = &setup.buffers;
    let reduce_bucket = b.zero_reduce_bucket_elements * setup.grad_bytes();
    let param_bytes = setup.precision.param_bytes();
    let mut buffers = 0;
    if zero0.present {
        buffers += 2 * b.ddp_bucket_bytes.min(zero0.gradients);
    }
    if zero12.present {
        buffers += reduce_bucket.min(zero12.gradients_full)
            + (b.zero_allgather_bucket_elements * param_bytes).min(zero12.parameters);
    }
    if zero3.present {
        buffers += reduce_bucket.min(zero3.gradients_full)
            + (b.zero3_prefetch_elements * param_bytes).min(zero3.gathered);
    }
    buffers += 2 * tensors.pipeline_boundary_bytes;
    out.device = DeviceBreakdown {
        parameters: dev.parameters,
        gradients: dev.gradients,
        optimizer_states: dev.optimizer_states,
        activations: dev.activations,
        buffers,
        transient: 2 * largest_gathered + recomputed_layer.max(tensors.logits_bytes),
        overhead: setup.overhead_bytes,
    };
    Ok(out)
}
