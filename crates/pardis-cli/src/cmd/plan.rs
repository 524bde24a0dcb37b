//! `pardis plan` (issues #4, #24): the memory-minimal parallel plan for training a model on a
//! mesh at the strongest peer's step time, beside Megatron-LM, DeepSpeed and torchtitan each at
//! its strongest, in the same cost model.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use pardis::memory::ModelConfig;
use pardis::memory::{
    OffloadTarget, PipelineSchedule, Recompute, ZeroStage, MEGATRON_VOCAB_PADDING,
};
use pardis::plan::planner;
use pardis::plan::{
    plan_graph, ComputationGraph, DeviceMesh, Objective, OperatorPlan, PeerConfig, PeerPlan, Plan,
    PlanReport, Problem, SolverConfig, TimeReference,
};
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
    /// Allowed slowdown of the min-memory plan over its reference step time (the strongest
    /// peer's, or pardis's fastest plan when no peer configuration fits).
    #[arg(long, visible_alias = "slack", default_value_t = planner::DEFAULT_TIME_SLACK)]
    time_slack: f64,
    /// Pad the vocabulary to a multiple of N, as Megatron-LM does (128 × tensor parallel 8), so
    /// tensor parallelism can split it; 1 keeps the model's own vocabulary.
    #[arg(long, default_value_t = MEGATRON_VOCAB_PADDING)]
    vocab_pad: u64,
    /// Per-device memory (e.g. 40GiB); default: the preset's.
    #[arg(long, value_parser = output::parse_bytes)]
    gpu_mem: Option<u64>,
    /// Sequences per training step.
    #[arg(long, default_value_t = pardis::plan::DEFAULT_GLOBAL_BATCH)]
    global_batch: u64,
    /// Sequence length.
    #[arg(long, default_value_t = pardis::plan::DEFAULT_SEQ_LEN)]
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
    #[command(flatten)]
    emit: super::emit::EmitArgs,
}

