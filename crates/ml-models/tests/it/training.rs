//! Training loop, AdamW resume, early stopping, checkpoint errors.

use candle_core::{Device, Tensor};
use ml_models::train::{NoCallback, ParamStore, SeededInit, TrainConfig, Trainer};
use ml_models::MlError;

use crate::common::scratch;

/// A linear least-squares problem `min ‖Xw − y‖²` with 4 unknowns.
fn regression() -> (ParamStore, Tensor, Tensor) {
    let dev = Device::Cpu;
    let mut init = SeededInit::new(7);
    let x = init.normal(&[32, 4], 1.0, &dev).unwrap();
    let w_true = Tensor::new(&[[1.0f32], [-2.0], [0.5], [3.0]], &dev).unwrap();
    let y = x.matmul(&w_true).unwrap();
    let mut store = ParamStore::new();
    store
        .add(
            "w",
            Tensor::zeros((4, 1), candle_core::DType::F32, &dev).unwrap(),
            true,
        )
        .unwrap();
    (store, x, y)
}

fn mse(store: &ParamStore, x: &Tensor, y: &Tensor) -> ml_models::Result<Tensor> {
    let w = store.get("w").unwrap().as_tensor();
    Ok(x.matmul(w)?.sub(y)?.sqr()?.mean_all()?)
}

fn cfg(steps: usize) -> TrainConfig {
    TrainConfig {
        lr: 0.05,
        grad_clip: None,
        max_steps: steps,
        steps_per_epoch: 10,
        ..TrainConfig::default()
    }
}

#[test]
fn training_reduces_loss_and_calls_back() {
    let (store, x, y) = regression();
    struct Count(usize, usize);
    impl ml_models::train::TrainCallback for Count {
        fn on_step(&mut self, _: &ml_models::train::StepMetrics) {
            self.0 += 1;
        }
        fn on_epoch(&mut self, _: &ml_models::train::EpochMetrics) {
            self.1 += 1;
        }
    }
    let mut cb = Count(0, 0);
    let mut tr = Trainer::new(cfg(200), &store).unwrap();
    let rep = tr
        .fit(&store, &mut |_| mse(&store, &x, &y), None, &mut cb)
        .unwrap();
    assert_eq!((cb.0, cb.1), (200, 20));
    assert!(
        rep.losses[199] < 1e-2 * rep.losses[0],
        "{:?}",
        &rep.losses[190..]
    );
}

#[test]
fn resume_continues_exactly() {
    let dir = scratch("resume");
    let ck = dir.join("ck.safetensors");
    // Straight run of 40 steps.
    let (s1, x, y) = regression();
    Trainer::new(cfg(40), &s1)
        .unwrap()
        .fit(&s1, &mut |_| mse(&s1, &x, &y), None, &mut NoCallback)
        .unwrap();
    // 20 steps with checkpoints, then a fresh trainer resumes to 40.
    let (s2, _, _) = regression();
    let c = TrainConfig {
        checkpoint: Some(ck.clone()),
        ..cfg(20)
    };
    Trainer::new(c, &s2)
        .unwrap()
        .fit(&s2, &mut |_| mse(&s2, &x, &y), None, &mut NoCallback)
        .unwrap();
    let (s3, _, _) = regression();
    let mut tr = Trainer::new(cfg(40), &s3).unwrap();
    tr.resume(&s3, &ck).unwrap();
    assert_eq!(tr.steps(), 20);
    tr.fit(&s3, &mut |_| mse(&s3, &x, &y), None, &mut NoCallback)
        .unwrap();
    let a = s1.get("w").unwrap().as_tensor().to_vec2::<f32>().unwrap();
    let b = s3.get("w").unwrap().as_tensor().to_vec2::<f32>().unwrap();
    for (p, q) in a.iter().zip(&b) {
        assert!((p[0] - q[0]).abs() < 1e-6, "{a:?} vs {b:?}");
    }
}

