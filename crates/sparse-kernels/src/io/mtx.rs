//! Matrix Market exchange format (NIST): `coordinate` and `array` matrices with `real`,
//! `integer` or `pattern` values and `general`, `symmetric` or `skew-symmetric` symmetry.

use super::open;
use crate::error::{Result, SparseError};
use crate::{CsrMatrix, Scalar, SpIndex};
use sparse_formats::matrix_market::{MatrixMarketReader, MmField, MmFormat, MmSymmetry};
use std::io::{BufRead, Write};
use std::path::Path;

/// Parses a Matrix Market stream into CSR (duplicates summed, columns sorted, symmetric and
/// skew-symmetric storage expanded, explicit zeros of `array` files dropped).
///
/// # Errors
/// [`SparseError::Parse`] with the line number for a malformed banner, size line or entry
/// (including indices out of range, non-finite values and entries above the diagonal of
/// symmetric files), [`SparseError::Truncated`] when fewer entries than declared are present,
/// [`SparseError::Unsupported`] for complex or hermitian files,
/// [`SparseError::IndexOverflow`] when the dimensions or the entry count do not fit `I`, and
/// [`SparseError::Format`] for a line over 1 MiB or more rows than `32 · entries + 2^20` —
/// all before anything is allocated for the matrix.
pub fn parse_matrix_market<T: Scalar, I: SpIndex>(reader: impl BufRead) -> Result<CsrMatrix<T, I>> {
    let mut mm = MatrixMarketReader::new(reader)?;
    let header = mm.header();
    if header.field == MmField::Complex {
        return Err(SparseError::Unsupported("complex values".into()));
    }
    if header.symmetry == MmSymmetry::Hermitian {
        return Err(SparseError::Unsupported("hermitian matrices".into()));
    }
    let size = mm.size()?;
    for (what, value) in [
        ("nrows", size.rows),
        ("ncols", size.cols),
        ("entry count", size.entries),
    ] {
        if I::checked_from(value).is_none() {
            return Err(SparseError::IndexOverflow {
                what,
                value,
                index_type: I::NAME,
            });
        }
    }
    let mut t = Vec::with_capacity(sparse_formats::reserve_hint(size.entries as u64));
    while let Some(e) = mm.next_entry()? {
        let v = T::from_f64(e.value);
        if !v.to_f64().is_finite() {
            return Err(SparseError::parse(
                e.line,
                format!("value {} overflows {}", e.value, T::NAME),
            ));
        }
        if header.format == MmFormat::Array && v == T::ZERO {
            continue;
        }
        t.push((e.row, e.col, v));
        match header.symmetry {
            MmSymmetry::Symmetric if e.row != e.col => t.push((e.col, e.row, v)),
            MmSymmetry::SkewSymmetric => t.push((e.col, e.row, T::from_f64(-v.to_f64()))),
            _ => {}
        }
    }
    CsrMatrix::from_triplets(size.rows, size.cols, &t)
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
