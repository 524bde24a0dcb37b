//! The Graph500 TEPS (traversed edges per second) runner.

use crate::bfs::{BfsAlgorithm, BfsConfig, BfsResult, Direction};
use crate::csr::CsrGraph;
use crate::error::{GraphError, Result};
use crate::validate::validate_bfs;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::time::Instant;

/// Number of BFS roots Graph500 prescribes.
pub const GRAPH500_ROOTS: usize = 64;

/// Settings of [`run_teps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TepsConfig {
    /// Number of distinct random roots of degree ≥ 1. Default [`GRAPH500_ROOTS`] (64).
    pub roots: usize,
    /// Seed of the root sample. Default 1.
    pub seed: u64,
    /// Validate every result with [`validate_bfs`] (not timed). Default `false`.
    pub validate: bool,
    /// Tuning of the parallel variants. Default [`BfsConfig::default`].
    pub bfs: BfsConfig,
}

impl Default for TepsConfig {
    fn default() -> Self {
        TepsConfig {
            roots: GRAPH500_ROOTS,
            seed: 1,
            validate: false,
            bfs: BfsConfig::default(),
        }
    }
}

/// Measurement of one BFS.
#[derive(Debug, Clone, PartialEq)]
pub struct RootRun {
    /// The source vertex.
    pub root: u32,
    /// Wall time of the search in seconds.
    pub seconds: f64,
    /// Edges of the root's component (Graph500's traversed edges).
    pub edges: u64,
    /// `edges / seconds`.
    pub teps: f64,
    /// Vertices reached.
    pub reached: u64,
    /// Number of BFS levels.
    pub levels: u32,
    /// Direction switches taken: `(depth, new direction)`.
    pub switches: Vec<(u32, Direction)>,
}

/// TEPS over all roots.
#[derive(Debug, Clone, PartialEq)]
pub struct TepsReport {
    /// The variant measured.
    pub algorithm: BfsAlgorithm,
    /// One entry per root, in order.
    pub runs: Vec<RootRun>,
    /// Harmonic mean of the per-root TEPS, as Graph500 reports.
    pub harmonic_mean_teps: f64,
}

/// Picks up to `count` distinct roots of out-degree ≥ 1, uniformly at random (deterministic in
/// `seed`). Returns all such vertices when there are fewer than `count`.
pub fn sample_roots(graph: &CsrGraph, count: usize, seed: u64) -> Vec<u32> {
    let mut candidates: Vec<u32> = (0..graph.num_vertices())
        .into_par_iter()
        .filter(|&v| graph.out_degree(v) > 0)
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let take = count.min(candidates.len());
    for i in 0..take {
        let j = rng.random_range(i..candidates.len());
        candidates.swap(i, j);
    }
    candidates.truncate(take);
    candidates
}

/// Edges of the component `result` reached: undirected edges with a reached endpoint, or arcs
/// leaving reached vertices in a directed graph.
pub fn traversed_edges(graph: &CsrGraph, result: &BfsResult) -> u64 {
    let arcs: u64 = (0..graph.num_vertices())
        .into_par_iter()
        .filter(|&v| result.depth_of(v).is_some())
        .map(|v| graph.out_degree(v))
        .sum();
    if graph.is_directed() {
        arcs
    } else {
        arcs / 2
    }
}

/// Runs `algorithm` from `config.roots` random roots of degree ≥ 1 (Graph500 procedure) and
/// reports per-root times and the harmonic-mean TEPS. `on_root` is called after each root
/// (for progress display). Runs in the caller's rayon pool.
///
/// # Errors
/// [`GraphError::InvalidInput`] if no vertex has an edge or `config.roots` is 0;
/// [`GraphError::InvalidBfs`] if `config.validate` is set and a result fails validation.
pub fn run_teps(
    graph: &CsrGraph,
    algorithm: BfsAlgorithm,
    config: &TepsConfig,
    mut on_root: impl FnMut(&RootRun),
) -> Result<TepsReport> {
    let roots = sample_roots(graph, config.roots, config.seed);
    if roots.is_empty() {
        return Err(GraphError::InvalidInput(
            "no vertex has an edge: nothing to search (TEPS needs roots of degree >= 1)".into(),
        ));
    }
    let mut runs = Vec::with_capacity(roots.len());
    for root in roots {
        let start = Instant::now();
        let result = algorithm.run(graph, root, &config.bfs);
        let seconds = start.elapsed().as_secs_f64().max(1e-9);
        if config.validate {
            validate_bfs(graph, &result)?;
        }
        let edges = traversed_edges(graph, &result);
        let run = RootRun {
            root,
            seconds,
            edges,
            teps: edges as f64 / seconds,
            reached: result.num_reached(),
            levels: result.num_levels(),
            switches: result.direction_switches(),
        };
        on_root(&run);
        runs.push(run);
    }
    let harmonic_mean_teps = runs.len() as f64 / runs.iter().map(|r| 1.0 / r.teps).sum::<f64>();
    Ok(TepsReport {
        algorithm,
        runs,
        harmonic_mean_teps,
    })
}
