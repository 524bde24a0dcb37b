//! The Graph500 TEPS (traversed edges per second) runner.

use crate::bfs::{BfsAlgorithm, BfsConfig, BfsResult, Direction};
use crate::csr::CsrGraph;
use crate::error::{GraphError, Result};
use crate::relabel::Permutation;
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
    /// Edges of the root's component as the graph stores them: deduplicated, self loops
    /// dropped ([`traversed_edges`]).
    pub edges: u64,
    /// `edges / seconds` (deduplicated TEPS).
    pub teps: f64,
    /// Input edge tuples within the component, duplicates and self loops included (the
    /// Graph500 specification's traversed edges; [`InputTuples::in_component`]); `None` when
    /// the run had no tuple counts ([`run_teps`]).
    pub input_tuples: Option<u64>,
    /// `input_tuples / seconds`: TEPS as the Graph500 specification defines it.
    pub graph500_teps: Option<f64>,
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
    /// Harmonic mean of the per-root deduplicated TEPS ([`RootRun::teps`]).
    pub harmonic_mean_teps: f64,
    /// Harmonic mean of the per-root TEPS by the Graph500 specification
    /// ([`RootRun::graph500_teps`], the statistic Graph500 reports); `None` without tuple
    /// counts.
    pub graph500_harmonic_mean_teps: Option<f64>,
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

/// The input edge tuples of a graph counted per vertex, kept from the edge list the graph was
/// built from ([`crate::GraphBuilder::build_with_input_tuples`],
/// [`crate::generate::GeneratorSpec::build_with_input_tuples`]): what the Graph500
/// specification counts as traversed edges, "the number of input edge tuples within the
/// component traversed by the search", duplicates and self loops included. The graph itself
/// holds each undirected edge once and no self loops, so [`traversed_edges`] is lower (by
/// about 19 % on Kronecker graphs of scale 14).
///
/// Each tuple `(u, v)` of an undirected graph counts once at `u` and once at `v` (a self loop
/// twice at `u`), so the tuples within a component are half the sum of its vertices' counts,
/// as the specification computes it; in a directed graph a tuple counts at its source only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputTuples {
    pub(crate) degrees: Vec<u64>,
    pub(crate) directed: bool,
    pub(crate) total: u64,
}

impl InputTuples {
    /// The number of input tuples (the length of the edge list).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Tuples at vertex `v` (each end of an undirected tuple counts once).
    ///
    /// # Panics
    /// If `v` is not a vertex of the graph.
    #[track_caller]
    pub fn degree(&self, v: u32) -> u64 {
        self.degrees[v as usize]
    }

    /// Input tuples within the component `result` reached (Graph500's traversed edges):
    /// tuples with a reached endpoint, or tuples leaving reached vertices when directed.
    ///
    /// # Errors
    /// [`GraphError::InvalidInput`] if `result` has another vertex count than these counts.
    pub fn in_component(&self, result: &BfsResult) -> Result<u64> {
        if result.depth.len() != self.degrees.len() {
            return Err(GraphError::InvalidInput(format!(
                "BFS result on {} vertices, input tuples counted on {}",
                result.depth.len(),
                self.degrees.len()
            )));
        }
        let ends: u64 = (0..self.degrees.len() as u32)
            .into_par_iter()
            .filter(|&v| result.depth_of(v).is_some())
            .map(|v| self.degrees[v as usize])
            .sum();
        Ok(if self.directed { ends } else { ends / 2 })
    }

    /// The counts under the relabelling of [`crate::relabel_by_degree`] (vertex `new_id(v)`
    /// gets `v`'s count), to go with the relabelled graph.
    ///
    /// # Errors
    /// [`GraphError::InvalidInput`] if the permutation has another length.
    pub fn relabelled(&self, permutation: &Permutation) -> Result<InputTuples> {
        if permutation.len() != self.degrees.len() {
            return Err(GraphError::InvalidInput(format!(
                "permutation of {} vertices, input tuples counted on {}",
                permutation.len(),
                self.degrees.len()
            )));
        }
        let degrees = (0..self.degrees.len() as u32)
            .into_par_iter()
            .map(|new| self.degrees[permutation.old_id(new) as usize])
            .collect();
        Ok(InputTuples {
            degrees,
            directed: self.directed,
            total: self.total,
        })
    }
}

