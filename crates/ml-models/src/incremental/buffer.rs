//! The bounded replay memory: `M` slots split between labelled exemplars and unlabelled inputs.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{MlError, Result};

/// How labelled exemplars are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Reservoir sampling (Vitter's algorithm R) over every labelled row offered: each row seen
    /// so far is in memory with equal probability; classes get memory in proportion to their
    /// share of the stream.
    Reservoir,
    /// iCaRL herding (Rebuffi et al. 2017): an equal quota per class seen; within a class the
    /// rows whose running feature mean best approximates the class mean, in that order, so that
    /// shrinking a class keeps its best prefix.
    Herding,
}

/// Size and split of the memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BufferConfig {
    /// Total slots `M`.
    pub capacity: usize,
    /// Fraction of `M` for labelled exemplars (`round(f · M)`); the rest holds unlabelled rows.
    pub labeled_fraction: f64,
    /// Policy for labelled exemplars (unlabelled rows always use reservoir sampling).
    pub labeled_selection: Selection,
}

/// One stored row.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Features.
    pub x: Vec<f32>,
    /// Head target, `None` for an unlabelled row.
    pub y: Option<u32>,
    /// The model's logits over the classes seen when the row was stored (empty when the method
    /// does not record them).
    pub logits: Vec<f32>,
    /// The prediction recorded when the row was stored (the temporal method with
    /// [`ReplayTarget::Recorded`](super::ReplayTarget::Recorded)): probabilities over the head
    /// outputs `0..record.len()` (the classes seen then), zero outside `task_classes` when the
    /// recorder was task-aware; empty when the method records nothing.
    pub record: Vec<f32>,
    /// Head outputs `start..end` of the task the row arrived with (task boundaries are known
    /// during training; the row's own class is not).
    pub task_classes: (u32, u32),
}

/// A memory of at most `capacity` rows: `labeled_capacity()` labelled exemplars and
/// `unlabeled_capacity()` unlabelled rows.
#[derive(Debug, Clone)]
pub struct MemoryBuffer {
    cfg: BufferConfig,
    labeled_cap: usize,
    labeled: Vec<Sample>,
    unlabeled: Vec<Sample>,
    seen_labeled: u64,
    seen_unlabeled: u64,
    rng: ChaCha8Rng,
}