/// Per-parameter learning-rate factors (`Trainer::scale_lr`, e.g. a fine-tuned encoder under a
/// new head) are part of the optimiser state: a run resumed by a trainer that never set them
/// makes the same updates as the uninterrupted run (warm-up included), bit for bit.
#[test]
fn resume_keeps_learning_rate_factors() {
    let dir = scratch("resume-lr-scale");
    let ck = dir.join("ck.safetensors");
    let dev = Device::Cpu;
    // Two parameter groups: an "encoder" w and a "head" h, y ≈ (X·w)·h.
    let model = || {
        let (mut store, x, y) = regression();
        store
            .add("head.h", Tensor::new(&[0.5f32], &dev).unwrap(), true)
            .unwrap();
        (store, x, y)
    };
    let loss = |store: &ParamStore, x: &Tensor, y: &Tensor| -> ml_models::Result<Tensor> {
        let w = store.get("w").unwrap().as_tensor();
        let h = store.get("head.h").unwrap().as_tensor();
        Ok(x.matmul(w)?.broadcast_mul(h)?.sub(y)?.sqr()?.mean_all()?)
    };
    let c = |steps: usize| TrainConfig {
        warmup_steps: 12,
        grad_clip: Some(1.0),
        ..cfg(steps)
    };
    let scaled = |tr: &mut Trainer| assert_eq!(tr.scale_lr(0.1, |n| n == "w").unwrap(), 1);
    let values = |s: &ParamStore| -> Vec<f32> {
        s.params()
            .iter()
            .flat_map(|p| {
                p.var
                    .as_tensor()
                    .flatten_all()
                    .unwrap()
                    .to_vec1::<f32>()
                    .unwrap()
            })
            .collect()
    };
    // Uninterrupted: 30 steps.
    let (s1, x, y) = model();
    let mut tr = Trainer::new(c(30), &s1).unwrap();
    scaled(&mut tr);
    tr.fit(&s1, &mut |_| loss(&s1, &x, &y), None, &mut NoCallback)
        .unwrap();
    // Interrupted after 10 steps (inside the 12-step warm-up), resumed by a trainer that never
    // called `scale_lr`.
    let (s2, _, _) = model();
    let mut tr = Trainer::new(
        TrainConfig {
            checkpoint: Some(ck.clone()),
            ..c(10)
        },
        &s2,
    )
    .unwrap();
    scaled(&mut tr);
    tr.fit(&s2, &mut |_| loss(&s2, &x, &y), None, &mut NoCallback)
        .unwrap();
    let (s3, _, _) = model();
    let mut tr = Trainer::new(c(30), &s3).unwrap();
    tr.resume(&s3, &ck).unwrap();
    tr.fit(&s3, &mut |_| loss(&s3, &x, &y), None, &mut NoCallback)
        .unwrap();
    assert_eq!(
        values(&s1),
        values(&s3),
        "resumed run equals the straight run"
    );
    // Without the stored factors (a trainer resuming at factor 1) the run differs, so the
    // comparison above can fail.
    let (s4, _, _) = model();
    let mut tr = Trainer::new(c(30), &s4).unwrap();
    let mut state = ml_models::train::params::read_checkpoint(&ck, &dev).unwrap();
    state.retain(|k, _| !k.starts_with("adamw.lr_scale."));
    s4.load(&ck).unwrap();
    let mut opt = ml_models::train::AdamW::new(&s4, Default::default()).unwrap();
    opt.load_state(&state).unwrap();
    assert_eq!(
        opt.lr_scales(),
        &[1.0, 1.0],
        "old state: the factors set here stay"
    );
    let mut st = ml_models::train::params::read_checkpoint(&ck, &dev).unwrap();
    st.insert(
        "adamw.lr_scale.w".into(),
        Tensor::new(&[f64::NAN], &dev).unwrap(),
    );
    let before = opt.lr_scales().to_vec();
    assert!(matches!(opt.load_state(&st), Err(MlError::InvalidInput(_))));
    assert_eq!(
        opt.lr_scales(),
        before.as_slice(),
        "unchanged after an error"
    );
    tr.resume(&s4, &ck).unwrap();
    assert_eq!(tr.scale_lr(1.0, |n| n == "w").unwrap(), 1);
    tr.fit(&s4, &mut |_| loss(&s4, &x, &y), None, &mut NoCallback)
        .unwrap();
    assert_ne!(values(&s1), values(&s4));
}

/// The values of every parameter of `s`, flattened in order.
fn values_of(s: &ParamStore) -> Vec<f32> {
    s.params()
        .iter()
        .flat_map(|p| {
            p.var
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap()
        })
        .collect()
}

