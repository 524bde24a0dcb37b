//! Turning stage solutions into a reported [`Plan`]: memory by category recomputed with
//! memory-model, per-operator shardings and the collectives they insert.

use memory_model::{
    host_memory_per_node, stage_memory, HostConfig, PlacedOperator, StageMemory, StageTensors,
    TrainingSetup,
};

use super::{Candidate, Problem, StageProblem};
use crate::cost_model::{offload_step_time, OffloadedPartition, BACKWARD_FLOP_FACTOR};
use crate::error::Result;
use crate::graph::ComputationGraph;
use crate::ilp::{IlpObjective, IlpSolution};
use crate::mesh::DeviceMesh;
use crate::plan::{DeviceBreakdown, IlpSummary, OperatorPlan, Plan, StagePlan};
use crate::sharding::Sharding;
use crate::strategy::edge_collectives;

impl Problem {
    /// Solves every stage of `cand` for `objective` and assembles the plan.
    pub(crate) fn solve(
        &self,
        name: &str,
        cand: &Candidate,
        stages: &[StageProblem],
        objective: IlpObjective,
    ) -> Result<Plan> {
        let solutions = stages
            .iter()
            .map(|st| st.space.ilp.solve(objective, &self.solver))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.assemble(name, cand, stages, &solutions))
    }

    /// Per-device memory of one stage under the strategy `choice`: memory-model's
    /// [`stage_memory`] of the stage's operators under their chosen shardings, with the stage
    /// boundary and logits tensors as laid out by those shardings. A sharding memory-model
    /// rejects (never one the ILP kept) counts as an empty operator. The host bytes are what
    /// one device offloads.
    pub(crate) fn stage_memory(
        &self,
        cand: &Candidate,
        st: &StageProblem,
        choice: &[usize],
        in_flight: u64,
        setup: &TrainingSetup,
    ) -> StageMemory {
        let mesh = &cand.stage_mesh;
        let g = &st.graph;
        let shardings: Vec<&Sharding> = choice
            .iter()
            .enumerate()
            .map(|(i, &c)| &st.space.shardings[i][c])
            .collect();
        let placed: Vec<PlacedOperator<'_>> = (0..choice.len())
            .map(|i| g.placed_operator(i, shardings[i], mesh, in_flight, cand.virtual_stages()))
            .collect();
        let boundary = (cand.pp > 1)
            .then(|| g.boundary_operator())
            .flatten()
            .map_or(0, |i| {
                g.output_bytes(i, shardings[i], mesh, setup.precision.activation_bytes())
            });
        let logits = g
            .logits_operator()
            .map_or(0, |i| g.output_bytes(i, shardings[i], mesh, 4));
        let tensors = StageTensors {
            pipeline_boundary_bytes: boundary,
            logits_bytes: logits,
        };
        stage_memory(setup, &placed, &tensors).unwrap_or_else(|_| StageMemory {
            device: DeviceBreakdown {
                overhead: setup.overhead_bytes,
                ..Default::default()
            },
            ..Default::default()
        })
    }

    /// Turns stage solutions into a [`Plan`], recomputing every stage's memory by category with
    /// memory-model's `operator_memory` for the chosen shardings.
    pub(crate) fn assemble(
        &self,
        name: &str,
        cand: &Candidate,
        stages: &[StageProblem],
        solutions: &[IlpSolution],
    ) -> Plan {
        let b = self.global_batch / cand.micro_batches;
        let mesh = &cand.stage_mesh;
        let keys = self.stage_keys(cand);
        let mut stage_plans = Vec::new();
        let mut host_bytes = Vec::new();
        for ((st, sol), key) in stages.iter().zip(solutions).zip(&keys) {
            let mut ops = Vec::new();
            for i in 0..sol.choice.len() {
                ops.push(operator_plan(
                    &st.graph.graph,
                    &st.space.shardings,
                    mesh,
                    i,
                    &sol.choice,
                ));
            }
            let setup = self.stage_setup(cand, key.index);
            let mem = self.stage_memory(cand, st, &sol.choice, key.in_flight, &setup);
            // Optimizer offload: the host's update and the gradient traffic come on top of
            // the ILP's time (a fixed cost of the partition, not of the layout's choice).
            let part = OffloadedPartition {
                elements: mem.host.gradients / 4,
                gradient_bytes: mem.host.gradients,
                state_bytes: mem.host.optimizer_states,
                sent_gradient_element_bytes: setup.grad_bytes(),
                parameter_element_bytes: setup.precision.param_bytes(),
            };
            // The backward passes' share of the stage time (2 of 3 FLOP units; recomputation
            // and collectives make this an estimate) is what gradient sends can hide behind.
            let backward = sol.time * BACKWARD_FLOP_FACTOR / (1.0 + BACKWARD_FLOP_FACTOR);
            let offload = offload_step_time(&self.mesh, &part, cand.micro_batches, backward);
            host_bytes.push(mem.host.total());
            stage_plans.push(StagePlan {
                index: st.key_index,
                layers: st.layers,
                operators: ops,
                memory: mem.device,
                ilp_memory: sol.memory,
                time_s: sol.time + offload,
                ilp: sol.stats.clone(),
            });
        }
        let peak = stage_plans
            .iter()
            .map(|s| s.memory)
            .max_by_key(|m| m.total())
            .unwrap_or_default();
        let time = stage_plans.iter().map(|s| s.time_s).fold(0.0, f64::max);
        // Offload must also fit the host, whose devices all offload alike (memory-model's
        // host rule, its buffer factor included; the fp32 start-up copies are left out).
        let host_per_node = host_memory_per_node(
            host_bytes.into_iter().max().unwrap_or(0),
            0,
            &HostConfig {
                gpus_per_node: (self.mesh.host.devices_per_host as u64)
                    .min(self.mesh.num_devices() as u64),
                ..self.setup.host
            },
        );
        Plan {
            name: name.to_string(),
            pipeline_stages: cand.pp,
            stage_mesh: mesh.shape_string(),
            micro_batches: cand.micro_batches,
            micro_batch_size: b,
            schedule: cand.schedule,
            recompute: cand.recompute,
            recompute_stages: cand.recompute_stages,
            layers_per_stage: cand.layers.clone(),
            per_device_memory: peak,
            step_time_s: time,
            fits: peak.total() <= self.mesh.device_memory_bytes
                && host_per_node <= self.mesh.host.memory_bytes,
            ilp: IlpSummary::summary_of(stage_plans.iter().map(|s| &s.ilp)),
            stages: stage_plans,
        }
    }
}

