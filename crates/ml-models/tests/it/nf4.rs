//! NF4 / double quantization / int8 and the fused kernel.

use std::sync::Arc;

use candle_core::{Device, Tensor, Var};
use ml_models::qlora::nf4::nf4_code_from_normal_quantiles;
use ml_models::qlora::*;
use ml_models::train::SeededInit;
use proptest::prelude::*;

use crate::common::max_rel_diff;

fn normal(n: usize, std: f32, seed: u64) -> Vec<f32> {
    let t = SeededInit::new(seed)
        .normal(&[n], std, &Device::Cpu)
        .unwrap();
    t.to_vec1().unwrap()
}

#[test]
fn codebook_matches_published_table_and_definition() {
    // QLoRA paper, Appendix E (identical to bitsandbytes' NF4 table).
    let published = [
        -1.0,
        -0.6961928009986877,
        -0.5250730514526367,
        -0.39491748809814453,
        -0.28444138169288635,
        -0.18477343022823334,
        -0.09105003625154495,
        0.0,
        0.07958029955625534,
        0.16093020141124725,
        0.24611230194568634,
        0.33791524171829224,
        0.44070982933044434,
        0.5626170039176941,
        0.7229568362236023,
        1.0,
    ];
    let derived = nf4_code_from_normal_quantiles();
    for i in 0..16 {
        assert_eq!(NF4_CODE[i], published[i] as f32);
        assert!(
            (derived[i] as f64 - published[i]).abs() < 1e-6,
            "{i}: {}",
            derived[i]
        );
    }
}

#[test]
fn dynamic_map_is_bitsandbytes_signed_map() {
    let m = dynamic_map_signed();
    assert!(m.windows(2).all(|w| w[0] < w[1]), "strictly ascending");
    assert_eq!((m[0], m[255]), (-0.992_968_75, 1.0));
    assert!(m.contains(&0.0));
    // Smallest magnitude: 1e-6 · 0.55.
    let smallest = m
        .iter()
        .filter(|&&x| x > 0.0)
        .fold(f32::MAX, |a, &b| a.min(b));
    assert!((smallest - 5.5e-7).abs() < 1e-12);
}

#[test]
fn roundtrip_error_bounds() {
    let (rows, cols) = (48, 256);
    let w = normal(rows * cols, 0.05, 1);
    let max_half_gap = NF4_CODE
        .windows(2)
        .map(|p| (p[1] - p[0]) / 2.0)
        .fold(0.0, f32::max);
    for dq in [false, true] {
        let q = Nf4Matrix::quantize(&w, rows, cols, dq).unwrap();
        let back = q.dequantize();
        let mut sq = 0.0f64;
        for (b, (blk, bb)) in w.chunks(NF4_BLOCK).zip(back.chunks(NF4_BLOCK)).enumerate() {
            let amax = blk.iter().fold(0f32, |m, x| m.max(x.abs()));
            // Double quantization perturbs the scale by at most a few percent of the absmax.
            let tol = amax * max_half_gap + if dq { 0.02 * amax } else { 1e-7 };
            for (x, y) in blk.iter().zip(bb) {
                assert!((x - y).abs() <= tol, "block {b}: {x} vs {y}");
                sq += ((x - y) as f64).powi(2);
            }
            // The absmax element itself is reproduced (code ±1).
            if !dq {
                let i = blk.iter().position(|x| x.abs() == amax).unwrap();
                assert_eq!(bb[i], blk[i]);
            }
        }
        let rms = (sq / w.len() as f64).sqrt();
        assert!(rms < 0.1 * 0.05, "rms error {rms}");
    }
    // An all-zero block stays zero.
    let z = Nf4Matrix::quantize(&[0.0; 64], 1, 64, true).unwrap();
    assert!(z.dequantize().iter().all(|&x| x == 0.0));
    assert!(Nf4Matrix::quantize(&[f32::NAN; 64], 1, 64, false).is_err());
    assert!(Nf4Matrix::quantize(&[0.0; 10], 2, 64, false).is_err());
}

#[test]
fn storage_size_and_bits_per_param() {
    let (rows, cols) = (64, 4096);
    let n = rows * cols;
    let w = normal(n, 1.0, 2);
    let plain = Nf4Matrix::quantize(&w, rows, cols, false).unwrap();
    assert_eq!(plain.storage_bytes(), n / 2 + 4 * n / 64);
    assert!((plain.bits_per_param() - 4.5).abs() < 1e-12);
    let dq = Nf4Matrix::quantize(&w, rows, cols, true).unwrap();
    assert_eq!(dq.storage_bytes(), n / 2 + n / 64 + 4 * (n / 64 / 256) + 4);
    assert!(
        (dq.bits_per_param() - 4.127).abs() < 1e-3,
        "{}",
        dq.bits_per_param()
    );
    let i8m = Int8Matrix::quantize(&w, rows, cols, 64).unwrap();
    assert_eq!(i8m.storage_bytes(), n + 4 * n / 64);
}

