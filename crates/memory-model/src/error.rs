//! Error type of the `memory_model` crate.

/// Everything that input data or the environment can make go wrong in `memory_model`.
///
/// Every variant renders as one line that names the offending field or value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A size that must be positive was zero (or negative in a JSON file).
    #[error("`{field}` must be positive, got {value}")]
    NonPositive {
        /// Name of the field.
        field: &'static str,
        /// The value given.
        value: i64,
    },
    /// A parallel degree does not divide the dimension it splits.
    #[error("{what} = {divisor} does not divide {dimension} = {value}")]
    NotDivisible {
        /// The parallel degree, e.g. `tp`.
        what: &'static str,
        /// Its value.
        divisor: u64,
        /// The dimension split, e.g. `heads`.
        dimension: &'static str,
        /// The dimension's size.
        value: u64,
    },
    /// More pipeline stages than layers.
    #[error("pp = {pp} exceeds the number of layers ({layers})")]
    TooManyStages {
        /// Pipeline-parallel degree.
        pp: u64,
        /// Transformer layers of the model.
        layers: u64,
    },
    /// The parallel degrees do not multiply to the device count.
    #[error("dp·tp·pp·cp = {dp}·{tp}·{pp}·{cp} = {product} but the cluster has {devices} devices")]
    DeviceCountMismatch {
        /// Data-parallel degree.
        dp: u64,
        /// Tensor-parallel degree.
        tp: u64,
        /// Pipeline-parallel degree.
        pp: u64,
        /// Context-parallel degree.
        cp: u64,
        /// Their product.
        product: u64,
        /// Devices in the cluster.
        devices: u64,
    },
    /// A combination of options that no framework supports (and pardis does not model).
    #[error("unsupported combination: {0}")]
    Unsupported(String),
    /// A model name that is not in the built-in zoo.
    #[error("unknown model `{name}`; known models: {known}")]
    UnknownModel {
        /// The name asked for.
        name: String,
        /// Comma-separated list of the known names.
        known: String,
    },
    /// A Hugging Face `config.json` lacks a field pardis needs or has one of the wrong type.
    #[error("config.json: field `{field}`: {reason}")]
    ConfigField {
        /// The JSON field name.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A Hugging Face `config.json` names an architecture pardis does not model.
    #[error("config.json: unsupported model_type `{0}` (supported: llama, mistral, mixtral, gpt2, gpt_neox)")]
    UnknownArchitecture(String),
    /// The text is not JSON at all.
    #[error("malformed JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A sharding splits one stored tensor more ways than the operator has devices.
    #[error("operator `{operator}`: tensor `{tensor}` is split {splits} ways (ZeRO included) but only {group} devices hold it")]
    InvalidSharding {
        /// Operator name.
        operator: String,
        /// Tensor name.
        tensor: String,
        /// Product of the splits of the tensor's dimensions (times the ZeRO group, if sharded).
        splits: u64,
        /// Devices that hold the tensor.
        group: u64,
    },
}

/// Result alias of this crate.
pub type Result<T, E = MemoryError> = std::result::Result<T, E>;

/// Returns `NonPositive` when `value` is zero.
pub(crate) fn positive(field: &'static str, value: u64) -> Result<u64> {
    if value == 0 {
        Err(MemoryError::NonPositive { field, value: 0 })
    } else {
        Ok(value)
    }
}
