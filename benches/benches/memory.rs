//! Criterion benchmarks of `memory-model`: one whole-model estimate, and the exhaustive search of
//! parallel configurations (issue #3 asks for all configurations of 1024 devices in well under a
//! second).
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pardis::memory::{estimate, search, ModelConfig, SearchSpace, TrainingSetup, ZeroStage};

fn bench_estimate(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory/estimate");
    for name in ["llama2-7b", "llama2-70b", "mixtral-8x7b"] {
        let model = ModelConfig::preset(name).expect("preset");
        let mut setup = TrainingSetup {
            seq_len: 4096,
            num_microbatches: 8,
            ..TrainingSetup::default()
        };
        setup.parallel.dp = 4;
        setup.parallel.tp = 8;
        setup.parallel.pp = 4;
        setup.parallel.sequence_parallel = true;
        setup.parallel.zero = ZeroStage::Zero1;
        group.bench_with_input(BenchmarkId::from_parameter(name), &model, |b, m| {
            b.iter(|| estimate(m, &setup).expect("valid"))
        });
    }
    group.finish();
}

fn bench_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("memory/search");
    group.sample_size(20);
    let model = ModelConfig::preset("llama2-70b").expect("preset");
    for devices in [64u64, 1024] {
        let base = TrainingSetup {
            seq_len: 4096,
            ..TrainingSetup::default()
        };
        let space = SearchSpace::new(devices, 80 << 30, base);
        group.bench_with_input(BenchmarkId::new("llama2-70b", devices), &space, |b, s| {
            b.iter(|| search(&model, s).expect("valid"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_estimate, bench_search);
criterion_main!(benches);
