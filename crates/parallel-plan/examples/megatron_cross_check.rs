//! Megatron-LM's own memory formula (`theoretical_memory_usage.py`, reimplemented) on the
//! arguments `pardis plan --emit megatron` writes, beside memory-model's first stage, for a few
//! models; then the assumptions on which they differ.
//!
//! Run: `cargo run --release -p parallel-plan --example megatron_cross_check`

use memory_model::{ModelConfig, MEGATRON_VOCAB_PADDING};
use parallel_plan::export::{self, megatron, Engine};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

const GIB: f64 = (1u64 << 30) as f64;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cases = [
        ("gpt3-1.3b", 1),
        ("gpt3-2.7b", 2),
        ("gpt3-13b", 4),
        ("llama2-7b", 2),
    ];
    println!(
        "| model | GPUs | Megatron-LM arguments | fidelity | Megatron W+O GiB | memory-model W+O GiB | W+O with counted differences | Megatron act GiB | memory-model act GiB | memory-model total GiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for (name, nodes) in cases {
        let model = ModelConfig::preset(name)?.with_vocab_padding(MEGATRON_VOCAB_PADDING);
        let p = Problem::new(model, DeviceMesh::preset("dgx-a100-80g", nodes)?);
        let report = planner::plan(&p, Objective::MinMemory { slack: 0.0 }, &|_, _, _| {})?;
        let e = export::export(&p, &report.plan, Engine::Megatron)?;
        let c = megatron::cross_check(&p, &e.config, &e.layers_per_stage, &e.plan);
        println!(
            "| {name} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2}{} | {:.2} | {:.2} |",
            p.mesh.num_devices(),
            e.config.label(),
            e.fidelity,
            c.megatron.weight_and_optimizer_bytes / GIB,
            c.pardis_weight_and_optimizer as f64 / GIB,
            c.explained_weight_and_optimizer() / GIB,
            c.megatron.activation_bytes / GIB,
            if c.megatron.sequence_parallel_formula {
                ""
            } else {
                "*"
            },
            c.pardis_activations as f64 / GIB,
            c.pardis_total as f64 / GIB,
        );
        for d in c.differences {
            notes.push(format!("{name}: {}", d.what));
        }
    }
    println!("\n(* Megatron's formula without --sequence-parallel and selective recomputation: s·b·h·(10 + 24/t) per layer × 1.05, whatever the recomputation.)\n");
    for n in notes {
        println!("- {n}");
    }
    Ok(())
}