/// Runs `algorithm` from `config.roots` random roots of degree ≥ 1 (Graph500 procedure) and
/// reports per-root times and the harmonic-mean TEPS counted on the graph's deduplicated,
/// loop-free edges. `on_root` is called after each root (for progress display). Runs in the
/// caller's rayon pool. [`run_teps_graph500`] also reports TEPS by the specification.
///
/// # Errors
/// [`GraphError::InvalidInput`] if no vertex has an edge or `config.roots` is 0;
/// [`GraphError::InvalidBfs`] if `config.validate` is set and a result fails validation.
pub fn run_teps(
    graph: &CsrGraph,
    algorithm: BfsAlgorithm,
    config: &TepsConfig,
    on_root: impl FnMut(&RootRun),
) -> Result<TepsReport> {
    run(graph, None, algorithm, config, on_root)
}

/// [`run_teps`], also counting the input edge tuples within each traversed component
/// (`tuples`, from the edge list `graph` was built from), so that every [`RootRun`] carries
/// TEPS as the Graph500 specification defines it beside the deduplicated figure.
///
/// ```
/// use graph_kernels::{bfs::BfsAlgorithm, generate::GeneratorSpec, teps};
/// let (g, tuples) = "kron:10".parse::<GeneratorSpec>()?.build_with_input_tuples(1)?;
/// let config = teps::TepsConfig { roots: 4, ..Default::default() };
/// let report = teps::run_teps_graph500(&g, &tuples, BfsAlgorithm::Serial, &config, |_| ())?;
/// let run = &report.runs[0];
/// assert!(run.input_tuples.unwrap() >= run.edges); // duplicates and self loops counted
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
///
/// # Errors
/// As [`run_teps`]; [`GraphError::InvalidInput`] if `tuples` were counted on another number
/// of vertices than `graph` has.
pub fn run_teps_graph500(
    graph: &CsrGraph,
    tuples: &InputTuples,
    algorithm: BfsAlgorithm,
    config: &TepsConfig,
    on_root: impl FnMut(&RootRun),
) -> Result<TepsReport> {
    if tuples.degrees.len() != graph.num_vertices() as usize {
        return Err(GraphError::InvalidInput(format!(
            "input tuples counted on {} vertices, the graph has {}",
            tuples.degrees.len(),
            graph.num_vertices()
        )));
    }
    run(graph, Some(tuples), algorithm, config, on_root)
}

fn run(
    graph: &CsrGraph,
    tuples: Option<&InputTuples>,
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
        let input_tuples = tuples.map(|t| t.in_component(&result)).transpose()?;
        let run = RootRun {
            root,
            seconds,
            edges,
            teps: edges as f64 / seconds,
            input_tuples,
            graph500_teps: input_tuples.map(|m| m as f64 / seconds),
            reached: result.num_reached(),
            levels: result.num_levels(),
            switches: result.direction_switches(),
        };
        on_root(&run);
        runs.push(run);
    }
    let harmonic_mean_teps = runs.len() as f64 / runs.iter().map(|r| 1.0 / r.teps).sum::<f64>();
    let graph500_harmonic_mean_teps = tuples.map(|_| {
        runs.len() as f64
            / runs
                .iter()
                .map(|r| 1.0 / r.graph500_teps.unwrap_or(f64::NAN))
                .sum::<f64>()
    });
    Ok(TepsReport {
        algorithm,
        runs,
        harmonic_mean_teps,
        graph500_harmonic_mean_teps,
    })
}
