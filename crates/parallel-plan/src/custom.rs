//! Planning a user-supplied [`ComputationGraph`] (the JSON format of [`crate::graph`]) on a
//! mesh with the same ILP. Without memory-model operators behind the nodes, memory follows a
//! simple documented rule: [`StateBytes`] per parameter element (divided by the data-parallel
//! group for what ZeRO shards) plus the saved tensors at [`crate::sharding::ACTIVATION_BYTES`]
//! per element, times the micro-batches in flight.

use crate::cost_model::group_size;
use crate::error::Result;
use crate::graph::ComputationGraph;
use crate::ilp::{IlpSolution, SolverConfig};
use crate::mesh::DeviceMesh;
use crate::sharding::{Sharding, ACTIVATION_BYTES};
use crate::strategy::{build_strategy_space, OpMemory, PipelineContext, StrategySpace};

/// Bytes per parameter element of each model-state category.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBytes {
    /// Stored parameter (default 2: bf16).
    pub parameter: u64,
    /// Gradient (default 2).
    pub gradient: u64,
    /// Optimizer states with master weights (default 12: Adam's fp32 copy and two moments).
    pub optimizer: u64,
}

impl Default for StateBytes {
    fn default() -> Self {
        StateBytes {
            parameter: 2,
            gradient: 2,
            optimizer: 12,
        }
    }
}

/// Memory of operator `op` of `graph` under `s` by the rule of the module docs.
pub fn generic_memory(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    bytes: &StateBytes,
    op: usize,
    s: &Sharding,
) -> OpMemory {
    let o = &graph.ops[op];
    let mut m = OpMemory::default();
    if let Some(w) = &o.weight {
        let local = s.local_numel(mesh, w);
        let dp = group_size(mesh, s.dp_axes(o)) as u64;
        let zero = s.zero.number();
        let shard = |on: bool, n: u64| if on { n.div_ceil(dp) } else { n };
        m.model_states = shard(zero >= 3, local) * bytes.parameter
            + shard(zero >= 2, local) * bytes.gradient
            + shard(zero >= 1, local) * bytes.optimizer;
    }
    m.activations_per_micro_batch = o
        .saved
        .iter()
        .map(|t| s.local_numel(mesh, t) * ACTIVATION_BYTES)
        .sum();
    m
}

/// The strategy space of a custom graph (one pipeline stage holding the whole graph).
pub fn graph_space(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    pipeline: &PipelineContext,
    bytes: &StateBytes,
) -> Result<StrategySpace> {
    graph.validate()?;
    let memory = |op: usize, s: &Sharding| generic_memory(graph, mesh, bytes, op, s);
    Ok(build_strategy_space(
        graph,
        mesh,
        pipeline,
        &memory,
        &|_, _| true,
    ))
}

/// Lexicographic min-memory plan of a custom graph: (min-time solution, min-memory solution).
pub fn plan_graph(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    micro_batches: u64,
    slack: f64,
    solver: &SolverConfig,
) -> Result<(StrategySpace, IlpSolution, IlpSolution)> {
    let ctx = PipelineContext {
        micro_batches,
        stages: 1,
        in_flight: 1,
    };
    let space = graph_space(graph, mesh, &ctx, &StateBytes::default())?;
    let (fast, lean) = space.ilp.solve_min_memory(slack, solver)?;
    Ok((space, fast, lean))
}
