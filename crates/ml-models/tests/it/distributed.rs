//! Data-parallel training over `collectives` follows the single-rank loss curve.

use candle_core::{Device, Tensor};
use ml_models::train::distributed::DataParallel;
use ml_models::train::{NoCallback, ParamStore, SeededInit, TrainConfig, Trainer};

/// Trains `w` on rows `rows` of a fixed 32×4 least-squares problem; returns (losses, w).
fn train(rows: std::ops::Range<usize>, sync: Option<DataParallel>) -> (Vec<f32>, Vec<f32>) {
    let dev = Device::Cpu;
    let x = SeededInit::new(3).normal(&[32, 4], 1.0, &dev).unwrap();
    let y = x
        .matmul(&Tensor::new(&[[1.0f32], [-2.0], [0.5], [3.0]], &dev).unwrap())
        .unwrap();
    let (x, y) = (
        x.narrow(0, rows.start, rows.len()).unwrap(),
        y.narrow(0, rows.start, rows.len()).unwrap(),
    );
    let mut store = ParamStore::new();
    let w = store
        .add(
            "w",
            Tensor::zeros((4, 1), candle_core::DType::F32, &dev).unwrap(),
            true,
        )
        .unwrap();
    let cfg = TrainConfig {
        lr: 0.05,
        max_steps: 25,
        steps_per_epoch: 25,
        ..TrainConfig::default()
    };
    let mut tr = Trainer::new(cfg, &store).unwrap();
    if let Some(s) = sync {
        tr.set_grad_sync(Box::new(s));
    }
    let mut loss = |_| Ok(x.matmul(w.as_tensor())?.sub(&y)?.sqr()?.mean_all()?);
    let rep = tr.fit(&store, &mut loss, None, &mut NoCallback).unwrap();
    (
        rep.losses,
        w.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
    )
}

#[test]
fn two_ranks_match_one_rank_with_the_global_batch() {
    let (l1, w1) = train(0..32, None);
    let out = collectives::run_local(2, |comm| {
        let r = comm.rank();
        train(16 * r..16 * (r + 1), Some(DataParallel::new(comm.clone())))
    })
    .unwrap();
    for (a, b) in out[0].1.iter().zip(&w1) {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{:?} vs {w1:?}",
            out[0].1
        );
    }
    assert_eq!(out[0].1, out[1].1, "ranks agree exactly");
    // The global loss is the mean of the two shard losses.
    for (i, g) in l1.iter().enumerate() {
        let m = (out[0].0[i] + out[1].0[i]) / 2.0;
        assert!((m - g).abs() <= 1e-5 * g.max(1.0), "step {i}: {m} vs {g}");
    }
}
