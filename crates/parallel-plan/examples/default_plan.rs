//! The `pardis plan` default: GPT-3 1.3B on one DGX A100-80GB node, min-memory at the strongest
//! peer's step time, beside the runners-up and each peer framework at its strongest.
//!
//! Run: `cargo run --release -p parallel-plan --example default_plan [-- model nodes]`

mod common;

use common::{dgx_problem, reported, shape, timed_min_memory, GIB};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("gpt3-1.3b", |s| s.as_str());
    let nodes: usize = args.get(1).map_or(Ok(1), |s| s.parse())?;
    let problem = dgx_problem(model, nodes)?;
    let (report, secs) = timed_min_memory(&problem, 0.0)?;
    println!(
        "{model} on {} devices: {} candidates ({} solved and fitting) in {secs:.2} s",
        problem.mesh.num_devices(),
        report.candidates_searched,
        report.candidates_solved,
    );
    for p in reported(&report) {
        println!(
            "{:34} {:44} {:8.2} GiB {:8.3} s fits {:5} ilp {}/{} {} {:.2}s",
            p.name,
            shape(p),
            p.per_device_memory.total() as f64 / GIB,
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
