//! The paper's comparison: GPT-3 1.3B / 2.7B / 6.7B / 13B on 8 / 16 / 32 / 64 A100-80GB
//! (DGX nodes of 8), pardis min-memory plan (time slack 5 %) against Megatron-LM's strategies
//! (TP in a node, PP across nodes, DP for the rest; the leanest of ±SP, ±distributed optimizer
//! that fits), in the same cost model.
//!
//! Run: `cargo run --release -p parallel-plan --example gpt3_table [-- models…]`

use memory_model::ModelConfig;
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

const GIB: f64 = (1u64 << 30) as f64;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let models = if args.is_empty() {
        vec![
            "gpt3-1.3b".to_string(),
            "gpt3-2.7b".into(),
            "gpt3-6.7b".into(),
            "gpt3-13b".into(),
        ]
    } else {
        args
    };
    println!("| model | devices | pardis plan | pardis GiB | time | Megatron-LM (leanest fitting) | Megatron GiB | time | saved | time ratio | solve s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for name in &models {
        for nodes in [1usize, 2, 4, 8] {
            let mesh = DeviceMesh::preset("dgx-a100-80g", nodes)?;
            let devices = mesh.num_devices();
            let problem = Problem::new(ModelConfig::preset(name)?, mesh);
            let start = std::time::Instant::now();
            let report = planner::plan(
                &problem,
                Objective::MinMemory { slack: 0.05 },
                &|_, _, _| {},
            )?;
            let secs = start.elapsed().as_secs_f64();
            let p = &report.plan;
            let megatron = report
                .baselines
                .iter()
                .filter(|b| b.name.starts_with("Megatron") && b.fits)
                .min_by_key(|b| b.per_device_memory.total);
            let (mname, mgib, mtime, saved, ratio) = match megatron {
                Some(m) => (
                    format!("{} pp{} m{}", m.name, m.pipeline_stages, m.micro_batches),
                    format!("{:.2}", m.per_device_memory.total as f64 / GIB),
                    format!("{:.3}", m.step_time_s),
                    format!(
                        "{:.1}%",
                        100.0
                            * (1.0
                                - p.per_device_memory.total as f64
                                    / m.per_device_memory.total as f64)
                    ),
                    format!("{:.3}", p.step_time_s / m.step_time_s),
                ),
                None => (
                    "none fits".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "-".into(),
                ),
            };
            println!(
                "| {name} | {devices} | pp{} {} m{} | {:.2} | {:.3} | {mname} | {mgib} | {mtime} | {saved} | {ratio} | {secs:.1} |",
                p.pipeline_stages,
                p.stage_mesh,
                p.micro_batches,
                p.per_device_memory.total as f64 / GIB,
                p.step_time_s,
            );
        }
    }
    Ok(())
}
