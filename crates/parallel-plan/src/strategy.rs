//! From a computation graph on a mesh to the ILP's [`StrategyGraph`]: candidate shardings per
//! operator, their time and memory, and the resharding cost of every edge.

use memory_model::{stage_terms, TermValues, TrainingSetup, STAGE_TERMS};

use crate::cost_model::AxisMask;
use crate::graph::ComputationGraph;
use crate::ilp::{MemoryTerm, StrategyEdge, StrategyGraph, StrategyNode};
use crate::mesh::DeviceMesh;
use crate::sharding::{enumerate_shardings, reshard, Layout, Sharding};

/// Memory of one operator under one sharding, bytes per device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpMemory {
    /// Parameters, gradients and optimizer states of one copy (held for the whole step).
    pub model_states: u64,
    /// Activations saved for backward by one micro-batch, one copy.
    pub activations_per_micro_batch: u64,
    /// Activations one copy holds at the stage's peak (the in-flight micro-batches' worth;
    /// interleaved: the whole part of its share of the in-flight model chunks).
    pub activations_held: u64,
    /// Activations held beyond `copies × activations_held`, over all copies (interleaved 1F1B's
    /// fractional share of model chunks per layer), bytes.
    pub activations_rest: u64,
    /// Contributions of all copies to the stage's buffers and transients (memory-model's stage
    /// terms; zero where a graph has no memory-model operators behind it).
    pub terms: TermValues,
}

/// Where in the pipeline the graph runs: the multipliers that turn per-micro-batch costs into
/// the step's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineContext {
    /// Micro-batches per step `m`.
    pub micro_batches: u64,
    /// Pipeline stages `p`.
    pub stages: u64,
    /// Micro-batches whose activations the stage holds at its peak (1F1B: `p − i`; GPipe: `m`;
    /// interleaved: model chunks).
    pub in_flight: u64,
    /// Model chunks per device (interleaved 1F1B's virtual stages; 1 otherwise).
    pub virtual_stages: u64,
}

impl PipelineContext {
    /// Per-micro-batch time counts `m + (p − 1)/v` times in a step (the pipeline bubble
    /// included).
    pub fn time_slots(&self) -> f64 {
        self.micro_batches as f64 + (self.stages - 1) as f64 / self.virtual_stages.max(1) as f64
    }
}

/// The ILP input for `graph` on `mesh`, with the candidate shardings behind each strategy index.
#[derive(Debug, Clone)]
pub struct StrategySpace {
    /// The ILP input.
    pub ilp: StrategyGraph,
    /// Per operator, the sharding of each strategy.
    pub shardings: Vec<Vec<Sharding>>,
    /// Per operator, the memory of each strategy (model states, activations per micro-batch).
    pub memory: Vec<Vec<OpMemory>>,
}

impl StrategySpace {
    /// Gives the ILP memory-model's stage terms of `setup` (buffers and transients, from each
    /// strategy's [`OpMemory::terms`]) and its fixed overhead, so that the ILP's memory of a
    /// choice is the stage's whole per-device memory.
    pub fn add_stage_terms(&mut self, setup: &TrainingSetup) {
        let table = |k: usize, largest: bool| -> Vec<Vec<u64>> {
            self.memory
                .iter()
                .map(|op| {
                    op.iter()
                        .map(|m| {
                            if largest {
                                m.terms.largest[k]
                            } else {
                                m.terms.sum[k]
                            }
                        })
                        .collect()
                })
                .collect()
        };
        self.ilp.memory_terms = stage_terms(setup)
            .iter()
            .enumerate()
            .map(|(k, term)| MemoryTerm {
                name: format!("{:?}", term.kind),
                sum: table(k, false),
                largest: table(k, true),
                cap: term.cap,
            })
            .collect();
        debug_assert_eq!(self.ilp.memory_terms.len(), STAGE_TERMS);
        if self.memory.iter().flatten().any(|m| m.activations_rest > 0) {
            self.ilp.memory_terms.push(MemoryTerm {
                name: "InterleavedActivations".into(),
                sum: self
                    .memory
                    .iter()
                    .map(|op| op.iter().map(|m| m.activations_rest).collect())
                    .collect(),
                largest: Vec::new(),
                cap: None,
            });
        }
        self.ilp.memory_offset = setup.overhead_bytes;
    }
}

/// Layout signature of a sharding: what its edges see (output, inputs, input gradients).
fn signature(
    graph: &ComputationGraph,
    op: usize,
    s: &Sharding,
) -> (Layout, Vec<Layout>, Vec<Layout>) {
    let o = &graph.ops[op];
    let ins = o.inputs.iter().map(|t| s.layout(t)).collect();
    let grads = (0..o.inputs.len())
        .map(|k| s.input_grad_layout(o, k))
        .collect();
    (s.output_layout(o), ins, grads)
}

