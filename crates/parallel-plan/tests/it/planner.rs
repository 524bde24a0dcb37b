//! The transformer planner: tying, trivial meshes, validity, and agreement with memory-model.

use memory_model::{estimate, ModelConfig, Parallelism, PipelineSchedule, ZeroStage as MmZero};
use parallel_plan::baselines::Baseline;
use parallel_plan::ilp::IlpObjective;
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::{Candidate, Problem};
use parallel_plan::PlanError;

fn quiet(_: usize, _: usize, _: &str) {}

/// GPT-3 125M shapes with `layers` layers, short sequences: small ILPs, fast tests.
fn small_problem(layers: u64, devices: usize) -> Problem {
    small_model_problem("gpt3-125m", layers, devices)
}

fn small_model_problem(name: &str, layers: u64, devices: usize) -> Problem {
    let mut model = ModelConfig::preset(name).unwrap();
    model.num_layers = layers;
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1)
        .unwrap()
        .stage_mesh(devices)
        .unwrap();
    let mut p = Problem::new(model, mesh);
    p.global_batch = 16;
    p.setup.seq_len = 256;
    p
}

#[test]
fn tying_gives_the_untied_optimum() {
    let mut p = small_problem(3, 4);
    let mesh = p.mesh.factorized(2).unwrap();
    let cand = Candidate {
        pp: 1,
        stage_mesh: mesh,
        micro_batches: 2,
    };
    let tied = p.build(&cand, None).unwrap();
    p.tie_layers = false;
    let untied = p.build(&cand, None).unwrap();
    let (t, u) = (&tied[0].space.ilp, &untied[0].space.ilp);
    assert!(u.nodes.len() > t.nodes.len());
    let cfg = Default::default();
    let ft = t
        .solve(
            IlpObjective::MinTime {
                memory_budget: None,
            },
            &cfg,
        )
        .unwrap();
    let fu = u
        .solve(
            IlpObjective::MinTime {
                memory_budget: None,
            },
            &cfg,
        )
        .unwrap();
    assert!(
        (ft.time - fu.time).abs() <= 1e-9 * fu.time,
        "tied {} untied {}",
        ft.time,
        fu.time
    );
    let limit = IlpObjective::MinMemory {
        time_limit: ft.time * 1.05,
    };
    let mt = t.solve(limit, &cfg).unwrap();
    let mu = u.solve(limit, &cfg).unwrap();
    // Under a time bound the untied ILP may mix strategies across layers (a knapsack effect),
    // so tying is a restriction there: never better, and within 1 % on this model.
    assert!(mt.memory >= mu.memory);
    assert!(
        (mt.memory - mu.memory) as f64 <= 0.01 * mu.memory as f64,
        "tied {} untied {}",
        mt.memory,
        mu.memory
    );
    // The tied plan, expanded to every layer, is feasible for the untied ILP with the same memory.
    assert_eq!(t.memory_of(&mt.choice), mt.memory);
    assert!(ft.stats.variables < fu.stats.variables);
}

#[test]
fn one_device_gives_the_trivial_plan() {
    let p = small_problem(2, 1);
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.05 }, &quiet).unwrap();
    let plan = &report.plan;
    assert_eq!(plan.pipeline_stages, 1);
    for op in &plan.stages[0].operators {
        assert_eq!(op.sharding, "replicated", "{}", op.name);
        assert_eq!(op.zero, 0);
        assert!(
            op.collectives.is_empty(),
            "{}: {:?}",
            op.name,
            op.collectives
        );
    }
}

#[test]
fn ilp_memory_equals_memory_model_and_splits_divide() {
    let p = small_problem(4, 8);
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.05 }, &quiet).unwrap();
    for plan in std::iter::once(&report.plan)
        .chain(&report.runners_up)
        .chain(&report.baselines)
    {
        for s in &plan.stages {
            assert_eq!(
                s.ilp_memory,
                s.memory.total - s.memory.overhead,
                "{} stage {}",
                plan.name,
                s.index
            );
        }
        assert!(plan.ilp.status == "Optimal", "{}", plan.ilp.status);
    }
    // Every split of every candidate divides its dimension (checked on the built spaces).
    let cand = Candidate {
        pp: 2,
        stage_mesh: p.mesh.stage_mesh(4).unwrap(),
        micro_batches: 4,
    };
    for st in p.build(&cand, None).unwrap() {
        for (op, cands) in st.graph.graph.ops.iter().zip(&st.space.shardings) {
            for s in cands {
                assert!(s.is_valid(&cand.stage_mesh, op));
                for (d, &axes) in op.dims.iter().zip(&s.dim_axes) {
                    let ways = parallel_plan::cost_model::group_size(&cand.stage_mesh, axes) as u64;
                    assert_eq!(d.units() % ways, 0);
                }
            }
        }
    }
}

