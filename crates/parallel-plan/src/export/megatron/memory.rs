//! Megatron-LM's own memory estimate (`megatron/training/theoretical_memory_usage.py` of
//! NVIDIA/Megatron-LM at `d98e8a64`, August 2026, reimplemented from its equations for dense
//! models: no MoE, MTP or multi-latent attention) and its cross-check against memory-model.
//!
//! Weights and optimizer (`compute_weight_and_optimizer_memory`): the most loaded shard holds
//! `1/pp` of the TP-split layer weights (attention `2h²(1 + g/a)·(kv·a/h)`, MLP `2h·f` × 3/2
//! with SwiGLU) and the embedding `h·V`, over TP, plus `1/pp` of the replicated norm weights
//! (`2h` per layer and `h` for the final norm, doubled for LayerNorm's bias), and the output
//! layer over TP when untied on one stage; at 18 bytes per parameter (bf16 weight, fp32
//! gradient, fp32 master weight, two Adam moments) or `6 + 12/dp` with the distributed
//! optimizer.
//!
//! Activations, first stage: with `--sequence-parallel` and selective recomputation
//! (`compute_activation_memory`, Korthikanti et al. 2022 Table 2) `s·b·h·(18 + 4f/h)` per layer;
//! otherwise (`compute_activation_memory_without_sp`) `s·b·h·(10 + 24/t)` per layer whatever the
//! recomputation, times 1.05. Both: times `L` (the first stage holds `pp` micro-batches of
//! `L/pp` layers), plus the embedding's input (`8·s·b`) and dropout mask (`s·b·h`) per
//! micro-batch in flight (`pp`), times `1 + (pp−1)/(pp·v)` when interleaved or `min(1, m/pp)`
//! otherwise; with one stage the output layer and loss (`4·s·b·h·(1 + V/h)`, resp.
//! `2·(s·b·V/t + s·b·h)`).

use memory_model::{
    embedding_operators, layer_operators, MlpKind, NormKind, PipelineSchedule, PositionKind,
    Recompute, ZeroStage,
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
    /// `--normalization RMSNorm` (no bias).
    pub rms_norm: bool,
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
            // Megatron-FSDP (ZeRO-2/3) runs with the distributed optimizer.
            distributed_optimizer: matches!(
                cfg.zero,
                ZeroStage::DistributedOptimizer | ZeroStage::Zero2 | ZeroStage::Zero3
            ),
            swiglu: m.mlp == MlpKind::SwiGlu,
            rms_norm: m.norm == NormKind::RmsNorm,
            untied: !m.tied_embeddings,
        }
    }

    /// Weights of one norm per hidden unit: 1 (RMSNorm) or 2 (LayerNorm's bias).
    fn norm_size(&self) -> f64 {
        if self.rms_norm {
            1.0
        } else {
            2.0
        }
    }

    /// TP-split parameters of one layer: the attention and MLP weights (no linear biases).
    pub fn split_layer_parameters(&self) -> f64 {
        let gated = if self.swiglu { 1.5 } else { 1.0 };
        let ratio = self.kv_channels * self.heads / self.hidden;
        2.0 * self.hidden * self.hidden * (1.0 + self.query_groups / self.heads) * ratio
            + 2.0 * self.hidden * self.ffn * gated
    }

    /// Replicated parameters of one layer: its two norms.
    pub fn replicated_layer_parameters(&self) -> f64 {
        2.0 * self.hidden * self.norm_size()
    }

    /// Parameters on the most loaded shard (Megatron's `num_parameters_on_most_loaded_model_shard`).
    pub fn parameters_on_most_loaded_shard(&self) -> f64 {
        let embedding = self.hidden * self.padded_vocab;
        let split = self.split_layer_parameters() * self.num_layers / self.pp + embedding;
        let replicated = (self.replicated_layer_parameters() * self.num_layers
            + self.norm_size() * self.hidden)
            / self.pp;
        let mut p = split / self.tp + replicated;
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
    /// Which of Megatron's two activation formulas applies: `true` for Korthikanti's Table 2
    /// (`--sequence-parallel` with selective recomputation), `false` for
    /// `compute_activation_memory_without_sp` (every other case; it ignores recomputation).
    pub sequence_parallel_formula: bool,
}

impl MegatronMemory {
    /// Weights, optimizer and activations.
    pub fn total(&self) -> f64 {
        self.weight_and_optimizer_bytes + self.activation_bytes
    }
}

