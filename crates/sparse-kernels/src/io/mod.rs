//! Reading and writing sparse matrices: Matrix Market (`.mtx`, read and write) and the Deep
//! Learning Matrix Collection format (`.smtx`, read), both optionally gzip-compressed.
//!
//! Errors carry the 1-based line number of the (decompressed) file.

mod mtx;
mod smtx;

pub use mtx::{
    parse_matrix_market, read_matrix_market, write_matrix_market, MmField, MmFormat, MmHeader,
    MmSymmetry,
};
pub use smtx::{parse_smtx, read_smtx};

use crate::error::{Result, SparseError};
use crate::{CsrMatrix, Scalar, SpIndex};
use flate2::read::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

/// Opens a file for buffered reading, decompressing it on the fly when it starts with the gzip
/// magic bytes (whatever its name).
///
/// # Errors
/// [`SparseError::Io`] when the file cannot be opened or read.
pub fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let io_err = |source| SparseError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = BufReader::new(File::open(path).map_err(io_err)?);
    let magic = file.fill_buf().map_err(io_err)?;
    if magic.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(BufReader::new(MultiGzDecoder::new(file))))
    } else {
        Ok(Box::new(file))
    }
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
/// Reader errors for files; [`SparseError::InvalidInput`] for an unknown generator spec.
pub fn read_or_generate<T: Scalar, I: SpIndex>(spec: &str, seed: u64) -> Result<CsrMatrix<T, I>> {
    let path = Path::new(spec);
    if path.is_file() {
        read_matrix(path, seed)
    } else {
        crate::gen::from_spec(spec, seed)
    }
}

/// Lines of a text stream with their 1-based numbers; invalid UTF-8 or read errors become
/// errors at that line.
pub(crate) struct Lines<R> {
    reader: R,
    line: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    pub(crate) fn new(reader: R) -> Self {
        Self {
            reader,
            line: 0,
            buf: Vec::new(),
        }
    }
    /// The number of the last line returned (0 before the first).
    pub(crate) fn line(&self) -> usize {
        self.line
    }
    /// The next line without its line terminator, or `None` at the end of the stream.
    pub(crate) fn next_line(&mut self) -> Result<Option<&str>> {
        self.buf.clear();
        let n = self
            .reader
            .read_until(b'\n', &mut self.buf)
            .map_err(SparseError::Stream)?;
        if n == 0 {
            return Ok(None);
        }
        self.line += 1;
        let text = std::str::from_utf8(&self.buf)
            .map_err(|_| SparseError::parse(self.line, "line is not valid UTF-8"))?;
        Ok(Some(text.trim_end_matches(['\n', '\r'])))
    }
}
