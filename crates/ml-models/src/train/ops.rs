//! Differentiable compositions of normalisation, activation and loss functions.
//!
//! candle's fused `layer_norm`, `rms_norm` and `softmax_last_dim` kernels have no backward pass,
//! so gradients silently stop at them (candle issues #2977, #3011, #3752). The functions here are
//! built from primitive ops that all have a backward, so every upstream parameter trains.

use candle_core::{DType, Tensor, D};

use crate::Result;

/// RMSNorm (Zhang & Sennrich 2019) over the last dimension: `x / √(mean(x²) + eps) · weight`.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (ms + eps)?.sqrt()?.recip()?;
    Ok(x.broadcast_mul(&inv)?.broadcast_mul(weight)?)
}

/// LayerNorm (Ba et al. 2016) over the last dimension with affine `weight` and `bias`.
pub fn layer_norm(x: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
    let mean = x.mean_keepdim(D::Minus1)?;
    let centred = x.broadcast_sub(&mean)?;
    let var = centred.sqr()?.mean_keepdim(D::Minus1)?;
    let inv = (var + eps)?.sqrt()?.recip()?;
    Ok(centred
        .broadcast_mul(&inv)?
        .broadcast_mul(weight)?
        .broadcast_add(bias)?)
}

/// Numerically stable softmax over the last dimension.
pub fn softmax(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let e = x.broadcast_sub(&max)?.exp()?;
    let s = e.sum_keepdim(D::Minus1)?;
    Ok(e.broadcast_div(&s)?)
}

/// Numerically stable log-softmax over the last dimension.
pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let max = x.max_keepdim(D::Minus1)?.detach();
    let shifted = x.broadcast_sub(&max)?;
    let lse = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    Ok(shifted.broadcast_sub(&lse)?)
}

/// SiLU / swish, `x · σ(x)`, written as `x / (1 + e^{-x})`.
pub fn silu(x: &Tensor) -> Result<Tensor> {
    let denom = (x.neg()?.exp()? + 1.0)?;
    Ok(x.div(&denom)?)
}

/// Leaky ReLU with PyTorch's default slope 0.01, `max(x, 0.01·x)` (the hidden activation of the
/// anomaly detectors' MLPs and the class-incremental networks).
pub fn leaky_relu(x: &Tensor) -> Result<Tensor> {
    Ok(x.maximum(&(x * 0.01)?)?)
}

/// Mean cross-entropy of `logits` `[n, classes]` against integer `targets` `[n]` (u32).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let lp = log_softmax(logits)?;
    let picked = lp.gather(&targets.to_dtype(DType::U32)?.unsqueeze(1)?, 1)?;
    Ok(picked.neg()?.mean_all()?)
}

/// Fraction of rows whose arg-max of `logits` `[n, classes]` equals `targets` `[n]`.
pub fn accuracy(logits: &Tensor, targets: &Tensor) -> Result<f32> {
    let pred = logits.argmax(D::Minus1)?.to_vec1::<u32>()?;
    let t = targets.to_dtype(DType::U32)?.to_vec1::<u32>()?;
    let hits = pred.iter().zip(&t).filter(|(a, b)| a == b).count();
    Ok(hits as f32 / t.len().max(1) as f32)
}
