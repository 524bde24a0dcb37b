//! Tabular anomaly detection on ADBench's data sets with the PCL-AD paper's protocol: partition
//! contrastive learning (PCL-AD, Li, Wang, Xu, Li & Zhou, "Deep anomaly detection with
//! partition contrastive learning for tabular data", Data Mining and Knowledge Discovery 2025)
//! and the baselines it is measured against, behind one [`Detector`] trait.
//!
//! - [`data`]: validated [`Features`] / [`Labelled`] data, the ADBench `.npz` and PCL-AD CSV
//!   readers, [`protocol_split`] (seeded shuffle, train on half of the normals, test on the rest
//!   plus every anomaly, min-max scaling fitted on the training split) and ADBench's own
//!   unsupervised setting, [`adbench_split`] (stratified 70/30 split of all rows); [`Protocol`]
//!   picks one.
//! - [`metrics`]: exact [`auc_roc`] (ties count ½) and [`average_precision`] (scikit-learn's
//!   definition).
//! - [`eval`]: a detector by name, one seed of the protocol, mean ± std, average ranks.
//! - Classical detectors in plain Rust with rayon: [`IsolationForest`], [`Ecod`], [`Knn`].
//! - Deep detectors on candle: [`Pcl`] (the paper), [`Icl`], [`Neutral`] (NeuTraL-AD), trained
//!   by one loop ([`DeepConfig`]: Adam lr 1e-3, weight decay 1e-5, batch 128).
//!
//! Every detector is fitted on unlabelled training rows and scores rows independently of each
//! other (a row's score never depends on which other rows are scored with it); higher scores
//! mean more anomalous. The one opt-in exception is ECOD's PyOD-compatible
//! [`EcdfRows::TrainingAndScored`], kept for comparisons with PyOD. Parallel work runs on the
//! caller's rayon pool.
//!
//! ```
//! use ml_models::anomaly::{auc_roc, Detector, Features, IsolationForest, IsolationForestConfig};
//!
//! // 200 points on a small grid and two far-away points.
//! let mut data: Vec<f64> = (0..200).flat_map(|i| [(i % 20) as f64, (i / 20) as f64]).collect();
//! let train = Features::new(200, 2, data.clone())?;
//! data.extend([60.0, 60.0, -40.0, 5.0]);
//! let test = Features::new(202, 2, data)?;
//! let mut forest = IsolationForest::new(IsolationForestConfig::default());
//! forest.fit(&train)?;
//! let scores = forest.score(&test)?;
//! let labels: Vec<u8> = (0..202).map(|i| u8::from(i >= 200)).collect();
//! assert!(auc_roc(&scores, &labels)? > 0.95);
//! # Ok::<(), ml_models::MlError>(())
//! ```

pub mod data;
mod deep;
mod ecod;
pub mod eval;
mod fused;
mod icl;
mod iforest;
mod knn;
pub mod metrics;
mod neutral;
mod pcl;

pub use data::{
    adbench_split, protocol_split, protocol_split_capped, Features, Labelled, MinMaxScaler,
    Protocol, Split, ADBENCH_MAX_ROWS, ADBENCH_TEST_SHARE,
};
pub use deep::DeepConfig;
pub use ecod::{Aggregation, EcdfRows, Ecod, EcodConfig};
pub use icl::{Icl, IclConfig};
pub use iforest::{average_path_length, IsolationForest, IsolationForestConfig};
pub use knn::{Knn, KnnConfig};
pub use metrics::{auc_roc, average_precision};
pub use neutral::{Neutral, NeutralConfig, NeutralTransform};
pub use pcl::{Pcl, PclConfig};

use crate::Result;

/// Input that anomaly detection cannot use, with where it was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// A feature value is NaN or infinite.
    #[error("feature value at row {row}, column {col} is NaN or infinite")]
    NonFinite {
        /// Sample index.
        row: usize,
        /// Feature index.
        col: usize,
    },
    /// A score handed to a metric is NaN or infinite.
    #[error("score {index} is NaN or infinite")]
    NonFiniteScore {
        /// Sample index.
        index: usize,
    },
    /// A label is not exactly 0 or 1.
    #[error("label {index} is {value}; labels must be 0 (normal) or 1 (anomaly)")]
    BadLabel {
        /// Sample index.
        index: usize,
        /// The offending value.
        value: f64,
    },
    /// Features and labels have different lengths.
    #[error("{rows} samples but {labels} labels")]
    LengthMismatch {
        /// Samples in `X`.
        rows: usize,
        /// Entries in `y`.
        labels: usize,
    },
    /// The data buffer does not hold `rows × cols` values.
    #[error("{len} values cannot form a {rows}×{cols} matrix")]
    Shape {
        /// Requested rows.
        rows: usize,
        /// Requested columns.
        cols: usize,
        /// Values given.
        len: usize,
    },
    /// No samples or no features.
    #[error("no samples or no features")]
    Empty,
    /// Labels must contain both classes (and at least two normals for a split).
    #[error("need both normal and anomalous samples")]
    OneClass,
    /// Rows to score have a different number of features than the training rows.
    #[error("detector was fitted on {fitted} features, got {found}")]
    FeatureCount {
        /// Features at fit time.
        fitted: usize,
        /// Features now.
        found: usize,
    },
    /// `score` was called before `fit`.
    #[error("detector is not fitted")]
    NotFitted,
    /// The detector cannot work on this data; the message says why.
    #[error("{0}")]
    Unsupported(String),
}

/// An unsupervised anomaly detector: fitted on (unlabelled) training rows, then scores rows,
/// higher = more anomalous. Scores are finite, and a row's score depends only on the fitted
/// state and the row itself (except under a configuration documented as transductive: only
/// [`EcodConfig`] with [`EcdfRows::TrainingAndScored`]).
pub trait Detector {
    /// Short name (`iforest`, `ecod`, `knn`, `pcl`, `icl`, `neutral`).
    fn name(&self) -> &'static str;

    /// Learns the normal data from `train`.
    ///
    /// # Errors
    /// [`InputError`] for data the detector cannot use; candle errors for deep models.
    fn fit(&mut self, train: &Features) -> Result<()>;

    /// Anomaly scores of the rows of `x`.
    ///
    /// # Errors
    /// [`InputError::NotFitted`] before `fit`, [`InputError::FeatureCount`] on a column mismatch.
    fn score(&self, x: &Features) -> Result<Vec<f64>>;
}

/// Checks that a detector fitted on `fitted` columns may score `x`.
fn check_cols(fitted: Option<usize>, x: &Features) -> Result<(), InputError> {
    match fitted {
        None => Err(InputError::NotFitted),
        Some(f) if f != x.cols => Err(InputError::FeatureCount {
            fitted: f,
            found: x.cols,
        }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
