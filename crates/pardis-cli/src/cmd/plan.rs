//! `pardis plan` (issue #4): the memory-minimal parallel plan for training a model on a mesh,
//! beside Megatron-LM and the other baselines in the same cost model.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use pardis::memory::ModelConfig;
use pardis::plan::custom::plan_graph;
use pardis::plan::graph::ComputationGraph;
use pardis::plan::ilp::SolverConfig;
use pardis::plan::mesh::DeviceMesh;
use pardis::plan::plan::{OperatorPlan, Plan};
use pardis::plan::planner::{self, Objective, PlanReport};
use pardis::plan::search::Problem;
use serde_json::json;

use super::memory::breakdown_json;
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
    /// A Hugging Face `config.json` to plan instead of --model.
    #[arg(long, conflicts_with = "graph")]
    hf_config: Option<PathBuf>,
    /// A computation graph in parallel-plan's JSON format (see
    /// crates/parallel-plan/examples/mlp_block_graph.json): planned on the whole mesh as one
    /// stage, min-memory within --time-slack; no baselines.
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Micro-batches per step for --graph (its shapes are one micro-batch's).
    #[arg(long, default_value_t = 1)]
    micro_batches: u64,
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

fn mesh(args: &Args) -> anyhow::Result<DeviceMesh> {
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
    Ok(mesh)
}

fn problem(args: &Args) -> anyhow::Result<Problem> {
    let model = match &args.hf_config {
        Some(path) => ModelConfig::from_hf_config_file(path)
            .with_context(|| format!("loading {}", path.display()))?,
        None => ModelConfig::preset(&args.model)?,
    };
    let mesh = mesh(args)?;
    check_slack(args)?;
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

fn check_slack(args: &Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.time_slack >= 0.0 && args.time_slack.is_finite(),
        "--time-slack must be ≥ 0"
    );
    Ok(())
}

fn plan_json(p: &Plan) -> serde_json::Value {
    let stages: Vec<_> = p
        .stages
        .iter()
        .map(|s| {
            json!({
                "index": s.index, "layers": s.layers, "per_device_memory": breakdown_json(&s.memory), "time_s": s.time_s, "ilp": s.ilp,
                "operators": s.operators,
            })
        })
        .collect();
    // Every operator of every distinct stage, with its stage index.
    let operators: Vec<_> = p
        .stages
        .iter()
        .flat_map(|s| {
            s.operators.iter().map(move |o| {
                let mut v = json!(o);
                v["stage"] = json!(s.index);
                v
            })
        })
        .collect();
    json!({
        "name": p.name, "pipeline_stages": p.pipeline_stages, "layers_per_stage": p.layers_per_stage,
        "stage_mesh": p.stage_mesh, "micro_batches": p.micro_batches, "micro_batch_size": p.micro_batch_size,
        "schedule": p.schedule, "recompute": p.recompute,
        "per_device_memory": breakdown_json(&p.per_device_memory), "step_time_s": p.step_time_s, "fits": p.fits,
        "ilp": p.ilp, "operators": operators, "stages": stages,
    })
}

/// Columns shared by the comparison and the pareto tables.
const PLAN_HEADERS: [&str; 8] = [
    "plan",
    "pp (layers)",
    "stage mesh",
    "m × b",
    "schedule",
    "recompute",
    "memory/device",
    "step time",
];

fn plan_cells(name: String, p: &Plan) -> Vec<String> {
    // Run-length: 32 stages of 3 layers print as `3×32`, 7/7/7/3 as `7×3/3`.
    let mut runs: Vec<(u64, usize)> = Vec::new();
    for &l in &p.layers_per_stage {
        match runs.last_mut() {
            Some((v, n)) if *v == l => *n += 1,
            _ => runs.push((l, 1)),
        }
    }
    let layers: Vec<String> = runs
        .iter()
        .map(|&(v, n)| {
            if n > 1 {
                format!("{v}×{n}")
            } else {
                v.to_string()
            }
        })
        .collect();
    let mem = format!(
        "{}{}",
        output::bytes(p.per_device_memory.total()),
        if p.fits { "" } else { " (OOM)" }
    );
    vec![
        name,
        format!("{} ({})", p.pipeline_stages, layers.join("/")),
        p.stage_mesh.clone(),
        format!("{} × {}", p.micro_batches, p.micro_batch_size),
        p.schedule.clone(),
        p.recompute.clone(),
        mem,
        format!("{:.3} s", p.step_time_s),
    ]
}

fn reference(report: &PlanReport) -> Option<&Plan> {
    let megatron = report
        .baselines
        .iter()
        .filter(|b| b.name.starts_with("Megatron"));
    megatron
        .filter(|b| b.fits)
        .min_by_key(|b| b.per_device_memory.total())
}

/// `equal_time`: the leanest pardis plan no slower than the reference Megatron-LM variant (the
/// equal-throughput comparison of the paper), when one exists.
fn print_table(report: &PlanReport, problem: &Problem, equal_time: Option<&Plan>) {
    let reference = reference(report);
    let mut t = output::table(PLAN_HEADERS.into_iter().chain([
        "saved vs Megatron",
        "time ratio",
        "ILP vars/cons",
        "status (gap)",
        "solve",
    ]));
    let mut rows = vec![(report.plan.name.clone(), &report.plan)];
    for (k, p) in report.runners_up.iter().enumerate() {
        rows.push((format!("  runner-up {}", k + 1), p));
    }
    if let (Some(p), Some(r)) = (equal_time, reference) {
        rows.push((format!("pardis at {}'s step time", r.name), p));
    }
    rows.extend(report.baselines.iter().map(|p| (p.name.clone(), p)));
    for (name, p) in rows {
        let (saved, ratio) = match reference {
            Some(r) => (
                format!(
                    "{:+.1}%",
                    100.0
                        * (1.0
                            - p.per_device_memory.total() as f64
                                / r.per_device_memory.total() as f64)
                ),
                format!("{:.3}", p.step_time_s / r.step_time_s),
            ),
            None => ("-".into(), "-".into()),
        };
        let mut row = plan_cells(name, p);
        row.extend([
            saved,
            ratio,
            format!("{}/{}", p.ilp.variables, p.ilp.constraints),
            format!("{} ({:.1e})", p.ilp.status, p.ilp.gap),
            format!("{:.2} s", p.ilp.solve_time_s),
        ]);
        t.add_row(row);
    }
    println!(
        "{} on {} ({} devices, {} each), global batch {} × seq {}; {} outer-search points, {} solved and fitting",
        problem.model.name,
        problem.mesh.name,
        problem.mesh.num_devices(),
        output::bytes(problem.mesh.device_memory_bytes),
        problem.global_batch,
        problem.setup.seq_len,
        report.candidates_searched,
        report.candidates_solved
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
            output::bytes(s.memory.total())
        );
        print_operators(&s.operators);
    }
}

