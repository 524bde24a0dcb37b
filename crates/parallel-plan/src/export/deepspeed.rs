//! DeepSpeed: the JSON config for a plan.
//!
//! Keys, with the file that defines each: `train_batch_size`,
//! `train_micro_batch_size_per_gpu`, `gradient_accumulation_steps` and `bf16.enabled` in
//! `deepspeed/runtime/constants.py` / `deepspeed/runtime/config.py`; `zero_optimization.stage`,
//! `zero_optimization.offload_optimizer.device`, `zero_optimization.offload_param.device` in
//! `deepspeed/runtime/zero/config.py` and `deepspeed/runtime/zero/offload_config.py`;
//! `activation_checkpointing.partition_activations`, `.contiguous_memory_optimization`,
//! `.cpu_checkpointing` in `deepspeed/runtime/activation_checkpointing/config.py`;
//! `tensor_parallel.autotp_size` and `tensor_parallel.partition_config` (`use_default_specs`,
//! `layer_specs[].patterns`, `layer_specs[].partition_type` = `row` / `column`) in
//! `deepspeed/runtime/tensor_parallel/config.py` (AutoTP training, DeepSpeed ≥ 0.16.4; custom
//! layer specs from PR #7806). AutoTP training combines with ZeRO stages 0–2 only.
//!
//! DeepSpeed's ZeRO engine runs no pipeline here (its `PipelineModule` excludes ZeRO-2/3) and
//! has no sequence parallelism for AutoTP; its activation checkpointing checkpoints whole
//! layers (the model code calls `deepspeed.checkpointing.checkpoint`). Linear names follow
//! Hugging Face: Llama (`q_proj`, `k_proj`, `v_proj`, `o_proj`, `gate_proj`, `up_proj`,
//! `down_proj`) for SwiGLU models, OPT (`q_proj`, `k_proj`, `v_proj`, `out_proj`, `fc1`, `fc2`)
//! for GeLU ones.

use memory_model::{MlpKind, OffloadTarget, Precision, Recompute, ZeroStage as MmZero};
use serde_json::{json, Value};

use super::shape::PlanShape;
use super::{base_config, note_zero, zero_of, EmittedFile, Fidelity, GivenUp, Nearest};
use crate::error::{PlanError, Result};
use crate::peers::Framework;
use crate::plan::Plan;
use crate::search::Problem;

/// Every key path the JSON may hold (see the module docs for the defining files).
pub const ALLOWED_KEYS: [&str; 15] = [
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "bf16.enabled",
    "zero_optimization.stage",
    "zero_optimization.offload_optimizer.device",
    "zero_optimization.offload_param.device",
    "activation_checkpointing.partition_activations",
    "activation_checkpointing.contiguous_memory_optimization",
    "activation_checkpointing.cpu_checkpointing",
    "tensor_parallel.autotp_size",
    "tensor_parallel.partition_config.use_default_specs",
    "tensor_parallel.partition_config.layer_specs.patterns",
    "tensor_parallel.partition_config.layer_specs.partition_type",
    "comment",
];

/// The nearest DeepSpeed configuration: no pipeline, one ZeRO stage (at most 2 with AutoTP),
/// no sequence parallelism, whole-layer checkpointing.
pub(crate) fn nearest(
    problem: &Problem,
    plan: &Plan,
    shape: &PlanShape,
    tp: u64,
) -> Result<Nearest> {
    let mut given_up = shape.layout_differences(tp);
    let n = problem.mesh.num_devices() as u64;
    if plan.pipeline_stages > 1 {
        given_up.push(GivenUp::Pipeline {
            plan: plan.pipeline_stages,
            engine: 1,
        });
    }
    let layers = vec![problem.model.num_layers];
    if plan.pipeline_stages > 1 {
        given_up.push(GivenUp::LayerSplit {
            plan: plan.layers_per_stage.clone(),
            engine: layers.clone(),
        });
    }
    // The plan's micro-batch over one stage; without the pipeline the stage is the whole mesh.
    let mut cfg = base_config(
        problem,
        plan,
        shape,
        Framework::DeepSpeed,
        tp,
        1,
        &mut given_up,
    )?;
    if cfg.tp * cfg.dp != n {
        return Err(PlanError::InvalidInput(format!("tp {tp} does not divide {n}")));
    }
    let mut zero = if cfg.dp > 1 { shape.zero } else { 0 };
    if tp > 1 {
        zero = zero.min(2);
    }
    note_zero(shape, zero, &mut given_up);
    cfg.zero = zero_of(zero, false);
    if shape.sequence_parallel && tp > 1 {
        given_up.push(GivenUp::SequenceParallel {
            plan: true,
            engine: false,
        });
    }
    cfg.sequence_parallel = false;
    if plan.recompute == Recompute::Selective {
        cfg.recompute = Recompute::Full;
        given_up.push(GivenUp::Recompute {
            plan: plan.recompute,
            engine: cfg.recompute,
        });
    }
    Ok(Nearest {
        config: cfg,
        layers,
        given_up,
    })
}

