//! Error type of the `sparse_kernels` crate.

/// Everything that input data or the environment can make go wrong in `sparse_kernels`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SparseError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = SparseError> = std::result::Result<T, E>;
