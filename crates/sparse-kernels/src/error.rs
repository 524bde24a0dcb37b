//! Error type of the `sparse_kernels` crate.
//!
//! Policy: anything that input data or the environment can cause (a malformed file, an index out
//! of range, a count that does not match) is a [`SparseError`]; violations of the programmer's
//! contract (a dense matrix with the wrong shape passed to a kernel) panic at the API edge.

use std::path::PathBuf;

/// Everything that input data or the environment can make go wrong in `sparse_kernels`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SparseError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// The CSR arrays do not describe a valid matrix (offsets not monotone, lengths disagree).
    #[error("invalid CSR structure: {0}")]
    InvalidStructure(String),

    /// A column index is not smaller than the number of columns.
    #[error("column index {col} in row {row} is out of range (matrix has {ncols} columns)")]
    ColumnOutOfRange {
        /// Row holding the entry.
        row: usize,
        /// The offending column index.
        col: usize,
        /// Number of columns of the matrix.
        ncols: usize,
    },

    /// A dimension, offset or index does not fit in the chosen index type.
    #[error("{what} = {value} does not fit in the index type `{index_type}`")]
    IndexOverflow {
        /// Which quantity overflowed.
        what: &'static str,
        /// Its value.
        value: usize,
        /// The index type's name.
        index_type: &'static str,
    },

    /// A file could not be opened or read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error (reported as the source of this one).
        #[source]
        source: std::io::Error,
    },

    /// Reading or writing a stream failed (no file name known).
    #[error("I/O error: {0}")]
    Stream(#[from] std::io::Error),

    /// A text file (Matrix Market, DLMC) is malformed at a given line.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number in the (decompressed) file.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },

    /// The file ended before all the declared entries were read.
    #[error(
        "truncated file: expected {expected} {what}, found {found} (file ends at line {line})"
    )]
    Truncated {
        /// What was being read (entries, row offsets, ...).
        what: &'static str,
        /// Declared count.
        expected: usize,
        /// Count actually present.
        found: usize,
        /// Last line number of the file.
        line: usize,
    },

    /// A Matrix Market feature that this reader does not handle (complex values, ...).
    #[error("unsupported Matrix Market format: {0}")]
    Unsupported(String),

    /// A file or generator argument rejected by the shared formats crate for a reason none of
    /// the variants above names: a line longer than [`sparse_formats::MAX_LINE_BYTES`], or a
    /// header or argument asking for more than the data or the index types can back (the
    /// message says how much memory it would need).
    #[error(transparent)]
    Format(sparse_formats::FormatError),

    /// Building a dedicated thread pool failed.
    #[error("cannot build a thread pool: {0}")]
    ThreadPool(String),
}

impl SparseError {
    /// A parse error at a 1-based line number.
    pub(crate) fn parse(line: usize, message: impl Into<String>) -> Self {
        Self::Parse {
            line,
            message: message.into(),
        }
    }
}

impl From<sparse_formats::FormatError> for SparseError {
    /// Maps the shared readers' errors onto this crate's variants (same messages).
    fn from(e: sparse_formats::FormatError) -> Self {
        use sparse_formats::FormatError as F;
        match e {
            F::Open { path, error } => Self::Io {
                path,
                source: error,
            },
            F::Read { error, .. } => Self::Stream(error),
            F::Parse { line, message } => Self::Parse { line, message },
            F::OutOfRange {
                line,
                row,
                col,
                nrows,
                ncols,
            } => Self::parse(
                line,
                format!("entry ({row}, {col}) out of range for a {nrows}×{ncols} matrix (1-based)"),
            ),
            F::Truncated {
                what,
                expected,
                found,
                line,
            } => Self::Truncated {
                what,
                expected,
                found,
                line,
            },
            F::Unsupported(m) => Self::Unsupported(m),
            F::InvalidInput(m) => Self::InvalidInput(m),
            other => Self::Format(other),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = SparseError> = std::result::Result<T, E>;
