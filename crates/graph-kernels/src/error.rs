//! Error type of the `graph_kernels` crate.

use std::path::PathBuf;

// Wrapped errors are written into the message instead of exposed as `source()`, so that
// error-chain printers (anyhow's `{:#}`) do not repeat them.

/// Everything that input data or the environment can make go wrong in `graph_kernels`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A line of a graph file could not be parsed.
    #[error("line {line}: {message}")]
    Parse {
        /// 1-based line number in the (decompressed) input.
        line: usize,
        /// What was wrong with the line.
        message: String,
    },

    /// A vertex id on a line is outside the declared or representable range.
    #[error(
        "line {line}: vertex id {id} is out of range (the graph has {num_vertices} vertices{hint})"
    )]
    VertexOutOfRange {
        /// 1-based line number in the (decompressed) input.
        line: usize,
        /// The offending id, as written in the file.
        id: u64,
        /// Number of vertices declared by the header (or the `u32` limit).
        num_vertices: u64,
        /// Extra advice (for example about 1-based ids).
        hint: &'static str,
    },

    /// Reading failed part-way (I/O error or a truncated/corrupt gzip stream).
    #[error("read error after line {line}: {error} (truncated or corrupt file?)")]
    Read {
        /// Number of complete lines read before the failure.
        line: usize,
        /// The underlying error (part of the message, so not repeated as a `source`).
        error: std::io::Error,
    },

    /// A file could not be opened.
    #[error("cannot open {path}: {error}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The underlying error (part of the message, so not repeated as a `source`).
        error: std::io::Error,
    },

    /// An error while reading the file at `path` (wraps the line-level error).
    #[error("{path}: {error}")]
    InFile {
        /// The file being read.
        path: PathBuf,
        /// What went wrong, with its line number (part of the message).
        error: Box<GraphError>,
    },

    /// The graph has more vertices or edges than this crate's index types hold.
    #[error("graph too large: {0}")]
    TooLarge(String),

    /// A file rejected by the shared formats crate for a reason none of the variants above
    /// names: a line longer than [`sparse_formats::MAX_LINE_BYTES`], a truncated Matrix Market
    /// file, an unsupported Matrix Market variant.
    #[error(transparent)]
    Format(sparse_formats::FormatError),

    /// A BFS result broke one of the five Graph500 validation rules.
    #[error("BFS validation failed, Graph500 rule {rule}: {message}")]
    InvalidBfs {
        /// Graph500 rule number (1–5) that failed, 0 for a malformed result (wrong lengths, root).
        rule: u8,
        /// Which vertex or edge broke the rule and how.
        message: String,
    },
}

impl From<sparse_formats::FormatError> for GraphError {
    /// Maps the shared readers' and generator's errors onto this crate's variants.
    fn from(e: sparse_formats::FormatError) -> Self {
        use sparse_formats::FormatError as F;
        match e {
            F::Open { path, error } => GraphError::Open { path, error },
            F::Read { line, error } => GraphError::Read { line, error },
            F::Parse { line, message } => GraphError::Parse { line, message },
            F::OutOfRange {
                line,
                row,
                col,
                nrows,
                ..
            } => {
                let id = if row == 0 || row > nrows { row } else { col };
                GraphError::VertexOutOfRange {
                    line,
                    id,
                    num_vertices: nrows,
                    hint: if id == 0 {
                        "; ids in this format are 1-based"
                    } else {
                        ""
                    },
                }
            }
            F::TooLarge(message) => GraphError::TooLarge(message),
            F::InvalidInput(message) => GraphError::InvalidInput(message),
            other => GraphError::Format(other),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;
