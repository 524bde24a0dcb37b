//! ECOD, unsupervised outlier detection with empirical cumulative distribution functions (Li,
//! Zhao, Hu, Botta, Ionescu & Chen, TKDE 2022). No hyper-parameters; [`EcodConfig`] only picks
//! between the published variants of two details.
//!
//! Per feature j a column of reference rows gives a left-tail ECDF `F_l(v) = P(X_j ≤ v)` and a
//! right-tail one `F_r(v) = P(X_j ≥ v)`, and `U_l = −ln F_l`, `U_r = −ln F_r`. `U_skew` is `U_l`
//! for a left-skewed reference column, `U_r` for a right-skewed one and `U_l + U_r` for a
//! symmetric (or constant) one (skewness sign as `scipy.stats.skew`'s, |skewness| < 1e-9 counts
//! as symmetric). Which rows are the reference is [`EcdfRows`]; how the `U`s become one score is
//! [`Aggregation`]. The defaults (training rows, per-feature `max(U_skew, (U_l + U_r)/2)`) keep a
//! row's score independent of the other scored rows, as the [`Detector`] contract asks;
//! `EcdfRows::TrainingAndScored` with `Aggregation::FeatureMax` reproduces PyOD 3.x's
//! `ECOD.decision_function` (scripts/compare-anomaly checks it).

use rayon::prelude::*;

use super::{check_cols, Detector, Features};
use crate::Result;

/// Which rows the ECDFs and skewness signs are computed on when scoring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcdfRows {
    /// The training rows only, with the scored row counted as one more sample:
    /// `F_l(v) = (#{train ≤ v} + 1) / (n + 1)` (and `F_r` alike), skewness of the training
    /// column. Tail probabilities stay positive, no score is infinite, and a row's score depends
    /// only on the training rows and itself (the [`Detector`] contract). The default.
    #[default]
    Training,
    /// Training rows ∪ every row of the batch passed to [`Detector::score`], as PyOD's
    /// `ECOD.decision_function` (it concatenates `X_train` with the rows it scores):
    /// `F_l(v) = #{train ∪ batch ≤ v} / (n + m)` (the row itself is counted, so `F ≥ 1/(n+m)`),
    /// skewness of the union column. **Transductive**: a row's score depends on which other rows
    /// are scored with it (scoring rows one at a time gives different scores than scoring them
    /// together), an explicit exception to the [`Detector`] contract, like a batch-dependent
    /// term of a deep model's loss would be. For comparisons with PyOD only.
    TrainingAndScored,
}

impl EcdfRows {
    /// `training` or `training+scored` (the CLI's spelling).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "training" => Some(Self::Training),
            "training+scored" => Some(Self::TrainingAndScored),
            _ => None,
        }
    }

    /// The name [`from_name`](Self::from_name) reads.
    ///
    /// ```
    /// use ml_models::anomaly::EcdfRows;
    /// for rows in [EcdfRows::Training, EcdfRows::TrainingAndScored] {
    ///     assert_eq!(EcdfRows::from_name(rows.name()), Some(rows));
    /// }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::Training => "training",
            Self::TrainingAndScored => "training+scored",
        }
    }
}

/// How the per-feature tail scores `U_l`, `U_r`, `U_skew` become a row's score.
///
/// The paper and PyOD disagree, so each is available: the paper's Algorithm 1 takes the largest
/// of three sums over features, PyOD sums a per-feature maximum (and changed which one between
/// releases).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Aggregation {
    /// `Σ_j max(U_skew, (U_l + U_r)/2)`: PyOD's first ECOD releases (0.9.x); pardis's default
    /// (unchanged since the detector landed).
    #[default]
    FeatureMean,
    /// `Σ_j max(U_skew, U_l, U_r)`: PyOD 3.x (checked against 3.6.7's `ecod.py`).
    FeatureMax,
    /// `max(Σ_j U_l, Σ_j U_r, Σ_j U_auto)` with `U_auto = U_l` where the reference column's
    /// skewness is negative and `U_r` otherwise: the paper's Algorithm 1 (`O_left-only`,
    /// `O_right-only`, `O_auto`, the score their maximum).
    Paper,
}

impl Aggregation {
    /// `feature-mean`, `feature-max` or `paper` (the CLI's spelling).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "feature-mean" => Some(Self::FeatureMean),
            "feature-max" => Some(Self::FeatureMax),
            "paper" => Some(Self::Paper),
            _ => None,
        }
    }

    /// The name [`from_name`](Self::from_name) reads.
    ///
    /// ```
    /// use ml_models::anomaly::Aggregation;
    /// for a in [Aggregation::FeatureMean, Aggregation::FeatureMax, Aggregation::Paper] {
    ///     assert_eq!(Aggregation::from_name(a.name()), Some(a));
    /// }
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::FeatureMean => "feature-mean",
            Self::FeatureMax => "feature-max",
            Self::Paper => "paper",
        }
    }
}

/// ECOD's variant choices. The default is inductive (`EcdfRows::Training`) with
/// `Aggregation::FeatureMean`; [`EcodConfig::pyod`] is PyOD 3.x's `decision_function`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EcodConfig {
    /// Rows the ECDFs are computed on (default [`EcdfRows::Training`]).
    pub ecdf: EcdfRows,
    /// Per-row aggregation (default [`Aggregation::FeatureMean`]).
    pub aggregation: Aggregation,
}

