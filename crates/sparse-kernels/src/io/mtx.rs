//! Matrix Market exchange format (NIST): `coordinate` and `array` matrices with `real`,
//! `integer` or `pattern` values and `general`, `symmetric` or `skew-symmetric` symmetry.

use super::{open, Lines};
use crate::error::{Result, SparseError};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::io::{BufRead, Write};
use std::path::Path;

/// Storage format of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmFormat {
    /// `coordinate`: one `row col [value]` line per stored entry.
    Coordinate,
    /// `array`: every entry, column by column.
    Array,
}

/// Value field of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmField {
    /// Floating-point values.
    Real,
    /// Integer values (converted to the element type).
    Integer,
    /// No values: every stored entry is 1.
    Pattern,
}

/// Symmetry of a Matrix Market file (only the lower triangle is stored when not general).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmSymmetry {
    /// Every entry stored.
    General,
    /// `a(j, i) = a(i, j)`.
    Symmetric,
    /// `a(j, i) = -a(i, j)`, zero diagonal.
    SkewSymmetric,
}

/// The parsed `%%MatrixMarket matrix <format> <field> <symmetry>` banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmHeader {
    /// Coordinate or array.
    pub format: MmFormat,
    /// Real, integer or pattern.
    pub field: MmField,
    /// General, symmetric or skew-symmetric.
    pub symmetry: MmSymmetry,
}

fn parse_header(line: &str) -> Result<MmHeader> {
    let words: Vec<String> = line
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") || words.len() != 5 {
        return Err(SparseError::parse(
            1,
            "expected `%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> <symmetry>`",
        ));
    }
    if words[1] != "matrix" {
        return Err(SparseError::Unsupported(format!(
            "object `{}` (only `matrix`)",
            words[1]
        )));
    }
    let format = match words[2].as_str() {
        "coordinate" => MmFormat::Coordinate,
        "array" => MmFormat::Array,
        f => return Err(SparseError::parse(1, format!("unknown format `{f}`"))),
    };
    let field = match words[3].as_str() {
        "real" | "double" => MmField::Real,
        "integer" => MmField::Integer,
        "pattern" if format == MmFormat::Coordinate => MmField::Pattern,
        "complex" => return Err(SparseError::Unsupported("complex values".into())),
        f => {
            return Err(SparseError::parse(
                1,
                format!("unknown or invalid field `{f}`"),
            ))
        }
    };
    let symmetry = match words[4].as_str() {
        "general" => MmSymmetry::General,
        "symmetric" => MmSymmetry::Symmetric,
        "skew-symmetric" => MmSymmetry::SkewSymmetric,
        "hermitian" => return Err(SparseError::Unsupported("hermitian matrices".into())),
        s => return Err(SparseError::parse(1, format!("unknown symmetry `{s}`"))),
    };
    Ok(MmHeader {
        format,
        field,
        symmetry,
    })
}

/// Next line that is neither a comment nor blank, or `None` at the end.
fn next_data_line<R: BufRead>(lines: &mut Lines<R>) -> Result<Option<String>> {
    while let Some(l) = lines.next_line()? {
        let t = l.trim();
        if !t.is_empty() && !t.starts_with('%') {
            return Ok(Some(t.to_owned()));
        }
    }
    Ok(None)
}

fn number<N: std::str::FromStr>(word: Option<&str>, line: usize, what: &str) -> Result<N> {
    let w = word.ok_or_else(|| SparseError::parse(line, format!("missing {what}")))?;
    w.parse()
        .map_err(|_| SparseError::parse(line, format!("{what} `{w}` is not a valid number")))
}

fn value<T: Scalar>(word: Option<&str>, line: usize, field: MmField) -> Result<T> {
    match field {
        MmField::Pattern => Ok(T::from_f64(1.0)),
        MmField::Integer => {
            number::<i64>(word, line, "integer value").map(|v| T::from_f64(v as f64))
        }
        MmField::Real => {
            let v = number::<f64>(word, line, "value")?;
            Ok(T::from_f64(v))
        }
    }
}

/// Adds entry `(i, j, v)` and its mirror image for symmetric files.
fn push_entry<T: Scalar>(
    t: &mut Vec<(usize, usize, T)>,
    (i, j, v): (usize, usize, T),
    symmetry: MmSymmetry,
    line: usize,
) -> Result<()> {
    if symmetry != MmSymmetry::General && j > i {
        return Err(SparseError::parse(
            line,
            format!(
                "entry ({}, {}) above the diagonal in a {symmetry:?} file",
                i + 1,
                j + 1
            ),
        ));
    }
    if symmetry == MmSymmetry::SkewSymmetric && i == j {
        return Err(SparseError::parse(
            line,
            "diagonal entry in a skew-symmetric file",
        ));
    }
    t.push((i, j, v));
    match symmetry {
        MmSymmetry::Symmetric if i != j => t.push((j, i, v)),
        MmSymmetry::SkewSymmetric => t.push((j, i, T::from_f64(-v.to_f64()))),
        _ => {}
    }
    Ok(())
}

