//! Megatron-LM's own memory estimate (`megatron/training/theoretical_memory_usage.py`,
//! reimplemented from its equations) and its cross-check against memory-model.

use memory_model::{
    embedding_operators, layer_operators, MlpKind, PipelineSchedule, PositionKind, Recompute,
    ZeroStage as MmZero,
};
use serde::{Deserialize, Serialize};

use crate::peers::PeerConfig;
use crate::plan::Plan;
use crate::search::Problem;

/// The inputs of Megatron's formula, as the emitted arguments set them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MegatronInputs {
    /// `--num-layers`.
    pub num_layers: f64,
    /// `--hidden-size`.
    pub hidden: f64,
    /// `--num-attention-heads`.
    pub heads: f64,
    /// `--num-query-groups` (the heads without GQA).
    pub query_groups: f64,
    /// `--kv-channels` (`hidden / heads` by default).
    pub kv_channels: f64,
    /// `--ffn-hidden-size`.
    pub ffn: f64,
    /// The vocabulary padded to `--make-vocab-size-divisible-by × TP`.
    pub padded_vocab: f64,
    /// `--seq-length`.
    pub seq: f64,
    /// `--micro-batch-size`.
    pub micro_batch: f64,
    /// `--tensor-model-parallel-size`.
    pub tp: f64,
    /// `--pipeline-model-parallel-size`.
    pub pp: f64,
    /// Data-parallel degree (world / (TP · PP)).
    pub dp: f64,
    /// Virtual stages per device (interleaved schedule).
    pub virtual_stages: Option<f64>,
    /// Micro-batches per step (`global / (micro · dp)`).
    pub num_microbatches: f64,
    /// `--sequence-parallel`.
    pub sequence_parallel: bool,
    /// `--recompute-granularity`.
    pub recompute: Recompute,
    /// `--use-distributed-optimizer`.
    pub distributed_optimizer: bool,
    /// `--swiglu`.
    pub swiglu: bool,
    /// `--untie-embeddings-and-output-weights`.
    pub untied: bool,
}

impl MegatronInputs {
    /// The inputs for configuration `cfg` of `problem` (what [`super::arguments`] emits).
    pub fn new(problem: &Problem, cfg: &PeerConfig) -> Self {
        let m = &problem.model;
        let multiple = (m.vocab_pad_multiple / cfg.tp).max(1) * cfg.tp;
        MegatronInputs {
            num_layers: m.num_layers as f64,
            hidden: m.hidden as f64,
            heads: m.num_heads as f64,
            query_groups: m.num_kv_heads as f64,
            kv_channels: m.head_dim as f64,
            ffn: m.ffn_hidden as f64,
            padded_vocab: (m.vocab_size.div_ceil(multiple) * multiple) as f64,
            seq: problem.setup.seq_len as f64,
            micro_batch: cfg.micro_batch_size as f64,
            tp: cfg.tp as f64,
            pp: cfg.pp as f64,
            dp: cfg.dp as f64,
            virtual_stages: match cfg.schedule {
                PipelineSchedule::Interleaved { virtual_stages } => Some(virtual_stages as f64),
                _ => None,
            },
            num_microbatches: cfg.micro_batches as f64,
            sequence_parallel: cfg.sequence_parallel,
            recompute: cfg.recompute,
            distributed_optimizer: cfg.zero == MmZero::DistributedOptimizer,
            swiglu: m.mlp == MlpKind::SwiGlu,
            untied: !m.tied_embeddings,
        }
    }

    /// Parameters of the transformer layers (Megatron's count: no linear biases).
    pub fn layer_parameters(&self) -> f64 {
        let gated = if self.swiglu { 1.5 } else { 1.0 };
        let ratio = self.kv_channels * self.heads / self.hidden;
        2.0 * self.num_layers
            * self.hidden
            * self.hidden
            * ((1.0 + self.query_groups / self.heads) * ratio
                + self.ffn / self.hidden * gated
                + 2.0 / self.hidden
                + 1.0 / (self.num_layers * self.hidden))
    }

    /// Parameters on the most loaded shard: the first stage's `L/pp` layers and the embedding
    /// (and the output layer when untied with one stage), over TP.
    pub fn parameters_on_most_loaded_shard(&self) -> f64 {
        let embedding = self.hidden * self.padded_vocab;
        let mut p = (self.layer_parameters() / self.pp + embedding) / self.tp;
        if self.untied && self.pp == 1.0 {
            p += embedding / self.tp;
        }
        p
    }
}