/// Names of the axes in `mask`, e.g. `node,gpu`.
pub fn axis_names(mesh: &DeviceMesh, mask: u8) -> String {
    let names: Vec<&str> = mesh
        .axes
        .iter()
        .enumerate()
        .filter(|(k, _)| mask & (1 << k) != 0)
        .map(|(_, a)| a.name.as_str())
        .collect();
    names.join(",")
}

/// The chosen sharding of operator `op` of `g` and the collectives it and its incoming edges
/// insert, for the strategy `choice` (indices into `shardings`).
pub(crate) fn operator_plan(
    g: &ComputationGraph,
    shardings: &[Vec<Sharding>],
    mesh: &DeviceMesh,
    op: usize,
    choice: &[usize],
) -> OperatorPlan {
    let s = &shardings[op][choice[op]];
    let o = &g.ops[op];
    let parts: Vec<String> = o
        .dims
        .iter()
        .zip(&s.dim_axes)
        .filter(|(_, &a)| a != 0)
        .map(|(d, &a)| format!("{}:{}", d.name, axis_names(mesh, a)))
        .collect();
    let mut collectives = Vec::new();
    for (k, e) in g.edges.iter().enumerate().filter(|(_, e)| e.to == op) {
        let su = &shardings[e.from][choice[e.from]];
        for (c, axes) in edge_collectives(g, mesh, k, su, s) {
            collectives.push(format!(
                "{c}@{} from {}",
                axis_names(mesh, axes),
                g.ops[e.from].name
            ));
        }
    }
    let dp = s.zero_axes(o);
    let skipped = s.dp_axes(o) & s.zero_skip_axes;
    if o.weight.is_some() && skipped != 0 {
        collectives.push(format!("grad all-reduce@{}", axis_names(mesh, skipped)));
    }
    if o.weight.is_some() && dp != 0 {
        let sync = match s.zero.number() {
            0 => "grad all-reduce",
            1 => "grad reduce-scatter + param all-gather",
            2 => "grad reduce-scatter per micro-batch + param all-gather",
            _ => "param all-gather ×2 + grad reduce-scatter per micro-batch",
        };
        collectives.push(format!("{sync}@{}", axis_names(mesh, dp)));
    }
    OperatorPlan {
        name: o.name.clone(),
        copies: o.copies,
        sharding: if parts.is_empty() {
            "replicated".into()
        } else {
            parts.join(" ")
        },
        zero: s.zero.number(),
        collectives,
    }
}

