//! Megatron-LM: `pretrain_gpt.py` arguments for a plan, and Megatron's own memory formula on
//! them beside memory-model's.
//!
//! Every flag exists in `megatron/training/arguments.py` of NVIDIA/Megatron-LM (checked at
//! `d98e8a64`, August 2026; all but the layout and CP flags also in core 0.12): written there
//! with `add_argument` (`--use-distributed-optimizer`, `--decoder-first-pipeline-num-layers`,
//! `--decoder-last-pipeline-num-layers`, `--pipeline-model-parallel-layout`,
//! `--num-layers-per-virtual-pipeline-stage`, `--group-query-attention`, `--seq-length`,
//! `--max-position-embeddings`, `--make-vocab-size-divisible-by`, `--swiglu`,
//! `--position-embedding-type`, `--untie-embeddings-and-output-weights`, `--use-flash-attn`,
//! `--data-parallel-sharding-strategy`, `--no-gradient-accumulation-fusion`, `--ckpt-format`),
//! or from the fields of `DistributedInitConfig` (`megatron/training/config/common_config.py`:
//! `--use-megatron-fsdp`), or
//! generated there by `ArgumentGroupFactory` (`megatron/training/argument_utils.py`, `--` and
//! the field name with `-` for `_`) from the fields of `ModelParallelConfig`
//! (`megatron/core/model_parallel_config.py`: `--tensor-model-parallel-size`,
//! `--pipeline-model-parallel-size`, `--context-parallel-size`, `--sequence-parallel`,
//! `--bf16`, `--fp16`), `TransformerConfig` (`megatron/core/transformer/transformer_config.py`:
//! `--num-layers`, `--hidden-size`, `--num-attention-heads`, `--ffn-hidden-size`,
//! `--kv-channels`, `--num-query-groups`, `--normalization`, `--add-qkv-bias`,
//! `--attention-dropout`, `--hidden-dropout`, `--fp32-residual-connection`,
//! `--recompute-granularity`, `--recompute-method`, `--recompute-num-layers`, and
//! `--disable-bias-linear` through its `arg_names`) and `TrainingConfig`
//! (`megatron/training/config/training_config.py`: `--micro-batch-size`,
//! `--global-batch-size`). [`ALLOWED_ARGUMENTS`] lists them; the golden tests check every
//! emitted flag against it.
//!
//! The pipeline layout string follows the flag's help: `E` the embedding, `t` a transformer
//! layer, `L` the loss, `|` between stages. Full recomputation is written as
//! `--recompute-granularity full --recompute-method uniform --recompute-num-layers 1` (every
//! layer checkpointed at its input, what memory-model's `Recompute::Full` counts).
//!
//! The cross-check ([`cross_check`], [`theoretical_memory`]) reimplements
//! `megatron/training/theoretical_memory_usage.py` (see [`memory`]'s docs for its equations)
//! and lists where its assumptions differ from memory-model's.

use memory_model::{
    MlpKind, NormKind, PipelineSchedule, PositionKind, Precision, Recompute, ZeroStage,
};

use super::shape::PlanShape;
use super::{base_config, note_zero, zero_of, EmittedFile, GivenUp, Header, Nearest};
use crate::error::Result;
use crate::peers::Framework;
use crate::plan::Plan;
use crate::search::Problem;

/// Every flag the export may write (all defined in `megatron/training/arguments.py`).
pub const ALLOWED_ARGUMENTS: [&str; 40] = [
    "--use-megatron-fsdp",
    "--data-parallel-sharding-strategy",
    "--no-gradient-accumulation-fusion",
    "--ckpt-format",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--context-parallel-size",
    "--sequence-parallel",
    "--use-distributed-optimizer",
    "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout",
    "--num-layers-per-virtual-pipeline-stage",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--micro-batch-size",
    "--global-batch-size",
    "--num-layers",
    "--hidden-size",
    "--num-attention-heads",
    "--ffn-hidden-size",
    "--kv-channels",
    "--group-query-attention",
    "--num-query-groups",
    "--seq-length",
    "--max-position-embeddings",
    "--make-vocab-size-divisible-by",
    "--normalization",
    "--swiglu",
    "--position-embedding-type",
    "--untie-embeddings-and-output-weights",
    "--disable-bias-linear",
    "--add-qkv-bias",
    "--attention-dropout",
    "--hidden-dropout",
    "--bf16",
    "--fp16",
    "--use-flash-attn",
    "--fp32-residual-connection",
];