/// A 20-step run of `regression` with checkpoints; returns the checkpoint's tensors.
fn checkpointed_run(
    name: &str,
) -> (
    std::path::PathBuf,
    std::collections::HashMap<String, Tensor>,
) {
    let dir = scratch(name);
    let ck = dir.join("ck.safetensors");
    let (s, x, y) = regression();
    let c = TrainConfig {
        checkpoint: Some(ck.clone()),
        ..cfg(20)
    };
    Trainer::new(c, &s)
        .unwrap()
        .fit(&s, &mut |_| mse(&s, &x, &y), None, &mut NoCallback)
        .unwrap();
    let map = ml_models::train::params::read_checkpoint(&ck, &Device::Cpu).unwrap();
    (dir, map)
}

/// `Trainer::resume` is all or nothing: a checkpoint whose parameters are fine but whose
/// optimiser state is not (a bad learning-rate factor, a missing step count or moment) is
/// refused and leaves both the parameters and the trainer as they were (it used to install
/// the parameters first, then fail on the optimiser state).
#[test]
fn a_failed_resume_changes_nothing() {
    let (dir, good) = checkpointed_run("resume-atomic");
    type Spoil = fn(&mut std::collections::HashMap<String, Tensor>);
    let spoils: [(&str, Spoil); 4] = [
        ("nan factor", |m| {
            m.insert(
                "adamw.lr_scale.w".into(),
                Tensor::new(&[f64::NAN], &Device::Cpu).unwrap(),
            );
        }),
        ("negative factor", |m| {
            m.insert(
                "adamw.lr_scale.w".into(),
                Tensor::new(&[-0.5f64], &Device::Cpu).unwrap(),
            );
        }),
        ("no step count", |m| {
            m.remove("adamw.t");
        }),
        ("no moment", |m| {
            m.remove("adamw.v.w");
        }),
    ];
    for (what, spoil) in spoils {
        let mut map = good.clone();
        spoil(&mut map);
        let bad = dir.join("bad.safetensors");
        candle_core::safetensors::save(&map, &bad).unwrap();
        let start = || {
            let (s, x, y) = regression();
            s.get("w")
                .unwrap()
                .set(&Tensor::new(&[[9.0f32], [8.0], [7.0], [6.0]], &Device::Cpu).unwrap())
                .unwrap();
            (s, x, y)
        };
        let (s, x, y) = start();
        let before = values_of(&s);
        let mut tr = Trainer::new(cfg(40), &s).unwrap();
        tr.scale_lr(0.25, |_| true).unwrap();
        let e = tr.resume(&s, &bad).unwrap_err();
        match (&e, what) {
            (MlError::InvalidInput(_), "nan factor" | "negative factor") => {}
            (MlError::MissingTensor { path, .. }, "no step count" | "no moment") => {
                assert_eq!(path, &bad, "the error names the file")
            }
            _ => panic!("{what}: {e:?}"),
        }
        assert_eq!(values_of(&s), before, "{what}: parameters untouched");
        assert_eq!(tr.steps(), 0, "{what}: optimiser untouched");
        // The factor set before the refused resume is still in force: a step equals the step
        // of a fresh trainer with that factor (and differs from one at factor 1).
        let stepped = |factor: Option<f64>| {
            let (s2, x2, y2) = start();
            let mut t = Trainer::new(cfg(40), &s2).unwrap();
            if let Some(f) = factor {
                t.scale_lr(f, |_| true).unwrap();
            }
            t.step_once(&mut |_| mse(&s2, &x2, &y2)).unwrap();
            values_of(&s2)
        };
        tr.step_once(&mut |_| mse(&s, &x, &y)).unwrap();
        assert_eq!(values_of(&s), stepped(Some(0.25)), "{what}: factor kept");
        assert_ne!(values_of(&s), stepped(None));
        // The trainer still runs from scratch with its own factor.
        tr.resume(&s, &dir.join("ck.safetensors")).unwrap();
        assert_eq!(tr.steps(), 20, "{what}: a good checkpoint still resumes");
    }
}

