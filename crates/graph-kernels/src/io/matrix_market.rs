//! Matrix Market coordinate files read as graphs (nonzero `(i, j)` = edge `i → j`).

use super::{check_vertex_count, fields, one_based, parse_u64, Lines};
use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use std::io::BufRead;

/// Reads a square Matrix Market `coordinate` matrix as a graph: entry `(i, j)` is the edge
/// `i-1 → j-1`; values are ignored. `symmetric`, `skew-symmetric` and `hermitian` storage
/// give an undirected graph whatever `directed` says.
///
/// # Errors
/// [`GraphError::Parse`] for a bad banner, `array` format, a non-square size line or a
/// malformed entry; [`GraphError::VertexOutOfRange`] for indices outside `1..=n`;
/// [`GraphError::InvalidInput`] when the entry count differs from the size line.
///
/// ```
/// let text = "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 2\n";
/// let g = graph_kernels::io::read_matrix_market(text.as_bytes(), true)?;
/// assert!(!g.is_directed());
/// assert_eq!(g.out_neighbors(1), &[0, 2]);
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
pub fn read_matrix_market(reader: impl BufRead, directed: bool) -> Result<CsrGraph> {
    let mut lines = Lines::new(reader);
    let parse_err = |line, message: &str| GraphError::Parse {
        line,
        message: message.to_string(),
    };
    let (line, banner) = lines
        .next_line()?
        .ok_or_else(|| parse_err(1, "empty file: expected a `%%MatrixMarket` banner"))?;
    let banner = String::from_utf8_lossy(banner).to_ascii_lowercase();
    let words: Vec<&str> = banner.split_whitespace().collect();
    if words.first() != Some(&"%%matrixmarket") || words.get(1) != Some(&"matrix") {
        return Err(parse_err(
            line,
            "expected `%%MatrixMarket matrix ...` banner",
        ));
    }
    if words.get(2) != Some(&"coordinate") {
        return Err(parse_err(
            line,
            "only `coordinate` (sparse) matrices are graphs",
        ));
    }
    let symmetric = matches!(
        words.get(4).copied(),
        Some("symmetric" | "skew-symmetric" | "hermitian")
    );
    let mut size: Option<(u64, u64)> = None;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    while let Some((line, text)) = lines.next_line()? {
        if text.starts_with(b"%") {
            continue;
        }
        let mut it = fields(text);
        let Some(first) = it.next() else { continue };
        match size {
            None => {
                let rows = parse_u64(Some(first), line, "row count")?;
                let cols = parse_u64(it.next(), line, "column count")?;
                let nnz = parse_u64(it.next(), line, "entry count")?;
                if rows != cols {
                    return Err(parse_err(
                        line,
                        &format!("matrix is {rows}x{cols}, a graph needs a square one"),
                    ));
                }
                if rows >= u64::from(u32::MAX) {
                    return Err(GraphError::TooLarge(format!("line {line}: {rows} rows")));
                }
                edges.reserve(nnz.min(1 << 24) as usize);
                size = Some((rows, nnz));
            }
            Some((n, _)) => {
                let i = one_based(parse_u64(Some(first), line, "row index")?, n, line)?;
                let j = one_based(parse_u64(it.next(), line, "column index")?, n, line)?;
                edges.push((i, j));
            }
        }
    }
    let (n, nnz) = size.ok_or_else(|| parse_err(0, "no size line `rows cols entries` found"))?;
    if edges.len() as u64 != nnz {
        return Err(GraphError::InvalidInput(format!(
            "size line announces {nnz} entries, file has {}",
            edges.len()
        )));
    }
    check_vertex_count(n, edges.len())?;
    GraphBuilder::new(n)
        .directed(directed && !symmetric)
        .edge_vec(edges)
        .build()
}
