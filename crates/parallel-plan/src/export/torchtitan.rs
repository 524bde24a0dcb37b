//! torchtitan: the job TOML and a `parallelize_module` plan for a plan.
//!
//! The TOML targets torchtitan's TOML job configs, whose options are the dataclass fields of
//! `torchtitan/config/job_config.py` (pytorch/torchtitan, checked at `238fa995`, February 2026,
//! the last commit before PR #2386 replaced TOML files by Python `Trainer.Config` functions;
//! the same field names live on in `ParallelismConfig` of `torchtitan/config/configs.py`):
//! `[parallelism]` (class `Parallelism`): `data_parallel_replicate_degree`,
//! `data_parallel_shard_degree`, `tensor_parallel_degree`, `context_parallel_degree`,
//! `fsdp_reshard_after_forward`, `pipeline_parallel_degree`, `pipeline_parallel_schedule` (a schedule class of
//! `torch/distributed/pipelining/schedules.py`: `1F1B`, `GPipe`, `Interleaved1F1B`),
//! `pipeline_parallel_microbatch_size`, `module_fqns_per_model_part` (the modules of each
//! (virtual) stage, which expresses any layer split); `[activation_checkpoint]` (class
//! `ActivationCheckpoint`): `mode` (`none`, `selective`, `full`), `selective_ac_option` (`op`:
//! per-operator selective checkpointing); `[training]` (class `Training`): `local_batch_size`,
//! `global_batch_size`, `seq_len`. The tensor-parallel plan uses `ColwiseParallel`,
//! `RowwiseParallel`, `SequenceParallel`, `PrepareModuleInput` and `PrepareModuleInputOutput`
//! of `torch/distributed/tensor/parallel/style.py`, on the module names of torchtitan's Llama
//! (`torchtitan/models/llama3/model/model.py`: `tok_embeddings`, `layers.N.attention_norm`,
//! `layers.N.attention.wq/wk/wv/wo`, `layers.N.ffn_norm`, `layers.N.feed_forward.w1/w2/w3`,
//! `norm`, `output`), as `apply_tp` of `torchtitan/models/llama3/infra/parallelize.py` applies
//! them (the attention module takes four inputs there: `x`, `freqs_cis`, `attention_masks`,
//! `positions`).
//!
//! The tensor-parallel plan is per linear: each of q/k/v, `wo`, `w1`/`w3` and `w2` keeps the
//! plan's split (column, row, or none) when it is split at the engine's degree or not at all,
//! with `PrepareModuleInput` / `PrepareModuleInputOutput` (and the styles' `input_layouts` /
//! `output_layouts`) converting between the sequence-split residual stream and what each linear
//! takes; the standard pair is written exactly as `apply_tp` writes it.
//! `scripts/check-torchtitan-plans` runs every such layout under PyTorch against the unsplit
//! model.
//!
//! What it cannot express: one tensor-parallel degree serves every linear (a linear split
//! another number of ways, or along both feature dimensions, gets the standard split), and
//! sequence-parallel norms whenever TP is on; FSDP2 shards every parameter and gathers it per
//! module (ZeRO-3), or keeps it gathered from forward to backward with
//! `fsdp_reshard_after_forward = "never"` (ZeRO-2's memory plus the 1/dp shard, which the price
//! leaves out), or DDP shards nothing; there is no ZeRO-1.
//! What it gives up is listed and the configuration priced as run.
//! torchtitan's selective checkpointing (`op`) saves matmul and attention outputs, recomputes
//! the pointwise operators and every second matmul; the export prices memory-model's pointwise
//! recomputation, its nearest mode (a selective plan is given up for it), and says so in the
//! file.

use memory_model::{MlpKind, PipelineSchedule, Recompute, ZeroStage};

use super::shape::{LinearSplit, PlanShape, LAYER_LINEARS};
use super::{base_config, note_zero, EmittedFile, GivenUp, Header, Nearest};
use crate::error::Result;
use crate::peers::Framework;
use crate::plan::Plan;
use crate::search::Problem;