/// Megatron's estimate, bytes per device of the first stage.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MegatronMemory {
    /// Weights, gradients and optimizer states.
    pub weight_and_optimizer_bytes: f64,
    /// Activations.
    pub activation_bytes: f64,
    /// Whether Megatron itself reports activations for these inputs (sequence parallelism with
    /// selective recomputation); otherwise they come from Korthikanti's other rows.
    pub megatron_reports_activations: bool,
}

impl MegatronMemory {
    /// Weights, optimizer and activations.
    pub fn total(&self) -> f64 {
        self.weight_and_optimizer_bytes + self.activation_bytes
    }
}

/// Megatron's theoretical memory for `inputs` (see the module docs of [`super`]).
pub fn theoretical_memory(inputs: &MegatronInputs) -> MegatronMemory {
    let x = inputs;
    let bytes_per_parameter = if x.distributed_optimizer {
        6.0 + 12.0 / x.dp
    } else {
        18.0
    };
    let weight_and_optimizer_bytes = x.parameters_on_most_loaded_shard() * bytes_per_parameter;
    let sbh = x.seq * x.micro_batch * x.hidden;
    // Korthikanti et al. 2022, Table 2, generalised to f ≠ 4h as Megatron does; everything is
    // divided by TP at the end, so terms TP does not split are multiplied by it here.
    let per_layer = match (x.recompute, x.sequence_parallel) {
        (Recompute::Full, true) => 2.0 * sbh,
        (Recompute::Full, false) => 2.0 * sbh * x.tp,
        (_, true) => sbh * (18.0 + 4.0 * x.ffn / x.hidden),
        (_, false) => 10.0 * sbh * x.tp + sbh * (8.0 + 4.0 * x.ffn / x.hidden),
    } + if x.recompute == Recompute::None {
        5.0 * x.heads * x.seq * x.seq * x.micro_batch
    } else {
        0.0
    };
    let mut act = per_layer * x.num_layers;
    act += 8.0 * x.seq * x.micro_batch * x.pp;
    act += sbh * x.pp;
    match x.virtual_stages {
        Some(v) => act *= 1.0 + (x.pp - 1.0) / (x.pp * v),
        None if x.pp > 1.0 => act *= (x.num_microbatches / x.pp).min(1.0),
        None => {}
    }
    if x.pp == 1.0 {
        act += sbh * 4.0 * (1.0 + x.padded_vocab / x.hidden);
    }
    MegatronMemory {
        weight_and_optimizer_bytes,
        activation_bytes: act / x.tp,
        megatron_reports_activations: x.sequence_parallel && x.recompute == Recompute::Selective,
    }
}

/// An assumption on which Megatron's formula and memory-model differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssumptionDifference {
    /// What differs.
    pub what: String,
    /// memory-model minus Megatron that it explains, bytes (weights and optimizer), where it
    /// can be counted.
    pub weight_bytes: Option<f64>,
}

/// Megatron's estimate beside memory-model's for the same configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// Megatron's formula on the emitted arguments.
    pub megatron: MegatronMemory,
    /// memory-model, first stage: parameters + gradients + optimizer states, bytes.
    pub pardis_weight_and_optimizer: u64,
    /// memory-model, first stage: activations, bytes.
    pub pardis_activations: u64,
    /// memory-model, first stage: everything (buffers, transients, overhead included), bytes.
    pub pardis_total: u64,
    /// Where the assumptions differ.
    pub differences: Vec<AssumptionDifference>,
}

impl CrossCheck {
    /// Megatron's weights and optimizer plus the differences counted in bytes.
    pub fn explained_weight_and_optimizer(&self) -> f64 {
        self.megatron.weight_and_optimizer_bytes
            + self
                .differences
                .iter()
                .filter_map(|d| d.weight_bytes)
                .sum::<f64>()
    }
}

