//! DLMC `.smtx` files (Gale, Zaharia, Young, Elsen, "Sparse GPU Kernels for Deep Learning",
//! SC 2020): line 1 `rows, cols, nnz`; line 2 the `rows + 1` row offsets; line 3 the `nnz`
//! column indices (0-based). The files hold no values; they are generated deterministically.

use super::{open, Lines};
use crate::error::{Result, SparseError};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::io::BufRead;
use std::path::Path;

fn numbers<I: SpIndex>(text: &str, line: usize, what: &str, expected: usize) -> Result<Vec<I>> {
    let mut out = Vec::with_capacity(expected);
    for w in text
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
    {
        let v: usize = w.parse().map_err(|_| {
            SparseError::parse(line, format!("{what} `{w}` is not a non-negative integer"))
        })?;
        let v = I::checked_from(v).ok_or_else(|| {
            SparseError::parse(
                line,
                format!("{what} {v} does not fit the index type {}", I::NAME),
            )
        })?;
        out.push(v);
    }
    if out.len() != expected {
        return Err(SparseError::parse(
            line,
            format!("expected {expected} {what}s, found {}", out.len()),
        ));
    }
    Ok(out)
}

/// Parses a DLMC stream; values are deterministic pseudo-random numbers in `[-1, 1)` from
/// `seed` (see [`CsrMatrix::fill_deterministic`]).
///
/// # Errors
/// [`SparseError::Parse`] with the line number for a malformed header, a wrong count of
/// offsets or indices, offsets that are not monotone, or a column out of range;
/// [`SparseError::Truncated`] when a line is missing.
pub fn parse_smtx<T: Scalar, I: SpIndex>(
    reader: impl BufRead,
    seed: u64,
) -> Result<CsrMatrix<T, I>> {
    let mut lines = Lines::new(reader);
    let truncated = |found: usize, line: usize| SparseError::Truncated {
        what: "lines",
        expected: 3,
        found,
        line,
    };
    let header = lines.next_line()?.ok_or(truncated(0, 0))?;
    let dims = numbers::<usize>(header, 1, "dimension", 3).map_err(|_| {
        SparseError::parse(1, format!("expected `rows, cols, nnz`, found `{header}`"))
    })?;
    let (nrows, ncols, nnz) = (dims[0], dims[1], dims[2]);
    let offsets_line = lines.next_line()?.ok_or(truncated(1, 1))?;
    let offsets = numbers::<I>(offsets_line, 2, "row offset", nrows + 1)?;
    let indices = match lines.next_line()? {
        Some(l) => numbers::<I>(l, 3, "column index", nnz)?,
        None if nnz == 0 => Vec::new(),
        None => return Err(truncated(2, 2)),
    };
    if let Some(l) = lines.next_line()? {
        if !l.trim().is_empty() {
            return Err(SparseError::parse(
                4,
                "unexpected content after the column indices",
            ));
        }
    }
    let mut m = CsrMatrix::try_new(nrows, ncols, offsets, indices, vec![T::ZERO; nnz]).map_err(
        |e| match e {
            SparseError::ColumnOutOfRange { .. } => SparseError::parse(3, e.to_string()),
            other => SparseError::parse(2, other.to_string()),
        },
    )?;
    m.fill_deterministic(seed);
    Ok(m)
}

/// Reads a DLMC `.smtx` file (gzip-compressed or not); see [`parse_smtx`].
///
/// # Errors
/// [`SparseError::Io`] when the file cannot be read; the parse errors of [`parse_smtx`].
pub fn read_smtx<T: Scalar, I: SpIndex>(path: &Path, seed: u64) -> Result<CsrMatrix<T, I>> {
    parse_smtx(open(path)?, seed)
}