/// Every `section.option` the TOML may hold (all in `torchtitan/config/job_config.py`).
pub const ALLOWED_OPTIONS: [&str; 14] = [
    "parallelism.data_parallel_replicate_degree",
    "parallelism.data_parallel_shard_degree",
    "parallelism.fsdp_reshard_after_forward",
    "parallelism.tensor_parallel_degree",
    "parallelism.context_parallel_degree",
    "parallelism.pipeline_parallel_degree",
    "parallelism.pipeline_parallel_schedule",
    "parallelism.pipeline_parallel_microbatch_size",
    "parallelism.module_fqns_per_model_part",
    "activation_checkpoint.mode",
    "activation_checkpoint.selective_ac_option",
    "training.local_batch_size",
    "training.global_batch_size",
    "training.seq_len",
];

/// The nearest torchtitan configuration: FSDP (ZeRO-3), FSDP without resharding after forward
/// (ZeRO-2, for ZeRO-1 and 2) or DDP (none); sequence-parallel norms whenever TP is on; any
/// layer split and schedule.
pub(crate) fn nearest(
    problem: &Problem,
    plan: &Plan,
    shape: &PlanShape,
    tp: u64,
) -> Result<Nearest> {
    let (layout, mut given_up) = shape.per_linear_layout(tp);
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
    // FSDP2 that reshards after forward is ZeRO-3; one that keeps the gathered parameters
    // until the backward ends (`fsdp_reshard_after_forward = "never"`) holds ZeRO-2's memory
    // (plus its 1/dp parameter shard, not counted); DDP is ZeRO-0.
    let zero = match shape.zero {
        _ if cfg.dp <= 1 => 0,
        0 => 0,
        1 | 2 => 2,
        _ => 3,
    };
    note_zero(shape, zero, &mut given_up);
    cfg.zero = super::zero_of(zero, false);
    if cfg.recompute == Recompute::Selective {
        // One selective setting, per operator: priced as pointwise (see `peers`).
        cfg.recompute = Recompute::Pointwise;
        given_up.push(GivenUp::Recompute {
            plan: plan.recompute,
            engine: cfg.recompute,
        });
    }
    if tp > 1 && !shape.sequence_parallel {
        given_up.push(GivenUp::SequenceParallel {
            plan: false,
            engine: true,
        });
    }
    cfg.sequence_parallel = tp > 1;
    let mut layers = plan.layers_per_stage.clone();
    if let PipelineSchedule::Interleaved { virtual_stages } = cfg.schedule {
        // Interleaved model parts are the layers in `pp · v` equal chunks.
        let l = problem.model.num_layers;
        let even = memory_model::layers_per_stage(l, pp);
        if layers != even || !l.is_multiple_of(pp * virtual_stages) {
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
        linear_layout: Some(layout),
    })
}

/// Layers of each model part: the stages', or with `v` virtual stages `pp · v` equal chunks
/// (torchtitan places part `i` on pipeline rank `i mod pp`).
fn model_parts(layers: &[u64], schedule: PipelineSchedule) -> Vec<u64> {
    match schedule {
        PipelineSchedule::Interleaved { virtual_stages } if virtual_stages > 1 => {
            let total: u64 = layers.iter().sum();
            let parts = layers.len() as u64 * virtual_stages;
            memory_model::layers_per_stage(total, parts)
        }
        _ => layers.to_vec(),
    }
}