#[test]
fn int8_roundtrip() {
    let w = normal(1000, 1.0, 3);
    let q = Int8Matrix::quantize(&w, 10, 100, 64).unwrap();
    for (blk, back) in w.chunks(64).zip(q.dequantize().chunks(64)) {
        let amax = blk.iter().fold(0f32, |m, x| m.max(x.abs()));
        for (x, y) in blk.iter().zip(back) {
            assert!((x - y).abs() <= amax / 254.0 + 1e-6);
        }
    }
}

fn check_fused(m: usize, n: usize, k: usize, dq: bool, seed: u64) {
    let w = normal(n * k, 0.1, seed);
    let x = normal(m * k, 1.0, seed + 1);
    let q = Nf4Matrix::quantize(&w, n, k, dq).unwrap();
    let y = fused_matmul_t(&x, &q);
    let dev = Device::Cpu;
    let wt = Tensor::from_vec(q.dequantize(), (n, k), &dev).unwrap();
    let xt = Tensor::from_vec(x, (m, k), &dev).unwrap();
    let reference = xt.matmul(&wt.t().unwrap()).unwrap();
    let yt = Tensor::from_vec(y, (m, n), &dev).unwrap();
    assert!(max_rel_diff(&yt, &reference) <= 1e-5);
}

#[test]
fn fused_matches_dequantize_then_matmul() {
    check_fused(17, 96, 256, true, 10);
    check_fused(1, 5, 100, false, 11);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// The pair-table decoder against the one-weight-at-a-time definition, at any start
    /// (odd ones included) and length, across block boundaries.
    #[test]
    fn dequantize_range_matches_per_weight_decoding(
        n in 1usize..700, a in 0usize..700, len in 0usize..300, dq: bool, seed in 0u64..1000,
    ) {
        let w = normal(n, 1.0, seed);
        let q = Nf4Matrix::quantize(&w, 1, n, dq).unwrap();
        let start = a % n;
        let len = len.min(n - start);
        let mut out = vec![f32::NAN; len];
        q.dequantize_range(start, &mut out);
        for (j, &v) in out.iter().enumerate() {
            let k = start + j;
            let expect = NF4_CODE[q.code_index(k) as usize] * q.absmax().get(k / 64);
            prop_assert_eq!(v.to_bits(), expect.to_bits(), "weight {}", k);
        }
    }

    #[test]
    fn fused_matches_reference_random_shapes(m in 1usize..9, n in 1usize..40, k in 1usize..200, dq: bool, seed in 0u64..1000) {
        check_fused(m, n, k, dq, seed);
    }
}

#[test]
fn quant_linear_op_backward_matches_dense() {
    let (n, k) = (24, 128);
    let q: Arc<dyn QuantizedMatrix> =
        Arc::new(Nf4Matrix::quantize(&normal(n * k, 0.1, 4), n, k, true).unwrap());
    let op = QuantLinearOp::new(q);
    let dev = Device::Cpu;
    let x = Var::from_tensor(&SeededInit::new(5).normal(&[2, 3, k], 1.0, &dev).unwrap()).unwrap();
    let c = SeededInit::new(6).normal(&[2, 3, n], 1.0, &dev).unwrap();
    let y = x.as_tensor().apply_op1(op.clone()).unwrap();
    let g1 = (y * &c).unwrap().sum_all().unwrap().backward().unwrap();
    let w = op.dequantized(&dev).unwrap();
    let y2 = x.as_tensor().broadcast_matmul(&w.t().unwrap()).unwrap();
    let g2 = (y2 * &c).unwrap().sum_all().unwrap().backward().unwrap();
    let (a, b) = (
        g1.get(x.as_tensor()).unwrap(),
        g2.get(x.as_tensor()).unwrap(),
    );
    assert!(max_rel_diff(a, b) < 1e-5);
}

#[test]
fn quant_linear_op_fused_and_gemm_paths_agree() {
    let (n, k) = (40, 192);
    let q: Arc<dyn QuantizedMatrix> =
        Arc::new(Nf4Matrix::quantize(&normal(n * k, 0.1, 8), n, k, true).unwrap());
    let x = SeededInit::new(9)
        .normal(&[3, 11, k], 1.0, &Device::Cpu)
        .unwrap();
    // 33 rows: above the default threshold (dequantize + gemm) and forced fused.
    let gemm = x.apply_op1(QuantLinearOp::new(q.clone())).unwrap();
    let fused = x
        .apply_op1(QuantLinearOp::new(q).with_fused_max_rows(usize::MAX))
        .unwrap();
    assert_eq!(gemm.dims(), [3, 11, n]);
    assert!(max_rel_diff(&gemm, &fused) < 1e-5);
}
