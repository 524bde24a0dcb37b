//! Error type of the `memory_model` crate.

/// Everything that input data or the environment can make go wrong in `memory_model`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;
