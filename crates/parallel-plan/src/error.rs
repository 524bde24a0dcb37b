//! Error type of the `parallel_plan` crate.

/// Everything that input data or the environment can make go wrong in `parallel_plan`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// An unknown mesh preset name.
    #[error("unknown mesh `{name}`; known presets: {known}")]
    UnknownMesh {
        /// The name given.
        name: String,
        /// The known preset names.
        known: String,
    },
    /// Malformed JSON (mesh or graph file).
    #[error("malformed JSON: {0}")]
    Json(String),
    /// A strategy or computation graph is inconsistent.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),
    /// No plan fits the per-device memory budget.
    #[error(
        "no plan fits {:.2} GiB per device ({budget} bytes); the smallest achievable per-device memory is {:.2} GiB ({min_achievable} bytes)",
        *budget as f64 / (1u64 << 30) as f64,
        *min_achievable as f64 / (1u64 << 30) as f64
    )]
    Infeasible {
        /// The budget, bytes.
        budget: u64,
        /// The smallest per-device memory any plan reaches, bytes.
        min_achievable: u64,
    },
    /// No plan meets a step-time bound (a min-memory solve under a bound below the fastest
    /// plan of its candidate).
    #[error("no plan meets the step-time bound of {time_limit_s:.6} s")]
    TimeBoundUnmet {
        /// The bound, seconds.
        time_limit_s: f64,
    },
    /// HiGHS failed or returned no usable solution.
    #[error("ILP solver: {0}")]
    Solver(String),
    /// An error from the memory model.
    #[error(transparent)]
    Memory(#[from] memory_model::MemoryError),
}

/// Result alias of this crate.
pub type Result<T, E = PlanError> = std::result::Result<T, E>;