/// The nearest Megatron-LM configuration: uniform TP with Megatron's column/row layout, the
/// distributed optimizer for ZeRO-1 (and for ZeRO-2/3 with a pipeline), Megatron-FSDP for
/// ZeRO-2/3 without one, 1F1B for GPipe, the plan's layer split (any split
/// is expressible through first/last-stage layers or a pipeline layout) unless interleaved.
pub(crate) fn nearest(
    problem: &Problem,
    plan: &Plan,
    shape: &PlanShape,
    tp: u64,
) -> Result<Nearest> {
    let mut given_up = shape.layout_differences(tp);
    let pp = plan.pipeline_stages;
    let mut cfg = base_config(
        problem,
        plan,
        shape,
        Framework::MegatronLm,
        tp,
        pp,
        &mut given_up,
    )?;
    // ZeRO-1: the distributed optimizer. ZeRO-2/3 without a pipeline: Megatron-FSDP
    // (`optim_grads` / `optim_grads_params`); its docs name TP, CP and EP as compatible, not
    // PP, so with a pipeline the distributed optimizer is the nearest.
    let zero = match shape.zero {
        _ if cfg.dp <= 1 => 0,
        0 => 0,
        z @ (2 | 3) if pp == 1 => z,
        _ => 1,
    };
    note_zero(shape, zero, &mut given_up);
    cfg.zero = zero_of(zero, true);
    if cfg.recompute == Recompute::Pointwise {
        // `--recompute-modules layernorm` recomputes unfused norms only, and never a dense
        // MLP's activation function (see `peers::configurations`): the attention core alone is
        // the nearest.
        cfg.recompute = Recompute::Selective;
        given_up.push(GivenUp::Recompute {
            plan: plan.recompute,
            engine: cfg.recompute,
        });
    }
    if plan.schedule == PipelineSchedule::GPipe && pp > 1 {
        cfg.schedule = PipelineSchedule::OneFOneB;
        given_up.push(GivenUp::Schedule {
            plan: plan.schedule,
            engine: cfg.schedule,
        });
    }
    let mut layers = plan.layers_per_stage.clone();
    if let PipelineSchedule::Interleaved { virtual_stages } = cfg.schedule {
        let l = problem.model.num_layers;
        if !l.is_multiple_of(pp * virtual_stages) {
            // --num-layers-per-virtual-pipeline-stage needs equal chunks.
            cfg.schedule = PipelineSchedule::OneFOneB;
            given_up.push(GivenUp::Schedule {
                plan: plan.schedule,
                engine: cfg.schedule,
            });
        }
    }
    if let PipelineSchedule::Interleaved { .. } = cfg.schedule {
        let l = problem.model.num_layers;
        let even = memory_model::layers_per_stage(l, pp);
        if layers != even {
            given_up.push(GivenUp::LayerSplit {
                plan: layers.clone(),
                engine: even.clone(),
            });
            layers = even;
        }
    }
    Ok(Nearest {
        config: cfg,
        layers,
        given_up,
        linear_layout: None,
    })
}

