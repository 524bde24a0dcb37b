//! The decoder: every parameter trains, overfitting, QLoRA on a micro model, checkpoints.

use candle_core::{Device, Tensor};
use ml_models::models::*;
use ml_models::qlora::*;
use ml_models::train::{NoCallback, ParamStore, SeededInit, TrainConfig, Trainer};

use crate::common::{max_abs, max_rel_diff, scratch};

fn micro() -> (Gpt, ParamStore, SeededInit) {
    let mut store = ParamStore::new();
    let mut init = SeededInit::new(1);
    let gpt = Gpt::new(GptConfig::micro(20), &mut store, &mut init).unwrap();
    (gpt, store, init)
}

fn batch() -> (Tensor, Tensor) {
    let ids: Vec<u32> = (0..34).map(|i| (i * 7 % 19 + 1) as u32).collect();
    let x = Tensor::from_vec([&ids[0..16], &ids[17..33]].concat(), (2, 16), &Device::Cpu).unwrap();
    let y = Tensor::from_vec([&ids[1..17], &ids[18..34]].concat(), (2, 16), &Device::Cpu).unwrap();
    (x, y)
}

#[test]
fn every_parameter_gets_a_nonzero_gradient() {
    let (gpt, store, _) = micro();
    let (x, y) = batch();
    let grads = gpt.loss(&x, &y, true).unwrap().backward().unwrap();
    assert_eq!(store.params().len(), 1 + 2 * 9 + 1);
    for p in store.params() {
        let g = grads
            .get(p.var.as_tensor())
            .unwrap_or_else(|| panic!("{} has no gradient", p.name));
        let n = max_abs(g);
        assert!(n > 0.0, "{} has an all-zero gradient", p.name);
    }
}

fn train(gpt: &Gpt, store: &ParamStore, steps: usize, lr: f64) -> Vec<f32> {
    let (x, y) = batch();
    let cfg = TrainConfig {
        lr,
        max_steps: steps,
        steps_per_epoch: steps,
        grad_clip: Some(1.0),
        ..TrainConfig::default()
    };
    let mut tr = Trainer::new(cfg, store).unwrap();
    tr.fit(
        store,
        &mut |_| gpt.loss(&x, &y, true),
        None,
        &mut NoCallback,
    )
    .unwrap()
    .losses
}

#[test]
fn overfits_a_fixed_batch() {
    let (gpt, store, _) = micro();
    let l = train(&gpt, &store, 60, 1e-2);
    assert!(
        (l[0] - (20f32).ln()).abs() < 0.3,
        "initial loss {} ≈ ln 20",
        l[0]
    );
    assert!(
        *l.last().unwrap() < 0.35 * l[0],
        "{} → {}",
        l[0],
        l.last().unwrap()
    );
}

#[test]
fn qlora_trains_only_adapters() {
    let (mut gpt, mut store, mut init) = micro();
    let (x, _) = batch();
    let before = gpt.forward(&x, false).unwrap();
    let embed0 = store.get("embed").unwrap().as_tensor().copy().unwrap();
    let cfg = LoraConfig::uniform(
        &LayerKind::ALL,
        4,
        8.0,
        BaseFormat::Nf4 { double_quant: true },
    );
    gpt.apply_lora(&cfg, &mut store, &mut init).unwrap();
    assert!(
        store.get("layers.0.attn.q.weight").is_none(),
        "NF4 base leaves the store"
    );
    let trainable: Vec<_> = store.trainable().map(|p| p.name.clone()).collect();
    assert_eq!(trainable.len(), 2 * 7 * 2);
    assert!(trainable.iter().all(|n| n.contains("lora_")));
    // At B = 0 the model is the NF4 model: close to, not equal to, the f32 one.
    let q = gpt.forward(&x, false).unwrap();
    let d = max_rel_diff(&q, &before);
    assert!(d > 0.0 && d < 0.05, "NF4 model deviates by {d}");
    let l = train(&gpt, &store, 40, 1e-2);
    assert!(
        *l.last().unwrap() < 0.9 * l[0],
        "{} → {}",
        l[0],
        l.last().unwrap()
    );
    assert_eq!(
        max_rel_diff(store.get("embed").unwrap().as_tensor(), &embed0),
        0.0
    );
    // Merging the adapters gives the same function.
    let unmerged = gpt.forward(&x, false).unwrap();
    gpt.set_merged(true).unwrap();
    assert!(max_rel_diff(&gpt.forward(&x, false).unwrap(), &unmerged) < 1e-4);
}

#[test]
fn checkpoint_roundtrip_and_wrong_model() {
    let (gpt, store, _) = micro();
    let (x, _) = batch();
    let dir = scratch("gpt");
    let p = dir.join("micro.safetensors");
    store.save(&p, &[]).unwrap();
    let mut s2 = ParamStore::new();
    let g2 = Gpt::new(GptConfig::micro(20), &mut s2, &mut SeededInit::new(99)).unwrap();
    s2.load(&p).unwrap();
    assert_eq!(
        max_rel_diff(
            &g2.forward(&x, false).unwrap(),
            &gpt.forward(&x, false).unwrap()
        ),
        0.0
    );
    let mut s3 = ParamStore::new();
    Gpt::new(GptConfig::micro(21), &mut s3, &mut SeededInit::new(1)).unwrap();
    assert!(matches!(
        s3.load(&p),
        Err(ml_models::MlError::ShapeMismatch { .. })
    ));
}

#[test]
fn detached_view_matches_and_builds_no_graph() {
    let (mut gpt, mut store, mut init) = micro();
    let (x, y) = batch();
    let full = gpt.loss(&x, &y, false).unwrap();
    assert!(full.track_op(), "training forward must build a graph");
    let view = gpt.detached();
    let eval = view.loss(&x, &y, false).unwrap();
    assert!(!eval.track_op(), "evaluation view must not build a graph");
    assert!(max_rel_diff(&eval, &full) < 1e-6);
    // With QLoRA adapters (B randomised so they contribute), and after a training step the view
    // sees the updated weights without being rebuilt.
    let lc = LoraConfig::uniform(
        &LayerKind::ALL,
        2,
        4.0,
        BaseFormat::Nf4 { double_quant: true },
    );
    gpt.apply_lora(&lc, &mut store, &mut init).unwrap();
    let view = gpt.detached();
    train(&gpt, &store, 3, 1e-2);
    let (a, b) = (
        gpt.loss(&x, &y, false).unwrap(),
        view.loss(&x, &y, false).unwrap(),
    );
    assert!(a.track_op() && !b.track_op());
    assert!(max_rel_diff(&b, &a) < 1e-6);
    assert!(max_rel_diff(&a, &full) > 1e-4, "training changed nothing");
}

#[test]
fn budget_splits_keep_the_trainable_parameter_budget() {
    use ml_models::qlora::budget_splits;
    for (r, per_rank) in [
        (8usize, (2048usize, 2880usize)),
        (8, (3072, 3840)),
        (4, (1024, 1536)),
    ] {
        let budget = r * (per_rank.0 + per_rank.1);
        let splits = budget_splits(r, per_rank);
        assert_eq!(splits[1], ("balanced", r, r));
        assert!(splits[0].1 > r && splits[0].2 < r && splits[2].1 < r && splits[2].2 > r);
        for (_, ra, rm) in splits {
            let used = ra * per_rank.0 + rm * per_rank.1;
            // Rounding the MLP rank moves the count by at most half an MLP rank step.
            assert!(
                used.abs_diff(budget) <= per_rank.1 / 2,
                "{ra}/{rm}: {used} vs {budget}"
            );
        }
    }
}
