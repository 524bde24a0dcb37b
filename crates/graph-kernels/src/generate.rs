//! Synthetic graphs: Graph500 Kronecker, Erdős–Rényi G(n, m), 2-D grids.

use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use crate::teps::InputTuples;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Edges generated per independent random stream (the unit of parallel work), as in the shared
/// R-MAT generator.
const EDGES_PER_STREAM: u64 = sparse_formats::rmat::EDGES_PER_STREAM;

/// Parameters of the Graph500 Kronecker (R-MAT) generator: the shared generator's
/// configuration (`sparse_formats::rmat`), whose edge list the sparse kernels read as a
/// matrix; [`kronecker_with`] builds the graph.
pub use sparse_formats::rmat::RmatConfig as KroneckerConfig;

/// A uniformly random permutation of `0..n` (Fisher–Yates), deterministic in `seed` (the one
/// that permutes Kronecker vertex ids).
pub use sparse_formats::rmat::random_permutation;

/// The most edges a generator produces in one call (2^40), shared with the Kronecker generator.
pub const MAX_GENERATED_EDGES: u64 = sparse_formats::rmat::MAX_EDGES;

/// Generates the undirected graph of `config` (self loops and duplicates removed), in
/// parallel in the caller's rayon pool.
///
/// # Errors
/// [`GraphError::InvalidInput`] for probabilities outside [0, 1] or summing above 1,
/// [`GraphError::TooLarge`] for `scale > 31` or more than 2^40 edges.
pub fn kronecker_with(config: &KroneckerConfig) -> Result<CsrGraph> {
    let edges = config.edges()?;
    GraphBuilder::new(1u64 << config.scale)
        .edge_vec(edges)
        .build()
}

/// [`kronecker_with`], also returning the generator's edge tuples counted per vertex
/// ([`InputTuples`]), for TEPS as the Graph500 specification counts them.
///
/// # Errors
/// As [`kronecker_with`].
pub fn kronecker_with_input_tuples(config: &KroneckerConfig) -> Result<(CsrGraph, InputTuples)> {
    let edges = config.edges()?;
    GraphBuilder::new(1u64 << config.scale)
        .edge_vec(edges)
        .build_with_input_tuples()
}

/// The Graph500 Kronecker graph: 2^`scale` vertices, `edge_factor`·2^`scale` generated edges
/// with A = 0.57, B = C = 0.19, vertex ids randomly permuted, symmetrized, self loops and
/// duplicates removed. Deterministic in `seed`.
///
/// # Errors
/// [`GraphError::TooLarge`] for `scale > 31`.
pub fn kronecker(scale: u32, edge_factor: u32, seed: u64) -> Result<CsrGraph> {
    kronecker_with(&KroneckerConfig {
        edge_factor,
        seed,
        ..KroneckerConfig::graph500(scale)
    })
}

/// Erdős–Rényi G(n, m): `m` edges with endpoints drawn uniformly (self loops and duplicates
/// then removed, so slightly fewer remain), undirected. Deterministic in `seed`.
///
/// # Errors
/// [`GraphError::TooLarge`] if `n >= u32::MAX`, or if `m` exceeds both `n²` (more draws than
/// vertex pairs) and 2^20, or exceeds [`MAX_GENERATED_EDGES`] (the message says how much
/// memory the edge list would need); [`GraphError::InvalidInput`] if `n == 0` and `m > 0`.
pub fn erdos_renyi(n: u64, m: u64, seed: u64) -> Result<CsrGraph> {
    erdos_renyi_builder(n, m, seed)?.build()
}

/// The builder holding the edge list of [`erdos_renyi`].
fn erdos_renyi_builder(n: u64, m: u64, seed: u64) -> Result<GraphBuilder> {
    if n >= u64::from(u32::MAX) {
        return Err(GraphError::TooLarge(format!("{n} vertices")));
    }
    if m > MAX_GENERATED_EDGES || (m > n.saturating_mul(n) && m > 1 << 20) {
        return Err(GraphError::TooLarge(format!(
            "{m} edges on {n} vertices (at most max(n², 2^20) and 2^40): \
             the edge list alone would need {}",
            sparse_formats::human_bytes(m.saturating_mul(8))
        )));
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
    Ok(GraphBuilder::new(n).edge_vec(edges))
}

/// The `rows × cols` grid graph with 4-neighbour (von Neumann) connectivity, undirected;
/// vertex `r * cols + c` is row `r`, column `c`. Its BFS has `rows + cols - 1` levels from a
/// corner: a long, thin search like road networks.
///
/// # Panics
/// If `rows * cols >= u32::MAX`.
#[track_caller]
pub fn grid_2d(rows: u32, cols: u32) -> CsrGraph {
    grid_builder(rows, cols)
        .build()
        .expect("grid ids are in range")
}

/// The builder holding the edge list of [`grid_2d`].
#[track_caller]
fn grid_builder(rows: u32, cols: u32) -> GraphBuilder {
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
    GraphBuilder::new(n).edge_vec(edges)
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

    /// [`GeneratorSpec::build`], also returning the generated edge tuples counted per vertex
    /// ([`InputTuples`]: duplicates and self loops included), for TEPS as the Graph500
    /// specification counts them ([`crate::teps::run_teps_graph500`]).
    ///
    /// # Errors
    /// As [`GeneratorSpec::build`].
    pub fn build_with_input_tuples(&self, seed: u64) -> Result<(CsrGraph, InputTuples)> {
        match *self {
            GeneratorSpec::Kronecker { scale, edge_factor } => {
                kronecker_with_input_tuples(&KroneckerConfig {
                    edge_factor,
                    seed,
                    ..KroneckerConfig::graph500(scale)
                })
            }
            GeneratorSpec::ErdosRenyi { n, m } => {
                erdos_renyi_builder(n, m, seed)?.build_with_input_tuples()
            }
            GeneratorSpec::Grid { rows, cols } => {
                if u64::from(rows) * u64::from(cols) >= u64::from(u32::MAX) {
                    return Err(GraphError::TooLarge(format!("grid {rows}x{cols}")));
                }
                grid_builder(rows, cols).build_with_input_tuples()
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