/// The JSON config of `nearest`.
pub fn config_json(problem: &Problem, nearest: &Nearest, priced: &Plan, fidelity: Fidelity) -> Value {
    let c = &nearest.config;
    let stage = match c.zero {
        MmZero::Zero0 => 0,
        MmZero::Zero1 | MmZero::DistributedOptimizer => 1,
        MmZero::Zero2 => 2,
        MmZero::Zero3 => 3,
    };
    let mut zero = json!({ "stage": stage });
    let device = |t: OffloadTarget| match t {
        OffloadTarget::None => None,
        OffloadTarget::Cpu => Some("cpu"),
        OffloadTarget::Nvme => Some("nvme"),
    };
    if let Some(d) = device(problem.setup.offload.optimizer) {
        zero["offload_optimizer"] = json!({ "device": d });
    }
    if let Some(d) = device(problem.setup.offload.parameters).filter(|_| stage == 3) {
        zero["offload_param"] = json!({ "device": d });
    }
    let mut given: Vec<String> = nearest.given_up.iter().map(ToString::to_string).collect();
    given.insert(
        0,
        format!(
            "pardis plan -> DeepSpeed: {fidelity} ({}); memory-model {:.2} GiB per device, cost model {:.3} s per step",
            c.label(),
            priced.per_device_memory.total() as f64 / (1u64 << 30) as f64,
            priced.step_time_s
        ),
    );
    let mut v = json!({
        "comment": given,
        "train_batch_size": problem.global_batch,
        "train_micro_batch_size_per_gpu": c.micro_batch_size,
        "gradient_accumulation_steps": c.micro_batches,
        "zero_optimization": zero,
    });
    if problem.setup.precision != Precision::Fp32 {
        v["bf16"] = json!({ "enabled": true });
    }
    if c.recompute == Recompute::Full {
        v["activation_checkpointing"] = json!({
            "partition_activations": false,
            "contiguous_memory_optimization": false,
            "cpu_checkpointing": false,
        });
    }
    if c.tp > 1 {
        let (column, row): (Vec<&str>, Vec<&str>) = match problem.model.mlp {
            MlpKind::SwiGlu => (
                vec![
                    r".*\.q_proj\.weight$",
                    r".*\.k_proj\.weight$",
                    r".*\.v_proj\.weight$",
                    r".*\.gate_proj\.weight$",
                    r".*\.up_proj\.weight$",
                ],
                vec![r".*\.o_proj\.weight$", r".*\.down_proj\.weight$"],
            ),
            MlpKind::Gelu => (
                vec![
                    r".*\.q_proj\.weight$",
                    r".*\.k_proj\.weight$",
                    r".*\.v_proj\.weight$",
                    r".*\.fc1\.weight$",
                ],
                vec![r".*\.out_proj\.weight$", r".*\.fc2\.weight$"],
            ),
        };
        v["tensor_parallel"] = json!({
            "autotp_size": c.tp,
            "partition_config": {
                "use_default_specs": false,
                "layer_specs": [
                    { "patterns": column, "partition_type": "column" },
                    { "patterns": row, "partition_type": "row" },
                ],
            },
        });
    }
    v
}

/// `deepspeed.json`.
pub(crate) fn files(
    problem: &Problem,
    nearest: &Nearest,
    priced: &Plan,
    fidelity: Fidelity,
) -> Result<Vec<EmittedFile>> {
    let v = config_json(problem, nearest, priced, fidelity);
    let mut contents = serde_json::to_string_pretty(&v)
        .map_err(|e| PlanError::Json(e.to_string()))?;
    contents.push('\n');
    Ok(vec![EmittedFile {
        name: "deepspeed.json".into(),
        contents,
    }])
}
