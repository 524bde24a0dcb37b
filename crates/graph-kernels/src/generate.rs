//! Synthetic graphs: Graph500 Kronecker, Erdős–Rényi G(n, m), 2-D grids.

use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Edges generated per independent random stream (the unit of parallel work).
const EDGES_PER_STREAM: u64 = 1 << 16;

/// Parameters of the Graph500 Kronecker (R-MAT) generator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KroneckerConfig {
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
    /// Seed; the same seed gives the same graph on any thread count. Default 1.
    pub seed: u64,
}

impl KroneckerConfig {
    /// Graph500 parameters at `scale`.
    pub fn graph500(scale: u32) -> Self {
        KroneckerConfig {
            scale,
            edge_factor: 16,
            a: 0.57,
            b: 0.19,
            c: 0.19,
            seed: 1,
        }
    }

    /// Generates the edge list (vertex ids already permuted), in parallel.
    ///
    /// # Errors
    /// [`GraphError::InvalidInput`] for probabilities outside [0, 1] or summing above 1,
    /// [`GraphError::TooLarge`] for `scale > 31` or more than 2^40 edges.
    pub fn edges(&self) -> Result<Vec<(u32, u32)>> {
        let (a, b, c) = (self.a, self.b, self.c);
        if [a, b, c].iter().any(|p| !(0.0..=1.0).contains(p)) || a + b + c > 1.0 {
            return Err(GraphError::InvalidInput(format!(
                "Kronecker probabilities a={a}, b={b}, c={c} must lie in [0, 1] and sum to at most 1"
            )));
        }
        if self.scale > 31 || (u64::from(self.edge_factor) << self.scale) > 1 << 40 {
            return Err(GraphError::TooLarge(format!(
                "Kronecker scale {} with edge factor {}",
                self.scale, self.edge_factor
            )));
        }
        let m = u64::from(self.edge_factor) << self.scale;
        let to_u32 = |p: f64| (p * 4_294_967_296.0).min(4_294_967_295.0) as u32;
        let (ta, tab, tabc) = (to_u32(a), to_u32(a + b), to_u32(a + b + c));
        let perm = random_permutation(1u32 << self.scale.min(31), self.seed);
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

    /// Generates the undirected graph (self loops and duplicates removed).
    ///
    /// # Errors
    /// As [`KroneckerConfig::edges`].
    pub fn build(&self) -> Result<CsrGraph> {
        let edges = self.edges()?;
        GraphBuilder::new(1u64 << self.scale)
            .edge_vec(edges)
            .build()
    }
}

/// The Graph500 Kronecker graph: 2^`scale` vertices, `edge_factor`·2^`scale` generated edges
/// with A = 0.57, B = C = 0.19, vertex ids randomly permuted, symmetrized, self loops and
/// duplicates removed. Deterministic in `seed`.
///
/// # Errors
/// [`GraphError::TooLarge`] for `scale > 31`.
pub fn kronecker(scale: u32, edge_factor: u32, seed: u64) -> Result<CsrGraph> {
    KroneckerConfig {
        edge_factor,
        seed,
        ..KroneckerConfig::graph500(scale)
    }
    .build()
}

/// Erdős–Rényi G(n, m): `m` edges with endpoints drawn uniformly (self loops and duplicates
/// then removed, so slightly fewer remain), undirected. Deterministic in `seed`.
///
/// # Errors
/// [`GraphError::TooLarge`] if `n >= u32::MAX`; [`GraphError::InvalidInput`] if `n == 0`
/// and `m > 0`.
pub fn erdos_renyi(n: u64, m: u64, seed: u64) -> Result<CsrGraph> {
    if n >= u64::from(u32::MAX) {
        return Err(GraphError::TooLarge(format!("{n} vertices")));
    }
    if n == 0 && m > 0 {
        return Err(GraphError::InvalidInput(
            "edges requested on 0 vertices".into(),
        ));
    }
    let nv = n as u32;
    let edges: Vec<(u32, u32)> = (0..m.div_ceil(EDGES_PER_STREAM))
        .into_par_iter()
        .flat_map_iter(|s| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(s);
            let count = EDGES_PER_STREAM.min(m - s * EDGES_PER_STREAM);
            (0..count).map(move |_| (rng.random_range(0..nv), rng.random_range(0..nv)))
        })
        .collect();
    GraphBuilder::new(n).edge_vec(edges).build()
}

