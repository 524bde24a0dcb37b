//! Error type of the `ml_models` crate.

use std::path::PathBuf;

/// Everything that input data or the environment can make go wrong in `ml_models`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MlError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A tensor operation failed inside candle.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// Reading or writing a file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A data file is malformed (wrong magic, truncated, bad number, bad JSON, ...).
    #[error("malformed {format} data in {path}: {reason}")]
    Format {
        /// Format name (`npy`, `npz`, `csv`, `idx`, `fewrel`, ...).
        format: &'static str,
        /// The file (or `<memory>`).
        path: PathBuf,
        /// What is wrong, with line/field where known.
        reason: String,
    },
    /// A checkpoint file could not be parsed as safetensors (truncated or corrupt).
    #[error("corrupt checkpoint {path}: {reason}")]
    CorruptCheckpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// Parser message.
        reason: String,
    },
    /// A checkpoint was written by a different configuration than the one asking for it
    /// (e.g. a few-shot model trained with other options), or none was written for it.
    #[error("checkpoint {path} does not fit: {reason}")]
    CheckpointMismatch {
        /// The checkpoint file (or the file that was looked for).
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// A checkpoint lacks a tensor the model needs.
    #[error("checkpoint {path} has no tensor `{name}`")]
    MissingTensor {
        /// The checkpoint file.
        path: PathBuf,
        /// The missing tensor name.
        name: String,
    },
    /// A checkpoint tensor has a different shape than the model parameter.
    #[error("checkpoint tensor `{name}` has shape {found:?}, the model expects {expected:?}")]
    ShapeMismatch {
        /// Tensor name.
        name: String,
        /// Shape the model expects.
        expected: Vec<usize>,
        /// Shape found in the checkpoint.
        found: Vec<usize>,
    },
    /// Training diverged (loss became NaN or infinite).
    #[error("training diverged at step {step}: loss is {loss}")]
    Diverged {
        /// Global step at which the loss was not finite.
        step: usize,
        /// The loss value.
        loss: f32,
    },
    /// A collective operation of data-parallel training failed.
    #[cfg(feature = "collectives")]
    #[error("collective failed: {0}")]
    Collective(#[from] collectives::CollectiveError),
    /// A layer cannot be made trainable as it is stored (quantized or bf16 base, a LoRA
    /// adapter that fine-tuning the base would drop, already trainable, or a name already in
    /// the parameter store).
    #[error("layer `{layer}` cannot be fine-tuned: {reason}")]
    NotFineTunable {
        /// The layer's name (its weight is `<layer>.weight`).
        layer: String,
        /// Why not.
        reason: String,
    },
    /// A few-shot episode needs more instances of a relation than the data has.
    #[error("relation {relation} has {have} instances, an episode needs {need} (K + Q)")]
    TooFewInstances {
        /// The relation id.
        relation: String,
        /// Instances available.
        have: usize,
        /// Instances an episode draws (K support + Q query).
        need: usize,
    },
    /// Tabular anomaly-detection input was unusable (NaN, bad label, shape, ...).
    #[error("anomaly detection: {0}")]
    AnomalyInput(#[from] crate::anomaly::InputError),
}

impl MlError {
    /// An [`MlError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`MlError::Format`] for `path`.
    pub(crate) fn format(
        format: &'static str,
        path: impl Into<PathBuf>,
        reason: impl Into<String>,
    ) -> Self {
        Self::Format {
            format,
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = MlError> = std::result::Result<T, E>;