/// The planner's Megatron-LM baseline holds exactly the bytes memory-model's `estimate` gives the
/// same configuration (parameters, gradients, optimizer states, activations of the peak stage).
#[test]
fn megatron_baseline_matches_memory_model_estimate() {
    // GPT-3 350M shapes (16 heads: tensor parallel 8 divides them), 4 layers.
    let mut p = small_model_problem("gpt3-350m", 4, 8);
    p.mesh = DeviceMesh::preset("dgx-a100-80g", 2).unwrap();
    // (With sequence parallelism the two differ slightly: the planner treats the sequence-split
    // tensor-parallel axis as data parallel for the norms and shards their optimizer states
    // over it too; Megatron-LM shards over the data-parallel group only.)
    for (pp, sp, dist_opt) in [
        (1u64, false, false),
        (1, false, true),
        (2, false, false),
        (2, false, true),
    ] {
        let b = Baseline::Megatron {
            sequence_parallel: sp,
            distributed_optimizer: dist_opt,
        };
        let stage_mesh = p.mesh.stage_mesh(16 / pp as usize).unwrap();
        let m = 4;
        let cand = Candidate {
            pp,
            stage_mesh,
            micro_batches: m,
        };
        let stages = p.build(&cand, Some(&*b.restriction())).unwrap();
        let sols: Vec<_> = stages
            .iter()
            .map(|s| {
                assert!(
                    s.space.ilp.nodes.iter().all(|n| n.time.len() == 1),
                    "baseline pins one strategy"
                );
                s.space
                    .ilp
                    .solve(
                        IlpObjective::MinTime {
                            memory_budget: None,
                        },
                        &Default::default(),
                    )
                    .unwrap()
            })
            .collect();
        let dp = 16 / (8 * pp);
        let mut setup = p.setup.clone();
        setup.micro_batch = p.global_batch / m / dp;
        setup.num_microbatches = m;
        setup.parallel = Parallelism {
            dp,
            tp: 8,
            pp,
            sequence_parallel: sp,
            schedule: PipelineSchedule::OneFOneB,
            zero: if dist_opt {
                MmZero::DistributedOptimizer
            } else {
                MmZero::Zero0
            },
            ..Parallelism::default()
        };
        let report = estimate(&p.model, &setup).unwrap();
        for (stage, sol) in stages.iter().zip(&sols) {
            let mm = &report.per_stage[stage.key_index as usize].memory;
            let expected = mm.parameters + mm.gradients + mm.optimizer_states + mm.activations;
            assert_eq!(
                sol.memory, expected,
                "pp {pp} sp {sp} dist-opt {dist_opt} stage {}",
                stage.key_index
            );
        }
    }
}

#[test]
fn infeasible_budget_reports_smallest_memory() {
    let mut p = small_problem(2, 2);
    p.mesh.device_memory_bytes = 1 << 20;
    match planner::plan(&p, Objective::MinTime, &quiet) {
        Err(PlanError::Infeasible {
            budget,
            min_achievable,
        }) => {
            assert_eq!(budget, 1 << 20);
            assert!(min_achievable > budget);
        }
        other => panic!("expected Infeasible, got {other:?}"),
    }
}

#[test]
fn bad_mesh_inputs_are_typed_errors() {
    assert!(matches!(
        DeviceMesh::preset("tpu-v9", 1),
        Err(PlanError::UnknownMesh { .. })
    ));
    assert!(DeviceMesh::preset("dgx-h100", 0).is_err());
    assert!(matches!(
        DeviceMesh::from_json("{"),
        Err(PlanError::Json(_))
    ));
    let four_axes = r#"{"name":"x","axes":[
        {"name":"a","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"b","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"c","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"d","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0}],
        "device_memory_bytes":1,"peak_flops":1e12,"efficiency":0.5}"#;
    assert!(matches!(
        DeviceMesh::from_json(four_axes),
        Err(PlanError::InvalidInput(_))
    ));
}
