//! 4-bit NormalFloat (NF4) block quantization with double quantization, as in QLoRA
//! (Dettmers, Pagnoni, Holtzman, Zettlemoyer, "QLoRA: Efficient Finetuning of Quantized LLMs",
//! NeurIPS 2023) and its reference implementation bitsandbytes (`quantize_4bit`).
//!
//! A weight tensor is cut into blocks of [`NF4_BLOCK`] = 64 consecutive values (row-major); each
//! block stores its absolute maximum `c` and 64 four-bit indices into [`NF4_CODE`], the 16
//! quantiles of N(0, 1) normalised to [-1, 1] with an exact zero. With double quantization the
//! fp32 absmax constants are mean-subtracted and quantized again, blockwise with
//! [`DQ_BLOCK`] = 256, to 8 bits with bitsandbytes' signed dynamic map; the storage cost is then
//! `4 + 8/64 + 32/(64·256) ≈ 4.127` bits per parameter.

use crate::qlora::quant::{check_shape, dynamic_map_signed, nearest_sorted, QuantizedMatrix};
use crate::Result;

/// Values per NF4 block (QLoRA and bitsandbytes default).
pub const NF4_BLOCK: usize = 64;
/// Absmax constants per second-level block under double quantization.
pub const DQ_BLOCK: usize = 256;

/// The NF4 code book exactly as published in QLoRA (Appendix E) and bitsandbytes
/// (`create_normal_map(offset=0.9677083, use_extra_value=True)`), ascending.
pub const NF4_CODE: [f32; 16] = [
    -1.0,
    -0.696_192_8,
    -0.525_073_05,
    -0.394_917_5,
    -0.284_441_38,
    -0.184_773_43,
    -0.091_050_036,
    0.0,
    0.079_580_3,
    0.160_930_2,
    0.246_112_3,
    0.337_915_24,
    0.440_709_83,
    0.562_617,
    0.722_956_84,
    1.0,
];

/// Index of the exact zero in [`NF4_CODE`].
const NF4_ZERO: u8 = 7;

/// The two code values of every packed byte (high nibble = even index first): one table load
/// decodes two weights.
static NF4_PAIRS: [[f32; 2]; 256] = {
    let mut t = [[0f32; 2]; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = [NF4_CODE[b >> 4], NF4_CODE[b & 0x0f]];
        b += 1;
    }
    t
};

/// Decodes the weights `start..start + out.len()` of `packed`, all of one block with scale `s`:
/// a byte (two weights) per table load, with the odd first / last weight on its own.
fn decode_scaled(packed: &[u8], start: usize, out: &mut [f32], s: f32) {
    let lead = (start % 2).min(out.len());
    let (head, rest) = out.split_at_mut(lead);
    if let Some(first) = head.first_mut() {
        *first = NF4_CODE[(packed[start / 2] & 0x0f) as usize] * s;
    }
    let k = start + lead;
    let pairs = rest.len() / 2;
    let (body, tail) = rest.split_at_mut(2 * pairs);
    for (o, &byte) in body.chunks_exact_mut(2).zip(&packed[k / 2..k / 2 + pairs]) {
        let p = NF4_PAIRS[byte as usize];
        o[0] = p[0] * s;
        o[1] = p[1] * s;
    }
    if let Some(last) = tail.first_mut() {
        *last = NF4_CODE[(packed[(k + 2 * pairs) / 2] >> 4) as usize] * s;
    }
}

/// Derives the NF4 code book from its definition: 8 positive quantiles
/// `Φ⁻¹(linspace(δ, 1/2, 9)[..8])`, 7 negative ones `-Φ⁻¹(linspace(δ, 1/2, 8)[..7])` and an exact
/// zero, normalised by the largest, with `δ = 0.9677083` (bitsandbytes' `create_normal_map`).
pub fn nf4_code_from_normal_quantiles() -> [f32; 16] {
    const OFFSET: f64 = 0.967_708_3;
    let lin = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| OFFSET + (0.5 - OFFSET) * i as f64 / (n - 1) as f64)
            .collect()
    };
    let mut v: Vec<f64> = lin(9)[..8].iter().map(|&p| inverse_normal_cdf(p)).collect();
    v.extend(lin(8)[..7].iter().map(|&p| -inverse_normal_cdf(p)));
    v.push(0.0);
    v.sort_by(f64::total_cmp);
    let max = v[15];
    let mut out = [0f32; 16];
    for (o, x) in out.iter_mut().zip(&v) {
        *o = (x / max) as f32;
    }
    out
}

/// Φ⁻¹ by Acklam's rational approximation (relative error < 1.2e-9).
fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// The per-block scales of an NF4 tensor: plain fp32, or double-quantized.
#[derive(Debug, Clone, PartialEq)]
pub enum Absmax {
    /// One fp32 absmax per 64-value block.
    F32(Vec<f32>),
    /// Double quantization: `absmax[b] = dyn[codes[b]] · scales[b / 256] + offset`.
    Double {
        /// 8-bit index into the signed dynamic map, one per block.
        codes: Vec<u8>,
        /// fp32 absmax of each group of 256 mean-subtracted constants.
        scales: Vec<f32>,
        /// Mean of the original constants.
        offset: f32,
        /// bitsandbytes' signed dynamic 8-bit map.
        map: Box<[f32; 256]>,
    },
}