/// `module_fqns_per_model_part`: per model part, its modules.
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
fn job_toml(problem: &Problem, nearest: &Nearest, header: &Header) -> String {
    let c = &nearest.config;
    let (replicate, shard) = if c.zero == ZeroStage::Zero0 {
        (c.dp, 1)
    } else {
        (1, c.dp)
    };
    let mut s = header.comment("torchtitan.toml");
    s.push_str("# torchtitan TOML job config (torchtitan before PR #2386, Feb 2026; later: the same fields in a Python Trainer.Config)\n");
    s.push_str("\n[parallelism]\n");
    s.push_str(&format!("data_parallel_replicate_degree = {replicate}\n"));
    s.push_str(&format!("data_parallel_shard_degree = {shard}\n"));
    if c.zero == ZeroStage::Zero2 {
        s.push_str("# parameters stay gathered from forward to backward: ZeRO-2's memory\n");
        s.push_str("fsdp_reshard_after_forward = \"never\"\n");
    }
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
        let parts: Vec<String> = stage_modules(&model_parts(&nearest.layers, c.schedule))
            .iter()
            .map(|m| toml_string_list(m))
            .collect();
        s.push_str(&format!(
            "module_fqns_per_model_part = [\n  {},\n]\n",
            parts.join(",\n  ")
        ));
    }
    s.push_str("\n[activation_checkpoint]\n");
    match c.recompute {
        Recompute::None | Recompute::Full => {
            s.push_str(&format!("mode = \"{}\"\n", c.recompute));
        }
        // `nearest` turns selective into pointwise.
        Recompute::Selective | Recompute::Pointwise => {
            s.push_str("mode = \"selective\"\n");
            s.push_str(
                "# torchtitan's per-operator selective checkpointing; priced as memory-model's \
                 pointwise recomputation (norm and activation-function outputs); it also \
                 recomputes every second matmul, so it holds less and runs longer\n",
            );
            s.push_str("selective_ac_option = \"op\"\n");
        }
    }
    s.push_str("\n[training]\n");
    // Without a pipeline, micro-batches are gradient-accumulation steps of `local_batch_size`.
    let local_batch = if c.pp > 1 { local } else { c.micro_batch_size };
    s.push_str(&format!("local_batch_size = {local_batch}\n"));
    s.push_str(&format!("global_batch_size = {}\n", problem.global_batch));
    s.push_str(&format!("seq_len = {}\n", problem.setup.seq_len));
    s
}

/// The `parallelize_module` plan of `nearest` as Python.
fn tp_plan(problem: &Problem, nearest: &Nearest, header: &Header) -> String {
    let c = &nearest.config;
    let mut s = header.comment(
        "torchtitan_tp_plan.py (parallelize_module plan, torch.distributed.tensor.parallel)",
    );
    s.push_str("# Module names are torchtitan's Llama; a GPT-style model needs the same names.\n");
    s.push_str("from torch.distributed.tensor import Replicate, Shard\n");
    s.push_str("from torch.distributed.tensor.parallel import (\n    ColwiseParallel,\n    PrepareModuleInput,\n    PrepareModuleInputOutput,\n    RowwiseParallel,\n    SequenceParallel,\n    parallelize_module,\n)\n\n");
    s.push_str(&format!("TENSOR_PARALLEL_DEGREE = {}\n", c.tp));
    s.push_str(&format!(
        "SEQUENCE_PARALLEL = {}\n\n",
        if c.sequence_parallel { "True" } else { "False" }
    ));
    if c.tp <= 1 {
        s.push_str(
            "# No tensor parallelism: nothing to parallelize.\nTOP_PLAN = {}\nLAYER_PLAN = {}\n",
        );
    } else {
        s.push_str("TOP_PLAN = {\n");
        s.push_str("    \"tok_embeddings\": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),\n");
        s.push_str("    \"norm\": SequenceParallel(),\n");
        s.push_str("    \"output\": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False),\n");
        s.push_str("}\n\n");
        s.push_str("LAYER_PLAN = {\n");
        let layout = nearest
            .linear_layout
            .unwrap_or(LAYER_LINEARS.map(|(_, split)| split));
        let swiglu = problem.model.mlp == MlpKind::SwiGlu;
        let blocks: [(&str, &str, &[&str], &str, usize); 2] = [
            ("attention_norm", "attention", &["wq", "wk", "wv"], "wo", 0),
            (
                "ffn_norm",
                "feed_forward",
                if swiglu { &["w1", "w3"] } else { &["w1"] },
                "w2",
                2,
            ),
        ];
        for (norm, block, first, second, i) in blocks {
            s.push_str(&format!("    \"{norm}\": SequenceParallel(),\n"));
            for line in block_plan(block, first, second, layout[i], layout[i + 1]) {
                s.push_str(&format!("    {line},\n"));
            }
        }
        s.push_str("}\n");
    }
    s.push_str("\n\ndef apply_pardis_tp(model, tp_mesh):\n");
    s.push_str(
        "    \"\"\"Applies the plan to a model (or one pipeline stage of it) on `tp_mesh`.\"\"\"\n",
    );
    s.push_str("    if not LAYER_PLAN:\n        return model\n");
    s.push_str("    present = {k: v for k, v in TOP_PLAN.items() if getattr(model, k, None) is not None}\n");
    s.push_str("    parallelize_module(model, tp_mesh, present)\n");
    s.push_str("    for block in model.layers.values():\n");
    s.push_str("        parallelize_module(block, tp_mesh, LAYER_PLAN)\n");
    s.push_str("    return model\n");
    s
}

