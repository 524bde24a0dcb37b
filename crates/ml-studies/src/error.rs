//! The studies' error type.

use ml_models::MlError;

/// What can go wrong in a study run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StudyError {
    /// A model, loader or training error of `ml-models`.
    #[error(transparent)]
    Ml(#[from] MlError),
    /// A tensor operation failed.
    #[error("tensor operation failed: {0}")]
    Candle(#[from] ml_models::candle::Error),
    /// A setting or argument out of range.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Drawing a plot failed.
    #[error("plot failed: {0}")]
    Plot(String),
    /// Training diverged after the pretrained weights were loaded from a cached checkpoint:
    /// the checkpoint, not the settings, may be at fault.
    #[error(
        "training diverged at step {step}: loss is {loss}; the pretrained weights came from the \
         cached checkpoint {} (delete it to pretrain again)",
        path.display()
    )]
    DivergedFromCache {
        /// The cached checkpoint that was loaded.
        path: std::path::PathBuf,
        /// The optimiser step at which the loss stopped being finite.
        step: usize,
        /// The non-finite loss.
        loss: f32,
    },
    /// A data set file was not found under any data root.
    #[error(transparent)]
    Data(#[from] pardis_datasets::DatasetError),
}

/// `Result` with [`StudyError`].
pub type Result<T> = std::result::Result<T, StudyError>;
