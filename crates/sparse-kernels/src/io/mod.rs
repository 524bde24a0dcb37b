//! Reading and writing sparse matrices: Matrix Market (`.mtx`, read and write) and the Deep
//! Learning Matrix Collection format (`.smtx`, read), both optionally gzip-compressed.
//!
//! Matrix Market is read by the shared `sparse_formats` crate (the graph kernels read it too);
//! DLMC is this crate's own. Errors carry the 1-based line number of the (decompressed) file;
//! sizes in headers are checked against the index type and the entry count before anything is
//! allocated, and a Matrix Market line longer than [`sparse_formats::MAX_LINE_BYTES`] (1 MiB)
//! is an error, so `/dev/zero` or a binary file fails at once.

mod mtx;
mod smtx;

pub use mtx::{parse_matrix_market, read_matrix_market, write_matrix_market};
pub use smtx::{parse_smtx, read_smtx};
pub use sparse_formats::matrix_market::{MmField, MmFormat, MmHeader, MmSymmetry};

use crate::error::Result;
use crate::{CsrMatrix, Scalar, SpIndex};
use std::io::BufRead;
use std::path::Path;

/// Opens a file for buffered reading, decompressing it on the fly when it starts with the gzip
/// magic bytes (whatever its name).
///
/// # Errors
/// [`crate::SparseError::Io`] when the file cannot be opened or read.
pub fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    Ok(sparse_formats::open(path)?)
}

/// Reads a matrix by file name: `.smtx` / `.smtx.gz` as DLMC (values from `seed`), anything
/// else as Matrix Market.
///
/// # Errors
/// I/O and parse errors of the underlying reader.
pub fn read_matrix<T: Scalar, I: SpIndex>(path: &Path, seed: u64) -> Result<CsrMatrix<T, I>> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if name.ends_with(".smtx") || name.ends_with(".smtx.gz") {
        read_smtx(path, seed)
    } else {
        read_matrix_market(path)
    }
}

/// Reads `spec` as a matrix file when a file of that name exists, otherwise builds it with
/// [`crate::gen::from_spec`] (`kron:18`, `stencil27:64`, ...); `seed` seeds DLMC values and
/// generators. Benchmarks and tools take either.
///
/// # Errors
/// Reader errors for files; [`crate::SparseError::InvalidInput`] for an unknown or oversized
/// generator spec.
pub fn read_or_generate<T: Scalar, I: SpIndex>(spec: &str, seed: u64) -> Result<CsrMatrix<T, I>> {
    let path = Path::new(spec);
    if path.is_file() {
        read_matrix(path, seed)
    } else {
        crate::gen::from_spec(spec, seed)
    }
}
