//! # graph_kernels
//!
//! CSR graphs and parallel breadth-first search — top-down, bottom-up and Beamer's
//! direction-optimizing hybrid — with Graph500 validation and TEPS measurement.
//!
//! - [`CsrGraph`] with `u32` vertex ids and `u64` edge offsets, built by [`GraphBuilder`]
//!   (symmetrize, drop self loops and duplicates), optionally relabelled by degree
//!   ([`relabel_by_degree`], permutation kept).
//! - Loaders in [`io`]: SNAP edge lists, DIMACS/PACE, Matrix Market (the reader shared with the
//!   sparse kernels, from `sparse_formats`), plain or gzip, with typed errors carrying line
//!   numbers; lines over 1 MiB and implausible headers fail before allocating. Conversions to
//!   and from petgraph in [`convert`].
//! - Generators in [`generate`]: Graph500 Kronecker (the shared R-MAT generator), Erdős–Rényi,
//!   2-D grid.
//! - BFS variants in [`bfs`] (the paper anchors are cited there): [`bfs::bfs_serial`],
//!   [`bfs::bfs_top_down`], [`bfs::bfs_bottom_up`], [`bfs::bfs_direction_optimizing`] (the
//!   default), all returning parent and depth arrays, all in the caller's rayon pool.
//! - [`validate_bfs`] (the five Graph500 rules) and the Graph500 TEPS runner [`teps::run_teps`].
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.
//!
//! ```
//! use graph_kernels::{bfs, generate, validate_bfs};
//!
//! // Graph500 Kronecker graph, scale 12 (4096 vertices), edge factor 16, seed 7.
//! let g = generate::kronecker(12, 16, 7)?;
//! let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
//! let result = pool.install(|| {
//!     bfs::bfs_direction_optimizing(&g, 0, &bfs::BfsConfig::default())
//! });
//! validate_bfs(&g, &result)?;
//! assert_eq!(result.depth, bfs::bfs_serial(&g, 0).depth);
//! println!("{} vertices reached in {} levels", result.num_reached(), result.num_levels());
//! # Ok::<(), graph_kernels::GraphError>(())
//! ```

pub mod bfs;
pub mod convert;
mod csr;
mod error;
pub mod generate;
pub mod io;
mod relabel;
pub mod teps;
mod validate;

/// The rayon version the kernels run on, so callers can build a matching `ThreadPool`.
#[doc(no_inline)]
pub use rayon;

pub use bfs::{BfsAlgorithm, BfsConfig, BfsResult};
pub use csr::{Adjacency, CsrGraph, GraphBuilder};
pub use error::{GraphError, Result};
pub use relabel::{relabel_by_degree, Permutation};
pub use validate::validate_bfs;
