//! Criterion benchmarks of `ml_models::anomaly` (issue 27): fit + score of the classical
//! detectors (Isolation Forest, ECOD, k-NN) and training throughput of the deep ones (PCL-AD,
//! ICL, NeuTraL-AD: samples/s over a fixed number of Adam steps, the frozen-view precomputation
//! of PCL-AD included) on seed 0 of the ADBench split of `38_thyroid` (3 772 × 6, from the data
//! roots), or on a generated set of the same size when the shared file is absent.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pardis::ml::anomaly::data::read_labelled;
use pardis::ml::anomaly::{
    protocol_split, DeepConfig, Detector, Ecod, Features, Icl, IclConfig, IsolationForest,
    IsolationForestConfig, Knn, KnnConfig, Labelled, Neutral, NeutralConfig, Pcl, PclConfig, Split,
};

/// Seed 0's split of thyroid, or of a generated stand-in (3 679 normals on a curve with noise,
/// 93 points off it, 6 features) when the file is absent.
fn thyroid_split() -> (String, Split) {
    let roots = pardis_datasets::DataRoots::from_env();
    if let Some(l) = roots.locate_path("tabular-ad/adbench/38_thyroid.npz") {
        let data = read_labelled(&l.path).expect("thyroid loads");
        return ("38_thyroid".into(), protocol_split(&data, 0).unwrap());
    }
    eprintln!("anomaly: 38_thyroid.npz not found under the data roots, using a generated set");
    let (n, d) = (3772, 6);
    let mut x = Vec::with_capacity(n * d);
    let mut y = Vec::with_capacity(n);
    for i in 0..n {
        let t = (i as f64 * 0.618_033_988_7).fract();
        let wobble = ((i * 7919) % 1000) as f64 / 1000.0 - 0.5;
        let anomaly = i >= n - 93;
        for j in 0..d {
            let v = (t * (j + 1) as f64).sin() + 0.05 * wobble * (j as f64 - 2.5);
            x.push(if anomaly && j == i % d { v + 3.0 } else { v });
        }
        y.push(f64::from(u8::from(anomaly)));
    }
    let data = Labelled::new(Features::new(n, d, x).unwrap(), &y).unwrap();
    ("generated".into(), protocol_split(&data, 0).unwrap())
}

fn classical(c: &mut Criterion) {
    let (name, split) = thyroid_split();
    let mut g = c.benchmark_group(format!("anomaly_fit_score/{name}"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    g.throughput(Throughput::Elements(
        (split.train.rows + split.test.rows) as u64,
    ));
    let run = |det: &mut dyn Detector| {
        det.fit(&split.train).unwrap();
        det.score(&split.test).unwrap()
    };
    g.bench_function("iforest", |b| {
        b.iter(|| run(&mut IsolationForest::new(IsolationForestConfig::default())))
    });
    g.bench_function("ecod", |b| b.iter(|| run(&mut Ecod::new())));
    g.bench_function("knn", |b| {
        b.iter(|| run(&mut Knn::new(KnnConfig::default())))
    });
    g.finish();
}

/// A deep detector by name with the training settings `train`.
fn deep(name: &str, train: DeepConfig) -> Box<dyn Detector> {
    match name {
        "pcl" => Box::new(Pcl::new(PclConfig {
            train,
            ..PclConfig::default()
        })),
        "icl" => Box::new(Icl::new(IclConfig {
            train,
            ..IclConfig::default()
        })),
        _ => Box::new(Neutral::new(NeutralConfig {
            train,
            ..NeutralConfig::default()
        })),
    }
}

fn deep_training(c: &mut Criterion) {
    let (name, split) = thyroid_split();
    // 20 Adam steps of 128 rows (one step is 128 samples; the training rows are 1 839).
    let train = DeepConfig {
        epochs: 100,
        max_steps: 20,
        ..DeepConfig::default()
    };
    let samples = (20 * train.batch) as u64;
    let mut g = c.benchmark_group(format!("anomaly_train/{name}"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_millis(500));
    g.throughput(Throughput::Elements(samples));
    for det in ["pcl", "icl", "neutral"] {
        g.bench_function(BenchmarkId::new("fit_20_steps", det), |b| {
            b.iter(|| deep(det, train).fit(&split.train).unwrap())
        });
    }
    g.finish();
    // Scoring throughput of the test split (1 933 rows) by a trained PCL-AD.
    let mut pcl = Pcl::new(PclConfig {
        train,
        ..PclConfig::default()
    });
    pcl.fit(&split.train).unwrap();
    let mut g = c.benchmark_group(format!("anomaly_score/{name}"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    g.throughput(Throughput::Elements(split.test.rows as u64));
    g.bench_function("pcl", |b| b.iter(|| pcl.score(&split.test).unwrap()));
    g.finish();
}

criterion_group!(benches, classical, deep_training);
criterion_main!(benches);
