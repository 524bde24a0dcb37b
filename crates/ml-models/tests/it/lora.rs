//! LoRA layer: exactness at B = 0, merge/unmerge, finite differences, configuration rules.

use candle_core::{Device, Tensor};
use ml_models::qlora::*;
use ml_models::train::{ParamStore, SeededInit};

use crate::common::max_rel_diff;

fn layer(base: BaseFormat, rank: usize, dropout: f32) -> (Linear, ParamStore, Tensor) {
    let mut store = ParamStore::new();
    let mut init = SeededInit::new(3);
    let mut lin = Linear::new("l", 96, 40, 0.1, &mut store, &mut init).unwrap();
    let dense = store.get("l.weight").unwrap().as_tensor().copy().unwrap();
    lin.freeze_base(base, &mut store).unwrap();
    lin.attach_adapter(
        AdapterSpec { rank, alpha: 16.0 },
        dropout,
        &mut store,
        &mut init,
    )
    .unwrap();
    (lin, store, dense)
}

fn x() -> Tensor {
    SeededInit::new(9)
        .normal(&[2, 5, 96], 1.0, &Device::Cpu)
        .unwrap()
}

fn randomise_b(lin: &Linear) {
    let b = &lin.adapter().unwrap().b;
    b.set(
        &SeededInit::new(11)
            .normal(b.dims(), 0.1, &Device::Cpu)
            .unwrap(),
    )
    .unwrap();
}

#[test]
fn zero_b_equals_base_exactly() {
    let (lin, _, dense) = layer(BaseFormat::F32, 4, 0.0);
    let y = lin.forward(&x(), true).unwrap();
    let base = x().broadcast_matmul(&dense.t().unwrap()).unwrap();
    let (a, b) = (
        y.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        base.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
    );
    assert_eq!(a, b);
    // QLoRA: B = 0 gives exactly the dequantized-NF4 model.
    let (q, _, _) = layer(BaseFormat::Nf4 { double_quant: true }, 4, 0.0);
    let Base::Quantized(op) = q.base() else {
        panic!("quantized base")
    };
    let w = op.dequantized(&Device::Cpu).unwrap();
    let r = x().broadcast_matmul(&w.t().unwrap()).unwrap();
    assert!(max_rel_diff(&q.forward(&x(), false).unwrap(), &r) < 1e-5);
}

#[test]
fn merged_equals_unmerged_and_unmerge_restores() {
    for base in [
        BaseFormat::F32,
        BaseFormat::Bf16,
        BaseFormat::Nf4 {
            double_quant: false,
        },
    ] {
        let (mut lin, store, _) = layer(base, 8, 0.0);
        randomise_b(&lin);
        let before = lin.forward(&x(), false).unwrap();
        lin.merge().unwrap();
        let merged = lin.forward(&x(), false).unwrap();
        assert!(max_rel_diff(&merged, &before) < 1e-5, "{base:?}");
        lin.unmerge().unwrap();
        assert!(max_rel_diff(&lin.forward(&x(), false).unwrap(), &before) < 1e-5);
        if base == BaseFormat::F32 {
            let _ = store;
        }
    }
}

#[test]
fn adapter_gradients_match_finite_differences() {
    let (lin, _, _) = layer(BaseFormat::Nf4 { double_quant: true }, 3, 0.0);
    randomise_b(&lin);
    let ad = lin.adapter().unwrap();
    let loss = |lin: &Linear| {
        lin.forward(&x(), false)
            .unwrap()
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
    };
    let grads = loss(&lin).backward().unwrap();
    for var in [&ad.a, &ad.b] {
        let g = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let orig = var.as_tensor().copy().unwrap();
        let flat = orig.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for i in [0usize, 7, flat.len() - 1] {
            let eps = 1e-2f32;
            let mut f = [0f32; 2];
            for (j, s) in [1.0f32, -1.0].iter().enumerate() {
                let mut p = flat.clone();
                p[i] += s * eps;
                var.set(&Tensor::from_vec(p, var.dims(), &Device::Cpu).unwrap())
                    .unwrap();
                f[j] = loss(&lin).to_scalar::<f32>().unwrap();
            }
            var.set(&orig).unwrap();
            let fd = (f[0] - f[1]) / (2.0 * eps);
            assert!(
                (fd - g[i]).abs() <= 2e-2 * g[i].abs().max(1.0),
                "fd {fd} vs {}",
                g[i]
            );
        }
    }
}