/// Megatron's theoretical memory for `inputs` (see the module docs).
pub fn theoretical_memory(inputs: &MegatronInputs) -> MegatronMemory {
    let x = inputs;
    let bytes_per_parameter = if x.distributed_optimizer {
        6.0 + 12.0 / x.dp
    } else {
        18.0
    };
    let weight_and_optimizer_bytes = x.parameters_on_most_loaded_shard() * bytes_per_parameter;
    let sbh = x.seq * x.micro_batch * x.hidden;
    let sp_formula = x.sequence_parallel && x.recompute == Recompute::Selective;
    let per_layer = if sp_formula {
        sbh * (18.0 + 4.0 * x.ffn / x.hidden)
    } else {
        sbh * (10.0 + 24.0 / x.tp)
    };
    let mut act = per_layer * x.num_layers;
    act += 8.0 * x.seq * x.micro_batch * x.pp;
    act += sbh * x.pp;
    match x.virtual_stages {
        Some(v) => act *= 1.0 + (x.pp - 1.0) / (x.pp * v),
        None if x.pp > 1.0 => act *= (x.num_microbatches / x.pp).min(1.0),
        None => {}
    }
    let activation_bytes = if sp_formula {
        if x.pp == 1.0 {
            act += sbh * 4.0 * (1.0 + x.padded_vocab / x.hidden);
        }
        act / x.tp
    } else {
        if x.pp == 1.0 {
            let logits = x.seq * x.micro_batch * x.padded_vocab / x.tp;
            act += (logits + sbh) * 2.0;
        }
        act * 1.05
    };
    MegatronMemory {
        weight_and_optimizer_bytes,
        activation_bytes,
        sequence_parallel_formula: sp_formula,
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

/// Elements of `ops`' parameters split by tensor parallelism (a Heads, KV-heads, FFN or
/// vocabulary dimension) and replicated over it.
fn split_and_replicated(ops: &[memory_model::Operator]) -> (f64, f64) {
    use memory_model::Dim;
    let mut out = (0.0, 0.0);
    for p in ops.iter().flat_map(|o| &o.params).filter(|p| !p.tied_copy) {
        let split = p
            .shape
            .0
            .iter()
            .any(|(d, _)| matches!(d, Dim::Heads | Dim::KvHeads | Dim::Ffn | Dim::Vocab));
        let n = p.shape.elements() as f64;
        if split {
            out.0 += n;
        } else {
            out.1 += n;
        }
    }
    out
}

/// Megatron's formula on `cfg` (layer split `layers`) beside memory-model's first stage of
/// `priced` (the configuration priced by [`crate::peers::evaluate_with_layers`]). The weight differences are
/// itemised in parameters and priced at memory-model's bytes per parameter; whatever they do not
/// explain is listed as `unexplained`.
pub fn cross_check(
    problem: &Problem,
    cfg: &PeerConfig,
    layers: &[u64],
    priced: &Plan,
) -> CrossCheck {
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
    let x = &inputs;
    let optimizer = if x.distributed_optimizer {
        12.0 / x.dp
    } else {
        12.0
    };
    let grad = setup.grad_bytes() as f64;
    let param = setup.precision.param_bytes() as f64;
    // memory-model's bytes per parameter on these settings (Megatron-FSDP shards gradients,
    // and at ZeRO-3 parameters, over the data-parallel ranks).
    let (grad_share, param_share) = match cfg.zero {
        ZeroStage::Zero2 => (1.0 / x.dp, 1.0),
        ZeroStage::Zero3 => (1.0 / x.dp, 1.0 / x.dp),
        _ => (1.0, 1.0),
    };
    let per_param = param * param_share + grad * grad_share + optimizer;
    let mut differences = Vec::new();
    let item = |differences: &mut Vec<AssumptionDifference>, what: String, parameters: f64| {
        if parameters.abs() > 0.5 {
            differences.push(AssumptionDifference {
                what,
                weight_bytes: Some(parameters * per_param),
            });
        }
    };
    if grad != 4.0 || param != 2.0 {
        let p = x.parameters_on_most_loaded_shard();
        differences.push(AssumptionDifference {
            what: format!(
                "bytes per parameter: Megatron assumes bf16 weights and fp32 main gradients (2 + 4), memory-model {param} + {grad} (precision {:?}, fp32_grad_accumulation {})",
                setup.precision, setup.fp32_grad_accumulation
            ),
            weight_bytes: Some(p * (param + grad - 6.0)),
        });
    }
    if matches!(cfg.zero, ZeroStage::Zero2 | ZeroStage::Zero3) {
        // theoretical_memory_usage.py knows the distributed optimizer, not Megatron-FSDP.
        let p = x.parameters_on_most_loaded_shard();
        let sharded = grad * (1.0 - grad_share) + param * (1.0 - param_share);
        differences.push(AssumptionDifference {
            what: format!(
                "Megatron-FSDP ({:?}) also shards gradients{} over the {} data-parallel ranks; Megatron's formula counts them whole",
                cfg.zero,
                if cfg.zero == ZeroStage::Zero3 { " and parameters" } else { "" },
                x.dp
            ),
            weight_bytes: Some(-p * sharded),
        });
    }
    let workload = setup.workload();
    let first = layers.first().copied().unwrap_or(m.num_layers) as f64;
    let (meg_split, meg_repl) = (x.split_layer_parameters(), x.replicated_layer_parameters());
    item(
        &mut differences,
        format!(
            "layer split: Megatron's formula puts L/pp = {} layers on the first stage, the arguments {first}",
            x.num_layers / x.pp
        ),
        (first - x.num_layers / x.pp) * (meg_split / x.tp + meg_repl),
    );
    let (layer_split, layer_repl) = split_and_replicated(&layer_operators(m, &workload));
    item(
        &mut differences,
        format!(
            "layer parameters Megatron's formula leaves out (linear biases): {} per layer",
            layer_split + layer_repl - meg_split - meg_repl
        ),
        first * ((layer_split - meg_split) / x.tp + (layer_repl - meg_repl)),
    );
    let (emb_split, emb_repl) = split_and_replicated(&embedding_operators(m, &workload));
    let megatron_embedding = x.hidden * x.padded_vocab;
    item(
        &mut differences,
        format!(
            "embedding: memory-model {} split over TP + {emb_repl} replicated ({}), Megatron's formula {megatron_embedding} split",
            emb_split,
            if m.position == PositionKind::Learned {
                "learned position table"
            } else {
                "no position table"
            }
        ),
        (emb_split - megatron_embedding) / x.tp + emb_repl,
    );
    // Megatron counts the final norm (and an untied output layer with one stage) on the first
    // stage; memory-model holds the head on the last stage.
    let norm = if x.rms_norm { 1.0 } else { 2.0 };
    let megatron_head = norm * x.hidden / x.pp
        + if x.untied && x.pp == 1.0 {
            megatron_embedding / x.tp
        } else {
            0.0
        };
    let actual_head = if x.pp == 1.0 {
        let (s, r) = split_and_replicated(&memory_model::head_operators(m, &workload, false));
        s / x.tp + r
    } else {
        0.0
    };
    item(
        &mut differences,
        format!(
            "final norm / output layer: Megatron's formula counts {megatron_head} of them on the first stage, memory-model {actual_head}"
        ),
        actual_head - megatron_head,
    );
    let explained: f64 = differences.iter().filter_map(|d| d.weight_bytes).sum();
    let pardis_weight_and_optimizer =
        stage0.parameters + stage0.gradients + stage0.optimizer_states;
    let residual =
        pardis_weight_and_optimizer as f64 - megatron.weight_and_optimizer_bytes - explained;
    if residual.abs() > 1e-6 * pardis_weight_and_optimizer as f64 {
        differences.push(AssumptionDifference {
            what: format!("unexplained weights and optimizer difference: {residual:.0} B"),
            weight_bytes: None,
        });
    }
    differences.push(AssumptionDifference {
        what: format!(
            "communication buffers, transients and overhead: memory-model {} B, Megatron's formula none",
            stage0.buffers + stage0.transient + stage0.overhead
        ),
        weight_bytes: None,
    });
    if megatron.sequence_parallel_formula {
        if setup.flash_attention {
            differences.push(AssumptionDifference {
                what: "activations: flash attention saves q, k, v, the output and an fp32 log-sum-exp; Korthikanti's formula assumes the unfused attention core".into(),
                weight_bytes: None,
            });
        }
    } else {
        differences.push(AssumptionDifference {
            what: format!(
                "activations: without --sequence-parallel and selective recomputation Megatron uses s·b·h·(10 + 24/t) per layer times 1.05, whatever the recomputation (here {}) and the FFN size",
                x.recompute
            ),
            weight_bytes: None,
        });
    }
    if m.mlp == MlpKind::SwiGlu
        || m.num_kv_heads != m.num_heads
        || m.head_dim * m.num_heads != m.hidden
    {
        differences.push(AssumptionDifference {
            what: "activations: Megatron's formula assumes a GeLU MLP, multi-head attention and kv-channels = hidden / heads (SwiGLU, GQA or another head size change the saved tensors)".into(),
            weight_bytes: None,
        });
    }
    if first != x.num_layers / x.pp {
        differences.push(AssumptionDifference {
            what: "activations: Megatron's formula takes L/pp layers on the first stage".into(),
            weight_bytes: None,
        });
    }
    CrossCheck {
        megatron,
        pardis_weight_and_optimizer,
        pardis_activations: stage0.activations,
        pardis_total: stage0.total(),
        differences,
    }
}
