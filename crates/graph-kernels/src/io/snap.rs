//! SNAP edge lists (Leskovec & Krevl, <https://snap.stanford.edu/data/>).

use super::{check_vertex_count, fields, parse_u64, Lines};
use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use std::io::BufRead;

/// Reads a SNAP edge list: lines starting with `#` or `%` and blank lines are comments, every
/// other line is `from to` (tab or space separated, further fields ignored), 0-based ids. The
/// vertex count is the largest id plus one (sparse ids leave isolated vertices).
///
/// # Errors
/// [`GraphError::Parse`] for a line without two integer ids, [`GraphError::VertexOutOfRange`]
/// for an id that does not fit `u32`, [`GraphError::Read`] when the stream fails (truncated gzip),
/// [`GraphError::TooLarge`] when the largest id exceeds 32 × edges + 2^20 (ids that sparse
/// would allocate mostly isolated vertices; the same bound applies to the other formats).
///
/// ```
/// let text = "# a triangle\n0\t1\n1 2\n2\t0\n";
/// let g = graph_kernels::io::read_snap(text.as_bytes(), false)?;
/// assert_eq!((g.num_vertices(), g.num_edges()), (3, 3));
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
pub fn read_snap(reader: impl BufRead, directed: bool) -> Result<CsrGraph> {
    let mut lines = Lines::new(reader);
    let mut edges: Vec<(u32, u32)> = Vec::new();
    let mut max_id: Option<u32> = None;
    const LIMIT: u64 = u32::MAX as u64 - 1;
    while let Some((line, text)) = lines.next_line()? {
        let mut it = fields(text);
        let Some(first) = it.next() else { continue };
        if first.starts_with(b"#") || first.starts_with(b"%") {
            continue;
        }
        let u = parse_u64(Some(first), line, "source id")?;
        let v = parse_u64(it.next(), line, "target id")?;
        for id in [u, v] {
            if id >= LIMIT {
                return Err(GraphError::VertexOutOfRange {
                    line,
                    id,
                    num_vertices: LIMIT,
                    hint: "; ids must fit u32",
                });
            }
        }
        let (u, v) = (u as u32, v as u32);
        max_id = Some(max_id.unwrap_or(0).max(u).max(v));
        edges.push((u, v));
    }
    let n = max_id.map_or(0, |m| u64::from(m) + 1);
    check_vertex_count(n, edges.len())?;
    GraphBuilder::new(n)
        .directed(directed)
        .edge_vec(edges)
        .build()
}