#[cfg(test)]
mod tests {
    use memory_model::{ModelConfig, Recompute, MEGATRON_VOCAB_PADDING};

    use crate::ilp::IlpObjective;
    use crate::mesh::DeviceMesh;
    use crate::search::{Candidate, Problem};

    /// A candidate recomputing on its first stage only: every stage's ILP memory is the whole
    /// memory memory-model gives that stage under its own mode, and only stage 0 saves.
    #[test]
    fn leading_stage_recomputation_prices_each_stage_with_its_own_mode() {
        let mut model = ModelConfig::preset("gpt3-125m")
            .unwrap()
            .with_vocab_padding(MEGATRON_VOCAB_PADDING);
        model.num_layers = 4;
        let mesh = DeviceMesh::preset("dgx-a100-80g", 1)
            .unwrap()
            .stage_mesh(8)
            .unwrap();
        let mut p = Problem::new(model, mesh);
        p.global_batch = 16;
        p.setup.seq_len = 256;
        let fastest = IlpObjective::MinTime {
            memory_budget: None,
        };
        let solve = |cand: &Candidate| {
            let stages = p.build(cand, None).unwrap();
            p.solve("t", cand, &stages, fastest).unwrap()
        };
        let mut cand = Candidate::new(4, 2, p.mesh.stage_mesh(4).unwrap(), 4);
        let none = solve(&cand);
        cand.recompute = Recompute::Pointwise;
        cand.recompute_stages = 1;
        let partial = solve(&cand);
        assert_eq!(partial.recompute_label(), "pointwise(1/2 stages)");
        for s in &partial.stages {
            assert_eq!(s.ilp_memory, s.memory.total(), "stage {}", s.index);
        }
        let activations = |plan: &crate::plan::Plan, i: usize| plan.stages[i].memory.activations;
        assert!(activations(&partial, 0) < activations(&none, 0));
        assert_eq!(activations(&partial, 1), activations(&none, 1));

        // The rerun norm's output is resharded for the linear again in backward: the edge
        // into `qkv_proj` costs its forward reshard twice; an edge between two operators that
        // do not rerun costs the same as without recomputation.
        let edge_costs = |cand: &Candidate, from: &str, to: &str| -> Vec<f64> {
            let st = p.build(cand, None).unwrap().remove(0);
            let ops = &st.graph.graph.ops;
            let e = st
                .space
                .ilp
                .edges
                .iter()
                .find(|e| ops[e.from].name == from && ops[e.to].name == to)
                .unwrap();
            e.cost.clone()
        };
        let mut plain = cand.clone();
        plain.recompute = Recompute::None;
        let (a, b) = (
            edge_costs(&plain, "input_norm", "qkv_proj"),
            edge_costs(&cand, "input_norm", "qkv_proj"),
        );
        assert!(a.iter().zip(&b).all(|(x, y)| y >= x));
        assert!(a.iter().zip(&b).any(|(x, y)| y > x));
        assert_eq!(
            edge_costs(&plain, "out_proj", "attention_out_dropout"),
            edge_costs(&cand, "out_proj", "attention_out_dropout")
        );

        // Full recomputation reruns the whole layer: the forward reshards inside it (the row-
        // parallel output projection's partial sums, all-reduced for the dropout) run again.
        let mut full = cand.clone();
        full.recompute = Recompute::Full;
        full.recompute_stages = full.pp;
        let (a, b) = (
            edge_costs(&plain, "out_proj", "attention_out_dropout"),
            edge_costs(&full, "out_proj", "attention_out_dropout"),
        );
        assert!(a.iter().zip(&b).all(|(x, y)| y >= x));
        assert!(a.iter().zip(&b).any(|(x, y)| y > x));
    }
}
