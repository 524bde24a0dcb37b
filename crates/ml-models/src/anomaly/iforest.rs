//! Isolation Forest (Liu, Ting & Zhou, ICDM 2008) as scikit-learn implements it: sub-samples of
//! ψ = min(256, n) rows drawn without replacement, trees grown to depth ⌈log₂ ψ⌉ on random
//! features (constant ones skipped) with uniform random thresholds, and the score
//! `2^(−E[h(x)] / c(ψ))` where a leaf holding `m` training rows adds `c(m)` to the depth.

use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{check_cols, Detector, Features};
use crate::Result;

/// The Euler–Mascheroni constant, used in the harmonic-number approximation of `c(n)`.
const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// Isolation Forest hyper-parameters (defaults are the paper's and scikit-learn's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsolationForestConfig {
    /// Number of trees, default 100.
    pub trees: usize,
    /// Sub-sample size ψ per tree, default 256 (capped at the training rows).
    pub max_samples: usize,
    /// Seed of the sub-samples, features and thresholds, default 0.
    pub seed: u64,
}

impl Default for IsolationForestConfig {
    fn default() -> Self {
        Self {
            trees: 100,
            max_samples: 256,
            seed: 0,
        }
    }
}

/// `c(n)`, the average path length of an unsuccessful search in a binary search tree of `n`
/// nodes: `2 H(n−1) − 2(n−1)/n` with `H(i) ≈ ln i + γ`; `c(2) = 1`, `c(n ≤ 1) = 0`.
pub fn average_path_length(n: usize) -> f64 {
    match n {
        0 | 1 => 0.0,
        2 => 1.0,
        _ => {
            let n = n as f64;
            2.0 * ((n - 1.0).ln() + EULER_GAMMA) - 2.0 * (n - 1.0) / n
        }
    }
}

/// A node: a split on `feature` at `threshold` (rows with `x ≤ threshold` go left), or a leaf
/// (`feature == LEAF`) whose `threshold` holds its path length `depth + c(size)`.
#[derive(Debug, Clone, Copy)]
struct Node {
    feature: u32,
    threshold: f64,
    left: u32,
    right: u32,
}

const LEAF: u32 = u32::MAX;

#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn grow(x: &Features, rows: &mut [usize], max_depth: usize, rng: &mut ChaCha8Rng) -> Self {
        let mut nodes = Vec::with_capacity(2 * rows.len());
        let mut features: Vec<usize> = (0..x.cols).collect();
        grow_node(x, rows, 0, max_depth, rng, &mut nodes, &mut features);
        Self { nodes }
    }

    fn path_length(&self, row: &[f64]) -> f64 {
        let mut k = 0;
        loop {
            let n = self.nodes[k];
            if n.feature == LEAF {
                return n.threshold;
            }
            k = if row[n.feature as usize] <= n.threshold {
                n.left
            } else {
                n.right
            } as usize;
        }
    }
}

/// Grows the subtree of `rows` at `depth`, returns its node index.
fn grow_node(
    x: &Features,
    rows: &mut [usize],
    depth: usize,
    max_depth: usize,
    rng: &mut ChaCha8Rng,
    nodes: &mut Vec<Node>,
    features: &mut [usize],
) -> u32 {
    let me = nodes.len() as u32;
    let leaf = Node {
        feature: LEAF,
        threshold: depth as f64 + average_path_length(rows.len()),
        left: 0,
        right: 0,
    };
    nodes.push(leaf);
    if depth >= max_depth || rows.len() <= 1 {
        return me;
    }
    // Draw features without replacement until one is not constant on these rows.
    let mut remaining = features.len();
    let split = loop {
        if remaining == 0 {
            break None;
        }
        let pick = rng.random_range(0..remaining);
        features.swap(pick, remaining - 1);
        remaining -= 1;
        let f = features[remaining];
        let (lo, hi) = rows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                let v = x.data[r * x.cols + f];
                (lo.min(v), hi.max(v))
            });
        if hi > lo {
            let mut t = lo + rng.random::<f64>() * (hi - lo);
            if t >= hi {
                t = lo;
            }
            break Some((f, t));
        }
    };
    let Some((f, t)) = split else {
        return me;
    };
    // Partition rows in place: x ≤ t first.
    let mut mid = 0;
    for i in 0..rows.len() {
        if x.data[rows[i] * x.cols + f] <= t {
            rows.swap(i, mid);
            mid += 1;
        }
    }
    let (l, r) = rows.split_at_mut(mid);
    let left = grow_node(x, l, depth + 1, max_depth, rng, nodes, features);
    let right = grow_node(x, r, depth + 1, max_depth, rng, nodes, features);
    nodes[me as usize] = Node {
        feature: f as u32,
        threshold: t,
        left,
        right,
    };
    me
}

/// An Isolation Forest detector.
#[derive(Debug, Clone)]
pub struct IsolationForest {
    cfg: IsolationForestConfig,
    trees: Vec<Tree>,
    psi: usize,
    cols: Option<usize>,
}

impl IsolationForest {
    /// An unfitted forest.
    pub fn new(cfg: IsolationForestConfig) -> Self {
        Self {
            cfg,
            trees: Vec::new(),
            psi: 0,
            cols: None,
        }
    }
}

impl Detector for IsolationForest {
    fn name(&self) -> &'static str {
        "iforest"
    }

    fn fit(&mut self, train: &Features) -> Result<()> {
        let psi = self.cfg.max_samples.clamp(1, train.rows);
        let max_depth = (psi.max(2) as f64).log2().ceil() as usize;
        let seed = self.cfg.seed;
        self.trees = (0..self.cfg.trees.max(1))
            .into_par_iter()
            .map(|t| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                rng.set_stream(t as u64);
                let mut rows = sample(&mut rng, train.rows, psi).into_vec();
                Tree::grow(train, &mut rows, max_depth, &mut rng)
            })
            .collect();
        self.psi = psi;
        self.cols = Some(train.cols);
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols(self.cols, x)?;
        let norm = average_path_length(self.psi).max(1.0) * self.trees.len() as f64;
        Ok(x.data
            .par_chunks(x.cols)
            .map(|row| {
                let h: f64 = self.trees.iter().map(|t| t.path_length(row)).sum();
                (-h / norm).exp2()
            })
            .collect())
    }
}
