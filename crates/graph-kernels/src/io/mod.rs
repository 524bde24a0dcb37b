//! Graph file loaders: SNAP edge lists, DIMACS/PACE `p`-header files and Matrix Market, plain or
//! gzip-compressed. Every parse error carries its 1-based line number; a truncated gzip stream
//! is a [`GraphError::Read`] naming the last complete line.
//!
//! Opening (gzip by content), line reading and the Matrix Market reader are the shared
//! `sparse_formats` crate's. Lines are capped at [`sparse_formats::MAX_LINE_BYTES`] (1 MiB), so
//! `/dev/zero` or a binary file fails at once; headers reserve at most
//! [`sparse_formats::MAX_RESERVE`] edges, and vertex counts are checked against the edges read.

mod dimacs;
mod matrix_market;
mod snap;

pub use dimacs::read_dimacs;
pub use matrix_market::read_matrix_market;
pub use snap::read_snap;

use crate::csr::CsrGraph;
use crate::error::{GraphError, Result};
use std::path::Path;

pub(crate) use sparse_formats::{fields, LineReader as Lines};

/// File formats [`load_graph`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphFormat {
    /// SNAP edge list: `#` comments, then `from to` pairs (tab or space), 0-based ids.
    Snap,
    /// DIMACS / PACE: `c` comments, a `p <kind> <n> <m>` header, then `a u v [w]`, `e u v` or
    /// `u v` lines with 1-based ids.
    Dimacs,
    /// Matrix Market coordinate format (`%%MatrixMarket matrix coordinate ...`), 1-based.
    MatrixMarket,
}

impl GraphFormat {
    /// Guesses the format from a file name (`.gz` stripped): `.mtx` → Matrix Market;
    /// `.gr`, `.graph`, `.dimacs`, `.col` → DIMACS; anything else → SNAP.
    pub fn from_path(path: &Path) -> Self {
        let name = path
            .file_name()
            .map(|s| s.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let name = name.strip_suffix(".gz").unwrap_or(&name);
        match name.rsplit('.').next() {
            Some("mtx") => GraphFormat::MatrixMarket,
            Some("gr" | "graph" | "dimacs" | "col") => GraphFormat::Dimacs,
            _ => GraphFormat::Snap,
        }
    }
}

/// Options for loading graph files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Keep edge directions. Default `false`: edges are symmetrized (SNAP graphs in BFS
    /// benchmarks are searched as undirected, like GAPBS `-s`). Matrix Market files with
    /// `symmetric` storage are always undirected.
    pub directed: bool,
    /// Format; `None` (the default) guesses from the file name.
    pub format: Option<GraphFormat>,
}

/// Loads a graph file, decompressing it when its name ends in `.gz` or it starts with the gzip
/// magic bytes.
///
/// # Errors
/// [`GraphError::Open`] if the file cannot be opened; [`GraphError::InFile`] wrapping a
/// [`GraphError::Parse`], [`GraphError::VertexOutOfRange`] or [`GraphError::Read`] (with line
/// number) for malformed or truncated content.
pub fn load_graph(path: impl AsRef<Path>, options: LoadOptions) -> Result<CsrGraph> {
    let path = path.as_ref();
    let reader = sparse_formats::open(path)?;
    let format = options
        .format
        .unwrap_or_else(|| GraphFormat::from_path(path));
    let result = match format {
        GraphFormat::Snap => read_snap(reader, options.directed),
        GraphFormat::Dimacs => read_dimacs(reader, options.directed),
        GraphFormat::MatrixMarket => read_matrix_market(reader, options.directed),
    };
    result.map_err(|e| GraphError::InFile {
        path: path.to_path_buf(),
        error: Box::new(e),
    })
}

/// Parses an unsigned decimal field; `what` names it in the error.
pub(crate) fn parse_u64(field: Option<&[u8]>, line: usize, what: &str) -> Result<u64> {
    Ok(sparse_formats::parse_u64(field, line, what)?)
}

/// Converts a 1-based id to 0-based, checking it against `n`.
pub(crate) fn one_based(id: u64, n: u64, line: usize) -> Result<u32> {
    if id == 0 || id > n {
        return Err(GraphError::VertexOutOfRange {
            line,
            id,
            num_vertices: n,
            hint: if id == 0 {
                "; ids in this format are 1-based"
            } else {
                ""
            },
        });
    }
    Ok((id - 1) as u32)
}

/// Rejects vertex counts far beyond what the edges can touch (the shared rule,
/// [`sparse_formats::check_dimension`]): more than `32 m + 2^20` would allocate mostly isolated
/// vertices, and one stray large id (or header) could exhaust memory.
pub(crate) fn check_vertex_count(n: u64, edges: usize) -> Result<()> {
    // Per vertex: an out- and an in-offset (u64) at least.
    Ok(sparse_formats::check_dimension(
        "vertices",
        n,
        edges as u64,
        16,
    )?)
}