/// Builds the strategy space. `memory(op, sharding)` gives an operator's memory (memory-model's
/// per-operator cost); `restrict(op, sharding)` may drop candidates (baselines use it to pin a
/// strategy). Strategies dominated in both time and memory by another with the same layouts
/// are dropped, which does not change the optimum of any objective.
pub fn build_strategy_space(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    pipeline: &PipelineContext,
    memory: &dyn Fn(usize, &Sharding) -> OpMemory,
    restrict: &dyn Fn(usize, &Sharding) -> bool,
) -> StrategySpace {
    let slots = pipeline.time_slots();
    let mut space = StrategySpace {
        ilp: StrategyGraph::default(),
        shardings: Vec::new(),
        memory: Vec::new(),
    };
    for (i, op) in graph.ops.iter().enumerate() {
        let mut cands: Vec<(Sharding, f64, OpMemory)> = enumerate_shardings(mesh, op)
            .into_iter()
            .filter(|s| restrict(i, s))
            .map(|s| {
                let t = slots * s.micro_batch_time(mesh, op) + s.step_time(mesh, op);
                let m = memory(i, &s);
                (s, t, m)
            })
            .collect();
        let total = |m: &OpMemory| m.model_states + m.activations_held;
        let sigs: Vec<_> = cands
            .iter()
            .map(|(s, _, _)| signature(graph, i, s))
            .collect();
        let keep: Vec<bool> = (0..cands.len())
            .map(|a| {
                !(0..cands.len()).any(|b| {
                    b != a
                        && sigs[a] == sigs[b]
                        && cands[b].1 <= cands[a].1
                        && total(&cands[b].2) <= total(&cands[a].2)
                        && cands[b].2.terms.all_le(&cands[a].2.terms)
                        && cands[b].2.activations_rest <= cands[a].2.activations_rest
                        && (cands[b].1 < cands[a].1
                            || total(&cands[b].2) < total(&cands[a].2)
                            || b < a)
                })
            })
            .collect();
        let mut k = 0;
        cands.retain(|_| {
            k += 1;
            keep[k - 1]
        });
        space.ilp.nodes.push(StrategyNode {
            name: op.name.clone(),
            copies: op.copies,
            time: cands.iter().map(|c| c.1).collect(),
            memory: cands.iter().map(|c| total(&c.2)).collect(),
        });
        space.memory.push(cands.iter().map(|c| c.2).collect());
        space
            .shardings
            .push(cands.into_iter().map(|c| c.0).collect());
    }
    for e in &graph.edges {
        let (u, v) = (&graph.ops[e.from], &graph.ops[e.to]);
        // Classes: producers by output layout, consumers by (input layout, input-gradient layout).
        let (from_class, from_reps) =
            classify(space.shardings[e.from].iter().map(|s| s.output_layout(u)));
        let (to_class, to_reps) = classify(space.shardings[e.to].iter().map(|s| {
            (
                s.layout(&v.inputs[e.input]),
                s.input_grad_layout(v, e.input),
            )
        }));
        // A producer whose forward reruns in backward rebuilds its output, and the reshard
        // into the consumer's layout runs again: inside a recomputed region (full
        // recomputation's layer, selective's attention core) the consumer reruns too, and under
        // pointwise recomputation the consumer's saved input was dropped. A consumer that
        // reruns from a kept producer's tensor reads the input it saved (after the reshard:
        // the checkpointed function's inputs), so that reshard runs once. Conservative where a
        // kept input follows a rerun producer (selective's core → output projection, the
        // checkpoint between two fully recomputed layers): layouts that agree there, as the
        // engines' do, reshard nothing.
        let forward_runs = if u.recomputed { 2.0 } else { 1.0 };
        let mut cost = Vec::with_capacity(from_reps.len() * to_reps.len());
        for out in &from_reps {
            let out_grad = Layout { partial: 0, ..*out };
            for (input, grad) in &to_reps {
                let fwd = reshard(mesh, u.output.numel, *out, *input).0;
                let bwd = reshard(mesh, u.output.numel, *grad, out_grad).0;
                cost.push(slots * (forward_runs * fwd + bwd));
            }
        }
        space.ilp.edges.push(StrategyEdge {
            from: e.from,
            to: e.to,
            copies: e.copies,
            from_class,
            to_class,
            cost,
        });
    }
    space
}

/// Numbers equal keys consecutively: (class of each item, one representative key per class).
fn classify<K: PartialEq + Copy>(keys: impl Iterator<Item = K>) -> (Vec<usize>, Vec<K>) {
    let mut reps: Vec<K> = Vec::new();
    let classes = keys
        .map(|k| match reps.iter().position(|r| *r == k) {
            Some(c) => c,
            None => {
                reps.push(k);
                reps.len() - 1
            }
        })
        .collect();
    (classes, reps)
}

/// The collectives of edge `e` (forward and backward) for the chosen shardings, as
/// `(collective name, axes)` pairs.
pub fn edge_collectives(
    graph: &ComputationGraph,
    mesh: &DeviceMesh,
    edge: usize,
    su: &Sharding,
    sv: &Sharding,
) -> Vec<(String, AxisMask)> {
    let e = &graph.edges[edge];
    let (u, v) = (&graph.ops[e.from], &graph.ops[e.to]);
    let out = su.output_layout(u);
    let fwd = reshard(mesh, u.output.numel, out, sv.layout(&v.inputs[e.input])).1;
    let bwd = reshard(
        mesh,
        u.output.numel,
        sv.input_grad_layout(v, e.input),
        Layout { partial: 0, ..out },
    )
    .1;
    fwd.into_iter()
        .map(|(c, a)| (format!("fwd {}", c.name()), a))
        .chain(
            bwd.into_iter()
                .map(|(c, a)| (format!("bwd {}", c.name()), a)),
        )
        .collect()
}