/// Megatron's formula on `cfg` (layer split `layers`) beside memory-model's first stage of
/// `priced` (the configuration priced by [`super::super::price`]).
pub fn cross_check(problem: &Problem, cfg: &PeerConfig, layers: &[u64], priced: &Plan) -> CrossCheck {
    let inputs = MegatronInputs::new(problem, cfg);
    let megatron = theoretical_memory(&inputs);
    let stage0 = priced
        .stages
        .iter()
        .find(|s| s.index == 0)
        .map(|s| s.memory)
        .unwrap_or_default();
    let m = &problem.model;
    let setup = &problem.setup;
    let per_param = if inputs.distributed_optimizer {
        6.0 + 12.0 / inputs.dp
    } else {
        18.0
    };
    let mut differences = Vec::new();
    let grad = setup.grad_bytes() as f64;
    if grad != 4.0 {
        differences.push(AssumptionDifference {
            what: format!(
                "gradients: Megatron keeps fp32 main_grad (4 B/parameter), memory-model {grad} B (fp32_grad_accumulation {})",
                setup.fp32_grad_accumulation
            ),
            weight_bytes: Some((grad - 4.0) * inputs.parameters_on_most_loaded_shard()),
        });
    }
    let per_param = per_param + grad - 4.0;
    let workload = setup.workload();
    let count = |ops: Vec<memory_model::Operator>| -> f64 {
        ops.iter()
            .flat_map(|o| o.params.iter().map(|p| p.shape.elements() as f64))
            .sum()
    };
    let layer_actual = count(layer_operators(m, &workload));
    let layer_megatron = inputs.layer_parameters() / inputs.num_layers
        - 2.0 * inputs.hidden / inputs.num_layers; // the final norm is counted per model
    let first = layers.first().copied().unwrap_or(m.num_layers) as f64;
    let uneven = first - inputs.num_layers / inputs.pp;
    if uneven != 0.0 {
        differences.push(AssumptionDifference {
            what: format!(
                "layer split: Megatron's formula takes L/pp = {} layers on the first stage, the arguments put {first}",
                inputs.num_layers / inputs.pp
            ),
            weight_bytes: Some(uneven * layer_megatron / inputs.tp * per_param),
        });
    }
    let bias = layer_actual - layer_megatron;
    if bias.abs() > 0.5 {
        differences.push(AssumptionDifference {
            what: format!(
                "layer parameters Megatron's formula leaves out (linear biases): {bias} per layer"
            ),
            weight_bytes: Some(bias * first / inputs.tp * per_param),
        });
    }
    let embedding_actual = count(embedding_operators(m, &workload));
    let embedding_extra = embedding_actual - inputs.hidden * inputs.padded_vocab;
    if embedding_extra.abs() > 0.5 {
        differences.push(AssumptionDifference {
            what: format!(
                "embedding parameters Megatron's formula leaves out ({}): {embedding_extra}",
                if m.position == PositionKind::Learned {
                    "learned position table, replicated over TP"
                } else {
                    "padding"
                }
            ),
            weight_bytes: Some(embedding_extra * per_param),
        });
    }
    if inputs.pp == 1.0 {
        differences.push(AssumptionDifference {
            what: "final norm: counted by both on a single stage".into(),
            weight_bytes: None,
        });
    }
    let extra = stage0.buffers + stage0.transient + stage0.overhead;
    differences.push(AssumptionDifference {
        what: format!(
            "communication buffers, transients and overhead: memory-model {} B, Megatron's formula none",
            extra
        ),
        weight_bytes: None,
    });
    if !megatron.megatron_reports_activations {
        differences.push(AssumptionDifference {
            what: "activations: Megatron reports them only with --sequence-parallel and selective recomputation; Korthikanti's other Table 2 rows used".into(),
            weight_bytes: None,
        });
    }
    if setup.flash_attention {
        differences.push(AssumptionDifference {
            what: "activations: flash attention saves q, k, v, the output and an fp32 log-sum-exp; Megatron's formula assumes the unfused attention core (selective: none of its s² tensors)".into(),
            weight_bytes: None,
        });
    }
    if m.mlp == MlpKind::SwiGlu || m.num_kv_heads != m.num_heads || m.head_dim * m.num_heads != m.hidden {
        differences.push(AssumptionDifference {
            what: "activations: Megatron's formula assumes a GeLU MLP, multi-head attention and kv-channels = hidden / heads (SwiGLU, GQA or another head size change the saved tensors)".into(),
            weight_bytes: None,
        });
    }
    CrossCheck {
        megatron,
        pardis_weight_and_optimizer: stage0.parameters + stage0.gradients + stage0.optimizer_states,
        pardis_activations: stage0.activations,
        pardis_total: stage0.total(),
        differences,
    }
}
