//! Where the time of the whole search goes: wall-clock time of each planner phase (building and
//! solving the min-time ILPs, the min-memory ILPs, the baselines), measured through the progress
//! callback, and the ILP solve time each reported plan accumulated; then the second search
//! `pardis plan` runs, the leanest plan at the step time of the leanest fitting Megatron-LM
//! variant (equal time), timed on its own.
//!
//! Run: `cargo run --release -p parallel-plan --example search_profile [-- model nodes [ilp-time-limit-s]]`
//! (default GPT-3 175B on 128 DGX A100 nodes = 1024 GPUs).

mod common;

use std::sync::Mutex;
use std::time::Instant;

use common::{dgx_problem, reported, shape};
use parallel_plan::planner::{self, Objective};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("gpt3-175b", |s| s.as_str());
    let nodes: usize = args.get(1).map_or(Ok(128), |s| s.parse())?;
    let mut problem = dgx_problem(model, nodes)?;
    if let Some(limit) = args.get(2) {
        problem.solver.time_limit_s = limit.parse()?;
    }
    let start = Instant::now();
    // Per phase name: (first call, last call), seconds since start.
    let phases: Mutex<Vec<(String, f64, f64)>> = Mutex::new(Vec::new());
    let progress = |_: usize, _: usize, what: &str| {
        let now = start.elapsed().as_secs_f64();
        let mut p = phases.lock().unwrap_or_else(|e| e.into_inner());
        match p.iter_mut().find(|(name, _, _)| name == what) {
            Some(entry) => entry.2 = now,
            None => p.push((what.to_string(), now, now)),
        }
    };
    let report = planner::plan(&problem, Objective::MinMemory { slack: 0.0 }, &progress)?;
    let total = start.elapsed().as_secs_f64();
    println!(
        "{model} on {} devices: {} candidates, {} solved and fitting; {total:.2} s wall",
        problem.mesh.num_devices(),
        report.candidates_searched,
        report.candidates_solved
    );
    for (name, first, last) in phases.into_inner().unwrap_or_else(|e| e.into_inner()) {
        println!("  {name:16} first done at {first:6.2} s, last at {last:6.2} s");
    }
    for p in reported(&report) {
        println!(
            "  {:28} {:40} ilp {}/{} (solved {}/{}) {} gap {:.1e}, {:.2} s solving",
            p.name,
            shape(p),
            p.ilp.variables,
            p.ilp.constraints,
            p.ilp.solved_variables,
            p.ilp.solved_constraints,
            p.ilp.status,
            p.ilp.gap,
            p.ilp.solve_time_s
        );
    }
    if let (Some(r), Some(saving)) = (&report.peer_reference, report.memory_saving()) {
        println!(
            "reference: {} at {:.3} s; pardis saves {:.1} %",
            r.plan.name,
            r.plan.step_time_s,
            100.0 * saving
        );
    }
    println!("total {:.2} s wall", start.elapsed().as_secs_f64());
    Ok(())
}