fn mesh(args: &Args) -> anyhow::Result<DeviceMesh> {
    let mut mesh = match &args.mesh_json {
        Some(path) => {
            let text = crate::output::read_text_capped(path, crate::output::MAX_JSON_BYTES)?;
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
    anyhow::ensure!(args.vocab_pad > 0, "--vocab-pad must be positive");
    let model = model.with_vocab_padding(args.vocab_pad);
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

/// `pardis memory` flags that describe a peer configuration (the same memory to the byte).
fn memory_command(cfg: &PeerConfig, problem: &Problem) -> String {
    let mut flags = vec![format!("pardis memory --model {}", problem.model.name)];
    if problem.model.vocab_pad_multiple != 1 {
        flags.push(format!("--vocab-pad {}", problem.model.vocab_pad_multiple));
    }
    flags.push(format!(
        "--dp {} --tp {} --pp {} --micro-batch {} --num-microbatches {} --seq {}",
        cfg.dp, cfg.tp, cfg.pp, cfg.micro_batch_size, cfg.micro_batches, problem.setup.seq_len
    ));
    if cfg.sequence_parallel {
        flags.push("--sp".into());
    }
    match cfg.zero {
        ZeroStage::Zero0 => {}
        ZeroStage::DistributedOptimizer => flags.push("--distributed-optimizer".into()),
        z => flags.push(format!("--zero {}", z.number())),
    }
    match cfg.offload_target(problem) {
        OffloadTarget::None => {}
        OffloadTarget::Cpu => flags.push("--offload-optimizer cpu".into()),
        OffloadTarget::Nvme => flags.push("--offload-optimizer nvme".into()),
    }
    if cfg.recompute != Recompute::None {
        flags.push(format!("--recompute {}", cfg.recompute));
    }
    if let PipelineSchedule::Interleaved { virtual_stages } = cfg.schedule {
        flags.push(format!(
            "--schedule interleaved --virtual-stages {virtual_stages}"
        ));
    }
    if problem.setup.flash_attention {
        flags.push("--flash".into());
    }
    flags.join(" ")
}

/// The report as JSON: the library's serde form, the saving, and for every peer row the
/// `pardis memory` command that reproduces its memory.
fn report_json(report: &PlanReport, problem: &Problem) -> anyhow::Result<serde_json::Value> {
    let mut v = serde_json::to_value(report)?;
    v["memory_saving_vs_peer"] = json!(report.memory_saving());
    v["model"] = json!({
        "name": problem.model.name,
        "vocab_size": problem.model.vocab_size,
        "padded_vocab": problem.model.padded_vocab(),
    });
    v["mesh"] = json!({
        "name": problem.mesh.name,
        "devices": problem.mesh.num_devices(),
        "device_memory_bytes": problem.mesh.device_memory_bytes,
    });
    v["global_batch"] = json!(problem.global_batch);
    v["seq_len"] = json!(problem.setup.seq_len);
    if let Some(peers) = v["peers"].as_array_mut() {
        for (summary, value) in report.peers.iter().zip(peers) {
            for (key, row) in [
                ("fastest", &summary.fastest),
                ("leanest_within_budget", &summary.leanest_within_budget),
            ] {
                if let Some(r) = row {
                    value[key]["memory_command"] = json!(memory_command(&r.config, problem));
                }
            }
        }
    }
    if let Some(r) = &report.peer_reference {
        v["peer_reference"]["memory_command"] = json!(memory_command(&r.config, problem));
    }
    Ok(v)
}

/// `pp2 (13/11) gpu0:2×gpu1:4 m32 1F1B rc-full`: the shape of a pardis plan in one cell.
fn pardis_shape(p: &Plan) -> String {
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
    let mut shape = format!(
        "pp{} ({}) {} m{}",
        p.pipeline_stages,
        layers.join("/"),
        p.stage_mesh,
        p.micro_batches
    );
    if p.pipeline_stages > 1 {
        shape.push_str(&format!(" {}", p.schedule));
    }
    if p.recompute != Recompute::None {
        shape.push_str(&format!(" rc-{}", p.recompute_label()));
    }
    shape
}

/// `tp8 pp1 dp1 sp rc-full b2 m16`: a peer configuration in one cell.
fn peer_shape(c: &PeerConfig) -> String {
    format!("{} m{}", c.label(), c.micro_batches)
}

fn memory_cell(p: &Plan) -> String {
    format!(
        "{}{}",
        output::bytes(p.per_device_memory.total()),
        if p.fits { "" } else { " (OOM)" }
    )
}

fn saving_cell(p: &Plan, reference: Option<&PeerPlan>) -> String {
    reference.map_or("-".into(), |r| {
        format!(
            "{:+.1}%",
            100.0
                * (1.0
                    - p.per_device_memory.total() as f64 / r.plan.per_device_memory.total() as f64)
        )
    })
}

/// The header line naming the objective's reference point.
fn objective_line(report: &PlanReport) -> String {
    let o = &report.objective;
    let factor = if o.slack > 0.0 {
        format!("(1 + {}) × ", o.slack)
    } else {
        String::new()
    };
    let what = match &o.reference {
        TimeReference::StrongestPeer { name, step_time_s } => {
            format!("the strongest peer's step time ({name}, {step_time_s:.3} s)")
        }
        TimeReference::FastestPardis { step_time_s } if o.kind == "min-memory" => {
            format!("pardis's fastest plan ({step_time_s:.3} s; no peer configuration fits)")
        }
        TimeReference::FastestPardis { step_time_s } => {
            format!("pardis's fastest plan ({step_time_s:.3} s)")
        }
    };
    format!(
        "objective: {} within {factor}{what}: budget {:.3} s",
        o.kind, o.time_budget_s
    )
}

fn print_table(report: &PlanReport, problem: &Problem) {
    let model = &problem.model;
    let vocab = if model.padded_vocab() == model.vocab_size {
        format!("vocabulary {}", model.vocab_size)
    } else {
        format!(
            "vocabulary {} padded to {}",
            model.vocab_size,
            model.padded_vocab()
        )
    };
    println!(
        "{}",
        output::paragraph(&format!(
            "{} ({vocab}) on {}: {} devices × {}; global batch {} × seq {}",
            model.name,
            problem.mesh.name,
            problem.mesh.num_devices(),
            output::bytes(problem.mesh.device_memory_bytes),
            problem.global_batch,
            problem.setup.seq_len,
        ))
    );
    println!("{}", output::paragraph(&objective_line(report)));
    let reference = report.peer_reference.as_ref();
    let budget = report.objective.reference.step_time_s();
    let mut t = output::table([
        "plan",
        "configuration",
        "memory/device",
        "step time",
        "saved",
        "time ×",
    ]);
    let row = |t: &mut comfy_table::Table, name: String, shape: String, p: &Plan| {
        t.add_row(vec![
            name,
            shape,
            memory_cell(p),
            format!("{:.3} s", p.step_time_s),
            saving_cell(p, reference),
            format!("{:.3}", p.step_time_s / budget),
        ]);
    };
    let headline = if report.objective.kind == "min-memory"
        && report.plan.name.starts_with("pardis min-memory")
    {
        "pardis: leanest in budget"
    } else {
        "pardis: fastest"
    };
    let peer_chosen = report.plan.name.contains("(= ");
    row(
        &mut t,
        if peer_chosen {
            format!("{headline} (= peer)")
        } else {
            headline.into()
        },
        pardis_shape(&report.plan),
        &report.plan,
    );
    let same = |a: &Plan, b: &Plan| {
        pardis_shape(a) == pardis_shape(b)
            && a.per_device_memory == b.per_device_memory
            && a.step_time_s == b.step_time_s
    };
    if headline != "pardis: fastest" && !same(&report.plan, &report.fastest) {
        row(
            &mut t,
            "pardis: fastest".into(),
            pardis_shape(&report.fastest),
            &report.fastest,
        );
    }
    for s in &report.peers {
        match (&s.fastest, &s.leanest_within_budget) {
            (None, _) => {
                t.add_row(vec![
                    format!("{}: none fits", s.framework),
                    format!("{} configurations searched", s.configurations),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ]);
            }
            (Some(f), l) => {
                row(
                    &mut t,
                    format!("{}: fastest", s.framework),
                    peer_shape(&f.config),
                    &f.plan,
                );
                if let Some(l) = l.as_ref().filter(|l| l.config != f.config) {
                    row(
                        &mut t,
                        format!("{}: leanest in budget", s.framework),
                        peer_shape(&l.config),
                        &l.plan,
                    );
                }
            }
        }
    }
    println!("{t}");
    if peer_chosen {
        println!("{}", output::paragraph(&format!(
            "the chosen plan is a peer's configuration ({}): no plan the search returned is leaner (within the ILP's MIP gap).",
            report.plan.name
        )));
    }
    match reference {
        Some(r) => println!("{}", output::paragraph(&format!(
            "saved: memory per device against the leanest peer configuration within the budget ({}, {}); time ×: step time over the reference.",
            r.plan.name,
            output::bytes(r.plan.per_device_memory.total())
        ))),
        None => println!(
            "{}",
            output::paragraph(
                "no peer configuration fits within the budget; time ×: step time over the reference."
            )
        ),
    }
    if let Some(hint) = slack_hint(report) {
        println!("{}", output::paragraph(&hint));
    }
    if report.candidates_failed > 0 {
        println!("{}", output::paragraph(&format!(
            "note: {} of {} configurations were left out: HiGHS stopped without a solution on one of \
             their ILPs (a larger `--ilp-time-limit` includes them).",
            report.candidates_failed, report.candidates_searched
        )));
    }
}

/// For min-memory: a peer's fastest configuration that needs less memory than the chosen plan
/// but misses the budget (a reader sees it leaner in the table), and the `--time-slack` that
/// would let pardis's search reach its step time too.
fn slack_hint(report: &PlanReport) -> Option<String> {
    let o = &report.objective;
    if o.kind != "min-memory" {
        return None;
    }
    let chosen = report.plan.per_device_memory.total();
    let f = report
        .peers
        .iter()
        .filter_map(|s| s.fastest.as_ref())
        .filter(|f| {
            f.plan.fits
                && f.plan.step_time_s > o.time_budget_s * (1.0 + 1e-9)
                && f.plan.per_device_memory.total() < chosen
        })
        .min_by(|a, b| a.plan.step_time_s.total_cmp(&b.plan.step_time_s))?;
    let reference = o.reference.step_time_s();
    // Rounded up to four decimals, so that the peer's step time is within it.
    let slack = ((f.plan.step_time_s / reference - 1.0) * 1e4).ceil() / 1e4;
    Some(format!(
        "note: {} needs less memory ({}) at {:.1} % more time than the budget; `--time-slack {slack}` \
         searches pardis's plans up to its step time.",
        f.plan.name,
        output::bytes(f.plan.per_device_memory.total()),
        100.0 * (f.plan.step_time_s / o.time_budget_s - 1.0)
    ))
}

fn print_details(report: &PlanReport, problem: &Problem) {
    let p = &report.plan;
    println!("{}", output::paragraph(&format!(
        "outer search: {} points, {} solved and fitting, {} left out (solver failed); ILP {}/{} variables/constraints, {} (gap {:.1e}), {:.2} s solving",
        report.candidates_searched,
        report.candidates_solved,
        report.candidates_failed,
        p.ilp.variables,
        p.ilp.constraints,
        p.ilp.status,
        p.ilp.gap,
        p.ilp.solve_time_s
    )));
    let mut t = output::table(["runner-up", "configuration", "memory/device", "step time"]);
    for (k, r) in report.runners_up.iter().enumerate() {
        t.add_row(vec![
            format!("{}", k + 1),
            pardis_shape(r),
            memory_cell(r),
            format!("{:.3} s", r.step_time_s),
        ]);
    }
    println!("{t}");
    for s in &report.peers {
        println!(
            "{}: {} configurations searched, {} fit",
            s.framework, s.configurations, s.fitting
        );
        if let Some(f) = &s.fastest {
            println!("  fastest: {}", memory_command(&f.config, problem));
        }
    }
    for s in &p.stages {
        let m = &s.memory;
        println!("{}", output::paragraph(&format!(
            "stage {} ({} layers): {} per device = parameters {} + gradients {} + optimizer {} + activations {} + buffers {} + transient {} + overhead {}",
            s.index,
            s.layers,
            output::bytes(m.total()),
            output::bytes(m.parameters),
            output::bytes(m.gradients),
            output::bytes(m.optimizer_states),
            output::bytes(m.activations),
            output::bytes(m.buffers),
            output::bytes(m.transient),
            output::bytes(m.overhead),
        )));
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
    let text = crate::output::read_text_capped(path, crate::output::MAX_JSON_BYTES)?;
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
    println!("{}", output::paragraph(&format!(
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
    )));
    print_operators(&plan.operators);
    Ok(())
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    super::emit::check(&args.emit, args.graph.is_some(), args.pareto, args.json)?;
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
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({ "pareto": frontier }))?
            );
        } else {
            let mut t = output::table(["plan", "configuration", "memory/device", "step time"]);
            for p in &frontier {
                t.add_row(vec![
                    p.name.clone(),
                    pardis_shape(p),
                    memory_cell(p),
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
    if args.emit.requested() {
        // Files to stdout: nothing else there. Files to --out: the table first, as usual.
        if args.emit.writes_files() {
            print_table(&report, &problem);
        }
        return super::emit::run(&args.emit, &problem, &report.plan);
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report_json(&report, &problem)?)?
        );
        return Ok(());
    }
    print_table(&report, &problem);
    if args.details {
        print_details(&report, &problem);
    }
    Ok(())
}
