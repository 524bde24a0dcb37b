//! The bar cases of `pardis plan`: GPT-3 1.3B / 13B / 175B on 8 / 32 / 1024 A100-80GB and
//! Llama-2 7B on 16 (DGX nodes of 8; GPT-3 175B at its published global batch of 1536
//! sequences), each against the strongest peer configuration (Megatron-LM, DeepSpeed ZeRO,
//! torchtitan FSDP + TP, each searched over its own knobs) in the same cost model: pardis's
//! leanest plan at the strongest peer's step time, and the memory it saves against the leanest
//! peer configuration that is as fast.
//!
//! Run: `cargo run --release -p parallel-plan --example gpt3_table [-- model:nodes …]`

mod common;

use common::{dgx_problem, shape, timed_min_memory, GIB};
use parallel_plan::plan::Plan;

fn gib(p: &Plan) -> f64 {
    p.per_device_memory.total() as f64 / GIB
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cases: Vec<(String, usize)> = if args.is_empty() {
        [
            ("gpt3-1.3b", 1),
            ("gpt3-13b", 4),
            ("gpt3-175b", 128),
            ("llama2-7b", 2),
        ]
        .map(|(m, n)| (m.to_string(), n))
        .to_vec()
    } else {
        args.iter()
            .map(|a| {
                let (m, n) = a.split_once(':').ok_or("expected model:nodes")?;
                Ok((m.to_string(), n.parse()?))
            })
            .collect::<Result<_, Box<dyn std::error::Error>>>()?
    };
    println!("| model | GPUs | strongest peer (fastest fitting) | GiB | step s | leanest peer as fast | GiB | pardis at that step time | GiB | step s | saved | search s |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, nodes) in &cases {
        let mut problem = dgx_problem(name, *nodes)?;
        if name == "gpt3-175b" {
            problem.global_batch = 1536;
        }
        let devices = problem.mesh.num_devices();
        let (report, secs) = timed_min_memory(&problem, 0.0)?;
        let p = &report.plan;
        let strongest = report
            .peers
            .iter()
            .filter_map(|s| s.fastest.as_ref())
            .min_by(|a, b| a.plan.step_time_s.total_cmp(&b.plan.step_time_s));
        let (Some(s), Some(r)) = (strongest, &report.peer_reference) else {
            println!(
                "| {name} | {devices} | no peer configuration fits | - | - | - | - | {} | {:.2} | {:.3} | - | {secs:.1} |",
                shape(p),
                gib(p),
                p.step_time_s
            );
            continue;
        };
        println!(
            "| {name} | {devices} | {} | {:.2} | {:.3} | {} | {:.2} | {} | {:.2} | {:.3} | {:+.1} % | {secs:.1} |",
            s.plan.name,
            gib(&s.plan),
            s.plan.step_time_s,
            r.plan.name,
            gib(&r.plan),
            shape(p),
            gib(p),
            p.step_time_s,
            100.0 * report.memory_saving().unwrap_or(0.0),
        );
    }
    Ok(())
}
