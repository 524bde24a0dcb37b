//! ECOD, unsupervised outlier detection with empirical cumulative distribution functions (Li,
//! Zhao, Hu, Botta, Ionescu & Chen, TKDE 2022). Parameter-free.
//!
//! Per feature j the training column gives a left-tail ECDF `F_l(v) = P(X_j ≤ v)` and a
//! right-tail one `F_r(v) = P(X_j ≥ v)`. A scored row is treated as one more sample appended to
//! the training data (`F = (count + 1) / (n + 1)`), so tail probabilities stay positive, no
//! score is infinite, and a row's score does not depend on the other scored rows. PyOD's
//! `ECOD.decision_function` instead recomputes the ECDFs on training ∪ all scored rows.
//! With `U = −ln F`, the feature's outlyingness is `max(U_skew, (U_l + U_r)/2)` where `U_skew`
//! is `U_l` for a left-skewed training column, `U_r` for a right-skewed one and `U_l + U_r` for
//! a symmetric (or constant) one; the score sums this over features.

use rayon::prelude::*;

use super::{check_cols, Detector, Features};
use crate::Result;

/// The ECOD detector.
#[derive(Debug, Clone, Default)]
pub struct Ecod {
    /// Per feature: the sorted training column and the sign of its skewness.
    columns: Vec<(Vec<f64>, f64)>,
}

impl Ecod {
    /// An unfitted detector (ECOD has no hyper-parameters).
    pub fn new() -> Self {
        Self::default()
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

impl Detector for Ecod {
    fn name(&self) -> &'static str {
        "ecod"
    }

    fn fit(&mut self, train: &Features) -> Result<()> {
        self.columns = (0..train.cols)
            .into_par_iter()
            .map(|j| {
                let mut col: Vec<f64> = (0..train.rows)
                    .map(|i| train.data[i * train.cols + j])
                    .collect();
                let s = skew_sign(&col);
                col.sort_unstable_by(f64::total_cmp);
                (col, s)
            })
            .collect();
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols((!self.columns.is_empty()).then_some(self.columns.len()), x)?;
        Ok(x.data
            .par_chunks(x.cols)
            .map(|row| {
                row.iter()
                    .zip(&self.columns)
                    .map(|(&v, (col, skew))| {
                        let n1 = (col.len() + 1) as f64;
                        let le = col.partition_point(|&c| c <= v) as f64;
                        let ge = (col.len() - col.partition_point(|&c| c < v)) as f64;
                        let ul = -((le + 1.0) / n1).ln();
                        let ur = -((ge + 1.0) / n1).ln();
                        let uskew = if *skew < 0.0 {
                            ul
                        } else if *skew > 0.0 {
                            ur
                        } else {
                            ul + ur
                        };
                        uskew.max(0.5 * (ul + ur))
                    })
                    .sum()
            })
            .collect())
    }
}