/// The argument list (flags and values, in order) for `nearest` on `problem`.
pub fn arguments(
    problem: &Problem,
    nearest_cfg: &crate::peers::PeerConfig,
    layers: &[u64],
) -> Vec<String> {
    let m = &problem.model;
    let c = nearest_cfg;
    let mut a: Vec<String> = Vec::new();
    let mut push = |flag: &str, value: Option<String>| {
        a.push(flag.to_string());
        a.extend(value);
    };
    let n = |v: u64| Some(v.to_string());
    push("--tensor-model-parallel-size", n(c.tp));
    push("--pipeline-model-parallel-size", n(c.pp));
    push("--context-parallel-size", n(1));
    if c.sequence_parallel {
        push("--sequence-parallel", None);
    }
    match c.zero {
        ZeroStage::DistributedOptimizer => push("--use-distributed-optimizer", None),
        ZeroStage::Zero2 | ZeroStage::Zero3 => {
            // Megatron-FSDP's required flags (docs/user-guide/features/megatron_fsdp.md).
            push("--use-megatron-fsdp", None);
            let strategy = if c.zero == ZeroStage::Zero2 {
                "optim_grads"
            } else {
                "optim_grads_params"
            };
            push("--data-parallel-sharding-strategy", Some(strategy.into()));
            push("--no-gradient-accumulation-fusion", None);
            push("--use-distributed-optimizer", None);
            push("--ckpt-format", Some("fsdp_dtensor".into()));
        }
        _ => {}
    }
    match c.recompute {
        Recompute::None => {}
        // `nearest` never passes pointwise (see there).
        Recompute::Selective | Recompute::Pointwise => {
            push("--recompute-granularity", Some("selective".into()))
        }
        Recompute::Full => {
            push("--recompute-granularity", Some("full".into()));
            push("--recompute-method", Some("uniform".into()));
            push("--recompute-num-layers", n(1));
        }
    }
    push("--micro-batch-size", n(c.micro_batch_size));
    push("--global-batch-size", n(problem.global_batch));
    if let PipelineSchedule::Interleaved { virtual_stages } = c.schedule {
        push(
            "--num-layers-per-virtual-pipeline-stage",
            n(m.num_layers / (c.pp * virtual_stages).max(1)),
        );
    }
    for (flag, value) in pipeline_split(layers) {
        push(flag, Some(value));
    }
    push("--num-layers", n(m.num_layers));
    push("--hidden-size", n(m.hidden));
    push("--num-attention-heads", n(m.num_heads));
    push("--ffn-hidden-size", n(m.ffn_hidden));
    if m.head_dim * m.num_heads != m.hidden {
        push("--kv-channels", n(m.head_dim));
    }
    if m.num_kv_heads != m.num_heads {
        push("--group-query-attention", None);
        push("--num-query-groups", n(m.num_kv_heads));
    }
    push("--seq-length", n(problem.setup.seq_len));
    let positions = match m.position {
        PositionKind::Learned => m.max_positions,
        PositionKind::Rotary => problem.setup.seq_len,
    };
    push("--max-position-embeddings", n(positions));
    // Megatron pads the vocabulary to a multiple of this × TP.
    push(
        "--make-vocab-size-divisible-by",
        n((m.vocab_pad_multiple / c.tp).max(1)),
    );
    if m.norm == NormKind::RmsNorm {
        push("--normalization", Some("RMSNorm".into()));
    }
    if m.mlp == MlpKind::SwiGlu {
        push("--swiglu", None);
    }
    if m.position == PositionKind::Rotary {
        push("--position-embedding-type", Some("rope".into()));
    }
    if !m.tied_embeddings {
        push("--untie-embeddings-and-output-weights", None);
    }
    if !m.dense_bias {
        push("--disable-bias-linear", None);
        if m.qkv_bias {
            push("--add-qkv-bias", None);
        }
    }
    if !m.dropout {
        push("--attention-dropout", Some("0".into()));
        push("--hidden-dropout", Some("0".into()));
    }
    match problem.setup.precision {
        Precision::Mixed | Precision::PureBf16 => push("--bf16", None),
        Precision::Fp32 => {}
    }
    if problem.setup.flash_attention {
        push("--use-flash-attn", None);
    }
    a
}

