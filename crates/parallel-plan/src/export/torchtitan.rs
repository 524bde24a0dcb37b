//! torchtitan: the job TOML and a `parallelize_module` plan for a plan.
//!
//! TOML options, all from `torchtitan/config/job_config.py` (pytorch/torchtitan, 2025):
//! `[parallelism]` (class `Parallelism`): `data_parallel_replicate_degree`,
//! `data_parallel_shard_degree`, `tensor_parallel_degree`, `context_parallel_degree`,
//! `pipeline_parallel_degree`, `pipeline_parallel_schedule` (`1F1B`, `GPipe`,
//! `Interleaved1F1B`), `pipeline_parallel_microbatch_size`, `module_fqns_per_model_part` (the
//! modules of each pipeline stage, which expresses any layer split);
//! `[activation_checkpoint]` (class `ActivationCheckpoint`): `mode` (`none`, `selective`,
//! `full`), `selective_ac_option`; `[training]` (class `Training`): `local_batch_size`,
//! `global_batch_size`, `seq_len`. The tensor-parallel plan uses `ColwiseParallel`,
//! `RowwiseParallel`, `SequenceParallel` and `PrepareModuleInput` of
//! `torch/distributed/tensor/parallel/style.py`, on the module names of torchtitan's Llama
//! (`torchtitan/models/llama3/model/model.py`: `tok_embeddings`, `layers.N.attention_norm`,
//! `layers.N.attention.wq/wk/wv/wo`, `layers.N.ffn_norm`, `layers.N.feed_forward.w1/w2/w3`,
//! `norm`, `output`), as its `parallelize.py` applies them. torchtitan has no per-linear TP
//! choice beyond that plan: the export keeps Megatron's column/row layout and lists any other
//! choice of the ILP as given up.

use memory_model::{MlpKind, PipelineSchedule, ZeroStage as MmZero};

use super::shape::PlanShape;
use super::{base_config, note_zero, EmittedFile, Fidelity, GivenUp, Nearest};
use crate::error::Result;
use crate::peers::Framework;
use crate::plan::Plan;
use crate::search::Problem;

/// Every `section.option` the TOML may hold (all in `torchtitan/config/job_config.py`).
pub const ALLOWED_OPTIONS: [&str; 12] = [
    "parallelism.data_parallel_replicate_degree",
    "parallelism.data_parallel_shard_degree",
    "parallelism.tensor_parallel_degree",
    "parallelism.context_parallel_degree",
    "parallelism.pipeline_parallel_degree",
    "parallelism.pipeline_parallel_schedule",
    "parallelism.pipeline_parallel_microbatch_size",
    "parallelism.module_fqns_per_model_part",
    "activation_checkpoint.mode",
    "training.local_batch_size",
    "training.global_batch_size",
    "training.seq_len",
];

/// The nearest torchtitan configuration: FSDP (ZeRO-3) for any ZeRO stage, DDP for none;
/// sequence-parallel norms whenever TP is on; any layer split and schedule.
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
        Framework::Torchtitan,
        tp,
        pp,
        &mut given_up,
    )?;
    let zero = if cfg.dp > 1 && shape.zero >= 1 { 3 } else { 0 };
    note_zero(shape, zero, &mut given_up);
    cfg.zero = if zero == 3 {
        MmZero::Zero3
    } else {
        MmZero::Zero0
    };
    if tp > 1 && !shape.sequence_parallel {
        given_up.push(GivenUp::SequenceParallel {
            plan: false,
            engine: true,
        });
    }
    cfg.sequence_parallel = tp > 1;
    Ok(Nearest {
        config: cfg,
        layers: plan.layers_per_stage.clone(),
        given_up,
    })
}

/// `module_fqns_per_model_part`: per stage, its modules.
fn stage_modules(layers: &[u64]) -> Vec<Vec<String>> {
    let mut next = 0;
    let pp = layers.len();
    layers
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let mut m = Vec::new();
            if i == 0 {
                m.push("tok_embeddings".to_string());
            }
            m.extend((next..next + l).map(|k| format!("layers.{k}")));
            next += l;
            if i + 1 == pp {
                m.push("norm".into());
                m.push("output".into());
            }
            m
        })
        .collect()
}

fn toml_string_list(v: &[String]) -> String {
    let items: Vec<String> = v.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", items.join(", "))
}

