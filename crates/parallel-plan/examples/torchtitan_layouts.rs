//! Writes torchtitan's `parallelize_module` plan for every per-linear tensor-parallel layout
//! (column, row or no split for each of q/k/v, the out-projection, MLP-up and MLP-down, not
//! all four unsplit: 80 layouts) of a two-layer Llama on 2 GPUs, one directory per layout, for
//! `scripts/check-torchtitan-plans` to run under PyTorch against the unsplit model.
//!
//! Run: `cargo run -p parallel-plan --example torchtitan_layouts -- OUT_DIR` (OUT_DIR must not
//! exist yet).

use memory_model::{ModelConfig, PipelineSchedule, Recompute, ZeroStage};
use parallel_plan::export::{self, Engine, Fidelity, LinearSplit};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::peers::{self, Framework, LinearLayout, PeerConfig};
use parallel_plan::search::Problem;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(out) = std::env::args_os().nth(1).map(std::path::PathBuf::from) else {
        return Err("usage: torchtitan_layouts OUT_DIR".into());
    };
    std::fs::create_dir(&out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let mut model = ModelConfig::preset("llama2-7b")?;
    model.num_layers = 2;
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1)?.stage_mesh(2)?;
    let mut p = Problem::new(model, mesh);
    p.global_batch = 4;
    p.setup.seq_len = 512;
    let cfg = PeerConfig {
        framework: Framework::Torchtitan,
        tp: 2,
        pp: 1,
        dp: 1,
        sequence_parallel: true,
        zero: ZeroStage::Zero0,
        recompute: Recompute::None,
        micro_batch_size: 1,
        micro_batches: 4,
        schedule: PipelineSchedule::OneFOneB,
        offload_optimizer: false,
    };
    let splits = [
        LinearSplit::Column,
        LinearSplit::Row,
        LinearSplit::Replicated,
    ];
    for code in 0..80usize {
        let layout: LinearLayout = std::array::from_fn(|i| splits[code / 3usize.pow(i as u32) % 3]);
        let plan = peers::evaluate_with_layout(&p, &cfg, &[2], &layout)?;
        let e = export::export(&p, &plan, Engine::Torchtitan)?;
        if e.fidelity != Fidelity::Exact {
            return Err(format!("{layout:?}: not exact: {}", e.summary()).into());
        }
        let name: Vec<String> = layout.iter().map(ToString::to_string).collect();
        let dir = out.join(name.join("_"));
        std::fs::create_dir(&dir)?;
        for f in &e.files {
            std::fs::write(dir.join(&f.name), &f.contents)?;
        }
    }
    println!("80 layouts written to {}", out.display());
    Ok(())
}