/// `scale_lr` applies the check `resume` applies (one function): what one refuses the other
/// refuses, what one accepts survives a save and resume.
#[test]
fn scale_lr_and_resume_accept_the_same_factors() {
    let (dir, good) = checkpointed_run("lr-factor-check");
    for f in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.5,
        -f64::MIN_POSITIVE,
    ] {
        let (s, _, _) = regression();
        let mut tr = Trainer::new(cfg(40), &s).unwrap();
        assert!(
            matches!(tr.scale_lr(f, |_| true), Err(MlError::InvalidInput(_))),
            "scale_lr({f})"
        );
        assert!(matches!(
            ml_models::train::optim::check_lr_factor(f, "factor"),
            Err(MlError::InvalidInput(_))
        ));
        let mut map = good.clone();
        map.insert(
            "adamw.lr_scale.w".into(),
            Tensor::new(&[f], &Device::Cpu).unwrap(),
        );
        let p = dir.join("factor.safetensors");
        candle_core::safetensors::save(&map, &p).unwrap();
        assert!(
            matches!(tr.resume(&s, &p), Err(MlError::InvalidInput(_))),
            "resume with {f}"
        );
    }
    for f in [0.0, 1e-3, 1.0, 1e300] {
        let (s, _, _) = regression();
        let mut tr = Trainer::new(cfg(40), &s).unwrap();
        assert_eq!(tr.scale_lr(f, |_| true).unwrap(), 1, "scale_lr({f})");
        let mut map = good.clone();
        map.insert(
            "adamw.lr_scale.w".into(),
            Tensor::new(&[f], &Device::Cpu).unwrap(),
        );
        let p = dir.join("factor.safetensors");
        candle_core::safetensors::save(&map, &p).unwrap();
        tr.resume(&s, &p)
            .unwrap_or_else(|e| panic!("resume with {f}: {e}"));
    }
}

/// Per-epoch checkpoints replace the previous one atomically and leave no temporary file.
#[test]
fn checkpoints_leave_only_the_checkpoint() {
    let (dir, _) = checkpointed_run("ck-only");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["ck.safetensors"]);
}

#[test]
fn early_stopping_and_restore_best() {
    let (store, x, y) = regression();
    let mut calls = 0;
    // Metric improves twice, then worsens forever: stop after `patience` bad epochs.
    let mut eval = || -> ml_models::Result<f32> {
        calls += 1;
        Ok([3.0, 2.0, 1.0, 5.0, 6.0, 7.0, 8.0][calls - 1])
    };
    let c = TrainConfig {
        patience: Some(2),
        ..cfg(1000)
    };
    let rep = Trainer::new(c, &store)
        .unwrap()
        .fit(
            &store,
            &mut |_| mse(&store, &x, &y),
            Some(&mut eval),
            &mut NoCallback,
        )
        .unwrap();
    assert!(rep.stopped_early);
    assert_eq!(rep.steps, 50);
    assert_eq!(rep.best_eval, Some(1.0));
}

#[test]
fn checkpoint_errors_are_typed() {
    let dir = scratch("ckerr");
    let (store, _, _) = regression();
    let p = dir.join("w.safetensors");
    store.save(&p, &[]).unwrap();
    store.load(&p).unwrap();
    // Truncated file.
    let bytes = std::fs::read(&p).unwrap();
    let bad = dir.join("trunc.safetensors");
    std::fs::write(&bad, &bytes[..bytes.len() - 3]).unwrap();
    assert!(matches!(
        store.load(&bad),
        Err(MlError::CorruptCheckpoint { .. })
    ));
    std::fs::write(&bad, b"not a checkpoint at all").unwrap();
    assert!(matches!(
        store.load(&bad),
        Err(MlError::CorruptCheckpoint { .. })
    ));
    // Wrong shape.
    let other = column_store("w", 5);
    let o = dir.join("other.safetensors");
    other.save(&o, &[]).unwrap();
    assert!(matches!(store.load(&o), Err(MlError::ShapeMismatch { .. })));
    // Missing tensor.
    let renamed = column_store("v", 4);
    renamed.save(&o, &[]).unwrap();
    assert!(matches!(store.load(&o), Err(MlError::MissingTensor { .. })));
    assert!(matches!(
        store.load(&dir.join("absent")),
        Err(MlError::Io { .. })
    ));
}

#[test]
fn divergence_is_an_error() {
    let (store, _, _) = regression();
    let mut tr = Trainer::new(cfg(5), &store).unwrap();
    let w = store.get("w").unwrap().clone();
    let r = tr.fit(
        &store,
        &mut |_| Ok((w.as_tensor().sum_all()? / 0.0)?),
        None,
        &mut NoCallback,
    );
    assert!(matches!(r, Err(MlError::Diverged { step: 0, .. })));
}

/// A store with one trainable zero column `name` of `rows` rows.
fn column_store(name: &str, rows: usize) -> ParamStore {
    let mut store = ParamStore::new();
    let zeros = Tensor::zeros((rows, 1), candle_core::DType::F32, &Device::Cpu).unwrap();
    store.add(name, zeros, true).unwrap();
    store
}
