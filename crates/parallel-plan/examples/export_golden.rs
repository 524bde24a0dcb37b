//! Regenerates the golden files of `tests/it/export.rs`: the default `pardis plan` (min-memory
//! at the strongest peer's step time) of GPT-3 1.3B on 8 A100s and Llama-2 7B on 16, and a
//! Megatron-LM configuration with tensor and pipeline parallelism (Llama-2 7B on 16: TP 2 + SP,
//! PP 2, distributed optimizer, selective recomputation), exported to Megatron-LM, torchtitan and
//! DeepSpeed.
//!
//! Run: `cargo run -p parallel-plan --example export_golden` (then review the diff).

use std::path::PathBuf;

use memory_model::{ModelConfig, PipelineSchedule, Recompute, ZeroStage, MEGATRON_VOCAB_PADDING};
use parallel_plan::export::{self, Engine};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::peers::{self, Framework, PeerConfig};
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

/// Keep in step with `CASES` of `tests/it/export.rs`.
const CASES: [(&str, &str, usize); 2] = [
    ("gpt3-1.3b-8", "gpt3-1.3b", 1),
    ("llama2-7b-16", "llama2-7b", 2),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (case, model, nodes) in CASES {
        let model = ModelConfig::preset(model)?.with_vocab_padding(MEGATRON_VOCAB_PADDING);
        let mut p = Problem::new(model, DeviceMesh::preset("dgx-a100-80g", nodes)?);
        p.solver.time_limit_s = 60.0;
        let report = planner::plan(&p, Objective::MinMemory { slack: 0.0 }, &|_, _, _| {})?;
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(case);
        std::fs::create_dir_all(&dir)?;
        for engine in Engine::ALL {
            let e = export::export(&p, &report.plan, engine)?;
            println!("{case}: {}", e.summary());
            for f in &e.files {
                std::fs::write(dir.join(&f.name), &f.contents)?;
            }
        }
    }
    // A plan with TP, SP and PP: Megatron-LM's own configuration, priced as the peers are.
    let model = ModelConfig::preset("llama2-7b")?.with_vocab_padding(MEGATRON_VOCAB_PADDING);
    let mut p = Problem::new(model, DeviceMesh::preset("dgx-a100-80g", 2)?);
    p.solver.time_limit_s = 60.0;
    let plan = peers::evaluate(&p, &TP_PP_CASE)?;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/llama2-7b-16-tp2-pp2");
    std::fs::create_dir_all(&dir)?;
    for engine in Engine::ALL {
        let e = export::export(&p, &plan, engine)?;
        println!("llama2-7b-16-tp2-pp2: {}", e.summary());
        for f in &e.files {
            std::fs::write(dir.join(&f.name), &f.contents)?;
        }
    }
    Ok(())
}

/// Keep in step with `TP_PP_CASE` of `tests/it/export.rs`.
const TP_PP_CASE: PeerConfig = PeerConfig {
    framework: Framework::MegatronLm,
    tp: 2,
    pp: 2,
    dp: 4,
    sequence_parallel: true,
    zero: ZeroStage::DistributedOptimizer,
    recompute: Recompute::Selective,
    micro_batch_size: 1,
    micro_batches: 64,
    schedule: PipelineSchedule::OneFOneB,
    offload_optimizer: false,
};
