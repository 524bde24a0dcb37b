//! The evaluation protocol as computation (no printing): a detector chosen by name, one seed of
//! the PCL-AD paper's split (or ADBench's, [`run_seed_protocol`]), mean ± std over seeds and
//! average ranks across data sets.

use std::time::Instant;

use super::{
    auc_roc, average_precision, DeepConfig, Detector, Ecod, Icl, IclConfig, IsolationForest,
    IsolationForestConfig, Knn, KnnConfig, Labelled, Neutral, NeutralConfig, Pcl, PclConfig,
    Protocol,
};
use crate::{MlError, Result};

/// Mean and sample standard deviation, re-exported from [`crate::stats`] where it lives.
pub use crate::stats::mean_std;

/// Every detector's name, in table order.
pub const DETECTORS: [&str; 6] = ["pcl", "iforest", "ecod", "knn", "icl", "neutral"];

/// A detector by name with its default configuration and `seed`.
///
/// # Errors
/// [`MlError::InvalidInput`] for an unknown name.
pub fn detector(name: &str, seed: u64) -> Result<Box<dyn Detector + Send>> {
    detector_for(name, seed, None)
}

/// [`detector`] for the data set named `data_set` (a file stem): PCL-AD then takes the
/// authors' settings for it ([`PclConfig::for_data_set`]); the other detectors have no
/// per-set settings.
///
/// # Errors
/// [`MlError::InvalidInput`] for an unknown name.
pub fn detector_for(
    name: &str,
    seed: u64,
    data_set: Option<&str>,
) -> Result<Box<dyn Detector + Send>> {
    let train = DeepConfig {
        seed,
        ..DeepConfig::default()
    };
    Ok(match name {
        "pcl" => {
            let cfg = PclConfig {
                train,
                ..PclConfig::default()
            };
            Box::new(Pcl::new(match data_set {
                Some(set) => cfg.for_data_set(set),
                None => cfg,
            }))
        }
        "iforest" => Box::new(IsolationForest::new(IsolationForestConfig {
            seed,
            ..IsolationForestConfig::default()
        })),
        "ecod" => Box::new(Ecod::new()),
        "knn" => Box::new(Knn::new(KnnConfig {
            seed,
            ..KnnConfig::default()
        })),
        "icl" => Box::new(Icl::new(IclConfig {
            train,
            ..IclConfig::default()
        })),
        "neutral" => Box::new(Neutral::new(NeutralConfig {
            train,
            ..NeutralConfig::default()
        })),
        other => {
            return Err(MlError::InvalidInput(format!(
                "unknown detector `{other}` (expected one of {})",
                DETECTORS.join(", ")
            )))
        }
    })
}

/// One detector on one seed's split.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SeedResult {
    /// The split's seed (also the detector's).
    pub seed: u64,
    /// AUC-ROC on the test split.
    pub auc_roc: f64,
    /// Average precision on the test split.
    pub auc_pr: f64,
    /// Wall seconds of `fit`.
    pub fit_s: f64,
    /// Wall seconds of `score` on the test split.
    pub score_s: f64,
}

/// Splits `data` with `seed`, fits detector `name` (seeded with `seed`) on the training part and
/// scores the test part.
///
/// # Errors
/// An unknown name, a data set the protocol cannot split, or the detector's own errors.
pub fn run_seed(data: &Labelled, name: &str, seed: u64) -> Result<SeedResult> {
    run_seed_capped(data, name, seed, None)
}

/// [`run_seed`] on [`protocol_split_capped`](super::data::protocol_split_capped)'s split: at most `max_rows` rows of `data` (a
/// stratified seeded subsample, ADBench's rule for large sets).
///
/// # Errors
/// As [`run_seed`].
pub fn run_seed_capped(
    data: &Labelled,
    name: &str,
    seed: u64,
    max_rows: Option<usize>,
) -> Result<SeedResult> {
    run_seed_on(data, None, name, seed, max_rows)
}

/// [`run_seed_capped`] with the detector built by [`detector_for`] for the data set named
/// `data_set` (what `pardis ml anomaly` runs: PCL-AD with the authors' per-set settings).
///
/// # Errors
/// As [`run_seed`].
pub fn run_seed_on(
    data: &Labelled,
    data_set: Option<&str>,
    name: &str,
    seed: u64,
    max_rows: Option<usize>,
) -> Result<SeedResult> {
    run_seed_protocol(data, data_set, name, seed, max_rows, Protocol::Pclad)
}

/// [`run_seed_on`] on `protocol`'s split ([`Protocol::split`]).
///
/// # Errors
/// As [`run_seed`].
pub fn run_seed_protocol(
    data: &Labelled,
    data_set: Option<&str>,
    name: &str,
    seed: u64,
    max_rows: Option<usize>,
    protocol: Protocol,
) -> Result<SeedResult> {
    let mut det = detector_for(name, seed, data_set)?;
    run_seed_with(data, det.as_mut(), seed, max_rows, protocol)
}

/// [`run_seed_protocol`] with a detector the caller built (any configuration): `protocol`'s
/// split of `seed`, fit on its training rows, score its test rows.
///
/// # Errors
/// A data set the protocol cannot split, or the detector's own errors.
pub fn run_seed_with(
    data: &Labelled,
    det: &mut dyn Detector,
    seed: u64,
    max_rows: Option<usize>,
    protocol: Protocol,
) -> Result<SeedResult> {
    let split = protocol.split(data, seed, max_rows)?;
    let t0 = Instant::now();
    det.fit(&split.train)?;
    let t1 = Instant::now();
    let scores = det.score(&split.test)?;
    let t2 = Instant::now();
    Ok(SeedResult {
        seed,
        auc_roc: auc_roc(&scores, &split.test_labels)?,
        auc_pr: average_precision(&scores, &split.test_labels)?,
        fit_s: (t1 - t0).as_secs_f64(),
        score_s: (t2 - t1).as_secs_f64(),
    })
}

/// Average rank of each column over the rows of `table` (`table[set][detector]`, higher is
/// better, rank 1 = best, ties share the mean of their ranks); a `None` cell (detector failed or
/// not run) is ranked last on that row.
pub fn average_ranks(table: &[Vec<Option<f64>>]) -> Vec<f64> {
    let cols = table.first().map_or(0, Vec::len);
    let mut sum = vec![0.0; cols];
    for row in table {
        let key = |c: usize| row[c].unwrap_or(f64::NEG_INFINITY);
        for (c, s) in sum.iter_mut().enumerate() {
            let better = (0..cols).filter(|&o| key(o) > key(c)).count() as f64;
            let equal = (0..cols).filter(|&o| key(o) == key(c)).count() as f64;
            *s += better + (equal + 1.0) / 2.0;
        }
    }
    sum.iter().map(|s| s / table.len().max(1) as f64).collect()
}
