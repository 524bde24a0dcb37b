//! What every block-quantized weight matrix offers, the 8-bit dynamic map of bitsandbytes, and
//! the blockwise int8 absmax scheme.

use crate::{MlError, Result};

/// A row-major `rows × cols` weight matrix stored in a block-quantized format.
pub trait QuantizedMatrix: Send + Sync + std::fmt::Debug {
    /// `(rows, cols)`: output and input features of a linear layer.
    fn shape(&self) -> (usize, usize);
    /// Number of rows (output features of a linear layer).
    fn rows(&self) -> usize {
        self.shape().0
    }
    /// Number of columns (input features).
    fn cols(&self) -> usize {
        self.shape().1
    }
    /// Dequantizes flattened elements `start .. start + out.len()` into `out`.
    fn dequantize_range(&self, start: usize, out: &mut [f32]);
    /// Bytes used by codes and scales.
    fn storage_bytes(&self) -> usize;
    /// The whole matrix in f32 (row-major).
    fn dequantize(&self) -> Vec<f32> {
        let mut out = vec![0f32; self.rows() * self.cols()];
        self.dequantize_range(0, &mut out);
        out
    }
}

/// Index of the value in ascending `code` nearest to `x` (ties go to the lower index).
pub(crate) fn nearest_sorted(code: &[f32], x: f32) -> usize {
    let hi = code.partition_point(|&c| c < x);
    if hi == 0 {
        return 0;
    }
    if hi == code.len() {
        return code.len() - 1;
    }
    if (x - code[hi - 1]) <= (code[hi] - x) {
        hi - 1
    } else {
        hi
    }
}

/// bitsandbytes' signed dynamic 8-bit map (`create_dynamic_map(signed=True)`, Dettmers et al.,
/// "8-bit Optimizers via Block-wise Quantization", ICLR 2022): for exponents 10⁻⁶ … 10⁰,
/// `2ⁱ` linearly spaced fractions in (0.1, 1) of each sign, plus 0 and 1; ascending.
pub fn dynamic_map_signed() -> [f32; 256] {
    let mut data: Vec<f64> = Vec::with_capacity(256);
    for i in 0..7 {
        let items = (1usize << i) + 1;
        let bounds: Vec<f64> = (0..items)
            .map(|k| 0.1 + 0.9 * k as f64 / (items - 1) as f64)
            .collect();
        let scale = 10f64.powi(i - 6);
        for w in bounds.windows(2) {
            let m = (w[0] + w[1]) / 2.0;
            data.push(scale * m);
            data.push(-scale * m);
        }
    }
    data.push(0.0);
    data.push(1.0);
    data.sort_by(f64::total_cmp);
    let mut out = [0f32; 256];
    for (o, x) in out.iter_mut().zip(&data) {
        *o = *x as f32;
    }
    out
}

/// Blockwise int8 absmax quantization: `q = round(127 · x / absmax_block)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Int8Matrix {
    rows: usize,
    cols: usize,
    block: usize,
    codes: Vec<i8>,
    absmax: Vec<f32>,
}

impl Int8Matrix {
    /// Quantizes row-major `data` with blocks of `block` values (64 is bitsandbytes' choice for
    /// blockwise 8-bit).
    ///
    /// # Panics
    /// If `block == 0`.
    #[track_caller]
    pub fn quantize(data: &[f32], rows: usize, cols: usize, block: usize) -> Result<Self> {
        assert!(block > 0, "block size must be positive");
        check_shape(data, rows, cols)?;
        let mut codes = Vec::with_capacity(data.len());
        let mut absmax = Vec::with_capacity(data.len().div_ceil(block));
        for b in data.chunks(block) {
            let a = b.iter().fold(0f32, |m, x| m.max(x.abs()));
            absmax.push(a);
            let inv = if a == 0.0 { 0.0 } else { 127.0 / a };
            codes.extend(
                b.iter()
                    .map(|&x| (x * inv).round().clamp(-127.0, 127.0) as i8),
            );
        }
        Ok(Self {
            rows,
            cols,
            block,
            codes,
            absmax,
        })
    }
}

impl QuantizedMatrix for Int8Matrix {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    fn dequantize_range(&self, start: usize, out: &mut [f32]) {
        for (o, i) in out.iter_mut().zip(start..) {
            *o = self.codes[i] as f32 * self.absmax[i / self.block] / 127.0;
        }
    }
    fn storage_bytes(&self) -> usize {
        self.codes.len() + 4 * self.absmax.len()
    }
}

/// Checks that `data` holds a non-empty, finite `rows × cols` matrix (shared by every format).
pub(crate) fn check_shape(data: &[f32], rows: usize, cols: usize) -> Result<()> {
    if data.len() != rows * cols || data.is_empty() {
        return Err(MlError::InvalidInput(format!(
            "quantize: {} values for a {rows}×{cols} matrix",
            data.len()
        )));
    }
    if let Some(x) = data.iter().find(|x| !x.is_finite()) {
        return Err(MlError::InvalidInput(format!(
            "quantize: non-finite weight {x}"
        )));
    }
    Ok(())
}
