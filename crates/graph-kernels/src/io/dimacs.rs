//! DIMACS (9th challenge `.gr`, colouring `.col`) and PACE (`p tw n m`) graph files.

use super::{check_vertex_count, fields, one_based, parse_u64, Lines};
use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::{GraphError, Result};
use std::io::BufRead;

/// Reads a DIMACS or PACE file: `c` lines are comments; one header `p <kind> <n> <m>` (for
/// example `p sp`, `p edge`, `p tw`) comes before any edge; edges are `a u v [weight]`,
/// `e u v`, or bare `u v`, with 1-based ids `<= n`. Weights are ignored.
///
/// # Errors
/// [`GraphError::Parse`] for a missing or repeated header, an edge before the header, a
/// malformed line, or an edge count that differs from the header's `m` (at the header's line);
/// [`GraphError::VertexOutOfRange`] for ids outside `1..=n`; [`GraphError::Read`] when the
/// stream fails.
///
/// ```
/// let text = "c a path\np tw 3 2\n1 2\n2 3\n";
/// let g = graph_kernels::io::read_dimacs(text.as_bytes(), false)?;
/// assert_eq!(g.out_neighbors(1), &[0, 2]);
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
pub fn read_dimacs(reader: impl BufRead, directed: bool) -> Result<CsrGraph> {
    let mut lines = Lines::new(reader);
    // Vertices, declared edges and the header's line.
    let mut n: Option<u64> = None;
    let mut declared: Option<(u64, usize)> = None;
    let mut edges: Vec<(u32, u32)> = Vec::new();
    while let Some((line, text)) = lines.next_line()? {
        let mut it = fields(text);
        let Some(first) = it.next() else { continue };
        match first {
            b"c" | b"%" => continue,
            b"p" => {
                if n.is_some() {
                    return Err(GraphError::Parse {
                        line,
                        message: "second `p` header".into(),
                    });
                }
                let _kind = it.next().ok_or_else(|| GraphError::Parse {
                    line,
                    message: "`p` header without problem kind (expected `p <kind> <n> <m>`)".into(),
                })?;
                let nv = parse_u64(it.next(), line, "vertex count in `p` header")?;
                let m = parse_u64(it.next(), line, "edge count in `p` header")?;
                if nv >= u64::from(u32::MAX) {
                    return Err(GraphError::TooLarge(format!("line {line}: {nv} vertices")));
                }
                edges.reserve(sparse_formats::reserve_hint(m));
                n = Some(nv);
                declared = Some((m, line));
            }
            _ => {
                let nv = n.ok_or_else(|| GraphError::Parse {
                    line,
                    message: "edge before the `p <kind> <n> <m>` header".into(),
                })?;
                let (u, v) = if first == b"a" || first == b"e" {
                    (it.next(), it.next())
                } else {
                    (Some(first), it.next())
                };
                let u = one_based(parse_u64(u, line, "source id")?, nv, line)?;
                let v = one_based(parse_u64(v, line, "target id")?, nv, line)?;
                edges.push((u, v));
            }
        }
    }
    let n = n.ok_or_else(|| GraphError::Parse {
        line: 0,
        message: "no `p <kind> <n> <m>` header found".into(),
    })?;
    check_vertex_count(n, edges.len())?;
    if let Some((m, line)) = declared {
        if edges.len() as u64 != m {
            return Err(GraphError::Parse {
                line,
                message: format!(
                    "`p` header announces {m} edges, the file has {}",
                    edges.len()
                ),
            });
        }
    }
    GraphBuilder::new(n)
        .directed(directed)
        .edge_vec(edges)
        .build()
}