/// Parses a Matrix Market stream into CSR (duplicates summed, columns sorted).
///
/// # Errors
/// [`SparseError::Parse`] with the line number for a malformed banner, size line or entry
/// (including indices out of range and entries above the diagonal of symmetric files),
/// [`SparseError::Truncated`] when fewer entries than declared are present,
/// [`SparseError::Unsupported`] for complex or hermitian files.
pub fn parse_matrix_market<T: Scalar, I: SpIndex>(reader: impl BufRead) -> Result<CsrMatrix<T, I>> {
    let mut lines = Lines::new(reader);
    let banner = lines
        .next_line()?
        .ok_or(SparseError::parse(1, "empty file"))?
        .to_owned();
    let header = parse_header(&banner)?;
    let size = next_data_line(&mut lines)?.ok_or(SparseError::Truncated {
        what: "size line",
        expected: 1,
        found: 0,
        line: lines.line(),
    })?;
    let size_line = lines.line();
    let mut w = size.split_whitespace();
    let nrows: usize = number(w.next(), size_line, "row count")?;
    let ncols: usize = number(w.next(), size_line, "column count")?;
    let expected = match header.format {
        MmFormat::Coordinate => number(w.next(), size_line, "entry count")?,
        MmFormat::Array => match header.symmetry {
            MmSymmetry::General => nrows * ncols,
            MmSymmetry::Symmetric => nrows * (nrows + 1) / 2,
            MmSymmetry::SkewSymmetric => nrows * nrows.saturating_sub(1) / 2,
        },
    };
    if w.next().is_some() {
        return Err(SparseError::parse(
            size_line,
            "too many numbers on the size line",
        ));
    }
    if header.symmetry != MmSymmetry::General && nrows != ncols {
        return Err(SparseError::parse(
            size_line,
            "symmetric matrix is not square",
        ));
    }
    let mut t = Vec::with_capacity(expected.min(1 << 28));
    // Array entries run down the columns, over the stored (lower) part only.
    let (mut ai, mut aj) = (
        usize::from(header.symmetry == MmSymmetry::SkewSymmetric),
        0usize,
    );
    for found in 0..expected {
        let Some(entry) = next_data_line(&mut lines)? else {
            return Err(SparseError::Truncated {
                what: "entries",
                expected,
                found,
                line: lines.line(),
            });
        };
        let line = lines.line();
        let mut w = entry.split_whitespace();
        let (i, j, v) = match header.format {
            MmFormat::Coordinate => {
                let i: usize = number(w.next(), line, "row index")?;
                let j: usize = number(w.next(), line, "column index")?;
                if i == 0 || i > nrows || j == 0 || j > ncols {
                    return Err(SparseError::parse(
                        line,
                        format!(
                            "entry ({i}, {j}) out of range for a {nrows}×{ncols} matrix (1-based)"
                        ),
                    ));
                }
                (i - 1, j - 1, value(w.next(), line, header.field)?)
            }
            MmFormat::Array => {
                let v = value(w.next(), line, header.field)?;
                let here = (ai, aj, v);
                ai += 1;
                if ai == nrows {
                    aj += 1;
                    ai = match header.symmetry {
                        MmSymmetry::General => 0,
                        MmSymmetry::Symmetric => aj,
                        MmSymmetry::SkewSymmetric => aj + 1,
                    };
                }
                here
            }
        };
        if w.next().is_some() {
            return Err(SparseError::parse(line, "too many fields in entry"));
        }
        if header.format == MmFormat::Array && v == T::ZERO {
            continue;
        }
        push_entry(&mut t, (i, j, v), header.symmetry, line)?;
    }
    if next_data_line(&mut lines)?.is_some() {
        return Err(SparseError::parse(
            lines.line(),
            format!("more than the {expected} declared entries"),
        ));
    }
    CsrMatrix::from_triplets(nrows, ncols, &t)
}

/// Reads a Matrix Market file (gzip-compressed or not).
///
/// # Errors
/// [`SparseError::Io`] when the file cannot be read; the parse errors of [`parse_matrix_market`].
pub fn read_matrix_market<T: Scalar, I: SpIndex>(path: &Path) -> Result<CsrMatrix<T, I>> {
    parse_matrix_market(open(path)?)
}

/// Writes `a` as `%%MatrixMarket matrix coordinate real general`, 1-based, one entry per line,
/// values in the shortest form that reads back to the same number.
///
/// # Errors
/// [`SparseError::Stream`] when writing fails.
pub fn write_matrix_market<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    mut out: impl Write,
) -> Result<()> {
    writeln!(out, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(out, "% written by sparse_kernels")?;
    writeln!(out, "{} {} {}", a.nrows(), a.ncols(), a.nnz())?;
    for i in 0..a.nrows() {
        let (cols, vals) = a.row(i);
        for (c, v) in cols.iter().zip(vals) {
            writeln!(out, "{} {} {:?}", i + 1, c.idx() + 1, v)?;
        }
    }
    out.flush()?;
    Ok(())
}
