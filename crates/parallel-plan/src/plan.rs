//! Plans as the planner reports them: per stage, per operator, memory by category, ILP size.

use serde::{Deserialize, Serialize};

use crate::ilp::IlpStats;

/// Per-device memory by category (the categories of `pardis memory`), bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryBreakdown {
    /// Parameters.
    pub parameters: u64,
    /// Gradients.
    pub gradients: u64,
    /// Optimizer states (with fp32 master weights).
    pub optimizer_states: u64,
    /// Activations saved for backward, times the micro-batches in flight.
    pub activations: u64,
    /// Communication buffers (not modelled by the planner: 0).
    pub buffers: u64,
    /// Transient peaks (not modelled by the planner: 0).
    pub transient: u64,
    /// Fixed per-device overhead of the training setup.
    pub overhead: u64,
    /// Sum of the above.
    pub total: u64,
}

/// The chosen sharding of one operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorPlan {
    /// Operator name.
    pub name: String,
    /// Identical copies (tied layers) on the stage.
    pub copies: u32,
    /// Per split dimension, the mesh axes splitting it, e.g. `batch:node,gpu heads:gpu`;
    /// `replicated` when nothing is split.
    pub sharding: String,
    /// ZeRO stage of the operator's parameters over its data-parallel axes.
    pub zero: u8,
    /// Collectives the operator and its incoming edges insert, e.g. `fwd all-reduce@gpu`.
    pub collectives: Vec<String>,
}

/// One pipeline stage of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// Stage index (0 = first).
    pub index: u64,
    /// Transformer layers on the stage.
    pub layers: u64,
    /// Operators (layer operators once, with their copies).
    pub operators: Vec<OperatorPlan>,
    /// Per-device memory of the stage.
    pub memory: MemoryBreakdown,
    /// Per-device memory as the ILP computed it (model states + activations in flight), bytes;
    /// equals `memory.total − memory.overhead`, which is recomputed independently.
    pub ilp_memory: u64,
    /// The stage's step time if it were the bottleneck, seconds.
    pub time_s: f64,
    /// The ILP behind this stage.
    pub ilp: IlpStats,
}

/// ILP statistics of a plan: the largest size, the worst status and gap, and the total solve
/// time over its solves ([`IlpStats::summary_of`]).
pub type IlpSummary = IlpStats;

/// A complete training plan on the whole mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What produced it: `pardis min-memory`, `Megatron-LM tp8 sp dist-opt`, ...
    pub name: String,
    /// Pipeline stages.
    pub pipeline_stages: u64,
    /// Mesh of one stage, e.g. `gpu0 2×gpu1 4`.
    pub stage_mesh: String,
    /// Micro-batches per step.
    pub micro_batches: u64,
    /// Sequences per micro-batch (over the whole stage).
    pub micro_batch_size: u64,
    /// Pipeline schedule (`OneFOneB` or `GPipe`).
    pub schedule: String,
    /// Activation recomputation: `none`, `selective` or `full`.
    pub recompute: String,
    /// Transformer layers of each pipeline stage.
    pub layers_per_stage: Vec<u64>,
    /// Per-device memory of the peak stage.
    pub per_device_memory: MemoryBreakdown,
    /// Step time (slowest stage), seconds.
    pub step_time_s: f64,
    /// Whether the per-device memory fits the device.
    pub fits: bool,
    /// Stages.
    pub stages: Vec<StagePlan>,
    /// ILP statistics.
    pub ilp: IlpSummary,
}