impl EcodConfig {
    /// PyOD 3.x's `ECOD().fit(train).decision_function(x)`: ECDFs on training ∪ scored rows,
    /// `Σ_j max(U_skew, U_l, U_r)`. Transductive (see [`EcdfRows::TrainingAndScored`]).
    pub fn pyod() -> Self {
        Self {
            ecdf: EcdfRows::TrainingAndScored,
            aggregation: Aggregation::FeatureMax,
        }
    }
}

/// The ECOD detector.
#[derive(Debug, Clone, Default)]
pub struct Ecod {
    config: EcodConfig,
    /// Per feature: the sorted training column and the sign of its skewness.
    columns: Vec<(Vec<f64>, f64)>,
}

impl Ecod {
    /// An unfitted detector with the default [`EcodConfig`].
    pub fn new() -> Self {
        Self::default()
    }

    /// An unfitted detector with `config`.
    pub fn with_config(config: EcodConfig) -> Self {
        Self {
            config,
            columns: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> EcodConfig {
        self.config
    }
}

/// The sign of the (biased, as `scipy.stats.skew`) sample skewness of `v`; 0 when constant or
/// numerically symmetric (|skewness| < 1e-9, where rounding alone would pick the sign).
fn skew_sign(v: &[f64]) -> f64 {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let (m2, m3) = v.iter().fold((0.0, 0.0), |(m2, m3), &x| {
        let d = x - mean;
        (m2 + d * d, m3 + d * d * d)
    });
    if m2 <= f64::EPSILON * mean.abs().max(1.0) * n {
        return 0.0;
    }
    let s = m3 / n / (m2 / n).powf(1.5);
    if s > 1e-9 {
        1.0
    } else if s < -1e-9 {
        -1.0
    } else {
        0.0
    }
}

/// The sorted column `j` of `rows` and its skewness sign.
fn sorted_column<'a>(rows: impl Iterator<Item = &'a [f64]>, j: usize) -> (Vec<f64>, f64) {
    let mut col: Vec<f64> = rows.map(|r| r[j]).collect();
    let s = skew_sign(&col);
    col.sort_unstable_by(f64::total_cmp);
    (col, s)
}

impl Detector for Ecod {
    fn name(&self) -> &'static str {
        "ecod"
    }

    fn fit(&mut self, train: &Features) -> Result<()> {
        self.columns = (0..train.cols)
            .into_par_iter()
            .map(|j| sorted_column(train.data.chunks(train.cols), j))
            .collect();
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols((!self.columns.is_empty()).then_some(self.columns.len()), x)?;
        // Reference columns, and the count added to each tail count (and to the column length):
        // 1 for the scored row appended to the training rows, 0 when it is already among them.
        let union: Vec<(Vec<f64>, f64)>;
        let (columns, extra) = match self.config.ecdf {
            EcdfRows::Training => (&self.columns, 1.0),
            EcdfRows::TrainingAndScored => {
                union = self
                    .columns
                    .par_iter()
                    .enumerate()
                    .map(|(j, (train, _))| {
                        let rows = x.data.chunks(x.cols).map(|r| &r[j..=j]);
                        let train = train.chunks(1);
                        sorted_column(train.chain(rows), 0)
                    })
                    .collect();
                (&union, 0.0)
            }
        };
        let aggregation = self.config.aggregation;
        Ok(x.data
            .par_chunks(x.cols)
            .map(|row| {
                let tails = row.iter().zip(columns).map(|(&v, (col, skew))| {
                    let n1 = col.len() as f64 + extra;
                    let le = col.partition_point(|&c| c <= v) as f64;
                    let ge = (col.len() - col.partition_point(|&c| c < v)) as f64;
                    // At least one count: the transductive mode's union holds the row itself,
                    // so this changes nothing for finite input, and keeps a NaN placed in a
                    // public field from scoring `+inf`.
                    let ul = -((le + extra).max(1.0) / n1).ln();
                    let ur = -((ge + extra).max(1.0) / n1).ln();
                    (ul, ur, *skew)
                });
                match aggregation {
                    Aggregation::FeatureMean => tails
                        .map(|(ul, ur, skew)| u_skew(ul, ur, skew).max(0.5 * (ul + ur)))
                        .sum(),
                    Aggregation::FeatureMax => tails
                        .map(|(ul, ur, skew)| u_skew(ul, ur, skew).max(ul.max(ur)))
                        .sum(),
                    Aggregation::Paper => {
                        let (l, r, auto) = tails.fold((0.0, 0.0, 0.0), |(l, r, a), (ul, ur, s)| {
                            (l + ul, r + ur, a + if s < 0.0 { ul } else { ur })
                        });
                        f64::max(l, r).max(auto)
                    }
                }
            })
            .collect())
    }
}

/// `U_l` for a left-skewed column (`skew < 0`), `U_r` for a right-skewed one, `U_l + U_r` for a
/// symmetric one.
fn u_skew(ul: f64, ur: f64, skew: f64) -> f64 {
    if skew < 0.0 {
        ul
    } else if skew > 0.0 {
        ur
    } else {
        ul + ur
    }
}