impl Absmax {
    /// The scale of block `b`.
    #[inline]
    pub fn get(&self, b: usize) -> f32 {
        match self {
            Absmax::F32(v) => v[b],
            Absmax::Double {
                codes,
                scales,
                offset,
                map,
            } => map[codes[b] as usize] * scales[b / DQ_BLOCK] + offset,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Absmax::F32(v) => 4 * v.len(),
            // The 256-entry map is a shared constant (bitsandbytes keeps one per device).
            Absmax::Double { codes, scales, .. } => codes.len() + 4 * scales.len() + 4,
        }
    }
}

/// A `rows × cols` matrix in NF4 (row-major, blocks over the flattened values).
#[derive(Debug, Clone, PartialEq)]
pub struct Nf4Matrix {
    rows: usize,
    cols: usize,
    /// Two 4-bit code indices per byte; element `2i` in the high nibble (bitsandbytes order).
    packed: Vec<u8>,
    absmax: Absmax,
}

impl Nf4Matrix {
    /// Quantizes row-major `data` of shape `rows × cols`; `double_quant` also quantizes the
    /// absmax constants (QLoRA's "double quantization").
    pub fn quantize(data: &[f32], rows: usize, cols: usize, double_quant: bool) -> Result<Self> {
        check_shape(data, rows, cols)?;
        let n = data.len();
        let mut packed = vec![0u8; n.div_ceil(2)];
        let mut absmax = Vec::with_capacity(n.div_ceil(NF4_BLOCK));
        for (b, block) in data.chunks(NF4_BLOCK).enumerate() {
            let amax = block.iter().fold(0f32, |m, x| m.max(x.abs()));
            absmax.push(amax);
            for (j, &x) in block.iter().enumerate() {
                let code = if amax == 0.0 {
                    NF4_ZERO
                } else {
                    nearest_sorted(&NF4_CODE, x / amax) as u8
                };
                let i = b * NF4_BLOCK + j;
                packed[i / 2] |= if i.is_multiple_of(2) { code << 4 } else { code };
            }
        }
        let absmax = if double_quant {
            double_quantize(&absmax)
        } else {
            Absmax::F32(absmax)
        };
        Ok(Self {
            rows,
            cols,
            packed,
            absmax,
        })
    }

    /// The block scales.
    pub fn absmax(&self) -> &Absmax {
        &self.absmax
    }

    /// Whether the scales are double-quantized.
    pub fn is_double_quantized(&self) -> bool {
        matches!(self.absmax, Absmax::Double { .. })
    }

    /// The 4-bit code index of flattened element `i`.
    #[inline]
    pub fn code_index(&self, i: usize) -> u8 {
        let b = self.packed[i / 2];
        if i.is_multiple_of(2) {
            b >> 4
        } else {
            b & 0x0f
        }
    }

    /// Storage bits per parameter (packed codes + scales).
    pub fn bits_per_param(&self) -> f64 {
        8.0 * self.storage_bytes() as f64 / (self.rows * self.cols) as f64
    }
}

/// Second-level quantization of the absmax constants (bitsandbytes `compress_statistics`).
fn double_quantize(absmax: &[f32]) -> Absmax {
    let offset = absmax.iter().map(|&x| x as f64).sum::<f64>() / absmax.len().max(1) as f64;
    let offset = offset as f32;
    let map = Box::new(dynamic_map_signed());
    let centred: Vec<f32> = absmax.iter().map(|&x| x - offset).collect();
    let mut codes = Vec::with_capacity(centred.len());
    let mut scales = Vec::with_capacity(centred.len().div_ceil(DQ_BLOCK));
    for block in centred.chunks(DQ_BLOCK) {
        let s = block.iter().fold(0f32, |m, x| m.max(x.abs()));
        scales.push(s);
        codes.extend(block.iter().map(|&x| {
            let v = if s == 0.0 { 0.0 } else { x / s };
            nearest_sorted(&map[..], v) as u8
        }));
    }
    Absmax::Double {
        codes,
        scales,
        offset,
        map,
    }
}

impl QuantizedMatrix for Nf4Matrix {
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
    fn dequantize_range(&self, start: usize, out: &mut [f32]) {
        let mut i = start;
        let end = start + out.len();
        let mut o = 0;
        while i < end {
            let b = i / NF4_BLOCK;
            let stop = ((b + 1) * NF4_BLOCK).min(end);
            decode_scaled(
                &self.packed,
                i,
                &mut out[o..o + stop - i],
                self.absmax.get(b),
            );
            o += stop - i;
            i = stop;
        }
    }
    fn storage_bytes(&self) -> usize {
        self.packed.len() + self.absmax.bytes()
    }
}
