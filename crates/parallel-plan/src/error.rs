//! Error type of the `parallel_plan` crate.

/// Everything that input data or the environment can make go wrong in `parallel_plan`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result alias of this crate.
pub type Result<T, E = PlanError> = std::result::Result<T, E>;