/// The `rows × cols` grid graph with 4-neighbour (von Neumann) connectivity, undirected;
/// vertex `r * cols + c` is row `r`, column `c`. Its BFS has `rows + cols - 1` levels from a
/// corner: a long, thin search like road networks.
///
/// # Panics
/// If `rows * cols >= u32::MAX`.
#[track_caller]
pub fn grid_2d(rows: u32, cols: u32) -> CsrGraph {
    let n = u64::from(rows) * u64::from(cols);
    assert!(
        n < u64::from(u32::MAX),
        "grid {rows}x{cols} has too many vertices"
    );
    let id = |r: u32, c: u32| r * cols + c;
    let mut edges = Vec::with_capacity(2 * n as usize);
    for r in 0..rows {
        for c in 0..cols {
            if c + 1 < cols {
                edges.push((id(r, c), id(r, c + 1)));
            }
            if r + 1 < rows {
                edges.push((id(r, c), id(r + 1, c)));
            }
        }
    }
    GraphBuilder::new(n)
        .edge_vec(edges)
        .build()
        .expect("grid ids are in range")
}

/// A uniformly random permutation of `0..n` (Fisher–Yates), deterministic in `seed`.
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

/// A generator named in text, as command lines take it: `kron:SCALE[:EDGE_FACTOR]`,
/// `er:N:M`, `grid:ROWS:COLS`.
///
/// ```
/// use graph_kernels::generate::GeneratorSpec;
/// let spec: GeneratorSpec = "kron:8".parse()?;
/// assert_eq!(spec, GeneratorSpec::Kronecker { scale: 8, edge_factor: 16 });
/// assert_eq!(spec.build(1)?.num_vertices(), 256);
/// assert!("kron:x".parse::<GeneratorSpec>().is_err());
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorSpec {
    /// [`kronecker`] with Graph500 probabilities.
    Kronecker {
        /// log2 of the vertex count.
        scale: u32,
        /// Generated edges per vertex (default 16).
        edge_factor: u32,
    },
    /// [`erdos_renyi`].
    ErdosRenyi {
        /// Vertices.
        n: u64,
        /// Generated edges.
        m: u64,
    },
    /// [`grid_2d`].
    Grid {
        /// Rows.
        rows: u32,
        /// Columns.
        cols: u32,
    },
}

impl GeneratorSpec {
    /// Generates the graph (deterministic in `seed`; the grid ignores it).
    ///
    /// # Errors
    /// As the generator called; [`GraphError::TooLarge`] for a grid of `u32::MAX` vertices.
    pub fn build(&self, seed: u64) -> Result<CsrGraph> {
        match *self {
            GeneratorSpec::Kronecker { scale, edge_factor } => kronecker(scale, edge_factor, seed),
            GeneratorSpec::ErdosRenyi { n, m } => erdos_renyi(n, m, seed),
            GeneratorSpec::Grid { rows, cols } => {
                if u64::from(rows) * u64::from(cols) >= u64::from(u32::MAX) {
                    return Err(GraphError::TooLarge(format!("grid {rows}x{cols}")));
                }
                Ok(grid_2d(rows, cols))
            }
        }
    }
}

impl std::str::FromStr for GeneratorSpec {
    type Err = GraphError;

    fn from_str(s: &str) -> Result<Self> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || {
            GraphError::InvalidInput(format!(
                "generator `{s}`: expected kron:SCALE[:EDGE_FACTOR], er:N:M or grid:ROWS:COLS"
            ))
        };
        let num =
            |i: usize| -> Result<u64> { parts.get(i).and_then(|p| p.parse().ok()).ok_or_else(bad) };
        let small = |x: u64| u32::try_from(x).map_err(|_| bad());
        match (parts[0], parts.len()) {
            ("kron", 2) => Ok(GeneratorSpec::Kronecker {
                scale: small(num(1)?)?,
                edge_factor: 16,
            }),
            ("kron", 3) => Ok(GeneratorSpec::Kronecker {
                scale: small(num(1)?)?,
                edge_factor: small(num(2)?)?,
            }),
            ("er", 3) => Ok(GeneratorSpec::ErdosRenyi {
                n: num(1)?,
                m: num(2)?,
            }),
            ("grid", 3) => Ok(GeneratorSpec::Grid {
                rows: small(num(1)?)?,
                cols: small(num(2)?)?,
            }),
            _ => Err(bad()),
        }
    }
}
