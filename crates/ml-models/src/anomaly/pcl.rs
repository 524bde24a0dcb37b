//! PCL-AD: partition contrastive learning for tabular anomaly detection (Li, Wang, Xu, Li &
//! Zhou, Data Mining and Knowledge Discovery 2025), following the authors' public code
//! (yyzzlee/pclad) where the paper leaves details out.
//!
//! 1. The d features are cut at random into `m = min(n_trans + 1, d)` contiguous partitions; one
//!    is the anchor, kept as is in every view. Each other partition k (length r) has a frozen
//!    random MLP r → ⌈r/2⌉ → ⌈r/2⌉ → r (no bias, never trained); view k is the instance with
//!    partition k replaced by its MLP image, so each view embeds a different feature coupling.
//! 2. View 0, the spatial center, is the mean of views 1..K.
//! 3. A trained encoder d → 96 → 64 maps every view to the unit sphere (`z_k`).
//! 4. Local loss of an instance: `Σ_k ( log Σ_{j≠k} exp(z_k·z_j/τ) − z_k·z_0/τ ) / (K ln K)`
//!    (the transformed samples repel each other and resemble their center; `K ln K` is the
//!    loss of uniform similarities, so the term is ≈ 1 at initialisation), τ = 0.1.
//! 5. Global structure loss of instance i: `mean_j ((x̂_i·x̂_j − ẑ0_i·ẑ0_j)/τ)²` over the other
//!    instances j of the batch (j = i adds 0), `x̂` the L2-normalised input: the centers keep the similarities
//!    of the original instances. (A mean rather than a sum over j, so both terms have the same
//!    scale whatever the batch size.)
//! 6. Adam(W), lr 1e-3, weight decay 1e-5, batch 128 ([`DeepConfig`]); the anomaly score is the
//!    per-instance loss.
//!
//! **Deterministic single-sample scoring.** In training the global term compares an instance
//! with the rest of its batch, so a score would depend on which rows share the batch. pardis
//! scores instead against a fixed reference set: at the end of `fit`, `reference` training rows
//! (seeded sample, default 128 — one batch) and their centers `ẑ0` are frozen, and the global term
//! of a scored row is its mean over that set. A row's score depends only on the row.

use candle_core::{Tensor, D};
use rand::seq::index::sample;
use rand::Rng;

use super::deep::{
    l2_normalise, score_rows, to_tensor, train, view_contrast_loss, DeepConfig, Mlp,
};
use super::{check_cols, Detector, Features, InputError};
use crate::core::{ParamStore, SeededInit};
use crate::Result;

/// PCL-AD hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PclConfig {
    /// Transformed views (partitions besides the anchor), default 10; capped at d − 1.
    pub n_trans: usize,
    /// Temperature τ of both loss terms, default 0.1.
    pub tau: f64,
    /// Encoder hidden width, default 96 (24 × 4).
    pub hidden: usize,
    /// Representation size, default 64.
    pub rep: usize,
    /// Reference rows of the global term when scoring, default 128.
    pub reference: usize,
    /// Training loop settings.
    pub train: DeepConfig,
}

impl Default for PclConfig {
    fn default() -> Self {
        Self {
            n_trans: 10,
            tau: 0.1,
            hidden: 96,
            rep: 64,
            reference: 128,
            train: DeepConfig::default(),
        }
    }
}

#[derive(Debug)]
struct Model {
    /// Contiguous partitions `(start, len)`; `anchor` indexes the one kept as is.
    parts: Vec<(usize, usize)>,
    anchor: usize,
    /// One frozen MLP per partition (`None` for the anchor).
    maps: Vec<Option<Mlp>>,
    encoder: Mlp,
    tau: f64,
}

impl Model {
    /// Unit embeddings `[b, K+1, rep]` of the center (0) and the K views.
    fn embed(&self, x: &Tensor) -> Result<Tensor> {
        let pieces: Vec<Tensor> = self
            .parts
            .iter()
            .map(|&(s, l)| x.narrow(1, s, l))
            .collect::<candle_core::Result<_>>()?;
        let mut views = Vec::new();
        for (k, map) in self.maps.iter().enumerate() {
            let Some(map) = map else { continue };
            let mut v = pieces.clone();
            v[k] = map.forward(&pieces[k])?;
            views.push(Tensor::cat(&v, 1)?);
        }
        let views = Tensor::stack(&views, 1)?; // [b, K, d]
        let center = views.mean_keepdim(1)?;
        let all = Tensor::cat(&[center, views], 1)?; // [b, K+1, d]
        l2_normalise(&self.encoder.forward(&all)?)
    }

