//! k-nearest-neighbour distance (Ramaswamy, Rastogi & Shim, SIGMOD 2000): a row's score is its
//! Euclidean distance to the k-th nearest training row (PyOD's `KNN(method="largest")`).
//! Brute force over the reference rows, vectorised and with partial distance pruning.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{check_cols, Detector, Features, InputError};
use crate::Result;

/// k-NN detector hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnnConfig {
    /// Neighbour rank whose distance is the score, default 5 (PyOD's default).
    pub k: usize,
    /// At most this many training rows are kept as reference points (a seeded uniform
    /// sub-sample beyond it), default 20 000, so scoring stays O(rows × 20 000 × d).
    pub max_reference: usize,
    /// Seed of the sub-sample, default 0.
    pub seed: u64,
}

impl Default for KnnConfig {
    fn default() -> Self {
        Self {
            k: 5,
            max_reference: 20_000,
            seed: 0,
        }
    }
}

/// The k-NN distance detector (brute force, parallel over scored rows).
#[derive(Debug, Clone)]
pub struct Knn {
    cfg: KnnConfig,
    reference: Option<Features>,
}

impl Knn {
    /// An unfitted detector.
    pub fn new(cfg: KnnConfig) -> Self {
        Self {
            cfg,
            reference: None,
        }
    }
}

impl Detector for Knn {
    fn name(&self) -> &'static str {
        "knn"
    }

    fn fit(&mut self, train: &Features) -> Result<()> {
        if train.rows < self.cfg.k.max(1) {
            return Err(InputError::Unsupported(format!(
                "k-NN with k = {} needs at least k training rows, got {}",
                self.cfg.k, train.rows
            ))
            .into());
        }
        self.reference = Some(if train.rows > self.cfg.max_reference {
            let mut rng = ChaCha8Rng::seed_from_u64(self.cfg.seed);
            let mut idx = sample(&mut rng, train.rows, self.cfg.max_reference).into_vec();
            idx.sort_unstable();
            train.select(&idx)
        } else {
            train.clone()
        });
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols(self.reference.as_ref().map(|r| r.cols), x)?;
        let reference = self.reference.as_ref().ok_or(InputError::NotFitted)?;
        let k = self.cfg.k.max(1);
        Ok(x.data
            .par_chunks(x.cols)
            .map(|row| kth_distance(row, &reference.data, k))
            .collect())
    }
}

/// Lanes of the distance accumulator: independent partial sums the compiler keeps in SIMD
/// registers (an in-order `f64` sum cannot be vectorised).
const LANES: usize = 8;

/// Squared distance between `a` and `b` accumulated in [`LANES`] interleaved partial sums, or
/// `None` as soon as a prefix of at least 64 features already exceeds `bound` (partial distance
/// pruning: every later term is non-negative, so that reference cannot be among the k nearest).
fn squared_distance_below(a: &[f64], b: &[f64], bound: f64) -> Option<f64> {
    let mut acc = [0.0f64; LANES];
    let (ca, cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (i, (x, y)) in ca.zip(cb).enumerate() {
        for l in 0..LANES {
            let t = x[l] - y[l];
            acc[l] += t * t;
        }
        if i % 8 == 7 && acc.iter().sum::<f64>() > bound {
            return None;
        }
    }
    let tail: f64 = ra.iter().zip(rb).map(|(x, y)| (x - y) * (x - y)).sum();
    Some(acc.iter().sum::<f64>() + tail)
}

/// The Euclidean distance from `row` to its `k`-th nearest row of `reference` (row-major, rows
/// of `row.len()` values): the k smallest squared distances kept in a sorted buffer.
fn kth_distance(row: &[f64], reference: &[f64], k: usize) -> f64 {
    let mut best = vec![f64::INFINITY; k];
    for r in reference.chunks_exact(row.len()) {
        if let Some(d) = squared_distance_below(r, row, best[k - 1]) {
            if d < best[k - 1] {
                let pos = best.partition_point(|&b| b <= d);
                best.insert(pos, d);
                best.pop();
            }
        }
    }
    best[k - 1].sqrt()
}
