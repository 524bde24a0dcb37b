//! k-nearest-neighbour distance (Ramaswamy, Rastogi & Shim, SIGMOD 2000): a row's score is its
//! Euclidean distance to the k-th nearest training row (PyOD's `KNN(method="largest")`).

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
            .map(|row| {
                // Keep the k smallest squared distances in a sorted buffer.
                let mut best = vec![f64::INFINITY; k];
                for r in reference.data.chunks_exact(x.cols) {
                    let d: f64 = r.iter().zip(row).map(|(a, b)| (a - b) * (a - b)).sum();
                    if d < best[k - 1] {
                        let pos = best.partition_point(|&b| b <= d);
                        best.insert(pos, d);
                        best.pop();
                    }
                }
                best[k - 1].sqrt()
            })
            .collect())
    }
}
