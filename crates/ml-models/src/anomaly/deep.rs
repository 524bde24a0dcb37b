//! What the deep detectors share: seeded MLPs, the contrastive view loss, and a mini-batch
//! training loop on the crate's AdamW.

use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;

pub(super) use super::fused::l2_normalise;
use super::fused::{add_bias, leaky_relu};
use super::{Features, InputError};
use crate::train::{ParamStore, SeededInit, TrainConfig, Trainer};
use crate::Result;

/// Training hyper-parameters shared by PCL-AD, ICL and NeuTraL-AD.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeepConfig {
    /// Passes over the training rows, default 20 (the PCL-AD authors' ADBench script).
    pub epochs: usize,
    /// Upper bound on optimiser steps over all epochs, default 2 000 (keeps the 600 000-row
    /// ADBench sets tractable on a CPU: 20 epochs of `donors` would be 47 000 steps; a set of
    /// fewer than 12 800 training rows never reaches it).
    pub max_steps: usize,
    /// Mini-batch size, default 128.
    pub batch: usize,
    /// Adam learning rate, default 1e-3.
    pub lr: f64,
    /// Weight decay, default 1e-5 (decoupled, as the crate's AdamW applies it).
    pub weight_decay: f64,
    /// Seed of initialisation, partitions and batch order, default 0.
    pub seed: u64,
}

impl Default for DeepConfig {
    fn default() -> Self {
        Self {
            epochs: 20,
            max_steps: 2000,
            batch: 128,
            lr: 1e-3,
            weight_decay: 1e-5,
            seed: 0,
        }
    }
}

/// A multi-layer perceptron `widths[0] → … → widths[last]`, leaky ReLU between layers, no
/// activation after the last one.
#[derive(Debug, Clone)]
pub(super) struct Mlp {
    layers: Vec<(Tensor, Option<Tensor>)>,
}

impl Mlp {
    /// Kaiming-uniform weights (and biases when `bias`); trainable ones are registered in
    /// `store` as `<name>.<layer>.w/.b`, frozen ones stay plain tensors outside autograd.
    pub(super) fn new(
        store: &mut ParamStore,
        init: &mut SeededInit,
        name: &str,
        widths: &[usize],
        bias: bool,
        trainable: bool,
    ) -> Result<Self> {
        let dev = Device::Cpu;
        let mut layers = Vec::new();
        for (l, w) in widths.windows(2).enumerate() {
            let wt = init.kaiming_uniform(&[w[1], w[0]], &dev)?;
            let bt = if bias {
                let bound = 1.0 / (w[0] as f32).sqrt();
                Some(init.uniform(&[w[1]], -bound, bound, &dev)?)
            } else {
                None
            };
            if trainable {
                let wv = store.add(format!("{name}.{l}.w"), wt, true)?;
                let bv = match bt {
                    Some(b) => Some(
                        store
                            .add(format!("{name}.{l}.b"), b, true)?
                            .as_tensor()
                            .clone(),
                    ),
                    None => None,
                };
                layers.push((wv.as_tensor().clone(), bv));
            } else {
                layers.push((wt, bt));
            }
        }
        Ok(Self { layers })
    }

    /// `x` of shape `[.., in]` → `[.., out]`.
    ///
    /// The leading dimensions are flattened into one: every layer is a single `[rows, in] ×
    /// [in, out]` product. (A broadcast product over `[b, v, in]` computes the same values but
    /// its backward pass forms one weight gradient per batch row, `[b, in, out]`, and then sums
    /// them: most of the deep detectors' training time before 2026-12-06.)
    pub(super) fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let dims = x.dims();
        let (lead, input) = dims.split_at(dims.len().saturating_sub(1));
        let rows: usize = lead.iter().product();
        let mut h = x.reshape((rows, input.first().copied().unwrap_or(1)))?;
        for (l, (w, b)) in self.layers.iter().enumerate() {
            h = h.matmul(&w.t()?)?;
            if let Some(b) = b {
                h = add_bias(&h, b)?;
            }
            if l + 1 < self.layers.len() {
                h = leaky_relu(&h)?;
            }
        }
        let mut shape = lead.to_vec();
        shape.push(h.dim(1)?);
        Ok(h.reshape(shape)?)
    }
}