impl MemoryBuffer {
    /// An empty memory; `seed` drives the reservoir draws.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] unless `0 ≤ labeled_fraction ≤ 1`.
    pub fn new(cfg: BufferConfig, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&cfg.labeled_fraction) {
            return Err(MlError::InvalidInput(format!(
                "labelled fraction {} is not in [0, 1]",
                cfg.labeled_fraction
            )));
        }
        let labeled_cap =
            ((cfg.capacity as f64 * cfg.labeled_fraction).round() as usize).min(cfg.capacity);
        Ok(Self {
            cfg,
            labeled_cap,
            labeled: Vec::new(),
            unlabeled: Vec::new(),
            seen_labeled: 0,
            seen_unlabeled: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BufferConfig {
        &self.cfg
    }

    /// Slots for labelled exemplars.
    pub fn labeled_capacity(&self) -> usize {
        self.labeled_cap
    }

    /// Slots for unlabelled rows.
    pub fn unlabeled_capacity(&self) -> usize {
        self.cfg.capacity - self.labeled_cap
    }

    /// Rows stored (labelled + unlabelled); never more than `capacity`.
    pub fn len(&self) -> usize {
        self.labeled.len() + self.unlabeled.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The labelled exemplars.
    pub fn labeled(&self) -> &[Sample] {
        &self.labeled
    }

    /// The unlabelled rows.
    pub fn unlabeled(&self) -> &[Sample] {
        &self.unlabeled
    }

    /// Offers one row to the memory: a labelled one (`y` is `Some`) to the labelled part, an
    /// unlabelled one to the unlabelled part, both by reservoir sampling. Returns whether it was
    /// stored.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] for a labelled row when the labelled policy is
    /// [`Selection::Herding`] (use [`MemoryBuffer::add_herded`]).
    pub fn offer(&mut self, s: Sample) -> Result<bool> {
        if s.y.is_some() {
            if self.cfg.labeled_selection == Selection::Herding {
                return Err(MlError::InvalidInput(
                    "labelled exemplars of a herding memory are added with add_herded".into(),
                ));
            }
            let cap = self.labeled_cap;
            Ok(reservoir(
                &mut self.labeled,
                cap,
                &mut self.seen_labeled,
                &mut self.rng,
                s,
            ))
        } else {
            let cap = self.unlabeled_capacity();
            Ok(reservoir(
                &mut self.unlabeled,
                cap,
                &mut self.seen_unlabeled,
                &mut self.rng,
                s,
            ))
        }
    }

    /// Herding update after a task: every class (old and new) gets `labeled_capacity() / c`
    /// slots, `c` the number of classes then stored; old classes keep the prefix of their
    /// herding order, each new class (its labelled rows with one feature vector per row) gets
    /// its first rows in herding order. Rows without a label are ignored.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when a class's rows and features differ in number.
    pub fn add_herded(&mut self, new_classes: Vec<(Vec<Sample>, Vec<Vec<f32>>)>) -> Result<()> {
        let mut classes: Vec<u32> = self.labeled.iter().filter_map(|s| s.y).collect();
        classes.sort_unstable();
        classes.dedup();
        let fresh = new_classes.iter().filter(|(s, _)| !s.is_empty()).count();
        let total = classes.len() + fresh;
        if total == 0 {
            return Ok(());
        }
        let quota = self.labeled_cap / total;
        let mut kept = Vec::with_capacity(self.labeled_cap);
        for c in classes {
            kept.extend(
                self.labeled
                    .iter()
                    .filter(|s| s.y == Some(c))
                    .take(quota)
                    .cloned(),
            );
        }
        for (rows, feats) in new_classes {
            if rows.len() != feats.len() {
                return Err(MlError::InvalidInput(format!(
                    "{} rows but {} feature vectors",
                    rows.len(),
                    feats.len()
                )));
            }
            for i in herding_order(&feats, quota) {
                if rows[i].y.is_some() {
                    kept.push(rows[i].clone());
                }
            }
        }
        self.seen_labeled += kept.len() as u64;
        self.labeled = kept;
        Ok(())
    }

    /// Mutable access to stored rows (e.g. to refresh recorded logits); the number of rows
    /// cannot change through it.
    pub fn samples_mut(&mut self) -> impl Iterator<Item = &mut Sample> {
        self.labeled.iter_mut().chain(self.unlabeled.iter_mut())
    }
}

/// Algorithm R: the `seen`-th offer replaces a uniformly drawn slot with probability
/// `cap / seen` once the memory is full.
fn reservoir(
    mem: &mut Vec<Sample>,
    cap: usize,
    seen: &mut u64,
    rng: &mut ChaCha8Rng,
    s: Sample,
) -> bool {
    *seen += 1;
    if mem.len() < cap {
        mem.push(s);
        return true;
    }
    let j = rng.random_range(0..*seen);
    if (j as usize) < cap && j < mem.len() as u64 {
        mem[j as usize] = s;
        return true;
    }
    false
}

/// iCaRL herding: up to `m` distinct row indices of `features` (rows L2-normalised first), each
/// chosen so that the mean of the chosen rows stays closest to the mean of all rows.
pub fn herding_order(features: &[Vec<f32>], m: usize) -> Vec<usize> {
    let unit: Vec<Vec<f64>> = features
        .iter()
        .map(|f| {
            let n = f
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>()
                .sqrt();
            f.iter().map(|&v| f64::from(v) / n.max(1e-12)).collect()
        })
        .collect();
    let Some(d) = unit.first().map(Vec::len) else {
        return Vec::new();
    };
    let mut mu = vec![0.0f64; d];
    for u in &unit {
        mu.iter_mut()
            .zip(u)
            .for_each(|(a, b)| *a += b / unit.len() as f64);
    }
    let mut sum = vec![0.0f64; d];
    let mut used = vec![false; unit.len()];
    let mut order = Vec::with_capacity(m.min(unit.len()));
    for k in 1..=m.min(unit.len()) {
        let mut best = (f64::INFINITY, 0usize);
        for (i, u) in unit.iter().enumerate() {
            if used[i] {
                continue;
            }
            let dist: f64 = (0..d)
                .map(|j| {
                    let e = mu[j] - (sum[j] + u[j]) / k as f64;
                    e * e
                })
                .sum();
            if dist < best.0 {
                best = (dist, i);
            }
        }
        used[best.1] = true;
        sum.iter_mut().zip(&unit[best.1]).for_each(|(a, b)| *a += b);
        order.push(best.1);
    }
    order
}
