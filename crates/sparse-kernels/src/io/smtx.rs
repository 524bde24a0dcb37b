//! DLMC `.smtx` files (Gale, Zaharia, Young, Elsen, "Sparse GPU Kernels for Deep Learning",
//! SC 2020): line 1 `rows, cols, nnz`; line 2 the `rows + 1` row offsets; line 3 the `nnz`
//! column indices (0-based). The files hold no values; they are generated deterministically.
//!
//! Lines 2 and 3 can be megabytes long, so numbers are parsed as they stream in rather than
//! line by line: memory grows with the numbers actually present, never with the header, and a
//! line is abandoned as soon as it holds more numbers than the header declared.

use super::open;
use crate::error::{Result, SparseError};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::io::BufRead;
use std::path::Path;

/// Digits of the longest number accepted (`u64::MAX` has 20).
const MAX_DIGITS: usize = 20;

/// Numbers separated by spaces, tabs and commas, one line at a time, straight from the stream.
struct Numbers<R> {
    reader: R,
}

/// How a line ended.
#[derive(Debug, PartialEq, Eq)]
enum LineEnd {
    /// A newline was read.
    Newline,
    /// The stream ended (after at least one byte of this line, or `bytes == 0`).
    Eof {
        /// Bytes of the line read before the end.
        bytes: usize,
    },
}

impl<R: BufRead> Numbers<R> {
    /// Reads line `line`, calling `push` for each number (at most `max` of them, then
    /// "expected `max`" fails at once). Returns how the line ended and how many numbers it held.
    fn line(
        &mut self,
        line: usize,
        what: &str,
        max: usize,
        mut push: impl FnMut(usize) -> Result<()>,
    ) -> Result<(LineEnd, usize)> {
        let mut count = 0usize;
        let mut bytes = 0usize;
        let mut token: Vec<u8> = Vec::with_capacity(MAX_DIGITS + 1);
        let mut finish = |token: &mut Vec<u8>, count: &mut usize| -> Result<()> {
            if token.is_empty() {
                return Ok(());
            }
            let bad = || {
                SparseError::parse(
                    line,
                    format!(
                        "{what} `{}` is not a non-negative integer",
                        token.escape_ascii()
                    ),
                )
            };
            let value: usize = std::str::from_utf8(token)
                .ok()
                .filter(|t| t.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|t| t.parse().ok())
                .ok_or_else(bad)?;
            token.clear();
            *count += 1;
            if *count > max {
                return Err(SparseError::parse(
                    line,
                    format!("expected {max} {what}s, found more"),
                ));
            }
            push(value)
        };
        loop {
            let buf = self.reader.fill_buf().map_err(SparseError::Stream)?;
            if buf.is_empty() {
                finish(&mut token, &mut count)?;
                return Ok((LineEnd::Eof { bytes }, count));
            }
            let mut used = 0;
            let mut newline = false;
            for &b in buf {
                used += 1;
                match b {
                    b'\n' => {
                        newline = true;
                        break;
                    }
                    b' ' | b'\t' | b',' | b'\r' => finish(&mut token, &mut count)?,
                    _ => {
                        token.push(b);
                        if token.len() > MAX_DIGITS {
                            // Too long for any index: report it (abbreviated) without reading on.
                            token.extend_from_slice(b"...");
                            return Err(SparseError::parse(
                                line,
                                format!(
                                    "{what} `{}` is not a non-negative integer",
                                    token.escape_ascii()
                                ),
                            ));
                        }
                    }
                }
            }
            bytes += used;
            self.reader.consume(used);
            if newline {
                finish(&mut token, &mut count)?;
                return Ok((LineEnd::Newline, count));
            }
        }
    }
}

/// Parses a DLMC stream; values are deterministic pseudo-random numbers in `[-1, 1)` from
/// `seed` (see [`CsrMatrix::fill_deterministic`]).
///
/// # Errors
/// [`SparseError::Parse`] with the line number for a malformed header, a size that does not
/// fit the index type `I`, a wrong count of offsets or indices, offsets that are not monotone,
/// or a column out of range; [`SparseError::Truncated`] when a line is missing. Memory grows
/// only with the numbers present in the file.
pub fn parse_smtx<T: Scalar, I: SpIndex>(
    reader: impl BufRead,
    seed: u64,
) -> Result<CsrMatrix<T, I>> {
    let mut numbers = Numbers { reader };
    let truncated = |found: usize, line: usize| SparseError::Truncated {
        what: "lines",
        expected: 3,
        found,
        line,
    };
    let mut dims = Vec::with_capacity(3);
    let header = numbers.line(1, "dimension", 3, |v| {
        dims.push(v);
        Ok(())
    });
    let (end, _) = header.map_err(|e| match e {
        SparseError::Parse { message, .. } => {
            SparseError::parse(1, format!("expected `rows, cols, nnz`: {message}"))
        }
        other => other,
    })?;
    if end == (LineEnd::Eof { bytes: 0 }) {
        return Err(truncated(0, 0));
    }
    if dims.len() != 3 {
        return Err(SparseError::parse(
            1,
            format!("expected `rows, cols, nnz`, found {} numbers", dims.len()),
        ));
    }
    let (nrows, ncols, nnz) = (dims[0], dims[1], dims[2]);
    for (what, value) in [("rows", nrows), ("cols", ncols), ("nnz", nnz)] {
        if I::checked_from(value).is_none() {
            return Err(SparseError::parse(
                1,
                format!("{what} {value} does not fit the index type {}", I::NAME),
            ));
        }
    }
    let index = |line: usize, what: &'static str| {
        move |v: usize| {
            I::checked_from(v).ok_or_else(|| {
                SparseError::parse(
                    line,
                    format!("{what} {v} does not fit the index type {}", I::NAME),
                )
            })
        }
    };
    let expect = |line: usize, what: &str, expected: usize, found: usize| {
        if found == expected {
            Ok(())
        } else {
            Err(SparseError::parse(
                line,
                format!("expected {expected} {what}s, found {found}"),
            ))
        }
    };
    // nrows + 1 cannot overflow: nrows fits I, which is at most usize.
    let mut offsets = Vec::with_capacity(sparse_formats::reserve_hint(nrows as u64 + 1));
    let to_offset = index(2, "row offset");
    let (end, found) = numbers.line(2, "row offset", nrows + 1, |v| {
        offsets.push(to_offset(v)?);
        Ok(())
    })?;
    if end == (LineEnd::Eof { bytes: 0 }) {
        return Err(truncated(1, 1));
    }
    expect(2, "row offset", nrows + 1, found)?;
    let mut indices = Vec::with_capacity(sparse_formats::reserve_hint(nnz as u64));
    let to_index = index(3, "column index");
    let (end, found) = numbers.line(3, "column index", nnz, |v| {
        indices.push(to_index(v)?);
        Ok(())
    })?;
    match end {
        LineEnd::Eof { bytes: 0 } if nnz > 0 => return Err(truncated(2, 2)),
        LineEnd::Eof { .. } => {}
        LineEnd::Newline => {
            let (_, extra) = numbers
                .line(4, "trailing number", 0, |_| Ok(()))
                .map_err(|_| {
                    SparseError::parse(4, "unexpected content after the column indices")
                })?;
            debug_assert_eq!(extra, 0);
        }
    }
    expect(3, "column index", nnz, found)?;
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
