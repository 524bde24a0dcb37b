//! DeepSpeed: the JSON config for a plan.
//!
//! Keys, with the file of deepspeedai/DeepSpeed (checked at `edaa7221`, August 2026) that
//! defines each: `train_batch_size`, `train_micro_batch_size_per_gpu`,
//! `gradient_accumulation_steps` and `bf16.enabled` in `deepspeed/runtime/constants.py`;
//! `zero_optimization.stage`, `.overlap_comm`, `.offload_optimizer`, `.offload_param` in
//! `deepspeed/runtime/zero/config.py` (`DeepSpeedZeroConfig`; `overlap_comm` defaults to
//! true only at stage 3, so stages 1 and 2 set it when the plan was priced with overlapped
//! gradient reduction) and their `device` in
//! `deepspeed/runtime/zero/offload_config.py`; `activation_checkpointing.partition_activations`,
//! `.contiguous_memory_optimization`, `.cpu_checkpointing` in
//! `deepspeed/runtime/activation_checkpointing/config.py`; `tensor_parallel.autotp_size` and
//! `tensor_parallel.partition_config` in `deepspeed/runtime/tensor_parallel/config.py`
//! (`TPTrainingConfig`), whose `use_default_specs` and `layer_specs[]` (`patterns`,
//! `partition_type` = `column` / `row`) are read by `AutoTPConfig.from_dict` in
//! `deepspeed/module_inject/autotp_config.py`. [`ALLOWED_KEYS`] lists them. Versions: custom
//! `layer_specs` since v0.18.6 (PR #7806); AutoTP training with ZeRO-3 since v0.19.4 (PR #8168;
//! earlier releases stop AutoTP at ZeRO-2).
//!
//! DeepSpeed's ZeRO engine runs no pipeline here (its `PipelineModule` excludes ZeRO-2/3 and
//! needs the model rewritten as a layer list) and AutoTP has no sequence parallelism; its
//! activation checkpointing checkpoints whole layers (the model code calls
//! `deepspeed.checkpointing.checkpoint`, or Hugging Face's `gradient_checkpointing_enable()`).
//! Linear names follow Hugging Face: Llama (`q_proj`, `k_proj`, `v_proj`, `o_proj`,
//! `gate_proj`, `up_proj`, `down_proj`) for SwiGLU models, OPT (`q_proj`, `k_proj`, `v_proj`,
//! `out_proj`, `fc1`, `fc2`) for GeLU ones. JSON has no comments: the label, memory, time and
//! what was given up go to `deepspeed_notes.txt` beside it.

use memory_model::{MlpKind, OffloadTarget, Precision, Recompute, ZeroStage};
use serde_json::{json, Value};

use super::shape::PlanShape;
use super::{base_config, note_zero, zero_of, EmittedFile, GivenUp, Header, Nearest};
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
    "zero_optimization.overlap_comm",
    "zero_optimization.offload_optimizer.device",
    "zero_optimization.offload_param.device",
    "activation_checkpointing.partition_activations",
    "activation_checkpointing.contiguous_memory_optimization",
    "activation_checkpointing.cpu_checkpointing",
    "tensor_parallel.autotp_size",
    "tensor_parallel.partition_config.use_default_specs",
    "tensor_parallel.partition_config.layer_specs.patterns",
    "tensor_parallel.partition_config.layer_specs.partition_type",
];

/// The nearest DeepSpeed configuration: no pipeline, one ZeRO stage, no sequence parallelism,
/// whole-layer checkpointing.
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
        return Err(PlanError::InvalidInput(format!(
            "tp {tp} does not divide {n}"
        )));
    }
    let zero = if cfg.dp > 1 { shape.zero } else { 0 };
    note_zero(shape, zero, &mut given_up);
    cfg.zero = zero_of(zero, false);
    if shape.sequence_parallel && tp > 1 {
        given_up.push(GivenUp::SequenceParallel {
            plan: true,
            engine: false,
        });
    }
    cfg.sequence_parallel = false;
    if matches!(plan.recompute, Recompute::Selective | Recompute::Pointwise) {
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
        linear_layout: None,
    })
}

/// The JSON config of `nearest`.
pub(crate) fn config_json(problem: &Problem, nearest: &Nearest) -> Value {
    let c = &nearest.config;
    let stage = match c.zero {
        ZeroStage::Zero0 => 0,
        ZeroStage::Zero1 | ZeroStage::DistributedOptimizer => 1,
        ZeroStage::Zero2 => 2,
        ZeroStage::Zero3 => 3,
    };
    let mut zero = json!({ "stage": stage });
    if matches!(stage, 1 | 2) && problem.mesh.overlap_grad_reduce {
        zero["overlap_comm"] = json!(true);
    }
    let device = |t: OffloadTarget| match t {
        OffloadTarget::None => None,
        OffloadTarget::Cpu => Some("cpu"),
        OffloadTarget::Nvme => Some("nvme"),
    };
    if let Some(d) = device(c.offload_target(problem)) {
        zero["offload_optimizer"] = json!({ "device": d });
    }
    if let Some(d) = device(problem.setup.offload.parameters).filter(|_| stage == 3) {
        zero["offload_param"] = json!({ "device": d });
    }
    let mut v = json!({
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
    header: &Header,
) -> Result<Vec<EmittedFile>> {
    let v = config_json(problem, nearest);
    let mut contents =
        serde_json::to_string_pretty(&v).map_err(|e| PlanError::Json(e.to_string()))?;
    contents.push('\n');
    let c = &nearest.config;
    let mut notes: String = header
        .lines("deepspeed.json")
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    if c.tp > 1 {
        notes.push_str("AutoTP layer_specs name Hugging Face linears; needs DeepSpeed >= 0.18.6");
        notes.push_str(if c.zero == ZeroStage::Zero3 {
            " (>= 0.19.4 with ZeRO-3)\n"
        } else {
            "\n"
        });
    }
    if c.recompute == Recompute::Full {
        notes.push_str("Activation checkpointing: checkpoint every transformer layer (deepspeed.checkpointing.checkpoint or gradient_checkpointing_enable()).\n");
    }
    notes.push_str("Data, optimizer and scheduler settings are yours.\n");
    Ok(vec![
        EmittedFile {
            name: "deepspeed.json".into(),
            contents,
        },
        EmittedFile {
            name: "deepspeed_notes.txt".into(),
            contents: notes,
        },
    ])
}