/// The `parallelize_module` entries of one block (attention or feed-forward): its input
/// brought from the sequence-split residual stream to what its first linears (`first`, split
/// `a`) take, the first linears, and the last one (`second`, split `b`) taking whatever the
/// first ones left and returning the sequence-split stream. Styles' defaults are left out, so
/// the standard column/row pair reads as torchtitan's own `apply_tp`.
fn block_plan(
    block: &str,
    first: &[&str],
    second: &str,
    a: LinearSplit,
    b: LinearSplit,
) -> Vec<String> {
    let attention = block == "attention";
    let tuple = |layout: &str| {
        if attention {
            format!("({layout}, None, None, None)")
        } else {
            format!("({layout},)")
        }
    };
    let desired = if a == LinearSplit::Row {
        "Shard(-1)"
    } else {
        "Replicate()"
    };
    // Plain (unsplit) linears take plain tensors.
    let local = if a == LinearSplit::Replicated {
        ", use_local_output=True"
    } else {
        ""
    };
    let mut out = vec![format!(
        "\"{block}\": PrepareModuleInput(input_layouts={}, desired_input_layouts={}{local})",
        tuple("Shard(1)"),
        tuple(desired)
    )];
    for w in first {
        match a {
            LinearSplit::Column => out.push(format!("\"{block}.{w}\": ColwiseParallel()")),
            LinearSplit::Row => out.push(format!(
                "\"{block}.{w}\": RowwiseParallel(output_layouts=Replicate())"
            )),
            LinearSplit::Replicated | LinearSplit::Both => {}
        }
    }
    // The first linears leave their outputs' features split only when column-parallel.
    let mid = if a == LinearSplit::Column {
        "Shard(-1)"
    } else {
        "Replicate()"
    };
    out.push(match b {
        LinearSplit::Row => {
            let input = if mid == "Shard(-1)" {
                String::new()
            } else {
                format!("input_layouts={mid}, ")
            };
            format!("\"{block}.{second}\": RowwiseParallel({input}output_layouts=Shard(1))")
        }
        LinearSplit::Column => {
            let input = if mid == "Replicate()" {
                String::new()
            } else {
                format!("input_layouts={mid}, ")
            };
            format!("\"{block}.{second}\": ColwiseParallel({input}output_layouts=Shard(1))")
        }
        LinearSplit::Replicated | LinearSplit::Both => format!(
            "\"{block}.{second}\": PrepareModuleInputOutput(input_layouts=({mid},), desired_input_layouts=(Replicate(),), use_local_input=True, output_layouts=(Replicate(),), desired_output_layouts=(Shard(1),), use_local_output=True)"
        ),
    });
    out
}

/// `torchtitan.toml` and `torchtitan_tp_plan.py`.
pub(crate) fn files(
    problem: &Problem,
    nearest: &Nearest,
    header: &Header,
) -> Result<Vec<EmittedFile>> {
    Ok(vec![
        EmittedFile {
            name: "torchtitan.toml".into(),
            contents: job_toml(problem, nearest, header),
        },
        EmittedFile {
            name: "torchtitan_tp_plan.py".into(),
            contents: tp_plan(problem, nearest, header),
        },
    ])
}
