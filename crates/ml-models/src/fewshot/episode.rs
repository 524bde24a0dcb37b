//! Seeded N-way K-shot episodes with Q queries per class, and accuracy with a 95 % confidence
//! interval over episodes.

use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::{MlError, Result};

/// The shape of an episode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EpisodeConfig {
    /// Classes per episode (N-way).
    pub n: usize,
    /// Support instances per class (K-shot).
    pub k: usize,
    /// Query instances per class.
    pub q: usize,
}

/// One episode: relation indices and, per class, instance indices within that relation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Episode {
    /// The `n` relations (indices into the sampler's relation list), in class order.
    pub classes: Vec<usize>,
    /// `support[i]`: `k` instance indices of relation `classes[i]`.
    pub support: Vec<Vec<usize>>,
    /// `query[i]`: `q` instance indices of relation `classes[i]`, disjoint from `support[i]`.
    pub query: Vec<Vec<usize>>,
}

/// Draws episodes from relations of known sizes with a ChaCha8 stream fixed by a seed.
#[derive(Debug, Clone)]
pub struct EpisodeSampler {
    sizes: Vec<usize>,
    cfg: EpisodeConfig,
    rng: ChaCha8Rng,
}

impl EpisodeSampler {
    /// A sampler over relations with `sizes[r]` instances each (`ids[r]` names them in errors).
    ///
    /// Errors: [`MlError::InvalidInput`] when `n`, `k` or `q` is 0, `k + q` overflows, or there
    /// are fewer than `n` relations, [`MlError::TooFewInstances`] when a relation has fewer than `k + q` instances.
    pub fn new(sizes: &[usize], ids: &[&str], cfg: EpisodeConfig, seed: u64) -> Result<Self> {
        if cfg.n == 0 || cfg.k == 0 || cfg.q == 0 {
            return Err(MlError::InvalidInput(format!(
                "episodes need N, K, Q ≥ 1, got {cfg:?}"
            )));
        }
        if sizes.len() < cfg.n {
            return Err(MlError::InvalidInput(format!(
                "{}-way episodes need at least {} relations, the data has {}",
                cfg.n,
                cfg.n,
                sizes.len()
            )));
        }
        let need = cfg.k.checked_add(cfg.q).ok_or_else(|| {
            MlError::InvalidInput(format!(
                "K + Q = {} + {} instances per relation is more than any data holds",
                cfg.k, cfg.q
            ))
        })?;
        if let Some(r) = sizes.iter().position(|&s| s < need) {
            return Err(MlError::TooFewInstances {
                relation: ids
                    .get(r)
                    .map_or_else(|| format!("#{r}"), |s| s.to_string()),
                have: sizes[r],
                need,
            });
        }
        Ok(Self {
            sizes: sizes.to_vec(),
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }

    /// The episode shape.
    pub fn config(&self) -> EpisodeConfig {
        self.cfg
    }

    /// The next episode: `n` distinct relations, then `k + q` distinct instances of each (the
    /// first `k` support, the rest queries).
    pub fn sample(&mut self) -> Episode {
        let EpisodeConfig { n, k, q } = self.cfg;
        let classes = sample(&mut self.rng, self.sizes.len(), n).into_vec();
        let mut support = Vec::with_capacity(n);
        let mut query = Vec::with_capacity(n);
        for &c in &classes {
            let mut picks = sample(&mut self.rng, self.sizes[c], k + q).into_vec();
            query.push(picks.split_off(k));
            support.push(picks);
        }
        Episode {
            classes,
            support,
            query,
        }
    }
}

/// Mean accuracy over episodes with the half-width of its normal-approximation 95 % confidence
/// interval, `1.96 · s/√E` (s: the sample standard deviation of the per-episode accuracies).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Accuracy {
    /// Mean of the per-episode accuracies.
    pub mean: f64,
    /// Half-width of the 95 % confidence interval.
    pub ci95: f64,
    /// Episodes evaluated.
    pub episodes: usize,
}

/// [`Accuracy`] of per-episode accuracies (empty input: mean NaN).
pub fn accuracy_ci(per_episode: &[f64]) -> Accuracy {
    let e = per_episode.len();
    let mean = per_episode.iter().sum::<f64>() / e as f64;
    let var = if e > 1 {
        per_episode.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (e - 1) as f64
    } else {
        0.0
    };
    Accuracy {
        mean,
        ci95: 1.96 * (var / e.max(1) as f64).sqrt(),
        episodes: e,
    }
}
