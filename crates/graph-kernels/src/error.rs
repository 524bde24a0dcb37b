//! Error type of the `graph_kernels` crate.

/// Everything that input data or the environment can make go wrong in `graph_kernels`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = GraphError> = std::result::Result<T, E>;
