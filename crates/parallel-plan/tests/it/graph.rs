//! Custom computation graphs in the documented JSON format.

use parallel_plan::custom_graph::{graph_space, plan_graph};
use parallel_plan::graph::ComputationGraph;
use parallel_plan::ilp::{IlpObjective, SolverConfig};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::strategy::PipelineContext;
use parallel_plan::PlanError;

fn example_graph() -> ComputationGraph {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mlp_block_graph.json");
    ComputationGraph::from_json(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The example graph plans on one node; the plan's memory by category adds up to the ILP's, and
/// the min-memory optimum equals exhaustive search under the same time bound.
#[test]
fn example_graph_plans_and_matches_brute_force() {
    let g = example_graph();
    assert_eq!(g.ops.len(), 4);
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1)
        .unwrap()
        .stage_mesh(4)
        .unwrap();
    let solver = SolverConfig::default();
    let plan = plan_graph(&g, &mesh, 4, 0.05, &solver).unwrap();
    assert_eq!(plan.operators.len(), 4);
    assert_eq!(plan.ilp.status, parallel_plan::ilp::SolveStatus::Optimal);
    assert!(plan.step_time_s <= plan.fastest_step_time_s * 1.05 * (1.0 + 1e-9));
    let ctx = PipelineContext {
        micro_batches: 4,
        stages: 1,
        in_flight: 1,
        virtual_stages: 1,
    };
    let space = graph_space(&g, &mesh, &ctx, &memory_model::TrainingSetup::default()).unwrap();
    let fastest = space
        .ilp
        .brute_force(IlpObjective::MinTime {
            memory_budget: None,
        })
        .unwrap();
    assert!((fastest.1 - plan.fastest_step_time_s).abs() <= 1e-9 * fastest.1);
    let leanest = space
        .ilp
        .brute_force(IlpObjective::MinMemory {
            time_limit: fastest.1 * 1.05 * (1.0 + 1e-9),
        })
        .unwrap();
    assert_eq!(plan.per_device_memory.total() as f64, leanest.1);
    let m = plan.per_device_memory;
    assert_eq!(
        m.total(),
        m.parameters + m.gradients + m.optimizer_states + m.activations
    );
    // JSON: memory-model's categories in integer bytes plus their total; reads back unchanged.
    let json = serde_json::to_value(&plan).unwrap();
    let bytes = json["per_device_memory"].as_object().unwrap();
    let keys: Vec<&str> = bytes.keys().map(String::as_str).collect();
    let mut expected = vec![
        "parameters",
        "gradients",
        "optimizer_states",
        "activations",
        "buffers",
        "transient",
        "overhead",
        "total",
    ];
    expected.sort_unstable();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, expected);
    assert_eq!(bytes["total"].as_u64(), Some(m.total()));
    assert_eq!(bytes["parameters"].as_u64(), Some(m.parameters));
    let back: parallel_plan::custom_graph::GraphPlan = serde_json::from_value(json).unwrap();
    assert_eq!(back, plan);
}

#[test]
fn malformed_graphs_are_typed_errors() {
    assert!(matches!(
        ComputationGraph::from_json("{\"ops\": ["),
        Err(PlanError::Json(_))
    ));
    let mut g = example_graph();
    g.edges[0].to = 9;
    let text = serde_json::to_string(&g).unwrap();
    assert!(matches!(
        ComputationGraph::from_json(&text),
        Err(PlanError::InvalidGraph(_))
    ));
    let mut g = example_graph();
    g.ops[1].output.dims = vec![0, 7];
    assert!(ComputationGraph::from_json(&serde_json::to_string(&g).unwrap()).is_err());
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
    assert!(plan_graph(&example_graph(), &mesh, 0, 0.05, &SolverConfig::default()).is_err());
}

/// Tensor sizes must agree with their dimensions, counts are bounded, and the plan honours the
/// device memory: a budget below the leanest plan is an `Infeasible` error naming it.
#[test]
fn graph_sizes_are_checked_and_the_budget_is_honoured() {
    let reject = |g: &ComputationGraph| {
        matches!(
            ComputationGraph::from_json(&serde_json::to_string(g).unwrap()),
            Err(PlanError::InvalidGraph(_))
        )
    };
    let mut g = example_graph();
    g.ops[1].dims[0].size *= 2; // the tensors now disagree with the dimension
    assert!(reject(&g));
    let mut g = example_graph();
    g.ops[0].output.numel += 1;
    assert!(reject(&g));
    let mut g = example_graph();
    g.ops[0].flops = 1e300;
    assert!(reject(&g));
    let mut g = example_graph();
    g.ops[0].output.dims = vec![0, 0, 2];
    assert!(reject(&g));
    let mut g = example_graph();
    g.ops[0].dims[2].units = Some(3); // 1024 is not a whole number of 3 units
    assert!(reject(&g));

    let mut mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
    let solver = SolverConfig::default();
    let plan = plan_graph(&example_graph(), &mesh, 4, 0.05, &solver).unwrap();
    assert!(plan.per_device_memory.total() <= mesh.device_memory_bytes);
    mesh.device_memory_bytes = 1 << 20;
    match plan_graph(&example_graph(), &mesh, 4, 0.05, &solver) {
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
