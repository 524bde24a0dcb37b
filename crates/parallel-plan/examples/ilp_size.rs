//! Size and solve time of single stage ILPs (min-time, then min-memory within 5 % warm-started
//! from the min-time solution).
//!
//! Run: `cargo run --release -p parallel-plan --example ilp_size -- gpt3-1.3b 1 1`
//! (model, nodes of dgx-a100-80g, pipeline stages).

use memory_model::ModelConfig;
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::search::{Candidate, Problem};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map_or("gpt3-1.3b", |s| s.as_str());
    let nodes: usize = args.get(1).map_or(Ok(1), |s| s.parse())?;
    let pp: u64 = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let mesh = DeviceMesh::preset("dgx-a100-80g", nodes)?;
    let devices = mesh.num_devices();
    let problem = Problem::new(ModelConfig::preset(model)?, mesh);
    let stage = problem.mesh.stage_mesh(devices / pp as usize)?;
    let mut meshes = vec![stage.clone()];
    meshes.extend((2..8).filter_map(|k| stage.factorized(k)));
    for m in meshes {
        let cand = Candidate::new(problem.model.num_layers, pp, m.clone(), 8 * pp);
        let t0 = std::time::Instant::now();
        let stages = problem.build(&cand, None)?;
        let build = t0.elapsed().as_secs_f64();
        for st in &stages {
            let g = &st.space.ilp;
            let strategies: usize = g.nodes.iter().map(|n| n.time.len()).sum();
            // Lexicographic min-memory within 5 %: min-time, then min-memory warm-started from it.
            let (fast, lean) = g.solve_min_memory(0.05, &problem.solver)?;
            println!(
                "{} stage {}: {} nodes, {} strategies, {} vars, {} cons; build {:.2}s; min-time {:.3}s {} ; min-mem {:.3}s {} gap {:.1e}; {:.3}s→{:.3}s, {:.2}→{:.2} GiB",
                m.shape_string(), st.key_index, g.nodes.len(), strategies, fast.stats.variables, fast.stats.constraints, build,
                fast.stats.solve_time_s, fast.stats.status, lean.stats.solve_time_s, lean.stats.status, lean.stats.gap,
                fast.time, lean.time, fast.memory as f64 / (1u64 << 30) as f64, lean.memory as f64 / (1u64 << 30) as f64
            );
        }
    }
    Ok(())
}