/// The per-sample contrastive view loss of NeuTraL-AD and PCL-AD's local term: for embeddings
/// `z` of shape `[b, K+1, e]` (unit rows, view 0 the positive), with `s_kj = z_k·z_j / τ`,
/// `Σ_{k=1..K} ( log Σ_{j≠k} exp(s_kj) − s_k0 )`. Returns `[b]`.
pub(super) fn view_contrast_loss(z: &Tensor, tau: f64) -> Result<Tensor> {
    let (_, v, _) = z.dims3()?;
    let s = (z.matmul(&z.transpose(1, 2)?.contiguous()?)? / tau)?;
    let diag: Vec<f32> = (0..v * v)
        .map(|i| if i / v == i % v { -1e9 } else { 0.0 })
        .collect();
    let mask = Tensor::from_vec(diag, (v, v), z.device())?;
    let s = s.broadcast_add(&mask)?;
    let rows = s.narrow(1, 1, v - 1)?; // [b, K, K+1]
    let lse = rows.log_sum_exp(2)?; // [b, K]
    let pos = rows.narrow(2, 0, 1)?.squeeze(2)?;
    Ok((lse - pos)?.sum(1)?)
}

/// `train` as an `[n, d]` f32 tensor on the CPU.
pub(super) fn to_tensor(x: &Features) -> Result<Tensor> {
    Ok(Tensor::from_vec(
        x.to_f32(),
        (x.rows, x.cols),
        &Device::Cpu,
    )?)
}

/// Mini-batch training of the trainable parameters of `store` on `n` rows: per epoch a seeded
/// shuffle, batches of `cfg.batch` row indices (a last batch of one row is skipped), the mean
/// of `loss(indices)` (a `[b]` tensor of per-sample losses; `indices` is a `u32` tensor the
/// closure gathers its inputs with), AdamW. Stops after `cfg.max_steps` steps. Returns the
/// steps taken and the training rows they processed.
///
/// # Errors
/// [`crate::MlError::Diverged`] when the loss stops being finite.
pub(super) fn train(
    store: &ParamStore,
    n: usize,
    cfg: &DeepConfig,
    init: &mut SeededInit,
    loss: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<(usize, usize)> {
    // The crate's training core steps the optimiser (and reports divergence); the epochs of
    // shuffled mini-batches are this loop's.
    let mut trainer = Trainer::new(
        TrainConfig::adamw(cfg.lr, cfg.weight_decay, cfg.max_steps),
        store,
    )?;
    let mut order: Vec<u32> = (0..n as u32).collect();
    let (mut step, mut seen) = (0, 0);
    for _ in 0..cfg.epochs {
        order.shuffle(init.rng());
        for chunk in order.chunks(cfg.batch.max(2)) {
            if step >= cfg.max_steps {
                return Ok((step, seen));
            }
            if chunk.len() < 2 && n >= 2 {
                continue;
            }
            let idx = Tensor::from_slice(chunk, chunk.len(), &Device::Cpu)?;
            trainer.step_once(&mut |_| loss(&idx)?.mean_all().map_err(Into::into))?;
            step += 1;
            seen += chunk.len();
        }
    }
    Ok((step, seen))
}

/// Scores `x` in chunks of 1 024 rows with `score` (per-sample, `[b]`), as `f64`; rejects a
/// non-finite score.
pub(super) fn score_rows(
    x: &Features,
    score: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Vec<f64>> {
    let t = to_tensor(x)?;
    let mut out = Vec::with_capacity(x.rows);
    let mut start = 0;
    while start < x.rows {
        let len = (x.rows - start).min(1024);
        let s = score(&t.narrow(0, start, len)?)?.to_vec1::<f32>()?;
        out.extend(s.into_iter().map(f64::from));
        start += len;
    }
    if let Some(index) = out.iter().position(|v| !v.is_finite()) {
        return Err(InputError::NonFiniteScore { index }.into());
    }
    Ok(out)
}
