//! `pardis plan` (issue #4): the memory-minimal parallel plan for training a model on a mesh,
//! beside Megatron-LM and the other baselines in the same cost model.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use pardis::memory::ModelConfig;
use pardis::plan::mesh::DeviceMesh;
use pardis::plan::plan::Plan;
use pardis::plan::planner::{self, Objective, PlanReport};
use pardis::plan::search::Problem;
use serde_json::json;

use crate::output;

/// Objective of the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ObjectiveArg {
    /// Minimise per-device memory within the time slack of the fastest plan.
    MinMemory,
    /// Minimise step time within the device memory (Alpa).
    MinTime,
}

/// Arguments of `pardis plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Built-in model (gpt3-125m … gpt3-175b, llama2-7b/13b/70b, ...).
    #[arg(long, default_value = "gpt3-1.3b")]
    model: String,
    /// Mesh preset: dgx-a100-80g, dgx-h100, pcie-4090.
    #[arg(long, default_value = "dgx-a100-80g")]
    mesh: String,
    /// Custom mesh as JSON (the serde form of `DeviceMesh`); overrides --mesh and --nodes.
    #[arg(long)]
    mesh_json: Option<PathBuf>,
    /// Nodes of the preset mesh (8 GPUs each).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Objective.
    #[arg(long, value_enum, default_value_t = ObjectiveArg::MinMemory)]
    objective: ObjectiveArg,
    /// Allowed slowdown of the min-memory plan over the fastest plan.
    #[arg(long, default_value_t = planner::DEFAULT_TIME_SLACK)]
    time_slack: f64,
    /// Per-device memory (e.g. 40GiB); default: the preset's.
    #[arg(long, value_parser = output::parse_bytes)]
    gpu_mem: Option<u64>,
    /// Sequences per training step.
    #[arg(long, default_value_t = pardis::plan::search::DEFAULT_GLOBAL_BATCH)]
    global_batch: u64,
    /// Sequence length.
    #[arg(long, default_value_t = pardis::plan::search::DEFAULT_SEQ_LEN)]
    seq: u64,
    /// HiGHS time limit per ILP, seconds.
    #[arg(long, default_value_t = pardis::plan::ilp::DEFAULT_TIME_LIMIT_S)]
    ilp_time_limit: f64,
    /// Sweep the time slack and print the memory/time frontier.
    #[arg(long)]
    pareto: bool,
    /// Print the chosen plan's per-operator shardings.
    #[arg(long)]
    details: bool,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

fn problem(args: &Args) -> anyhow::Result<Problem> {
    let model = ModelConfig::preset(&args.model)?;
    let mut mesh = match &args.mesh_json {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            DeviceMesh::from_json(&text)?
        }
        None => DeviceMesh::preset(&args.mesh, args.nodes)?,
    };
    if let Some(m) = args.gpu_mem {
        anyhow::ensure!(m > 0, "--gpu-mem must be positive");
        mesh.device_memory_bytes = m;
    }
    anyhow::ensure!(
        args.time_slack >= 0.0 && args.time_slack.is_finite(),
        "--time-slack must be ≥ 0"
    );
    anyhow::ensure!(
        args.global_batch > 0 && args.seq > 0,
        "--global-batch and --seq must be positive"
    );
    anyhow::ensure!(
        args.ilp_time_limit > 0.0,
        "--ilp-time-limit must be positive"
    );
    let mut p = Problem::new(model, mesh);
    p.global_batch = args.global_batch;
    p.setup.seq_len = args.seq;
    p.solver.time_limit_s = args.ilp_time_limit;
    Ok(p)
}

fn plan_json(p: &Plan) -> serde_json::Value {
    let stages: Vec<_> = p
        .stages
        .iter()
        .map(|s| {
            json!({
                "index": s.index, "layers": s.layers, "per_device_memory": s.memory, "time_s": s.time_s, "ilp": s.ilp,
                "operators": s.operators,
            })
        })
        .collect();
    json!({
        "name": p.name, "pipeline_stages": p.pipeline_stages, "stage_mesh": p.stage_mesh,
        "micro_batches": p.micro_batches, "micro_batch_size": p.micro_batch_size, "schedule": p.schedule,
        "per_device_memory": p.per_device_memory, "step_time_s": p.step_time_s, "fits": p.fits,
        "ilp": p.ilp, "stages": stages,
    })
}

fn reference(report: &PlanReport) -> Option<&Plan> {
    let megatron = report
        .baselines
        .iter()
        .filter(|b| b.name.starts_with("Megatron"));
    megatron
        .filter(|b| b.fits)
        .min_by_key(|b| b.per_device_memory.total)
}

