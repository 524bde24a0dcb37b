//! Error type of the `ml_models` crate.

/// Everything that input data or the environment can make go wrong in `ml_models`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = MlError> = std::result::Result<T, E>;
