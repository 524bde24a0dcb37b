//! The Graph500 BFS procedure on a Kronecker graph: generate, pick 64 roots of degree ≥ 1,
//! search from each with the direction-optimizing BFS, validate, report harmonic-mean TEPS.
//!
//! ```text
//! cargo run --release -p graph-kernels --example graph500 -- [SCALE=16] [THREADS=2]
//! ```

use graph_kernels::bfs::BfsAlgorithm;
use graph_kernels::generate::kronecker;
use graph_kernels::teps::{run_teps, TepsConfig};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let scale: u32 = args.next().map_or(Ok(16), |s| s.parse())?;
    let threads: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let t = Instant::now();
    let graph = pool.install(|| kronecker(scale, 16, 1))?;
    println!(
        "Kronecker scale {scale}: {} vertices, {} edges, generated in {:.2} s",
        graph.num_vertices(),
        graph.num_edges(),
        t.elapsed().as_secs_f64()
    );
    let config = TepsConfig {
        validate: true,
        ..TepsConfig::default()
    };
    let report =
        pool.install(|| run_teps(&graph, BfsAlgorithm::DirectionOptimizing, &config, |_| {}))?;
    for run in report.runs.iter().take(5) {
        println!(
            "root {:>9}: {:.4} s, {:.3} GTEPS, {} levels, switches {:?}",
            run.root,
            run.seconds,
            run.teps / 1e9,
            run.levels,
            run.switches
        );
    }
    println!(
        "{} roots, all validated; harmonic mean {:.3} GTEPS on {threads} threads",
        report.runs.len(),
        report.harmonic_mean_teps / 1e9
    );
    Ok(())
}
