//! Differentiable compositions against candle's fused kernels, seeded init.

use candle_core::{Device, Tensor, Var};
use ml_models::train::inverse_trig::{acos, acosh, asin};
use ml_models::train::ops::{cross_entropy, layer_norm, log_softmax, rms_norm, softmax};
use ml_models::train::SeededInit;

use crate::common::{max_abs, max_rel_diff};

fn rand(shape: &[usize], seed: u64) -> Tensor {
    SeededInit::new(seed)
        .normal(shape, 1.0, &Device::Cpu)
        .unwrap()
}

#[test]
fn norms_and_softmax_match_candle_fused_forward() {
    let x = rand(&[3, 5, 16], 1);
    let w = rand(&[16], 2);
    let b = rand(&[16], 3);
    let ours = rms_norm(&x, &w, 1e-5).unwrap();
    let fused = candle_nn::ops::rms_norm(&x, &w, 1e-5).unwrap();
    assert!(max_rel_diff(&ours, &fused) < 1e-5);
    let ours = layer_norm(&x, &w, &b, 1e-5).unwrap();
    let fused = candle_nn::ops::layer_norm(&x, &w, &b, 1e-5).unwrap();
    assert!(max_rel_diff(&ours, &fused) < 1e-5);
    let ours = softmax(&x).unwrap();
    let fused = candle_nn::ops::softmax_last_dim(&x).unwrap();
    assert!(max_rel_diff(&ours, &fused) < 1e-6);
    let ls = log_softmax(&x).unwrap().exp().unwrap();
    assert!(max_rel_diff(&ls, &fused) < 1e-6);
}

#[test]
fn cross_entropy_matches_candle_nn() {
    let logits = rand(&[7, 11], 4);
    let t = Tensor::new(&[0u32, 3, 10, 5, 5, 1, 2], &Device::Cpu).unwrap();
    let ours = cross_entropy(&logits, &t)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    let theirs = candle_nn::loss::cross_entropy(&logits, &t)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!((ours - theirs).abs() < 1e-5, "{ours} vs {theirs}");
}

#[test]
fn norm_gradients_reach_weight_and_input_and_match_finite_differences() {
    let x = Var::from_tensor(&rand(&[4, 8], 5)).unwrap();
    let w = Var::from_tensor(&rand(&[8], 6)).unwrap();
    let b = Var::from_tensor(&rand(&[8], 7)).unwrap();
    let c = rand(&[4, 8], 8);
    let loss = |x: &Tensor, w: &Tensor, b: &Tensor| -> Tensor {
        let r = rms_norm(x, w, 1e-5).unwrap();
        let l = layer_norm(&r, w, b, 1e-5).unwrap();
        (softmax(&l).unwrap() * &c).unwrap().sum_all().unwrap()
    };
    let g = loss(x.as_tensor(), w.as_tensor(), b.as_tensor())
        .backward()
        .unwrap();
    for (v, name) in [(&x, "x"), (&w, "w"), (&b, "b")] {
        let gv = g.get(v.as_tensor()).expect("gradient exists");
        let an = gv.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert!(
            an.iter().any(|a| a.abs() > 1e-6),
            "{name} has zero gradient"
        );
        // Central differences on the first three coordinates, in f64 arithmetic of f32 values.
        let base = v
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        for i in 0..3 {
            let eps = 1e-2f32;
            let mut f = [0f32; 2];
            for (k, s) in [1.0f32, -1.0].iter().enumerate() {
                let mut p = base.clone();
                p[i] += s * eps;
                let t = Tensor::from_vec(p, v.dims(), &Device::Cpu).unwrap();
                let (xx, ww, bb) = match name {
                    "x" => (t, w.as_tensor().clone(), b.as_tensor().clone()),
                    "w" => (x.as_tensor().clone(), t, b.as_tensor().clone()),
                    _ => (x.as_tensor().clone(), w.as_tensor().clone(), t),
                };
                f[k] = loss(&xx, &ww, &bb).to_scalar::<f32>().unwrap();
            }
            let fd = (f[0] - f[1]) / (2.0 * eps);
            assert!(
                (fd - an[i]).abs() < 2e-2 * an[i].abs().max(0.05),
                "{name}[{i}]: fd {fd} vs {}",
                an[i]
            );
        }
    }
}