/// Flags for a layer split that is not `L/pp` on every stage: first/last-stage layers when the
/// stages between split the rest evenly, else a `--pipeline-model-parallel-layout` (`E`
/// embedding, `t` a layer, `L` the loss, `|` between stages).
fn pipeline_split(layers: &[u64]) -> Vec<(&'static str, String)> {
    let pp = layers.len();
    let all_equal = |s: &[u64]| s.windows(2).all(|w| w[0] == w[1]);
    // Megatron splits evenly only when the stages divide the layers exactly.
    if pp <= 1 || all_equal(layers) {
        return Vec::new();
    }
    let (first, last) = (layers[0], layers[pp - 1]);
    if all_equal(&layers[1..]) {
        return vec![("--decoder-first-pipeline-num-layers", first.to_string())];
    }
    if all_equal(&layers[..pp - 1]) {
        return vec![("--decoder-last-pipeline-num-layers", last.to_string())];
    }
    if all_equal(&layers[1..pp - 1]) {
        return vec![
            ("--decoder-first-pipeline-num-layers", first.to_string()),
            ("--decoder-last-pipeline-num-layers", last.to_string()),
        ];
    }
    let stages: Vec<String> = layers
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let mut s = if i == 0 {
                "E".to_string()
            } else {
                String::new()
            };
            s.push_str(&"t".repeat(l as usize));
            if i + 1 == pp {
                s.push('L');
            }
            s
        })
        .collect();
    vec![("--pipeline-model-parallel-layout", stages.join("|"))]
}

/// Quotes `s` for a POSIX shell when it holds anything but `[A-Za-z0-9_.,:=+/-]`.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.,:=+/-".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `megatron_args.sh`: a bash array of the arguments, with the plan's label, memory and time,
/// what was given up and Megatron's own memory formula in comments.
pub(crate) fn files(
    problem: &Problem,
    nearest: &Nearest,
    header: &Header,
) -> Result<Vec<EmittedFile>> {
    let args = arguments(problem, &nearest.config, &nearest.layers);
    let theirs = theoretical_memory(&MegatronInputs::new(problem, &nearest.config));
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let mut s = String::from("#!/usr/bin/env bash\n");
    s.push_str(&header.comment("megatron_args.sh (pretrain_gpt.py arguments)"));
    let fsdp = matches!(nearest.config.zero, ZeroStage::Zero2 | ZeroStage::Zero3);
    s.push_str(&format!(
        "# Megatron's theoretical_memory_usage on these arguments: weights+optimizer {:.2} GiB, activations {:.2} GiB{}\n",
        gib(theirs.weight_and_optimizer_bytes),
        gib(theirs.activation_bytes),
        if fsdp {
            " (it does not model Megatron-FSDP's sharding of gradients and parameters)"
        } else {
            ""
        }
    ));
    s.push_str(if fsdp {
        "# Data, tokenizer, optimizer and checkpoint arguments are yours (but --ckpt-format, which Megatron-FSDP requires).\n"
    } else {
        "# Data, tokenizer, optimizer and checkpoint arguments are yours.\n"
    });
    s.push_str("PARDIS_MEGATRON_ARGS=(\n");
    let mut k = 0;
    while k < args.len() {
        let mut line = format!("  {}", shell_quote(&args[k]));
        if let Some(v) = args.get(k + 1).filter(|v| !v.starts_with("--")) {
            line.push(' ');
            line.push_str(&shell_quote(v));
            k += 1;
        }
        s.push_str(&line);
        s.push('\n');
        k += 1;
    }
    s.push_str(")\n");
    s.push_str(&format!(
        "# torchrun --nproc-per-node {} --nnodes {} pretrain_gpt.py \"${{PARDIS_MEGATRON_ARGS[@]}}\" ...\n",
        problem.mesh.axes.last().map_or(1, |a| a.size),
        problem.mesh.num_devices() / problem.mesh.axes.last().map_or(1, |a| a.size).max(1)
    ));
    Ok(vec![EmittedFile {
        name: "megatron_args.sh".into(),
        contents: s,
    }])
}

pub mod memory;

pub use memory::{cross_check, theoretical_memory, CrossCheck, MegatronInputs, MegatronMemory};