fn print_table(report: &PlanReport, problem: &Problem) {
    let reference = reference(report);
    let mut t = output::table([
        "plan",
        "pp",
        "stage mesh",
        "m × b",
        "memory/device",
        "step time",
        "saved vs Megatron",
        "time ratio",
        "ILP vars/cons",
        "status (gap)",
        "solve",
    ]);
    let rows = std::iter::once(&report.plan)
        .chain(&report.runners_up)
        .chain(&report.baselines);
    for (k, p) in rows.enumerate() {
        let name = if k > 0 && k <= report.runners_up.len() {
            format!("  runner-up {k}")
        } else {
            p.name.clone()
        };
        let (saved, ratio) = match reference {
            Some(r) => (
                format!(
                    "{:+.1}%",
                    100.0
                        * (1.0
                            - p.per_device_memory.total as f64 / r.per_device_memory.total as f64)
                ),
                format!("{:.3}", p.step_time_s / r.step_time_s),
            ),
            None => ("-".into(), "-".into()),
        };
        let mem = format!(
            "{}{}",
            output::bytes(p.per_device_memory.total),
            if p.fits { "" } else { " (OOM)" }
        );
        t.add_row(vec![
            name,
            p.pipeline_stages.to_string(),
            p.stage_mesh.clone(),
            format!("{} × {}", p.micro_batches, p.micro_batch_size),
            mem,
            format!("{:.3} s", p.step_time_s),
            saved,
            ratio,
            format!("{}/{}", p.ilp.variables, p.ilp.constraints),
            format!("{} ({:.1e})", p.ilp.status, p.ilp.gap),
            format!("{:.2} s", p.ilp.solve_time_s),
        ]);
    }
    println!(
        "{} on {} ({} devices, {} each), global batch {} × seq {}; {} outer-search points",
        problem.model.name,
        problem.mesh.name,
        problem.mesh.num_devices(),
        output::bytes(problem.mesh.device_memory_bytes),
        problem.global_batch,
        problem.setup.seq_len,
        report.candidates_searched
    );
    println!("{t}");
    if let Some(r) = reference {
        println!("memory saved and time ratio are relative to the leanest fitting Megatron-LM variant ({}).", r.name);
    }
}

fn print_details(p: &Plan) {
    for s in &p.stages {
        println!(
            "stage {} ({} layers): {} per device",
            s.index,
            s.layers,
            output::bytes(s.memory.total)
        );
        let mut t = output::table(["operator", "copies", "sharding", "ZeRO", "collectives"]);
        for o in &s.operators {
            t.add_row(vec![
                o.name.clone(),
                o.copies.to_string(),
                o.sharding.clone(),
                o.zero.to_string(),
                o.collectives.join("; "),
            ]);
        }
        println!("{t}");
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let problem = problem(&args)?;
    let bar = output::progress(1, "planning");
    let progress = |done: usize, total: usize, what: &str| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    };
    if args.pareto {
        let frontier = planner::pareto(&problem, &progress)?;
        bar.finish_and_clear();
        if args.json {
            let v: Vec<_> = frontier.iter().map(plan_json).collect();
            println!("{}", serde_json::to_string_pretty(&json!({ "pareto": v }))?);
        } else {
            let mut t = output::table([
                "plan",
                "pp",
                "stage mesh",
                "m × b",
                "memory/device",
                "step time",
            ]);
            for p in &frontier {
                t.add_row(vec![
                    p.name.clone(),
                    p.pipeline_stages.to_string(),
                    p.stage_mesh.clone(),
                    format!("{} × {}", p.micro_batches, p.micro_batch_size),
                    output::bytes(p.per_device_memory.total),
                    format!("{:.3} s", p.step_time_s),
                ]);
            }
            println!("{t}");
        }
        return Ok(());
    }
    let objective = match args.objective {
        ObjectiveArg::MinMemory => Objective::MinMemory {
            slack: args.time_slack,
        },
        ObjectiveArg::MinTime => Objective::MinTime,
    };
    let report = planner::plan(&problem, objective, &progress)?;
    bar.finish_and_clear();
    if args.json {
        let reference = reference(&report);
        let baselines: Vec<_> = report.baselines.iter().map(plan_json).collect();
        let mut v = plan_json(&report.plan);
        v["runners_up"] = json!(report.runners_up.iter().map(plan_json).collect::<Vec<_>>());
        v["baselines"] = json!(baselines);
        if let Some(r) = reference {
            v["memory_saved_vs_megatron"] = json!(
                1.0 - report.plan.per_device_memory.total as f64 / r.per_device_memory.total as f64
            );
            v["time_ratio_vs_megatron"] = json!(report.plan.step_time_s / r.step_time_s);
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print_table(&report, &problem);
    if args.details {
        print_details(&report.plan);
    }
    Ok(())
}
