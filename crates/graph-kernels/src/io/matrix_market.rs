//! Matrix Market coordinate files read as graphs (nonzero `(i, j)` = edge `i → j`), through the
//! shared reader of `sparse_formats` (which the sparse kernels read matrices with).

use super::check_vertex_count;
use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use sparse_formats::matrix_market::{MatrixMarketReader, MmFormat, MmSymmetry};
use std::io::BufRead;

/// Reads a square Matrix Market `coordinate` matrix as a graph: entry `(i, j)` is the edge
/// `i-1 → j-1`; values are checked but ignored. `symmetric`, `skew-symmetric` and `hermitian`
/// storage give an undirected graph whatever `directed` says.
///
/// # Errors
/// [`GraphError::Parse`] for a bad banner, `array` format, a non-square size line or a
/// malformed entry; [`GraphError::VertexOutOfRange`] for indices outside `1..=n`;
/// [`GraphError::TooLarge`] for `n >= u32::MAX` or more vertices than `32 · entries + 2^20`;
/// [`GraphError::Format`] when the entry count differs from the size line or a line is over
/// 1 MiB.
///
/// ```
/// let text = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n";
/// let g = graph_kernels::io::read_matrix_market(text.as_bytes(), true)?;
/// assert!(!g.is_directed());
/// assert_eq!(g.out_neighbors(1), &[0, 2]);
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
pub fn read_matrix_market(reader: impl BufRead, directed: bool) -> Result<CsrGraph> {
    let mut mm = MatrixMarketReader::new(reader)?;
    let header = mm.header();
    if header.format != MmFormat::Coordinate {
        return Err(GraphError::Parse {
            line: 1,
            message: "only `coordinate` (sparse) matrices are graphs".into(),
        });
    }
    let symmetric = header.symmetry != MmSymmetry::General;
    let size = mm.size()?;
    let (rows, cols) = (size.rows as u64, size.cols as u64);
    if rows != cols {
        return Err(GraphError::Parse {
            line: size.line,
            message: format!("matrix is {rows}x{cols}, a graph needs a square one"),
        });
    }
    if rows >= u64::from(u32::MAX) {
        return Err(GraphError::TooLarge(format!(
            "line {}: {rows} rows",
            size.line
        )));
    }
    let mut edges: Vec<(u32, u32)> =
        Vec::with_capacity(sparse_formats::reserve_hint(size.entries as u64));
    while let Some(e) = mm.next_entry()? {
        // In range: the reader checked 1 <= i, j <= n < u32::MAX.
        edges.push((e.row as u32, e.col as u32));
    }
    check_vertex_count(rows, edges.len())?;
    GraphBuilder::new(rows)
        .directed(directed && !symmetric)
        .edge_vec(edges)
        .build()
}