    /// Local loss `[b]` and centers `[b, rep]`.
    fn local(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let z = self.embed(x)?;
        let k = (self.parts.len() - 1) as f64;
        let local = (view_contrast_loss(&z, self.tau)? / (k * k.ln()))?;
        Ok((local, z.narrow(1, 0, 1)?.squeeze(1)?))
    }

    /// Global structure term `[b]`: mean over the `r` reference rows of the squared, τ-scaled
    /// gap between input and center similarities.
    fn structure(&self, x: &Tensor, z0: &Tensor, xr: &Tensor, zr: &Tensor) -> Result<Tensor> {
        let gx = l2_normalise(x)?.matmul(&l2_normalise(xr)?.t()?)?;
        let gz = z0.matmul(&zr.t()?)?;
        Ok(((gx - gz)? / self.tau)?.sqr()?.mean(D::Minus1)?)
    }
}

/// The PCL-AD detector.
#[derive(Debug)]
pub struct Pcl {
    cfg: PclConfig,
    model: Option<Model>,
    /// Frozen reference rows and their centers for the global term.
    reference: Option<(Tensor, Tensor)>,
    cols: Option<usize>,
    steps: usize,
}

impl Pcl {
    /// An unfitted detector.
    pub fn new(cfg: PclConfig) -> Self {
        Self {
            cfg,
            model: None,
            reference: None,
            cols: None,
            steps: 0,
        }
    }

    /// Optimiser steps taken by the last `fit`.
    pub fn steps(&self) -> usize {
        self.steps
    }
}

impl Detector for Pcl {
    fn name(&self) -> &'static str {
        "pcl"
    }

    fn fit(&mut self, train_x: &Features) -> Result<()> {
        let d = train_x.cols;
        if d < 3 {
            return Err(InputError::Unsupported(format!(
                "PCL-AD needs at least 3 features (anchor + 2 views), got {d}"
            ))
            .into());
        }
        let mut init = SeededInit::new(self.cfg.train.seed);
        let m = (self.cfg.n_trans + 1).clamp(3, d);
        let mut cuts = sample(init.rng(), d - 1, m - 1).into_vec();
        cuts.iter_mut().for_each(|c| *c += 1);
        cuts.sort_unstable();
        let mut parts = Vec::with_capacity(m);
        let mut start = 0;
        for &c in cuts.iter().chain(std::iter::once(&d)) {
            parts.push((start, c - start));
            start = c;
        }
        let anchor = init.rng().random_range(0..m);
        let mut store = ParamStore::new();
        let mut maps = Vec::with_capacity(m);
        for (k, &(_, r)) in parts.iter().enumerate() {
            maps.push(if k == anchor {
                None
            } else {
                let h = r.div_ceil(2);
                Some(Mlp::new(
                    &mut store,
                    &mut init,
                    &format!("map{k}"),
                    &[r, h, h, r],
                    false,
                    false,
                )?)
            });
        }
        let c = &self.cfg;
        let encoder = Mlp::new(
            &mut store,
            &mut init,
            "enc",
            &[d, c.hidden, c.rep],
            true,
            true,
        )?;
        let model = Model {
            parts,
            anchor,
            maps,
            encoder,
            tau: c.tau,
        };
        let x = to_tensor(train_x)?;
        self.steps = train(&store, &x, &c.train, &mut init, |b| {
            let (local, z0) = model.local(b)?;
            Ok((local + model.structure(b, &z0, b, &z0)?)?)
        })?;
        let r = c.reference.clamp(1, train_x.rows);
        let mut idx: Vec<u32> = sample(init.rng(), train_x.rows, r)
            .into_iter()
            .map(|i| i as u32)
            .collect();
        idx.sort_unstable();
        let xr = x.index_select(&Tensor::from_slice(&idx, r, x.device())?, 0)?;
        let (_, zr) = model.local(&xr)?;
        self.reference = Some((xr, zr.detach()));
        self.model = Some(model);
        self.cols = Some(d);
        Ok(())
    }

    fn score(&self, x: &Features) -> Result<Vec<f64>> {
        check_cols(self.cols, x)?;
        let (Some(model), Some((xr, zr))) = (&self.model, &self.reference) else {
            return Err(InputError::NotFitted.into());
        };
        debug_assert!(model.anchor < model.parts.len());
        score_rows(x, |b| {
            let (local, z0) = model.local(b)?;
            Ok((local + model.structure(b, &z0, xr, zr)?)?)
        })
    }
}
