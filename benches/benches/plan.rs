//! Criterion benchmarks of `parallel_plan`, on the cases of the table (GPT-3
//! 1.3B…175B and Llama-2 7B…70B on 8 to 1024 A100s, DGX nodes of 8) and of
//! `examples/solve_times.rs`: the single tied ILP of the whole model without pipelining
//! (min-time, and lexicographic min-memory within 5 %), and the whole multi-dimensional search
//! of `pardis plan` (min-memory at the strongest peer's step time, with the peers' searches). The ILP sizes are printed once per
//! case on stderr.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pardis::memory::{ModelConfig, Recompute, MEGATRON_VOCAB_PADDING, PRESET_NAMES};
use pardis::plan::ilp::IlpObjective;
use pardis::plan::mesh::DeviceMesh;
use pardis::plan::planner::{self, Objective};
use pardis::plan::search::Problem;

/// DGX A100-80GB nodes: 8, 64, 256 and 1024 GPUs.
const NODES: [usize; 4] = [1, 8, 32, 128];

/// The problems of the table: GPT-3 1.3B…175B and Llama-2 7B…70B (a contiguous run of
/// memory-model's presets) on each mesh of [`NODES`].
fn cases() -> impl Iterator<Item = (&'static str, Problem)> {
    let at = |name: &str| PRESET_NAMES.iter().position(|&m| m == name).unwrap();
    PRESET_NAMES[at("gpt3-1.3b")..=at("llama2-70b")]
        .iter()
        .flat_map(|&model| {
            NODES.map(|nodes| {
                let mesh = DeviceMesh::preset("dgx-a100-80g", nodes).unwrap();
                (
                    model,
                    Problem::new(
                        ModelConfig::preset(model)
                            .unwrap()
                            .with_vocab_padding(MEGATRON_VOCAB_PADDING),
                        mesh,
                    ),
                )
            })
        })
}

/// Ten samples, short warm-up: the cases are many and each takes up to seconds.
fn configure(group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500));
}

const FASTEST: IlpObjective = IlpObjective::MinTime {
    memory_budget: None,
};

fn single_ilp(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan/single_ilp");
    configure(&mut group);
    for (model, p) in cases() {
        // Whole model, whole mesh (unfactorized), no recomputation, the fewest
        // micro-batches the search tries.
        let Some(cand) = p
            .candidates(Some(1))
            .into_iter()
            .find(|c| c.stage_mesh == p.mesh && c.recompute == Recompute::None)
        else {
            continue;
        };
        let stages = p.build(&cand, None).unwrap();
        let ilp = &stages[0].space.ilp;
        let stats = ilp.solve(FASTEST, &p.solver).unwrap().stats;
        let id = format!("{model}/{}", p.mesh.num_devices());
        eprintln!(
            "{id}: {} layers tied, {} variables / {} constraints ({} / {} solved)",
            p.model.num_layers,
            stats.variables,
            stats.constraints,
            stats.solved_variables,
            stats.solved_constraints
        );
        group.bench_function(BenchmarkId::new("min-time", &id), |b| {
            b.iter(|| ilp.solve(FASTEST, &p.solver).unwrap())
        });
        // Lexicographic min-memory (5 % slack): min-time, then warm-started min-memory.
        group.bench_function(BenchmarkId::new("min-memory", &id), |b| {
            b.iter(|| ilp.solve_min_memory(0.05, &p.solver).unwrap())
        });
    }
    group.finish();
}

fn whole_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan/search");
    configure(&mut group);
    for (model, p) in cases() {
        let objective = Objective::MinMemory { slack: 0.0 };
        // Models that fit nowhere on this mesh (175B and 70B on one node) are skipped.
        if planner::plan(&p, objective, &|_, _, _| {}).is_err() {
            continue;
        }
        let id = BenchmarkId::new(model, p.mesh.num_devices());
        group.bench_function(id, |b| {
            b.iter(|| planner::plan(&p, objective, &|_, _, _| {}).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, single_ilp, whole_search);
criterion_main!(benches);
