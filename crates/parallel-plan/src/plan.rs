//! Plans as the planner reports them: per stage, per operator, memory by category, ILP size.

use serde::{Deserialize, Serialize};

use crate::ilp::IlpStats;

pub use memory_model::DeviceBreakdown;
use memory_model::{Categories, PipelineSchedule, Recompute};

/// Adds `copies` identical operators with per-device bytes `op` to `device`, their saved
/// activations held for `in_flight` micro-batches.
pub(crate) fn add_operator(
    device: &mut DeviceBreakdown,
    op: &Categories,
    copies: u64,
    in_flight: u64,
) {
    device.parameters += copies * op.parameters;
    device.gradients += copies * op.gradients;
    device.optimizer_states += copies * op.optimizer_states;
    device.activations += copies * op.activations * in_flight;
}

/// Serde adapter for a per-device [`DeviceBreakdown`] in a plan: its categories followed by
/// `total` (the shape of `pardis memory --json`), all integer bytes. Reading ignores `total`,
/// which is [`DeviceBreakdown::total`] of the categories.
pub mod bytes_with_total {
    use memory_model::DeviceBreakdown;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct WithTotal<'a> {
        #[serde(flatten)]
        categories: &'a DeviceBreakdown,
        total: u64,
    }

    /// Writes the categories and their total.
    pub fn serialize<S: Serializer>(d: &DeviceBreakdown, s: S) -> Result<S::Ok, S::Error> {
        WithTotal {
            categories: d,
            total: d.total(),
        }
        .serialize(s)
    }

    /// Reads the categories (an extra `total` is ignored).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DeviceBreakdown, D::Error> {
        DeviceBreakdown::deserialize(d)
    }
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
    /// Per-device memory of the stage: memory-model's [`memory_model::stage_memory`] of its
    /// operators under their shardings (buffers, transient peaks and overhead included).
    #[serde(with = "bytes_with_total")]
    pub memory: DeviceBreakdown,
    /// Per-device memory as the ILP computed it (model states + activations in flight), bytes;
    /// equals the operator categories of `memory` (parameters, gradients, optimizer states,
    /// activations), which are recomputed independently.
    pub ilp_memory: u64,
    /// The stage's step time if it were the bottleneck, seconds.
    pub time_s: f64,
    /// The ILP behind this stage.
    pub ilp: IlpStats,
}

/// ILP statistics of a plan: the largest size, the worst status and gap, and the total solve
/// time over its solves ([`IlpStats::summary_of`]).
pub type IlpSummary = IlpStats;

impl Plan {
    /// The recomputation as shown in tables: the mode (`none`, `selective`, `pointwise`,
    /// `full`), with `(k/p stages)` when only the first `k` of `p` stages recompute.
    pub fn recompute_label(&self) -> String {
        if self.recompute != Recompute::None && self.recompute_stages < self.pipeline_stages {
            format!(
                "{}({}/{} stages)",
                self.recompute, self.recompute_stages, self.pipeline_stages
            )
        } else {
            self.recompute.to_string()
        }
    }
}

/// A complete training plan on the whole mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What produced it: `pardis min-memory`, `Megatron-LM tp8 sp dist-opt`, ...
    pub name: String,
    /// Pipeline stages.
    pub pipeline_stages: u64,
    /// Mesh of one stage, e.g. `gpu0:2×gpu1:4`.
    pub stage_mesh: String,
    /// Micro-batches per step.
    pub micro_batches: u64,
    /// Sequences per micro-batch (over the whole stage).
    pub micro_batch_size: u64,
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Leading pipeline stages that recompute (`recompute`); the later ones keep every
    /// activation. Equals `pipeline_stages` when every stage recomputes.
    pub recompute_stages: u64,
    /// Transformer layers of each pipeline stage.
    pub layers_per_stage: Vec<u64>,
    /// Per-device memory of the peak stage.
    #[serde(with = "bytes_with_total")]
    pub per_device_memory: DeviceBreakdown,
    /// Step time (slowest stage), seconds.
    pub step_time_s: f64,
    /// Whether the per-device memory fits the device.
    pub fits: bool,
    /// Stages.
    pub stages: Vec<StagePlan>,
    /// ILP statistics.
    pub ilp: IlpSummary,
}
