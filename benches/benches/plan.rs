//! Criterion benchmarks of `parallel_plan`: one tied ILP per model and mesh (solve time; the ILP
//! size is printed once per case), and the whole multi-dimensional search.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pardis::memory::ModelConfig;
use pardis::plan::ilp::IlpObjective;
use pardis::plan::mesh::DeviceMesh;
use pardis::plan::planner::{self, Objective};
use pardis::plan::search::{Candidate, Problem};

/// (model, nodes of dgx-a100-80g, pipeline stages) for the single-ILP cases; `gpt3-175b` on 1
/// and 2 nodes without pipelining is the 96-layer single ILP of the issue's < 1 s goal.
const SINGLE_ILP: [(&str, usize, u64); 7] = [
    ("gpt3-1.3b", 1, 1),
    ("gpt3-175b", 1, 1),
    ("gpt3-175b", 2, 1),
    ("gpt3-13b", 4, 4),
    ("gpt3-175b", 128, 16),
    ("llama2-7b", 2, 2),
    ("llama2-70b", 16, 8),
];

fn single_ilp(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan/single_ilp");
    group.sample_size(10);
    for (model, nodes, pp) in SINGLE_ILP {
        let mesh = DeviceMesh::preset("dgx-a100-80g", nodes).unwrap();
        let devices = mesh.num_devices();
        let problem = Problem::new(ModelConfig::preset(model).unwrap(), mesh);
        let stage_mesh = problem.mesh.stage_mesh(devices / pp as usize).unwrap();
        let cand = Candidate::new(problem.model.num_layers, pp, stage_mesh, 4 * pp);
        let stages = problem.build(&cand, None).unwrap();
        let ilp = &stages[0].space.ilp;
        let sol = ilp
            .solve(
                IlpObjective::MinTime {
                    memory_budget: None,
                },
                &problem.solver,
            )
            .unwrap();
        eprintln!(
            "{model} on {devices} devices, pp {pp}: first-stage ILP {} variables, {} constraints, {}",
            sol.stats.variables, sol.stats.constraints, sol.stats.status
        );
        let id = format!("{model}/{devices}/pp{pp}");
        group.bench_function(BenchmarkId::new("min-time", &id), |b| {
            b.iter(|| {
                ilp.solve(
                    IlpObjective::MinTime {
                        memory_budget: None,
                    },
                    &problem.solver,
                )
                .unwrap()
            })
        });
        // Lexicographic min-memory (5 % slack) from scratch: min-time, then warm-started min-memory.
        group.bench_function(BenchmarkId::new("min-memory", &id), |b| {
            b.iter(|| ilp.solve_min_memory(0.05, &problem.solver).unwrap())
        });
    }
    group.finish();
}

fn whole_search(c: &mut Criterion) {
    let mut group = c.benchmark_group("plan/search");
    group.sample_size(10);
    for (model, nodes) in [("gpt3-1.3b", 1usize), ("gpt3-175b", 128)] {
        let mesh = DeviceMesh::preset("dgx-a100-80g", nodes).unwrap();
        let devices = mesh.num_devices();
        let problem = Problem::new(ModelConfig::preset(model).unwrap(), mesh);
        group.bench_function(BenchmarkId::new(model, devices), |b| {
            b.iter(|| {
                planner::plan(
                    &problem,
                    Objective::MinMemory { slack: 0.05 },
                    &|_, _, _| {},
                )
                .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, single_ilp, whole_search);
criterion_main!(benches);
