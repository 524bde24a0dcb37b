use std::io::Write;
use std::path::Path;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;
use crate::MlError;

/// `k` Gaussian blobs in `d` dimensions, `n` rows each, squashed into `[0, 1]`.
fn blobs(k: u32, d: usize, n: usize, spread: f32, seed: u64) -> ClassData {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let centres: Vec<Vec<f32>> = (0..k)
        .map(|_| (0..d).map(|_| rng.random::<f32>()).collect())
        .collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for c in 0..k {
        for _ in 0..n {
            for &m in &centres[c as usize] {
                let v = m + spread * (rng.random::<f32>() - 0.5);
                x.push(v.clamp(0.0, 1.0));
            }
            y.push(c);
        }
    }
    ClassData::new(x, y, d, None).unwrap()
}

fn stream(k: u32, tasks: usize, ratio: f64, seed: u64) -> TaskStream {
    let (tr, te) = blobs(k, 8, 30, 0.2, seed)
        .stratified_split(0.3, seed)
        .unwrap();
    TaskStream::new(
        tr,
        te,
        &StreamConfig {
            tasks,
            label_ratio: ratio,
            seed,
            class_order: None,
        },
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn task_streams_never_leak_future_classes(
        k in 2u32..11, tasks in 1usize..6, ratio in 0.01f64..1.0, seed in 0u64..1000,
    ) {
        prop_assume!(tasks <= k as usize);
        let s = stream(k, tasks, ratio, seed);
        let mut all: Vec<u32> = s.tasks.iter().flat_map(|t| t.classes.clone()).collect();
        prop_assert_eq!(all.len(), k as usize);
        all.sort_unstable();
        all.dedup();
        prop_assert_eq!(all.len(), k as usize, "classes are disjoint");
        for (t, task) in s.tasks.iter().enumerate() {
            prop_assert!(!task.classes.is_empty());
            for &i in task.labeled.iter().chain(&task.unlabeled) {
                prop_assert!(task.classes.contains(&s.train.y[i]));
            }
            for &i in &task.test {
                prop_assert!(task.classes.contains(&s.test.y[i]));
            }
            for &c in &task.classes {
                let n = s.train.y.iter().filter(|&&y| y == c).count();
                let lab = task.labeled.iter().filter(|&&i| s.train.y[i] == c).count();
                let want = ((ratio * n as f64).round() as usize).clamp(1, n);
                prop_assert_eq!(lab, want);
            }
            // Evaluation after task t covers exactly the classes of tasks 0..=t.
            let seen: Vec<u32> = s.tasks[..=t].iter().flat_map(|k| k.classes.clone()).collect();
            let rows = s.test_seen(t);
            prop_assert!(rows.iter().all(|&i| seen.contains(&s.test.y[i])));
            let expected = s.test.y.iter().filter(|y| seen.contains(y)).count();
            prop_assert_eq!(rows.len(), expected);
            // The learner's view: targets of this task only, as head outputs after the old ones.
            let v = s.task_view(t);
            let lo = s.seen_classes(t) - task.classes.len();
            prop_assert!(v.labeled_y.iter().all(|&y| (lo as u32..s.seen_classes(t) as u32).contains(&y)));
            prop_assert_eq!(v.unlabeled_x.len(), task.unlabeled.len() * s.train.dim);
            for &y in &v.labeled_y {
                prop_assert_eq!(s.task_of_target()[y as usize], t);
            }
        }
    }

    #[test]
    fn memory_never_exceeds_its_size(
        cap in 0usize..40, frac in 0.0f64..=1.0, herding in any::<bool>(),
        ops in proptest::collection::vec((any::<bool>(), 0u32..6, 1usize..30), 1..30),
    ) {
        let selection = if herding { Selection::Herding } else { Selection::Reservoir };
        let mut m = MemoryBuffer::new(
            BufferConfig { capacity: cap, labeled_fraction: frac, labeled_selection: selection },
            7,
        ).unwrap();
        prop_assert_eq!(m.labeled_capacity() + m.unlabeled_capacity(), cap);
        let mut rng = ChaCha8Rng::seed_from_u64(cap as u64);
        for (labeled, class, n) in ops {
            let rows: Vec<Sample> = (0..n)
                .map(|_| Sample {
                    x: vec![rng.random(), rng.random()],
                    y: labeled.then_some(class),
                    logits: vec![],
                    record: vec![],
                task_classes: (0, 1),
                })
                .collect();
            if labeled && herding {
                let feats = rows.iter().map(|s| s.x.clone()).collect();
                m.add_herded(vec![(rows, feats)]).unwrap();
            } else {
                for r in rows {
                    m.offer(r).unwrap();
                }
            }
            prop_assert!(m.len() <= cap);
            prop_assert!(m.labeled().len() <= m.labeled_capacity());
            prop_assert!(m.unlabeled().len() <= m.unlabeled_capacity());
            prop_assert!(m.labeled().iter().all(|s| s.y.is_some()));
            prop_assert!(m.unlabeled().iter().all(|s| s.y.is_none()));
        }
    }

    #[test]
    fn herding_matches_a_brute_force_reference(
        rows in proptest::collection::vec(proptest::collection::vec(0.1f32..1.0, 3), 1..12),
        m in 0usize..14,
    ) {
        // Reference: at step k try every unused row and keep the first of the smallest
        // distances between the class mean and the mean of the chosen rows plus that row.
        let unit: Vec<Vec<f64>> = rows.iter().map(|r| {
            let n = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
            r.iter().map(|&v| v as f64 / n).collect()
        }).collect();
        let mu: Vec<f64> = (0..3).map(|j| unit.iter().map(|u| u[j]).sum::<f64>() / unit.len() as f64).collect();
        let mut chosen: Vec<usize> = Vec::new();
        while chosen.len() < m.min(unit.len()) {
            let best = (0..unit.len()).filter(|i| !chosen.contains(i)).map(|i| {
                let k = chosen.len() + 1;
                let d: f64 = (0..3).map(|j| {
                    let s: f64 = chosen.iter().map(|&c| unit[c][j]).sum::<f64>() + unit[i][j];
                    (mu[j] - s / k as f64).powi(2)
                }).sum();
                (d, i)
            }).fold((f64::INFINITY, 0), |a, b| if b.0 < a.0 { b } else { a });
            chosen.push(best.1);
        }
        let got = herding_order(&rows, m);
        prop_assert_eq!(got.len(), chosen.len());
        // Ties in floating point may order differently; the chosen sets' means must agree.
        for (j, _) in mu.iter().enumerate() {
            let a: f64 = got.iter().map(|&i| unit[i][j]).sum();
            let b: f64 = chosen.iter().map(|&i| unit[i][j]).sum();
            prop_assert!((a - b).abs() < 1e-9);
        }
    }
}

#[test]
fn reservoir_keeps_every_offered_row_with_equal_chance() {
    let (n, cap, trials) = (50usize, 10usize, 1500u64);
    let mut hits = vec![0u32; n];
    for seed in 0..trials {
        let mut m = MemoryBuffer::new(
            BufferConfig {
                capacity: cap,
                labeled_fraction: 1.0,
                labeled_selection: Selection::Reservoir,
            },
            seed,
        )
        .unwrap();
        for i in 0..n {
            m.offer(Sample {
                x: vec![i as f32],
                y: Some(0),
                logits: vec![],
                record: vec![],
                task_classes: (0, 1),
            })
            .unwrap();
        }
        assert_eq!(m.len(), cap);
        for s in m.labeled() {
            hits[s.x[0] as usize] += 1;
        }
    }
    // Each row is kept with probability cap / n = 0.2: 300 of 1500, binomial sd ≈ 15.5.
    for (i, &h) in hits.iter().enumerate() {
        assert!(
            (240..=360).contains(&h),
            "row {i} kept {h} times of {trials}"
        );
    }
}

#[test]
fn herding_memory_gives_each_class_an_equal_quota() {
    let mut m = MemoryBuffer::new(
        BufferConfig {
            capacity: 12,
            labeled_fraction: 1.0,
            labeled_selection: Selection::Herding,
        },
        0,
    )
    .unwrap();
    let class = |c: u32, n: usize| {
        let rows: Vec<Sample> = (0..n)
            .map(|i| Sample {
                x: vec![c as f32, i as f32 + 1.0],
                y: Some(c),
                logits: vec![],
                record: vec![],
                task_classes: (0, 1),
            })
            .collect();
        let f = rows.iter().map(|s| s.x.clone()).collect();
        (rows, f)
    };
    m.add_herded(vec![class(0, 10), class(1, 10)]).unwrap();
    assert_eq!(m.labeled().len(), 12);
    let first: Vec<Sample> = m
        .labeled()
        .iter()
        .filter(|s| s.y == Some(0))
        .cloned()
        .collect();
    m.add_herded(vec![class(2, 10)]).unwrap();
    for c in 0..3 {
        assert_eq!(m.labeled().iter().filter(|s| s.y == Some(c)).count(), 4);
    }
    // Shrinking keeps the herding prefix.
    let kept: Vec<&Sample> = m.labeled().iter().filter(|s| s.y == Some(0)).collect();
    for (a, b) in kept.iter().zip(&first) {
        assert_eq!(*a, b);
    }
    assert!(matches!(
        m.offer(Sample {
            x: vec![0.0, 0.0],
            y: Some(0),
            logits: vec![],
            record: vec![],
            task_classes: (0, 1),
        }),
        Err(MlError::InvalidInput(_))
    ));
}

#[test]
fn accuracy_bookkeeping_on_a_hand_built_confusion_case() {
    // Three tasks: targets 0,1 (task 0), 2,3 (task 1), 4 (task 2).
    let task_of = [0usize, 0, 1, 1, 2];
    // After task 0: 4 rows, 3 right.
    let e0 = TaskEval::from_predictions(&[0, 1, 1, 1], &[0, 0, 1, 1], &task_of, 0).unwrap();
    assert_eq!(e0.per_task, vec![0.75]);
    assert_eq!(e0.seen_accuracy, 0.75);
    // After task 1: task 0 rows 1 of 4 right (confused with new classes), task 1 2 of 2.
    let e1 =
        TaskEval::from_predictions(&[2, 3, 1, 2, 2, 3], &[0, 0, 1, 1, 2, 3], &task_of, 1).unwrap();
    assert_eq!(e1.per_task, vec![0.25, 1.0]);
    assert!((e1.seen_accuracy - 3.0 / 6.0).abs() < 1e-12);
    // After task 2: task 0 2/4, task 1 1/2, task 2 2/2.
    let e2 = TaskEval::from_predictions(
        &[0, 4, 1, 4, 2, 4, 4, 4],
        &[0, 0, 1, 1, 2, 3, 4, 4],
        &task_of,
        2,
    )
    .unwrap();
    assert_eq!(e2.per_task, vec![0.5, 0.5, 1.0]);
    assert_eq!(e2.seen_accuracy, 5.0 / 8.0);
    let m = CilMetrics {
        evals: vec![e0, e1, e2],
    };
    assert_eq!(m.accuracy_curve(), vec![0.75, 0.5, 0.625]);
    assert!((m.average_incremental_accuracy() - (0.75 + 0.5 + 0.625) / 3.0).abs() < 1e-12);
    assert_eq!(m.final_accuracy(), 0.625);
    // Forgetting: task 0 best 0.75 (after task 0) − 0.5; task 1 best 1.0 − 0.5; mean 0.375.
    assert!((m.average_forgetting() - 0.375).abs() < 1e-12);
    // A future class in the evaluation is refused.
    assert!(TaskEval::from_predictions(&[0], &[2], &task_of, 0).is_err());
    assert!(TaskEval::from_predictions(&[0, 1], &[0], &task_of, 0).is_err());
}

fn write_idx(path: &Path, bytes: &[u8]) {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes).unwrap();
    std::fs::write(path, gz.finish().unwrap()).unwrap();
}

