//! Solve time and ILP size for GPT-3 1.3B…175B and Llama-2 7B…70B on meshes of 8 to 1024
//! A100s (DGX nodes of 8): the single tied ILP of the whole model without pipelining
//! (min-time, then min-memory within 5 % warm-started from it), and the whole
//! multi-dimensional search of `pardis plan` (min-memory at the strongest peer's step time, with the peers' searches).
//! Prints a Markdown table; times are wall-clock seconds on this machine.
//!
//! Run: `cargo run --release -p parallel-plan --example solve_times [-- nodes...]`
//! (default 1 8 32 128 nodes = 8, 64, 256 and 1024 GPUs).

mod common;

use std::time::Instant;

use common::dgx_problem;
use memory_model::{Recompute, PRESET_NAMES};
use parallel_plan::ilp::IlpStats;
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

/// GPT-3 1.3B…175B and Llama-2 7B…70B: a contiguous run of memory-model's presets.
fn models() -> &'static [&'static str] {
    let first = PRESET_NAMES
        .iter()
        .position(|&m| m == "gpt3-1.3b")
        .unwrap_or(0);
    let last = PRESET_NAMES
        .iter()
        .position(|&m| m == "llama2-70b")
        .unwrap_or(0);
    &PRESET_NAMES[first..=last]
}

/// `variables / constraints (solved variables / constraints)`.
fn size(s: &IlpStats) -> String {
    format!(
        "{} / {} ({} / {})",
        s.variables, s.constraints, s.solved_variables, s.solved_constraints
    )
}

/// The single tied ILP of the whole model on the whole mesh (no pipeline, unfactorized mesh,
/// no recomputation, the fewest micro-batches the search tries): its size, the min-time and
/// min-memory solve times and the worse status.
fn single_ilp(problem: &Problem) -> Result<String, Box<dyn std::error::Error>> {
    let cand = problem
        .candidates(Some(1))
        .into_iter()
        .find(|c| c.stage_mesh == problem.mesh && c.recompute == Recompute::None)
        .ok_or("no pipeline-free candidate")?;
    let stages = problem.build(&cand, None)?;
    let ilp = &stages[0].space.ilp;
    let (fast, lean) = ilp.solve_min_memory(0.05, &problem.solver)?;
    let stats = IlpStats::summary_of([&fast.stats, &lean.stats]);
    Ok(format!(
        "{} | m{} | {} | {:.3} | {:.3} | {}",
        problem.model.num_layers,
        cand.micro_batches,
        size(&stats),
        fast.stats.solve_time_s,
        lean.stats.solve_time_s,
        stats.status
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes: Vec<usize> = {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?;
        if args.is_empty() {
            vec![1, 8, 32, 128]
        } else {
            args
        }
    };
    println!(
        "| model | GPUs | layers | m | single ILP vars / cons (solved) | min-time s | min-memory s | status \
         | search points / solved | largest ILP vars / cons (solved) | search status (max gap) \
         | search s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let start = Instant::now();
    for &model in models() {
        for &n in &nodes {
            let problem = dgx_problem(model, n)?;
            let single =
                single_ilp(&problem).unwrap_or_else(|e| format!("– | – | {e} | – | – | –"));
            let t0 = Instant::now();
            let search =
                match planner::plan(&problem, Objective::MinMemory { slack: 0.0 }, &|_, _, _| {}) {
                    Ok(r) => {
                        let all = std::iter::once(&r.plan)
                            .chain(&r.runners_up)
                            .map(|p| &p.ilp);
                        let summary = IlpStats::summary_of(all);
                        format!(
                            "{} / {} | {} | {} ({:.0e})",
                            r.candidates_searched,
                            r.candidates_solved,
                            size(&summary),
                            summary.status,
                            summary.gap
                        )
                    }
                    Err(e) => format!("– | {e} | –"),
                };
            println!(
                "| {model} | {} | {single} | {search} | {:.2} |",
                problem.mesh.num_devices(),
                t0.elapsed().as_secs_f64()
            );
        }
    }
    eprintln!("table in {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
