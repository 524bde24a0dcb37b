//! The paper's comparison: GPT-3 1.3B / 2.7B / 6.7B / 13B on 8 / 16 / 32 / 64 A100-80GB
//! (DGX nodes of 8) against Megatron-LM's strategies (TP in a node, PP across nodes, DP for the
//! rest; the leanest of ±SP, ±distributed optimizer, each within 5 % of its own fastest
//! configuration, that fits), in the same cost model. Two pardis plans per row:
//! - at equal time: the leanest plan within 5 % of that Megatron-LM plan's step time;
//! - the default objective: the leanest plan within 5 % of the fastest plan of all.
//!
//! Run: `cargo run --release -p parallel-plan --example gpt3_table [-- models…]`

mod common;

use common::{dgx_problem, shape, timed_min_memory, GIB};
use parallel_plan::plan::Plan;
use parallel_plan::planner;

const SLACK: f64 = 0.05;

fn gib(p: &Plan) -> f64 {
    p.per_device_memory.total() as f64 / GIB
}

fn saved(p: &Plan, reference: &Plan) -> f64 {
    100.0 * (1.0 - p.per_device_memory.total() as f64 / reference.per_device_memory.total() as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let models = if args.is_empty() {
        ["gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b"]
            .map(String::from)
            .to_vec()
    } else {
        args
    };
    println!("| model | GPUs | Megatron-LM (leanest fitting) | GiB | step s | pardis at ≤ 1.05 × Megatron time | GiB | step s | saved | pardis within 5 % of fastest | GiB | step s | saved | search s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for name in &models {
        for nodes in [1usize, 2, 4, 8] {
            let problem = dgx_problem(name, nodes)?;
            let devices = problem.mesh.num_devices();
            let (report, secs) = timed_min_memory(&problem, SLACK)?;
            let p = &report.plan;
            let megatron = report
                .baselines
                .iter()
                .filter(|b| b.name.starts_with("Megatron") && b.fits)
                .min_by_key(|b| b.per_device_memory.total());
            let Some(m) = megatron else {
                println!(
                    "| {name} | {devices} | none fits | - | - | - | - | - | - | {} | {:.2} | {:.3} | - | {secs:.1} |",
                    shape(p),
                    gib(p),
                    p.step_time_s
                );
                continue;
            };
            let start = std::time::Instant::now();
            let equal =
                planner::leanest_within(&problem, m.step_time_s * (1.0 + SLACK), &|_, _, _| {})?;
            let secs = secs + start.elapsed().as_secs_f64();
            println!(
                "| {name} | {devices} | {} {} | {:.2} | {:.3} | {} | {:.2} | {:.3} | {:.1} % | {} | {:.2} | {:.3} | {:.1} % | {secs:.1} |",
                m.name,
                shape(m),
                gib(m),
                m.step_time_s,
                shape(&equal),
                gib(&equal),
                equal.step_time_s,
                saved(&equal, m),
                shape(p),
                gib(p),
                p.step_time_s,
                saved(p, m),
            );
        }
    }
    Ok(())
}
