//! Error type of the `sparse_formats` crate.

use std::path::PathBuf;

// Wrapped I/O errors are written into the message instead of exposed as `source()`, so that
// error-chain printers (anyhow's `{:#}`) do not repeat them.

/// Everything that a file, a stream or a generator argument can make go wrong here.
///
/// Messages name the line (1-based, of the decompressed stream) and what was expected, so a
/// kernel crate can pass them on unchanged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// A file could not be opened, or its first bytes could not be read.
    #[error("cannot open {path}: {error}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The underlying error (part of the message, so not repeated as a `source`).
        error: std::io::Error,
    },

    /// Reading failed part-way (I/O error, or a truncated or corrupt gzip stream).
    #[error("read error after line {line}: {error} (truncated or corrupt file?)")]
    Read {
        /// Number of complete lines read before the failure.
        line: usize,
        /// The underlying error (part of the message, so not repeated as a `source`).
        error: std::io::Error,
    },

    /// A line is longer than the reader's cap (see [`crate::MAX_LINE_BYTES`]); the stream is
    /// not a text file of this format (for example `/dev/zero`).
    #[error("line {line} is longer than {limit} bytes: not a text file of this format")]
    LineTooLong {
        /// 1-based number of the line being read.
        line: usize,
        /// The cap in bytes.
        limit: usize,
    },

    /// A line is malformed.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },

    /// A Matrix Market entry names a row or column outside the size line's bounds.
    #[error(
        "line {line}: entry ({row}, {col}) out of range for a {nrows}×{ncols} matrix (1-based)"
    )]
    OutOfRange {
        /// 1-based line number.
        line: usize,
        /// Row as written (1-based).
        row: u64,
        /// Column as written (1-based).
        col: u64,
        /// Rows declared by the size line.
        nrows: u64,
        /// Columns declared by the size line.
        ncols: u64,
    },

    /// The stream ended before everything the header declared was read.
    #[error(
        "truncated file: expected {expected} {what}, found {found} (file ends at line {line})"
    )]
    Truncated {
        /// What was being read (entries, size line, ...).
        what: &'static str,
        /// Declared count.
        expected: usize,
        /// Count actually present.
        found: usize,
        /// Last line number of the stream.
        line: usize,
    },

    /// A Matrix Market feature that the caller does not handle (complex values, `array` for a
    /// graph, ...).
    #[error("unsupported Matrix Market format: {0}")]
    Unsupported(String),

    /// A size declared by a header or requested by an argument is beyond what the data or the
    /// index types can back; the message says how much memory it would need.
    #[error("too large: {0}")]
    TooLarge(String),

    /// A generator parameter is invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

impl FormatError {
    /// A parse error at a 1-based line number.
    pub fn parse(line: usize, message: impl Into<String>) -> Self {
        Self::Parse {
            line,
            message: message.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
