//! Planning a user-supplied [`ComputationGraph`] (the JSON format of [`crate::graph`]) on a
//! mesh with the same ILP. A custom graph has no memory-model operators behind its nodes, so
//! memory-model prices each weight as a dense trainable tensor of its local elements
//! ([`memory_model::dense_model_states`]: the workspace's one ZeRO rule and bytes per element,
//! for a [`TrainingSetup`], by default mixed precision with Adam: 2 + 2 + 12 bytes per
//! element before ZeRO) plus the saved tensors at the setup's activation bytes per element,
//! times the micro-batches in flight.

use serde::{Deserialize, Serialize};

use crate::cost_model::group_size;
use crate::error::{PlanError, Result};
use crate::graph::ComputationGraph;
use crate::ilp::{IlpObjective, IlpStats, SolverConfig};
use crate::mesh::DeviceMesh;
use crate::plan::{add_operator, bytes_with_total, DeviceBreakdown, OperatorPlan};
use crate::search::operator_plan;
use crate::sharding::Sharding;
use crate::strategy::{build_strategy_space, OpMemory, PipelineContext, StrategySpace};
use memory_model::{dense_model_states, Categories, TrainingSetup};

/// Memory of operator `op` of `graph` under `s` by the rule of the module docs, by category
/// (`activations` for one micro-batch; one copy).
pub fn generic_breakdown(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    setup: &TrainingSetup,
    op: usize,
    s: &Sharding,
) -> Categories {
    let o = &graph.ops[op];
    let mut m = match &o.weight {
        Some(w) => {
            let local = s.local_numel(mesh, w);
            let zero_group = group_size(mesh, s.zero_axes(o)) as u64;
            dense_model_states(local, local, s.zero, zero_group, setup)
        }
        None => Categories::default(),
    };
    m.activations = o
        .saved
        .iter()
        .map(|t| s.local_numel(mesh, t) * setup.precision.activation_bytes())
        .sum();
    m
}

/// Memory of operator `op` of `graph` under `s` by the rule of the module docs, with
/// `in_flight` micro-batches' activations held.
pub fn generic_memory(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    setup: &TrainingSetup,
    in_flight: u64,
    op: usize,
    s: &Sharding,
) -> OpMemory {
    let m = generic_breakdown(graph, mesh, setup, op, s);
    OpMemory {
        model_states: m.parameters + m.gradients + m.optimizer_states,
        activations_per_micro_batch: m.activations,
        activations_held: m.activations * in_flight,
        activations_rest: 0,
        terms: Default::default(),
    }
}

/// The strategy space of a custom graph (one pipeline stage holding the whole graph).
pub fn graph_space(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    pipeline: &PipelineContext,
    setup: &TrainingSetup,
) -> Result<StrategySpace> {
    graph.validate()?;
    let memory =
        |op: usize, s: &Sharding| generic_memory(graph, mesh, setup, pipeline.in_flight, op, s);
    Ok(build_strategy_space(
        graph,
        mesh,
        pipeline,
        &memory,
        &|_, _| true,
    ))
}

/// The plan of a custom graph on a mesh (the whole mesh runs the whole graph; no pipeline).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphPlan {
    /// Devices of the mesh, e.g. `node:2×gpu:8`.
    pub mesh: String,
    /// Micro-batches per step (the graph's shapes are one micro-batch's).
    pub micro_batches: u64,
    /// Per operator, the chosen sharding and its collectives.
    pub operators: Vec<OperatorPlan>,
    /// Per-device memory by category (copies counted; activations of one micro-batch).
    #[serde(with = "bytes_with_total")]
    pub per_device_memory: DeviceBreakdown,
    /// Step time of the plan, seconds.
    pub step_time_s: f64,
    /// Step time of the fastest plan that fits the device memory (the min-time ILP), seconds.
    pub fastest_step_time_s: f64,
    /// Statistics of the min-time and min-memory solves (largest size, worst status, total time).
    pub ilp: IlpStats,
}

/// Lexicographic min-memory plan of a custom graph: minimise step time among the plans that fit
/// the mesh's device memory, then per-device memory within `(1 + slack)` of that time, with
/// memory priced for [`TrainingSetup::default`] (mixed precision, Adam).
///
/// # Errors
/// [`PlanError::Infeasible`] (with the smallest achievable memory) when no plan fits
/// [`DeviceMesh::device_memory_bytes`]; [`PlanError::InvalidGraph`] for a graph that fails
/// [`ComputationGraph::validate`]; solver errors.
pub fn plan_graph(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    micro_batches: u64,
    slack: f64,
    solver: &SolverConfig,
) -> Result<GraphPlan> {
    if micro_batches == 0 || !(slack >= 0.0 && slack.is_finite()) {
        return Err(PlanError::InvalidInput(format!(
            "micro-batches must be ≥ 1 and the slack finite and ≥ 0 (got {micro_batches}, {slack})"
        )));
    }
    let ctx = PipelineContext {
        micro_batches,
        stages: 1,
        in_flight: 1,
        virtual_stages: 1,
    };
    let setup = TrainingSetup::default();
    let space = graph_space(graph, mesh, &ctx, &setup)?;
    let fast = space.ilp.solve(
        IlpObjective::MinTime {
            memory_budget: Some(mesh.device_memory_bytes as f64),
        },
        solver,
    )?;
    let lean = space.ilp.solve_from(
        IlpObjective::MinMemory {
            time_limit: fast.time * (1.0 + slack),
        },
        solver,
        Some(&fast.choice),
    )?;
    let mut memory = DeviceBreakdown::default();
    for (op, &c) in lean.choice.iter().enumerate() {
        let m = generic_breakdown(graph, mesh, &setup, op, &space.shardings[op][c]);
        add_operator(&mut memory, &m, graph.ops[op].copies as u64, 1);
    }
    let operators = (0..graph.ops.len())
        .map(|op| operator_plan(graph, &space.shardings, mesh, op, &lean.choice))
        .collect();
    Ok(GraphPlan {
        mesh: mesh.shape_string(),
        micro_batches,
        operators,
        per_device_memory: memory,
        step_time_s: lean.time,
        fastest_step_time_s: fast.time,
        ilp: IlpStats::summary_of([&fast.stats, &lean.stats]),
    })
}
