//! The R-MAT recursive matrix generator (Chakrabarti, Zhan, Faloutsos, "R-MAT: A Recursive
//! Model for Graph Mining", SDM 2004) with the Graph500 parameters (Graph500 specification,
//! §3 "Graph Generation": A = 0.57, B = C = 0.19, edge factor 16, vertex ids permuted).
//!
//! Edges are produced in parallel in independent ChaCha8 streams of [`EDGES_PER_STREAM`]
//! edges, so the same seed gives the same edge list on any thread count. The sparse kernels
//! read it as a matrix (`kron:SCALE`), the graph kernels as a graph.

use crate::error::{FormatError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Graph500 probability of the top-left quadrant.
pub const GRAPH500_A: f64 = 0.57;
/// Graph500 probability of the top-right quadrant.
pub const GRAPH500_B: f64 = 0.19;
/// Graph500 probability of the bottom-left quadrant (`D = 1 - A - B - C = 0.05`).
pub const GRAPH500_C: f64 = 0.19;
/// Graph500 edge factor: generated edges per vertex.
pub const GRAPH500_EDGE_FACTOR: u32 = 16;
/// The largest scale: vertex ids are `u32`.
pub const MAX_SCALE: u32 = 31;
/// The most edges one call generates (2^40: 8 TiB of `(u32, u32)` pairs).
pub const MAX_EDGES: u64 = 1 << 40;
/// Edges generated per independent random stream (the unit of parallel work).
pub const EDGES_PER_STREAM: u64 = 1 << 16;

/// Parameters of the R-MAT generator; [`RmatConfig::graph500`] gives Graph500's.
///
/// ```
/// use sparse_formats::rmat::RmatConfig;
/// let edges = RmatConfig { seed: 7, ..RmatConfig::graph500(10) }.edges()?;
/// assert_eq!(edges.len(), 16 << 10);
/// assert!(edges.iter().all(|&(u, v)| u < 1024 && v < 1024));
/// # Ok::<(), sparse_formats::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RmatConfig {
    /// log2 of the vertex count.
    pub scale: u32,
    /// Edges per vertex before deduplication. Default 16 (Graph500).
    pub edge_factor: u32,
    /// Probability of the top-left quadrant. Default 0.57 (Graph500).
    pub a: f64,
    /// Probability of the top-right quadrant. Default 0.19.
    pub b: f64,
    /// Probability of the bottom-left quadrant. Default 0.19 (`d = 1 - a - b - c` = 0.05).
    pub c: f64,
    /// Seed; the same seed gives the same edges on any thread count. Default 1.
    pub seed: u64,
}

impl RmatConfig {
    /// Graph500 parameters at `scale`.
    pub fn graph500(scale: u32) -> Self {
        RmatConfig {
            scale,
            edge_factor: GRAPH500_EDGE_FACTOR,
            a: GRAPH500_A,
            b: GRAPH500_B,
            c: GRAPH500_C,
            seed: 1,
        }
    }

    /// The number of edges [`RmatConfig::edges`] generates: `edge_factor · 2^scale`
    /// (saturating).
    pub fn num_edges(&self) -> u64 {
        u64::from(self.edge_factor)
            .checked_shl(self.scale)
            .filter(|m| m >> self.scale == u64::from(self.edge_factor))
            .unwrap_or(u64::MAX)
    }

    /// Checks the parameters without generating anything.
    ///
    /// # Errors
    /// [`FormatError::InvalidInput`] for probabilities outside [0, 1] or summing above 1,
    /// [`FormatError::TooLarge`] for `scale > 31` or more than [`MAX_EDGES`] edges.
    pub fn validate(&self) -> Result<()> {
        let (a, b, c) = (self.a, self.b, self.c);
        if [a, b, c].iter().any(|p| !(0.0..=1.0).contains(p)) || a + b + c > 1.0 {
            return Err(FormatError::InvalidInput(format!(
                "Kronecker probabilities a={a}, b={b}, c={c} must lie in [0, 1] and sum to at most 1"
            )));
        }
        if self.scale > MAX_SCALE || self.num_edges() > MAX_EDGES {
            return Err(FormatError::TooLarge(format!(
                "Kronecker scale {} with edge factor {} (at most scale {MAX_SCALE} and 2^40 edges)",
                self.scale, self.edge_factor
            )));
        }
        Ok(())
    }

    /// Generates the directed edge list (vertex ids already permuted, self loops and duplicates
    /// kept), in parallel in the caller's rayon pool.
    ///
    /// # Errors
    /// As [`RmatConfig::validate`].
    pub fn edges(&self) -> Result<Vec<(u32, u32)>> {
        self.validate()?;
        let (a, b, c) = (self.a, self.b, self.c);
        let m = self.num_edges();
        let to_u32 = |p: f64| (p * 4_294_967_296.0).min(4_294_967_295.0) as u32;
        let (ta, tab, tabc) = (to_u32(a), to_u32(a + b), to_u32(a + b + c));
        let perm = random_permutation(1u32 << self.scale.min(MAX_SCALE), self.seed);
        let streams = m.div_ceil(EDGES_PER_STREAM);
        let edges = (0..streams)
            .into_par_iter()
            .flat_map_iter(|s| {
                let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
                rng.set_stream(s);
                let count = EDGES_PER_STREAM.min(m - s * EDGES_PER_STREAM);
                let perm = &perm;
                (0..count).map(move |_| {
                    let (mut u, mut v) = (0u32, 0u32);
                    for _ in 0..self.scale {
                        let r: u32 = rng.random();
                        let (du, dv) = if r < ta {
                            (0, 0)
                        } else if r < tab {
                            (0, 1)
                        } else if r < tabc {
                            (1, 0)
                        } else {
                            (1, 1)
                        };
                        u = (u << 1) | du;
                        v = (v << 1) | dv;
                    }
                    (perm[u as usize], perm[v as usize])
                })
            })
            .collect();
        Ok(edges)
    }
}

/// A uniformly random permutation of `0..n` (Fisher–Yates), deterministic in `seed`.
///
/// ```
/// let mut p = sparse_formats::rmat::random_permutation(100, 3);
/// p.sort_unstable();
/// assert_eq!(p, (0..100).collect::<Vec<u32>>());
/// ```
pub fn random_permutation(n: u32, seed: u64) -> Vec<u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    let mut perm: Vec<u32> = (0..n).collect();
    for i in (1..perm.len()).rev() {
        let j = rng.random_range(0..=i);
        perm.swap(i, j);
    }
    perm
}