#[test]
fn dropout_only_in_training() {
    let (lin, _, _) = layer(BaseFormat::F32, 4, 0.5);
    randomise_b(&lin);
    let a = lin.forward(&x(), false).unwrap();
    let b = lin.forward(&x(), false).unwrap();
    assert_eq!(max_rel_diff(&a, &b), 0.0);
    let t = lin.forward(&x(), true).unwrap();
    assert!(max_rel_diff(&t, &a) > 1e-4);
}

#[test]
fn rules_by_kind_and_depth() {
    let mut cfg = LoraConfig::uniform(&LayerKind::ALL, 8, 16.0, BaseFormat::F32);
    cfg.rules.push(LoraRule {
        kinds: LayerKind::MLP.to_vec(),
        layers: 2..4,
        adapter: Some(AdapterSpec {
            rank: 2,
            alpha: 4.0,
        }),
    });
    cfg.rules.push(LoraRule {
        kinds: vec![LayerKind::K],
        layers: 0..1,
        adapter: None,
    });
    assert_eq!(cfg.adapter_for(LayerKind::Q, 0).unwrap().rank, 8);
    assert_eq!(cfg.adapter_for(LayerKind::Up, 1).unwrap().rank, 8);
    assert_eq!(cfg.adapter_for(LayerKind::Up, 3).unwrap().rank, 2);
    assert!(cfg.adapter_for(LayerKind::K, 0).is_none());
    assert_eq!(cfg.adapter_for(LayerKind::K, 1).unwrap().alpha, 16.0);
    let d = LoraConfig::default();
    assert_eq!(
        d.adapter_for(LayerKind::Down, 99).unwrap(),
        AdapterSpec {
            rank: 64,
            alpha: 16.0
        }
    );
}

#[test]
fn frozen_dense_base_gradient_matches_plain_matmul() {
    // The frozen f32/bf16 base goes through `FrozenLinearOp` (no weight gradient); the gradient
    // reaching the input must equal the one through a plain matmul with the same weight.
    for base in [BaseFormat::F32, BaseFormat::Bf16] {
        let (lin, _, _) = layer(base, 4, 0.0);
        randomise_b(&lin);
        let Base::Frozen(w) = lin.base() else {
            panic!("frozen base")
        };
        let w = w.to_dtype(candle_core::DType::F32).unwrap();
        let ad = lin.adapter().unwrap();
        let xv = candle_core::Var::from_tensor(&x()).unwrap();
        let y = lin.forward(xv.as_tensor(), true).unwrap();
        let g = y.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let delta = xv
            .as_tensor()
            .broadcast_matmul(&ad.a.as_tensor().t().unwrap())
            .unwrap()
            .broadcast_matmul(&ad.b.as_tensor().t().unwrap())
            .unwrap();
        let y_ref = (xv.as_tensor().broadcast_matmul(&w.t().unwrap()).unwrap()
            + (delta * ad.scale).unwrap())
        .unwrap();
        assert!(max_rel_diff(&y, &y_ref) < 1e-5, "{base:?}");
        let g_ref = y_ref.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        for t in [xv.as_tensor(), ad.a.as_tensor(), ad.b.as_tensor()] {
            let (a, b) = (g.get(t).unwrap(), g_ref.get(t).unwrap());
            assert!(max_rel_diff(a, b) < 1e-4, "{base:?}");
        }
    }
}

/// A rank of 0 or above the weight's smaller side, and a dropout outside [0, 1), are typed
/// errors, not panics.
#[test]
fn adapter_rank_and_dropout_are_checked() {
    let attach = |rank: usize, dropout: f32| {
        let mut store = ParamStore::new();
        let mut init = SeededInit::new(3);
        let mut lin = Linear::new("l", 96, 40, 0.1, &mut store, &mut init).unwrap();
        lin.attach_adapter(
            AdapterSpec { rank, alpha: 16.0 },
            dropout,
            &mut store,
            &mut init,
        )
    };
    for (rank, dropout) in [(0, 0.0), (41, 0.0), (8, 1.0), (8, -0.1)] {
        assert!(
            matches!(
                attach(rank, dropout),
                Err(ml_models::MlError::InvalidInput(_))
            ),
            "rank {rank}, dropout {dropout}"
        );
    }
    assert!(attach(40, 0.0).is_ok());
}