/// The TOML of `nearest`.
fn job_toml(problem: &Problem, nearest: &Nearest, priced: &Plan, fidelity: Fidelity) -> String {
    let c = &nearest.config;
    let (replicate, shard) = if c.zero == MmZero::Zero3 {
        (1, c.dp)
    } else {
        (c.dp, 1)
    };
    let mut s = format!(
        "# pardis plan -> torchtitan: {fidelity} ({}); memory-model {:.2} GiB per device, cost model {:.3} s per step\n",
        c.label(),
        priced.per_device_memory.total() as f64 / (1u64 << 30) as f64,
        priced.step_time_s
    );
    for g in &nearest.given_up {
        s.push_str(&format!("# gave up: {g}\n"));
    }
    s.push_str("\n[parallelism]\n");
    s.push_str(&format!("data_parallel_replicate_degree = {replicate}\n"));
    s.push_str(&format!("data_parallel_shard_degree = {shard}\n"));
    s.push_str(&format!("tensor_parallel_degree = {}\n", c.tp));
    s.push_str("context_parallel_degree = 1\n");
    s.push_str(&format!("pipeline_parallel_degree = {}\n", c.pp));
    let local = c.micro_batch_size * c.micro_batches;
    if c.pp > 1 {
        let schedule = match c.schedule {
            PipelineSchedule::GPipe => "GPipe",
            PipelineSchedule::OneFOneB => "1F1B",
            PipelineSchedule::Interleaved { .. } => "Interleaved1F1B",
        };
        s.push_str(&format!("pipeline_parallel_schedule = \"{schedule}\"\n"));
        s.push_str(&format!(
            "pipeline_parallel_microbatch_size = {}\n",
            c.micro_batch_size
        ));
        let parts: Vec<String> = stage_modules(&nearest.layers)
            .iter()
            .map(|m| toml_string_list(m))
            .collect();
        s.push_str(&format!(
            "module_fqns_per_model_part = [\n  {},\n]\n",
            parts.join(",\n  ")
        ));
    }
    s.push_str("\n[activation_checkpoint]\n");
    s.push_str(&format!("mode = \"{}\"\n", c.recompute));
    s.push_str("\n[training]\n");
    // Without a pipeline, micro-batches are gradient-accumulation steps of `local_batch_size`.
    let local_batch = if c.pp > 1 { local } else { c.micro_batch_size };
    s.push_str(&format!("local_batch_size = {local_batch}\n"));
    s.push_str(&format!("global_batch_size = {}\n", problem.global_batch));
    s.push_str(&format!("seq_len = {}\n", problem.setup.seq_len));
    s
}

/// The `parallelize_module` plan of `nearest` as Python.
fn tp_plan(problem: &Problem, nearest: &Nearest) -> String {
    let c = &nearest.config;
    let mut s = String::from(
        "# pardis plan -> torchtitan tensor-parallel plan (torch.distributed.tensor.parallel).\n",
    );
    s.push_str("# Module names are torchtitan's Llama; a GPT-style model needs the same names.\n");
    s.push_str("from torch.distributed.tensor import Replicate, Shard\n");
    s.push_str("from torch.distributed.tensor.parallel import (\n    ColwiseParallel,\n    PrepareModuleInput,\n    RowwiseParallel,\n    SequenceParallel,\n    parallelize_module,\n)\n\n");
    s.push_str(&format!("TENSOR_PARALLEL_DEGREE = {}\n", c.tp));
    s.push_str(&format!("SEQUENCE_PARALLEL = {}\n\n", if c.sequence_parallel { "True" } else { "False" }));
    if c.tp <= 1 {
        s.push_str("# No tensor parallelism: nothing to parallelize.\nTOP_PLAN = {}\nLAYER_PLAN = {}\n");
    } else {
        s.push_str("TOP_PLAN = {\n");
        s.push_str("    \"tok_embeddings\": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),\n");
        s.push_str("    \"norm\": SequenceParallel(),\n");
        s.push_str("    \"output\": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),\n");
        s.push_str("}\n\n");
        s.push_str("LAYER_PLAN = {\n");
        s.push_str("    \"attention_norm\": SequenceParallel(),\n");
        s.push_str("    \"attention\": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),\n");
        for w in ["wq", "wk", "wv"] {
            s.push_str(&format!("    \"attention.{w}\": ColwiseParallel(),\n"));
        }
        s.push_str("    \"attention.wo\": RowwiseParallel(output_layouts=Shard(1)),\n");
        s.push_str("    \"ffn_norm\": SequenceParallel(),\n");
        s.push_str("    \"feed_forward\": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),\n");
        s.push_str("    \"feed_forward.w1\": ColwiseParallel(),\n");
        s.push_str("    \"feed_forward.w2\": RowwiseParallel(output_layouts=Shard(1)),\n");
        if problem.model.mlp == MlpKind::SwiGlu {
            s.push_str("    \"feed_forward.w3\": ColwiseParallel(),\n");
        }
        s.push_str("}\n");
    }
    s.push_str("\n\ndef apply_pardis_tp(model, tp_mesh):\n");
    s.push_str("    \"\"\"Applies the plan to a model (or one pipeline stage of it) on `tp_mesh`.\"\"\"\n");
    s.push_str("    if not LAYER_PLAN:\n        return model\n");
    s.push_str("    present = {k: v for k, v in TOP_PLAN.items() if getattr(model, k, None) is not None}\n");
    s.push_str("    parallelize_module(model, tp_mesh, present)\n");
    s.push_str("    for block in model.layers.values():\n");
    s.push_str("        parallelize_module(block, tp_mesh, LAYER_PLAN)\n");
    s.push_str("    return model\n");
    s
}

/// `torchtitan.toml` and `torchtitan_tp_plan.py`.
pub(crate) fn files(
    problem: &Problem,
    nearest: &Nearest,
    priced: &Plan,
    fidelity: Fidelity,
) -> Result<Vec<EmittedFile>> {
    Ok(vec![
        EmittedFile {
            name: "torchtitan.toml".into(),
            contents: job_toml(problem, nearest, priced, fidelity),
        },
        EmittedFile {
            name: "torchtitan_tp_plan.py".into(),
            contents: tp_plan(problem, nearest),
        },
    ])
}
