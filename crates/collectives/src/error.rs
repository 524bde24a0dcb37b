//! Error type of the `collectives` crate.

/// Everything that input data or the environment can make go wrong in `collectives`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;