#[test]
fn seeded_init_is_reproducible() {
    let a = SeededInit::new(42)
        .normal(&[64], 1.0, &Device::Cpu)
        .unwrap();
    let b = SeededInit::new(42)
        .normal(&[64], 1.0, &Device::Cpu)
        .unwrap();
    let c = SeededInit::new(43)
        .normal(&[64], 1.0, &Device::Cpu)
        .unwrap();
    assert_eq!(max_rel_diff(&a, &b), 0.0);
    assert!(max_rel_diff(&a, &c) > 0.1);
    let k = SeededInit::new(1)
        .kaiming_uniform(&[8, 100], &Device::Cpu)
        .unwrap();
    let m = max_abs(&k);
    assert!(m <= 0.1 && m > 0.08, "kaiming bound 1/sqrt(100): max {m}");
}

/// Forward against the scalar functions and backward against central differences (f64).
fn check_inverse_fn(
    f: fn(&Tensor) -> ml_models::Result<Tensor>,
    scalar: fn(f64) -> f64,
    xs: &[f64],
) {
    let x = Var::from_tensor(&Tensor::new(xs, &Device::Cpu).unwrap()).unwrap();
    let y = f(x.as_tensor()).unwrap();
    let yv = y.to_vec1::<f64>().unwrap();
    let g = y.sum_all().unwrap().backward().unwrap();
    let gv = g.get(x.as_tensor()).unwrap().to_vec1::<f64>().unwrap();
    for (i, &xi) in xs.iter().enumerate() {
        assert!((yv[i] - scalar(xi)).abs() < 1e-12, "value at {xi}");
        let eps = 1e-6;
        let fd = (scalar(xi + eps) - scalar(xi - eps)) / (2.0 * eps);
        assert!(
            (fd - gv[i]).abs() < 1e-6 * fd.abs().max(1.0),
            "derivative at {xi}: fd {fd} vs {}",
            gv[i]
        );
    }
    // f32 goes through the same op.
    let y32 = f(&Tensor::new(&[xs[0] as f32], &Device::Cpu).unwrap()).unwrap();
    assert!((y32.to_vec1::<f32>().unwrap()[0] as f64 - scalar(xs[0])).abs() < 1e-6);
}

#[test]
fn inverse_trig_ops_match_scalars_and_finite_differences() {
    let unit = [-0.95, -0.5, -0.1, 0.0, 0.3, 0.7, 0.9];
    check_inverse_fn(asin, f64::asin, &unit);
    check_inverse_fn(acos, f64::acos, &unit);
    check_inverse_fn(acosh, f64::acosh, &[1.01, 1.5, 2.0, 10.0, 1e3]);
    // Outside the domain: NaN, as the scalar functions.
    let out = asin(&Tensor::new(&[2.0f32], &Device::Cpu).unwrap()).unwrap();
    assert!(out.to_vec1::<f32>().unwrap()[0].is_nan());
}

#[test]
fn inverse_trig_composes_inside_autograd() {
    // d/dx acosh(1 + x²) at x = 0.5 through the chain rule: 2x / sqrt((1+x²)² - 1).
    let x = Var::from_tensor(&Tensor::new(&[0.5f64], &Device::Cpu).unwrap()).unwrap();
    let y = acosh(&(x.as_tensor().sqr().unwrap() + 1.0).unwrap()).unwrap();
    let g = y.sum_all().unwrap().backward().unwrap();
    let got = g.get(x.as_tensor()).unwrap().to_vec1::<f64>().unwrap()[0];
    let want = 1.0 / (1.25f64 * 1.25 - 1.0).sqrt();
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
}