fn print_operators(operators: &[OperatorPlan]) {
    let mut t = output::table(["operator", "copies", "sharding", "ZeRO", "collectives"]);
    for o in operators {
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

/// `--graph`: a custom computation graph on the whole mesh.
fn run_graph(args: &Args, path: &std::path::Path) -> anyhow::Result<()> {
    check_slack(args)?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let graph = ComputationGraph::from_json(&text)?;
    let mesh = mesh(args)?;
    let solver = SolverConfig {
        time_limit_s: args.ilp_time_limit,
        ..SolverConfig::default()
    };
    let bar = output::progress(1, "planning the graph");
    let plan = plan_graph(&graph, &mesh, args.micro_batches, args.time_slack, &solver)?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    println!(
        "{} ({} operators) on {} ({} devices): {} per device, step {:.4} s (fastest {:.4} s); ILP {}/{} {} ({:.1e}) in {:.2} s",
        path.display(),
        graph.ops.len(),
        plan.mesh,
        mesh.num_devices(),
        output::bytes(plan.per_device_memory.total()),
        plan.step_time_s,
        plan.fastest_step_time_s,
        plan.ilp.variables,
        plan.ilp.constraints,
        plan.ilp.status,
        plan.ilp.gap,
        plan.ilp.solve_time_s
    );
    print_operators(&plan.operators);
    Ok(())
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if let Some(path) = &args.graph {
        return run_graph(&args, path);
    }
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
            let mut t = output::table(PLAN_HEADERS);
            for p in &frontier {
                t.add_row(plan_cells(p.name.clone(), p));
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
    // Memory at equal throughput: the leanest plan no slower than the reference Megatron-LM
    // variant (none when the search finds nothing that fast).
    let equal_time = reference(&report)
        .and_then(|r| planner::leanest_within(&problem, r.step_time_s, &progress).ok());
    bar.finish_and_clear();
    if args.json {
        let reference = reference(&report);
        let baselines: Vec<_> = report.baselines.iter().map(plan_json).collect();
        let mut v = plan_json(&report.plan);
        v["runners_up"] = json!(report.runners_up.iter().map(plan_json).collect::<Vec<_>>());
        v["baselines"] = json!(baselines);
        v["candidates_searched"] = json!(report.candidates_searched);
        v["candidates_solved"] = json!(report.candidates_solved);
        if let Some(r) = reference {
            v["memory_saved_vs_megatron"] = json!(
                1.0 - report.plan.per_device_memory.total() as f64
                    / r.per_device_memory.total() as f64
            );
            v["time_ratio_vs_megatron"] = json!(report.plan.step_time_s / r.step_time_s);
            if let Some(e) = &equal_time {
                let mut ej = plan_json(e);
                ej["memory_saved_vs_megatron"] = json!(
                    1.0 - e.per_device_memory.total() as f64 / r.per_device_memory.total() as f64
                );
                v["equal_time_vs_megatron"] = ej;
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print_table(&report, &problem, equal_time.as_ref());
    if args.details {
        print_details(&report.plan);
    }
    Ok(())
}
