//! Fused dequantize-and-multiply `y = x · Wᵀ` for a block-quantized `W`, and its candle op.
//!
//! The kernel walks the rows of `W` (in parallel on the caller's rayon pool), dequantizes one row
//! at a time, a quantization block after another, into a row buffer that stays in cache, and
//! takes its dot products with every row of `x`; the f32 matrix is never materialised.

use std::sync::Arc;

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use rayon::prelude::*;

use crate::qlora::quant::QuantizedMatrix;

/// `y[m, n] = Σ_k x[m, k] · W[n, k]` with `x` row-major `[m, k]`, `W` quantized `[n, k]`;
/// returns `y` row-major `[m, n]`. Runs on the current rayon pool.
///
/// # Panics
/// If `x.len()` is not a multiple of `W.cols()`.
#[track_caller]
pub fn fused_matmul_t(x: &[f32], w: &dyn QuantizedMatrix) -> Vec<f32> {
    let (n, k) = (w.rows(), w.cols());
    assert!(
        k > 0 && x.len().is_multiple_of(k),
        "x has {} values, not a multiple of {k}",
        x.len()
    );
    let m = x.len() / k;
    // yt[n][m]: each task owns one row of W and writes one contiguous row of yt.
    let mut yt = vec![0f32; n * m];
    yt.par_chunks_mut(m.max(1)).enumerate().for_each_init(
        || vec![0f32; k],
        |row, (r, out)| {
            w.dequantize_range(r * k, row);
            for (o, xm) in out.iter_mut().zip(x.chunks_exact(k)) {
                *o = dot(xm, row);
            }
        },
    );
    let mut y = vec![0f32; m * n];
    for r in 0..n {
        for i in 0..m {
            y[i * n + r] = yt[r * m + i];
        }
    }
    y
}

/// Dot product with eight independent accumulators (lets the compiler vectorise).
#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, ar) = a.split_at(a.len() / 8 * 8);
    let (bc, br) = b.split_at(ac.len());
    for (x, y) in ac.chunks_exact(8).zip(bc.chunks_exact(8)) {
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let tail: f32 = ar.iter().zip(br).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// Inputs with more rows than this go through dequantize-then-gemm in [`QuantLinearOp`].
pub const FUSED_MAX_ROWS: usize = 16;

/// The candle op `x ↦ x · Wᵀ` over a quantized `W`. Forward: [`fused_matmul_t`] for inputs of
/// at most [`FUSED_MAX_ROWS`] rows (decoding, small batches); for more rows, `W` is dequantized
/// into a temporary f32 matrix and multiplied with candle's blocked gemm — the same split
/// bitsandbytes makes (its fused 4-bit kernel serves single-token inference, training batches
/// dequantize then matmul), because the portable fused loop is much slower than gemm there.
/// Backward: `∂x = ∂y · W` with `W` dequantized. `W` itself gets no gradient.
#[derive(Debug, Clone)]
pub struct QuantLinearOp {
    w: Arc<dyn QuantizedMatrix>,
    fused_max_rows: usize,
}

impl QuantLinearOp {
    /// The op for weight `w` (`[out, in]`), switching to dequantize-then-gemm above
    /// [`FUSED_MAX_ROWS`] input rows.
    pub fn new(w: Arc<dyn QuantizedMatrix>) -> Self {
        Self {
            w,
            fused_max_rows: FUSED_MAX_ROWS,
        }
    }

    /// The same op with another row threshold (`usize::MAX`: always the fused kernel).
    pub fn with_fused_max_rows(mut self, rows: usize) -> Self {
        self.fused_max_rows = rows;
        self
    }

    /// `W` dequantized as a `[out, in]` tensor on `dev`.
    pub fn dequantized(&self, dev: &candle_core::Device) -> candle_core::Result<Tensor> {
        Tensor::from_vec(self.w.dequantize(), (self.w.rows(), self.w.cols()), dev)
    }
}

impl CustomOp1 for QuantLinearOp {
    fn name(&self) -> &'static str {
        "quant-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (x, m) = linear_input(self.name(), s, l, self.w.cols())?;
        let y = if m <= self.fused_max_rows {
            fused_matmul_t(x, self.w.as_ref())
        } else {
            let dev = candle_core::Device::Cpu;
            let xt = Tensor::from_slice(x, (m, self.w.cols()), &dev)?;
            let wt = self.dequantized(&dev)?;
            xt.matmul(&wt.t()?)?.flatten_all()?.to_vec1::<f32>()?
        };
        Ok((CpuStorage::F32(y), linear_output_shape(l, self.w.rows())))
    }

    fn bwd(
        &self,
        arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let w = self.dequantized(arg.device())?;
        Ok(Some(grad.broadcast_matmul(&w)?))
    }
}

impl QuantLinearOp {
    /// Bytes of the quantized weight (codes + scales).
    pub fn storage_bytes(&self) -> usize {
        self.w.storage_bytes()
    }
}

/// The candle op `x ↦ x · Wᵀ` over a frozen dense `W` (`[out, in]`, f32 or bf16). A plain
/// `matmul` with a frozen weight still makes candle's backward compute `∂W = xᵀ · ∂y` (it derives
/// both operands of every matmul) and keep it in the gradient store until the backward pass
/// ends; this op returns `∂x = ∂y · W` only, as the quantized op does.
#[derive(Debug, Clone)]
pub struct FrozenLinearOp {
    w: Tensor,
}

impl FrozenLinearOp {
    /// The op for weight `w` (`[out, in]`).
    pub fn new(w: Tensor) -> Self {
        Self { w: w.detach() }
    }

    fn weight_f32(&self) -> candle_core::Result<Tensor> {
        self.w.to_dtype(candle_core::DType::F32)
    }
}

impl CustomOp1 for FrozenLinearOp {
    fn name(&self) -> &'static str {
        "frozen-linear"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (rows, cols) = self.w.dims2()?;
        let (x, m) = linear_input(self.name(), s, l, cols)?;
        let xt = Tensor::from_slice(x, (m, cols), &candle_core::Device::Cpu)?;
        let y = xt
            .matmul(&self.weight_f32()?.t()?)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        Ok((CpuStorage::F32(y), linear_output_shape(l, rows)))
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(grad.broadcast_matmul(&self.weight_f32()?)?))
    }
}

/// The f32 input of a linear op (`[.., cols]`, contiguous) as a slice, and its number of rows.
fn linear_input<'a>(
    op: &str,
    s: &'a CpuStorage,
    l: &Layout,
    cols: usize,
) -> candle_core::Result<(&'a [f32], usize)> {
    let CpuStorage::F32(v) = s else {
        candle_core::bail!("{op} expects f32 input");
    };
    let Some((a, b)) = l.contiguous_offsets() else {
        candle_core::bail!("{op} expects a contiguous input");
    };
    let dims = l.shape().dims();
    if dims.last() != Some(&cols) {
        candle_core::bail!("{op}: input {dims:?}, weight has {cols} columns");
    }
    let x = &v[a..b];
    Ok((x, x.len() / cols.max(1)))
}

/// The output shape of a linear op: the input's with the last dimension set to `rows`.
fn linear_output_shape(l: &Layout, rows: usize) -> Shape {
    let mut out = l.shape().dims().to_vec();
    if let Some(last) = out.last_mut() {
        *last = rows;
    }
    Shape::from(out)
}