fn idx_bytes(ty: u8, shape: &[u32], body: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, ty, shape.len() as u8];
    for d in shape {
        b.extend(d.to_be_bytes());
    }
    b.extend_from_slice(body);
    b
}

#[test]
fn corrupt_idx_files_give_typed_errors() {
    let dir = std::env::temp_dir().join(format!("ml-models-cil-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (im, lb) = (dir.join("im.gz"), dir.join("lb.gz"));
    let pixels: Vec<u8> = (0..2 * 4 * 4).map(|i| (i * 7) as u8).collect();
    write_idx(&im, &idx_bytes(0x08, &[2, 4, 4], &pixels));
    write_idx(&lb, &idx_bytes(0x08, &[2], &[3, 1]));
    let ok = ClassData::from_idx(&im, &lb).unwrap();
    assert_eq!(
        (ok.len(), ok.dim, ok.image, ok.classes),
        (2, 16, Some((4, 4)), 4)
    );
    assert_eq!(ok.x[1], 7.0 / 255.0);
    let fmt = |r: crate::Result<ClassData>| matches!(r, Err(MlError::Format { format: "idx", .. }));
    // Bad magic.
    let mut bad = idx_bytes(0x08, &[2], &[3, 1]);
    bad[0] = 0x12;
    write_idx(&lb, &bad);
    assert!(fmt(ClassData::from_idx(&im, &lb)));
    // Truncated body.
    write_idx(&lb, &idx_bytes(0x08, &[2], &[3]));
    assert!(fmt(ClassData::from_idx(&im, &lb)));
    // Truncated gzip stream.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&idx_bytes(0x08, &[2, 4, 4], &pixels)).unwrap();
    let full = gz.finish().unwrap();
    std::fs::write(&im, &full[..full.len() / 2]).unwrap();
    write_idx(&lb, &idx_bytes(0x08, &[2], &[3, 1]));
    assert!(fmt(ClassData::from_idx(&im, &lb)));
    // Counts that differ, and labels stored as images.
    write_idx(&im, &idx_bytes(0x08, &[2, 4, 4], &pixels));
    write_idx(&lb, &idx_bytes(0x08, &[3], &[3, 1, 0]));
    assert!(fmt(ClassData::from_idx(&im, &lb)));
    assert!(fmt(ClassData::from_idx(&im, &im)));
    assert!(matches!(
        ClassData::from_idx(&dir.join("missing"), &lb),
        Err(MlError::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn csv_labels_must_be_class_indices() {
    let dir = std::env::temp_dir().join(format!("ml-models-cil-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("d.csv");
    std::fs::write(&p, "0,8,16,1\n4,0,2,0\n").unwrap();
    let d = ClassData::from_csv_label_last(&p, None).unwrap();
    assert_eq!(d.y, vec![1, 0]);
    assert_eq!(d.x, vec![0.0, 0.5, 1.0, 0.25, 0.0, 0.125]);
    std::fs::write(&p, "0,8,16,1.5\n").unwrap();
    assert!(matches!(
        ClassData::from_csv_label_last(&p, None),
        Err(MlError::Format { .. })
    ));
    std::fs::write(&p, "0,8,16,-1\n").unwrap();
    assert!(ClassData::from_csv_label_last(&p, None).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_stream_configurations_are_refused() {
    let (tr, te) = blobs(4, 3, 10, 0.1, 0).stratified_split(0.3, 0).unwrap();
    let new = |tasks, label_ratio, class_order| {
        TaskStream::new(
            tr.clone(),
            te.clone(),
            &StreamConfig {
                tasks,
                label_ratio,
                seed: 0,
                class_order,
            },
        )
    };
    assert!(new(0, 0.1, None).is_err());
    assert!(new(5, 0.1, None).is_err());
    assert!(new(2, 0.0, None).is_err());
    assert!(new(2, 1.5, None).is_err());
    assert!(new(2, 0.1, Some(vec![0, 1, 2, 2])).is_err());
    let s = new(3, 0.1, Some(vec![3, 1, 0, 2])).unwrap();
    assert_eq!(s.tasks[0].classes, vec![3, 1]);
    assert_eq!(s.tasks[2].classes, vec![2]);
    assert_eq!(s.target(0), Some(2));
    assert!(ClassData::new(vec![0.0; 5], vec![0, 1], 2, None).is_err());
    assert!(ClassData::new(vec![f32::NAN, 0.0], vec![0], 2, None).is_err());
}

#[test]
fn the_head_grows_and_the_teacher_follows() {
    for arch in [
        Arch::Mlp { hidden: vec![8] },
        Arch::Cnn {
            channels: [2, 3],
            hidden: 5,
        },
    ] {
        let mut net = Net::new(arch, 64, Some((8, 8)), 1).unwrap();
        assert!(net
            .forward(
                &candle_core::Tensor::zeros(
                    (1, 64),
                    candle_core::DType::F32,
                    &candle_core::Device::Cpu
                )
                .unwrap()
            )
            .is_err());
        net.add_classes(2).unwrap();
        let mut teacher = net.frozen_copy().unwrap();
        assert!(teacher.add_classes(1).is_err());
        net.add_classes(3).unwrap();
        assert_eq!(net.classes(), 5);
        let x = vec![0.5f32; 3 * 64];
        let before = net.logits(&x).unwrap();
        assert_eq!((before.len(), before[0].len()), (3, 5));
        teacher.ema_update(&net, 0.9).unwrap();
        assert_eq!(teacher.classes(), 5);
        // The copied block (outputs 2..5) agrees with the student's: the student is untrained,
        // so the EMA leaves the body and the old block where they were (up to rounding) and
        // the new block is the student's own. A decay of 0 makes the teacher equal.
        let tl = teacher.logits(&x).unwrap();
        for (t, s) in tl.iter().zip(&before) {
            assert_eq!(t.len(), 5);
            for (a, b) in t.iter().zip(s) {
                assert!((a - b).abs() < 1e-5, "{t:?} vs {s:?}");
            }
        }
        teacher.ema_update(&net, 0.0).unwrap();
        let eq = teacher.logits(&x).unwrap();
        for (a, b) in eq[0].iter().zip(&before[0]) {
            assert!((a - b).abs() < 1e-5);
        }
        // Every parameter gets a gradient.
        let t =
            candle_core::Tensor::from_vec(x.clone(), (3, 64), &candle_core::Device::Cpu).unwrap();
        let loss = net.forward(&t).unwrap().sqr().unwrap().sum_all().unwrap();
        let g = loss.backward().unwrap();
        for p in net.store().unwrap().params() {
            assert!(
                g.get(p.var.as_tensor()).is_some(),
                "{} has no gradient",
                p.name
            );
        }
    }
    assert!(Net::new(
        Arch::Cnn {
            channels: [2, 2],
            hidden: 4
        },
        10,
        None,
        0
    )
    .is_err());
}

fn tiny() -> CilConfig {
    CilConfig {
        arch: Arch::Mlp { hidden: vec![32] },
        steps_per_task: 80,
        batch: 16,
        memory: 40,
        ..CilConfig::default()
    }
}

#[test]
fn joint_training_beats_fine_tuning_on_a_tiny_stream() {
    let s = stream(6, 3, 0.3, 3);
    let ft = run_method(&s, &Method::FineTune, &tiny()).unwrap();
    let joint = run_method(&s, &Method::Joint, &tiny()).unwrap();
    let (f, j) = (ft.metrics.final_accuracy(), joint.metrics.final_accuracy());
    // Fine-tuning predicts the last task's classes only: about a third of the rows.
    assert!(f < 0.5, "fine-tune {f}");
    assert!(j >= f + 0.3, "joint {j} vs fine-tune {f}");
    assert!(ft.metrics.average_forgetting() > joint.metrics.average_forgetting());
}

#[test]
fn every_method_runs_and_keeps_its_memory_bounded() {
    let s = stream(6, 3, 0.3, 5);
    let cfg = tiny();
    for name in Method::NAMES {
        let m = Method::by_name(name).unwrap();
        let r = run_method(&s, &m, &cfg).unwrap();
        assert_eq!(r.metrics.evals.len(), 3, "{name}");
        let (l, u) = r.memory_rows;
        assert!(l + u <= cfg.memory, "{name}");
        match name {
            "finetune" | "joint" => assert_eq!((l, u), (0, 0)),
            "temporal" => assert!(u > 0 && l > 0, "{name}: {l} + {u}"),
            _ => assert_eq!(u, 0, "{name}"),
        }
        let acc = r.metrics.final_accuracy();
        assert!((0.0..=1.0).contains(&acc), "{name}");
        // Every replay method remembers more than the fine-tuning lower bound (≈ 1/3).
        if name != "finetune" {
            assert!(acc > 0.45, "{name}: final accuracy {acc}");
        }
    }
    assert!(Method::by_name("nope").is_err());
}

fn recorded() -> TemporalConfig {
    TemporalConfig {
        replay_target: ReplayTarget::Recorded,
        ..TemporalConfig::default()
    }
}

#[test]
fn recorded_predictions_are_stored_with_their_rows_within_the_memory_bound() {
    let s = stream(6, 3, 0.3, 7);
    for (task_aware, replay_target) in [
        (true, ReplayTarget::Recorded),
        (false, ReplayTarget::Recorded),
        (true, ReplayTarget::Teacher),
    ] {
        let method = Method::Temporal(TemporalConfig {
            task_aware,
            replay_target,
            ..TemporalConfig::default()
        });
        let mut net = Net::new(Arch::Mlp { hidden: vec![8] }, s.train.dim, None, 3).unwrap();
        let mut mem = MemoryBuffer::new(
            BufferConfig {
                capacity: 17,
                labeled_fraction: 0.4,
                labeled_selection: Selection::Reservoir,
            },
            5,
        )
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for t in 0..s.tasks.len() {
            let view = s.task_view(t);
            net.add_classes(view.new_classes).unwrap();
            // A teacher that differs from the student, so that the recorder is identified.
            let mut teacher =
                Net::new(Arch::Mlp { hidden: vec![8] }, s.train.dim, None, 9).unwrap();
            teacher.add_classes(view.seen_classes).unwrap();
            methods::update_memory(&method, &mut mem, &net, Some(&teacher), &view, &mut rng)
                .unwrap();
            assert!(mem.len() <= 17 && mem.labeled().len() <= mem.labeled_capacity());
            assert!(mem.unlabeled().len() <= mem.unlabeled_capacity());
            let fresh: Vec<&Sample> = mem
                .labeled()
                .iter()
                .chain(mem.unlabeled())
                .filter(|r| r.task_classes.1 as usize == view.seen_classes)
                .collect();
            assert!(!fresh.is_empty(), "task {t} stored nothing");
            for r in fresh {
                if replay_target == ReplayTarget::Teacher {
                    assert!(r.record.is_empty());
                    continue;
                }
                // The record is the teacher's prediction on this very row, over the classes
                // seen then (restricted to the row's task when task-aware); up to rounding,
                // since the recorder ran on a batch and this check on one row.
                let want = methods::record_predictions(&teacher, &r.x, r.task_classes, task_aware)
                    .unwrap();
                assert_eq!(r.record.len(), want[0].len());
                for (a, b) in r.record.iter().zip(&want[0]) {
                    assert!((a - b).abs() < 1e-5, "{:?} vs {:?}", r.record, want[0]);
                }
                assert_eq!(r.record.len(), view.seen_classes);
                let sum: f32 = r.record.iter().sum();
                assert!((sum - 1.0).abs() < 1e-5, "{sum}");
                let (a, b) = (r.task_classes.0 as usize, r.task_classes.1 as usize);
                for (c, &p) in r.record.iter().enumerate() {
                    assert!(p >= 0.0);
                    if task_aware && !(a..b).contains(&c) {
                        assert_eq!(p, 0.0, "class {c} outside the task {a}..{b}");
                    }
                    if !task_aware {
                        assert!(p > 0.0);
                    }
                }
            }
        }
        // Old rows keep their old (shorter) records: records of every task are present.
        if replay_target == ReplayTarget::Recorded {
            let lens: std::collections::BTreeSet<usize> =
                mem.unlabeled().iter().map(|r| r.record.len()).collect();
            assert!(lens.len() >= 2, "{lens:?}");
        }
    }
}

/// `Σ_r Σ_c p log(p / softmax(s))` over rows, in f64 (0 log 0 = 0), divided by the rows.
fn kl_reference(s: &[Vec<f32>], p: &[Vec<f32>]) -> f64 {
    let mut tot = 0.0;
    for (sr, pr) in s.iter().zip(p) {
        let m = sr
            .iter()
            .map(|&v| f64::from(v))
            .fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = sr.iter().map(|&v| (f64::from(v) - m).exp()).sum();
        for (&sv, &pv) in sr.iter().zip(pr) {
            if pv > 0.0 {
                let logq = f64::from(sv) - m - z.ln();
                tot += f64::from(pv) * (f64::from(pv).ln() - logq);
            }
        }
    }
    tot / s.len() as f64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn recorded_kl_matches_a_reference_and_vanishes_at_the_record(
        rows in prop::collection::vec(
            (prop::collection::vec(-4.0f32..4.0, 5), prop::collection::vec(0.01f32..1.0, 5), 0usize..4),
            1..6,
        ),
    ) {
        let classes = 5;
        // Records over the first `classes - k` outputs (made when fewer classes existed).
        let samples: Vec<Sample> = rows
            .iter()
            .map(|(_, w, k)| {
                let n = classes - k;
                let z: f32 = w[..n].iter().sum();
                Sample {
                    x: vec![0.0],
                    y: None,
                    logits: vec![],
                    record: w[..n].iter().map(|v| v / z).collect(),
                    task_classes: (0, n as u32),
                }
            })
            .collect();
        let refs: Vec<&Sample> = samples.iter().collect();
        let p = methods::record_targets(&refs, classes).unwrap();
        let pv: Vec<Vec<f32>> = p.to_vec2().unwrap();
        for (r, s) in pv.iter().zip(&samples) {
            prop_assert_eq!(&r[..s.record.len()], &s.record[..]);
            prop_assert!(r[s.record.len()..].iter().all(|&v| v == 0.0));
        }
        let dev = candle_core::Device::Cpu;
        let n = rows.len();
        let student: Vec<f32> = rows.iter().flat_map(|(s, _, _)| s.iter().copied()).collect();
        let st = candle_core::Tensor::from_vec(student, (n, classes), &dev).unwrap();
        let got = methods::kl_to_targets(&st, &p).unwrap().to_scalar::<f32>().unwrap();
        let sv: Vec<Vec<f32>> = st.to_vec2().unwrap();
        let want = kl_reference(&sv, &pv);
        prop_assert!((f64::from(got) - want).abs() < 1e-4 * (1.0 + want), "{} vs {}", got, want);
        prop_assert!(got >= -1e-5);
        // A student whose distribution is the record: log p on the covered classes, a logit far
        // below elsewhere. The loss is zero.
        let at: Vec<f32> = pv
            .iter()
            .flat_map(|r| r.iter().map(|&v| if v > 0.0 { v.ln() } else { -40.0 }))
            .collect();
        let at = candle_core::Tensor::from_vec(at, (n, classes), &dev).unwrap();
        let zero = methods::kl_to_targets(&at, &p).unwrap().to_scalar::<f32>().unwrap();
        prop_assert!(zero.abs() < 1e-5, "{}", zero);
    }
}

#[test]
fn recorded_targets_and_exemplar_labels_run_and_keep_the_memory_bounded() {
    let s = stream(6, 3, 0.3, 5);
    let cfg = tiny();
    for c in [
        recorded(),
        TemporalConfig {
            exemplar_labels: true,
            ..recorded()
        },
    ] {
        let r = run_method(&s, &Method::Temporal(c), &cfg).unwrap();
        let (l, u) = r.memory_rows;
        assert!(l + u <= cfg.memory && l > 0 && u > 0);
        let acc = r.metrics.final_accuracy();
        assert!(acc > 0.45, "{c:?}: final accuracy {acc}");
    }
}

/// The bits of a tensor's elements.
fn tensor_bits(t: &candle_core::Tensor) -> Vec<u32> {
    t.flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// The dense layers' `[in, out]` storage computes the same bits as PyTorch's `[out, in]`
    /// through a transpose: the forward product `x · w` and the backward product `g · wᵀ`, for
    /// the widths of the networks here (inputs 64 or 784, hidden 256, head blocks of 2, CNN
    /// features 1 568 → 128) and batches of 2 to 600 rows (not 1: see `net::dense_layout`).
    #[test]
    fn dense_layout_gives_the_same_products(
        rows in 2usize..600,
        (k, n) in prop_oneof![
            Just((784usize, 256usize)), Just((64, 256)), Just((256, 256)), Just((256, 2)),
            Just((1568, 128)), Just((128, 2)), (1usize..40, 1usize..40)
        ],
        seed in 0u64..1000,
    ) {
        let dev = candle_core::Device::Cpu;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random::<f32>() - 0.5).collect() };
        let x = candle_core::Tensor::from_vec(draw(rows * k), (rows, k), &dev).unwrap();
        let g = candle_core::Tensor::from_vec(draw(rows * n), (rows, n), &dev).unwrap();
        let w = candle_core::Tensor::from_vec(draw(n * k), (n, k), &dev).unwrap();
        let stored = super::net::dense_layout(&w).unwrap();
        prop_assert_eq!(stored.dims(), &[k, n]);
        prop_assert_eq!(
            tensor_bits(&x.matmul(&w.t().unwrap()).unwrap()),
            tensor_bits(&x.matmul(&stored).unwrap())
        );
        prop_assert_eq!(
            tensor_bits(&g.matmul(&w).unwrap()),
            tensor_bits(&g.matmul(&stored.t().unwrap()).unwrap())
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// The first layer's product without an input gradient gives `x.matmul(w)`'s values and
    /// weight gradient bit for bit (and no gradient for the input).
    #[test]
    fn input_product_matches_matmul(
        rows in 1usize..300,
        (k, n) in prop_oneof![Just((784usize, 256usize)), Just((64, 256)), (1usize..40, 1usize..40)],
        seed in 0u64..1000,
    ) {
        let dev = candle_core::Device::Cpu;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = |len: usize| -> Vec<f32> { (0..len).map(|_| rng.random::<f32>() - 0.5).collect() };
        let x = candle_core::Tensor::from_vec(draw(rows * k), (rows, k), &dev).unwrap();
        let g = candle_core::Tensor::from_vec(draw(rows * n), (rows, n), &dev).unwrap();
        let w = candle_core::Var::from_tensor(
            &candle_core::Tensor::from_vec(draw(k * n), (k, n), &dev).unwrap(),
        )
        .unwrap();
        let plain = x.matmul(w.as_tensor()).unwrap();
        let fused = x.apply_op2(w.as_tensor(), super::net::InputProduct).unwrap();
        prop_assert_eq!(tensor_bits(&plain), tensor_bits(&fused));
        let grads = |y: &candle_core::Tensor| (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
        let (gp, gf) = (grads(&plain), grads(&fused));
        prop_assert_eq!(
            tensor_bits(gp.get(w.as_tensor()).unwrap()),
            tensor_bits(gf.get(w.as_tensor()).unwrap())
        );
        prop_assert!(gf.get(&x).is_none());
    }
}
