//! The `pardis plan` default: GPT-3 1.3B on one DGX A100-80GB node, min-memory with 5 % slack,
//! beside the baselines.
//!
//! Run: `cargo run -p parallel-plan --example default_plan [-- model nodes]`

use memory_model::ModelConfig;
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("gpt3-1.3b", |s| s.as_str());
    let nodes: usize = args.get(1).map_or(Ok(1), |s| s.parse())?;
    let problem = Problem::new(
        ModelConfig::preset(model)?,
        DeviceMesh::preset("dgx-a100-80g", nodes)?,
    );
    let start = std::time::Instant::now();
    let report = planner::plan(
        &problem,
        Objective::MinMemory { slack: 0.05 },
        &|_, _, _| {},
    )?;
    println!(
        "{} candidates in {:.2} s",
        report.candidates_searched,
        start.elapsed().as_secs_f64()
    );
    for p in std::iter::once(&report.plan)
        .chain(&report.runners_up)
        .chain(&report.baselines)
    {
        println!(
            "{:40} pp{} {:14} m{:4} {:8.2} GiB {:7.3} s fits {} ilp {}/{} {} {:.2}s",
            p.name,
            p.pipeline_stages,
            p.stage_mesh,
            p.micro_batches,
            p.per_device_memory.total as f64 / (1u64 << 30) as f64,
            p.step_time_s,
            p.fits,
            p.ilp.variables,
            p.ilp.constraints,
            p.ilp.status,
            p.ilp.solve_time_s
        );
    }
    Ok(())
}
