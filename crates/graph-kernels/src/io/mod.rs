//! Graph file loaders: SNAP edge lists, DIMACS/PACE `p`-header files and Matrix Market, plain or
//! gzip-compressed. Every parse error carries its 1-based line number; a truncated gzip stream
//! is a [`GraphError::Read`] naming the last complete line.

mod dimacs;
mod matrix_market;
mod snap;

pub use dimacs::read_dimacs;
pub use matrix_market::read_matrix_market;
pub use snap::read_snap;

use crate::csr::CsrGraph;
use crate::error::{GraphError, Result};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

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
    let open = |p: &Path| {
        File::open(p).map_err(|error| GraphError::Open {
            path: p.to_path_buf(),
            error,
        })
    };
    let mut file = BufReader::with_capacity(1 << 16, open(path)?);
    let gzip = file
        .fill_buf()
        .map(|b| b.starts_with(&[0x1f, 0x8b]))
        .unwrap_or(false);
    let reader: Box<dyn BufRead> = if gzip {
        let decoder = flate2::bufread::MultiGzDecoder::new(file);
        Box::new(BufReader::with_capacity(1 << 16, decoder))
    } else {
        Box::new(file)
    };
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

/// Reads lines as bytes (no UTF-8 requirement), counting them, mapping I/O errors to
/// [`GraphError::Read`].
pub(crate) struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line: usize,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(reader: R) -> Self {
        Lines {
            reader,
            buf: Vec::with_capacity(256),
            line: 0,
        }
    }

    /// The next line (without its line terminator) and its 1-based number, or `None` at end.
    pub(crate) fn next_line(&mut self) -> Result<Option<(usize, &[u8])>> {
        self.buf.clear();
        let read = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(|error| GraphError::Read {
                line: self.line,
                error,
            })?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        let mut s = self.buf.as_slice();
        while let [rest @ .., b'\n' | b'\r'] = s {
            s = rest;
        }
        Ok(Some((self.line, s)))
    }
}

/// Splits a line on ASCII whitespace.
pub(crate) fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

/// Parses an unsigned decimal field; `what` names it in the error.
pub(crate) fn parse_u64(field: Option<&[u8]>, line: usize, what: &str) -> Result<u64> {
    let field = field.ok_or_else(|| GraphError::Parse {
        line,
        message: format!("missing {what}"),
    })?;
    let mut value: u64 = 0;
    let bad = || GraphError::Parse {
        line,
        message: format!(
            "{what} `{}` is not a non-negative integer",
            String::from_utf8_lossy(field)
        ),
    };
    if field.is_empty() {
        return Err(bad());
    }
    for &b in field {
        if !b.is_ascii_digit() {
            return Err(bad());
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(value)
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

/// Rejects vertex counts far beyond what the edges can touch: an edge list names at most `2m`
/// vertices, so more than `32 m + 2^20` would allocate mostly isolated vertices, and one stray
/// large id (or header) could exhaust memory.
pub(crate) fn check_vertex_count(n: u64, edges: usize) -> Result<()> {
    let plausible = 32 * edges as u64 + (1 << 20);
    if n > plausible {
        return Err(GraphError::TooLarge(format!(
            "{n} vertices for only {edges} edges (more than 32 x edges + 2^20): \
             renumber the ids densely"
        )));
    }
    Ok(())
}
