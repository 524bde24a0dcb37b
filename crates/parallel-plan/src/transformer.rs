//! The computation graph of a decoder-only transformer (or of one pipeline stage of it), built
//! from memory-model's operator list so that both crates describe the same tensors.
//!
//! Each memory-model operator becomes one graph operator whose iteration dimensions are the
//! named dimensions of its tensors (query and key/value heads share one `heads` dimension whose
//! splits must divide the key/value heads). Operators follow each other in execution order;
//! residual additions also read the residual stream. Identical layers are tied: one node with
//! `copies = layers` (and the layer-to-layer edges with `copies = layers − 1`), unless
//! [`StageSpec::tie_layers`] is off.

use memory_model::{
    embedding_operators, head_operators, is_kept, layer_operators, placed_memory, Dim as MmDim,
    ModelConfig, OpKind as MmKind, Operator as MmOperator, OperatorSharding, PlacedOperator,
    Recompute, SaveClass, Shape, StageTermKind, TrainingSetup, Workload,
};

use crate::cost_model::group_size;
use crate::error::Result;
use crate::graph::{ComputationGraph, Dim, GraphEdge, OpKind, Operator, TensorSpec};
use crate::mesh::DeviceMesh;
use crate::sharding::Sharding;
use crate::strategy::{OpMemory, PipelineContext};

/// Which part of the model a pipeline stage holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSpec {
    /// Transformer layers on the stage (≥ 1).
    pub layers: u64,
    /// Holds the embeddings (first stage).
    pub first: bool,
    /// Holds the final norm, head and loss (last stage).
    pub last: bool,
    /// The pipeline has more than one stage (a tied head then keeps a copy on the last stage).
    pub pipelined: bool,
    /// Share one node among identical layers (default true; false builds every layer).
    pub tie_layers: bool,
    /// Activation recomputation: layer operators whose saved tensors it drops are marked
    /// [`Operator::recomputed`] (their forward runs again in the backward pass).
    pub recompute: Recompute,
}

/// A stage graph together with the memory-model operators its nodes stand for.
#[derive(Debug, Clone)]
pub struct TransformerGraph {
    /// The computation graph (layer operators tied unless asked otherwise).
    pub graph: ComputationGraph,
    /// Per graph operator, the memory-model operator it was built from.
    pub source_ops: Vec<MmOperator>,
    /// Per graph operator, the memory-model dimension of each of its iteration dimensions.
    pub dim_names: Vec<Vec<MmDim>>,
    /// Per graph operator, whether it belongs to the first (or, tied, the only) layer block:
    /// one layer's worth of operators, e.g. for the recomputation transient.
    pub first_layer: Vec<bool>,
}

/// Memory-model dimension → whether the planner may split it for an operator of this kind.
fn splittable(kind: MmKind, dim: MmDim) -> bool {
    use MmDim::*;
    match dim {
        Batch => true,
        Seq => !matches!(
            kind,
            MmKind::Linear
                | MmKind::AttentionScores
                | MmKind::AttentionContext
                | MmKind::Softmax
                | MmKind::Router
        ),
        Heads => true,
        Hidden | HiddenOut => kind == MmKind::Linear,
        Ffn => matches!(kind, MmKind::Linear | MmKind::Activation | MmKind::Dropout),
        Vocab => matches!(
            kind,
            MmKind::Linear | MmKind::Embedding | MmKind::CrossEntropy
        ),
        Experts => kind == MmKind::Linear,
        KvSeq | KvHeads | HeadDim | TopK | Positions | LoraRank => false,
    }
}

/// One planner dimension for query and key/value heads.
fn canonical(dim: MmDim) -> MmDim {
    if dim == MmDim::KvHeads {
        MmDim::Heads
    } else {
        dim
    }
}

/// Converts one memory-model operator; `residual` adds a second input slot for the residual
/// stream (a `[b, s, h]` tensor).
fn convert(op: &MmOperator, model: &ModelConfig, copies: u32) -> (Operator, Vec<MmDim>) {
    let mut names: Vec<MmDim> = Vec::new();
    let mut dims: Vec<Dim> = Vec::new();
    let shapes = op
        .inputs
        .iter()
        .chain(&op.outputs)
        .chain(op.params.iter().map(|p| &p.shape))
        .chain(op.saved.iter().map(|a| &a.shape));
    for shape in shapes {
        for &(d, n) in &shape.0 {
            let c = canonical(d);
            if !names.contains(&c) {
                names.push(c);
                let units = (c == MmDim::Heads).then_some(model.num_kv_heads);
                let size = if c == MmDim::Heads {
                    model.num_heads
                } else {
                    n
                };
                dims.push(Dim {
                    name: format!("{c:?}").to_lowercase(),
                    size,
                    units,
                    splittable: splittable(op.kind, c),
                });
            }
        }
    }
    let index = |d: MmDim| {
        names
            .iter()
            .position(|&n| n == canonical(d))
            .expect("collected above")
    };
    let spec = |shapes: &[&Shape]| TensorSpec {
        dims: shapes
            .first()
            .map_or(Vec::new(), |s| s.0.iter().map(|&(d, _)| index(d)).collect()),
        numel: shapes.iter().map(|s| s.elements()).sum(),
    };
    let inputs: Vec<&Shape> = op.inputs.iter().collect();
    let outputs: Vec<&Shape> = op.outputs.iter().collect();
    let input = spec(&inputs);
    let output = spec(&outputs);
    let weight_shapes: Vec<&Shape> = op.params.iter().map(|p| &p.shape).collect();
    let weight = (!weight_shapes.is_empty()).then(|| {
        let mut w = spec(&weight_shapes);
        // The weight's layout is that of its largest tensor (the matrix, not the bias).
        let largest = op
            .params
            .iter()
            .max_by_key(|p| p.shape.elements())
            .expect("non-empty");
        w.dims = largest.shape.0.iter().map(|&(d, _)| index(d)).collect();
        w
    });
    let reduce_dims: Vec<usize> = match op.kind {
        MmKind::Linear | MmKind::Router | MmKind::Embedding | MmKind::AttentionContext => {
            let out = &output.dims;
            let mut r: Vec<usize> = inputs
                .iter()
                .chain(&weight_shapes)
                .flat_map(|s| s.0.iter().map(|&(d, _)| index(d)))
                .filter(|d| !out.contains(d))
                .collect();
            r.sort_unstable();
            r.dedup();
            r.retain(|&d| dims[d].splittable);
            r
        }
        _ => Vec::new(),
    };
    let saved = op.saved.iter().map(|a| spec(&[&a.shape])).collect();
    let (kind, flops) = match op.kind {
        MmKind::Linear | MmKind::Router => {
            let tokens: u64 = inputs[0]
                .0
                .iter()
                .filter(|(d, _)| matches!(d, MmDim::Batch | MmDim::Seq | MmDim::TopK))
                .map(|&(_, n)| n)
                .product();
            let matrices: u64 = op
                .params
                .iter()
                .filter(|p| p.shape.0.len() >= 2)
                .map(|p| p.shape.elements())
                .sum();
            let flops = if matrices > 0 {
                2.0 * tokens as f64 * matrices as f64
            } else {
                // A head tied to the embedding holds no parameters here; its matrix is
                // `input features × output features`.
                let (i, o) = (inputs[0].elements(), outputs[0].elements());
                2.0 * i as f64 * o as f64 / tokens.max(1) as f64
            };
            (OpKind::Matmul, flops)
        }
        MmKind::AttentionScores | MmKind::AttentionContext => {
            // The query-shaped tensor `[b, s, a, d]`: the scores' first input, the context's
            // output (its first input is the `[b, a, s, s]` probabilities).
            let q = if op.kind == MmKind::AttentionContext {
                outputs[0]
            } else {
                inputs[0]
            };
            let s = q.size(MmDim::Seq).unwrap_or(1) as f64;
            let per_product = 2.0 * q.elements() as f64 * s;
            let fused = op.name == "flash_attention";
            (
                OpKind::Matmul,
                if fused {
                    2.0 * per_product
                } else {
                    per_product
                },
            )
        }
        _ => (OpKind::Elementwise, 0.0),
    };
    let mut inputs = vec![input];
    if op.kind == MmKind::ResidualAdd {
        inputs.push(output.clone());
    }
    let converted = Operator {
        name: op.name.to_string(),
        kind,
        copies,
        dims,
        inputs,
        output,
        reduce_dims,
        weight,
        saved,
        flops,
        recomputed: false,
    };
    (converted, names)
}

/// Builds the graph of one pipeline stage of `model` for one micro-batch of `workload`.
pub fn stage_graph(
    model: &ModelConfig,
    workload: &Workload,
    stage: &StageSpec,
) -> TransformerGraph {
    assert!(stage.layers >= 1, "a stage holds at least one layer");
    let mut g = TransformerGraph {
        graph: ComputationGraph::default(),
        source_ops: Vec::new(),
        dim_names: Vec::new(),
        first_layer: Vec::new(),
    };
    let push = |g: &mut TransformerGraph, op: MmOperator, copies: u32| {
        let (c, names) = convert(&op, model, copies);
        g.graph.ops.push(c);
        g.source_ops.push(op);
        g.dim_names.push(names);
        g.first_layer.push(false);
        g.graph.ops.len() - 1
    };
    let edge = |g: &mut TransformerGraph, from: usize, to: usize, input: usize, copies: u32| {
        if copies > 0 {
            g.graph.edges.push(GraphEdge {
                from,
                to,
                input,
                copies,
            });
        }
    };
    // The last operator of the embedding block (the residual stream entering layer 1).
    let mut stream: Option<usize> = None;
    if stage.first {
        for op in embedding_operators(model, workload) {
            let id = push(&mut g, op, 1);
            // Token embedding → position embedding (added) → dropout.
            if let Some(prev) = stream {
                edge(&mut g, prev, id, 0, 1);
            }
            stream = Some(id);
        }
    }
    let layer_ops = layer_operators(model, workload);
    let (blocks, copies) = if stage.tie_layers {
        (1, stage.layers as u32)
    } else {
        (stage.layers as usize, 1)
    };
    let mut previous_output: Option<usize> = None;
    for block in 0..blocks {
        let base = g.graph.ops.len();
        // The attention residual's skip input is the layer input (wired below); the MLP
        // residual's is the attention residual.
        let mut residual_source: Option<usize> = None;
        let mut last: Option<usize> = None;
        for op in layer_ops.iter().cloned() {
            let kind = op.kind;
            let name = op.name;
            // Full recomputation reruns the whole layer; selective, the operators whose saved
            // tensors it drops; pointwise, the norm or activation function whose output (the
            // next linear's saved input) it drops.
            let dropped = |a: &memory_model::ActTensor| {
                is_kept(a.class, Recompute::None) && !is_kept(a.class, stage.recompute)
            };
            let recomputed = stage.recompute == Recompute::Full
                || op
                    .saved
                    .iter()
                    .any(|a| a.class != SaveClass::PointwiseOutput && dropped(a));
            let producer_recomputed = op
                .saved
                .iter()
                .any(|a| a.class == SaveClass::PointwiseOutput && dropped(a));
            let id = push(&mut g, op, copies);
            g.graph.ops[id].recomputed = recomputed;
            if producer_recomputed {
                if let Some(prev) = last {
                    g.graph.ops[prev].recomputed = true;
                }
            }
            g.first_layer[id] = block == 0;
            if let Some(prev) = last {
                edge(&mut g, prev, id, 0, copies);
            }
            if kind == MmKind::ResidualAdd {
                if let Some(src) = residual_source {
                    edge(&mut g, src, id, 1, copies);
                }
            }
            if name == "attention_residual" {
                residual_source = Some(id);
            }
            last = Some(id);
        }
        let first = base;
        let attn_res = (base..g.graph.ops.len())
            .find(|&i| g.graph.ops[i].name == "attention_residual")
            .expect("layer has an attention residual");
        let out = last.expect("layer has operators");
        // Layer input: from the embedding / previous block, and (tied) from the layer itself.
        let entry = previous_output.or(stream);
        if let Some(src) = entry {
            edge(&mut g, src, first, 0, 1);
            edge(&mut g, src, attn_res, 1, 1);
        }
        if stage.tie_layers {
            edge(&mut g, out, first, 0, copies - 1);
            edge(&mut g, out, attn_res, 1, copies - 1);
        }
        previous_output = Some(out);
    }
    if stage.last {
        let mut prev = previous_output;
        for op in head_operators(model, workload, stage.pipelined) {
            let id = push(&mut g, op, 1);
            if let Some(p) = prev {
                edge(&mut g, p, id, 0, 1);
            }
            prev = Some(id);
        }
    }
    g
}

impl TransformerGraph {
    /// memory-model's sharding of operator `op` under the planner's `sharding` on a stage mesh:
    /// each named dimension split by the size of the axes assigned to it, the whole stage mesh
    /// as the operator's group (one data-parallel replica whose batch is split), and ZeRO over
    /// the operator's data-parallel axes.
    pub fn operator_sharding(
        &self,
        op: usize,
        sharding: &Sharding,
        mesh: &DeviceMesh,
    ) -> OperatorSharding {
        let mut s = OperatorSharding::replicated(1);
        s.group = mesh.num_devices() as u64;
        for (k, &axes) in sharding.dim_axes.iter().enumerate() {
            let ways = group_size(mesh, axes) as u64;
            let dim = self.dim_names[op][k];
            s.splits[dim as usize] = ways;
            if dim == MmDim::Heads {
                s.splits[MmDim::KvHeads as usize] = ways;
            }
        }
        if sharding.saved_seq_axes != 0 {
            s.splits[MmDim::Seq as usize] *= group_size(mesh, sharding.saved_seq_axes) as u64;
        }
        s.zero_group = group_size(mesh, sharding.zero_axes(&self.graph.ops[op])) as u64;
        s.zero = sharding.zero;
        s
    }

    /// Activation sets operator `op` holds on a stage with `in_flight` micro-batches (model
    /// chunks under interleaving) and `virtual_stages` chunks per device, over all its copies:
    /// a layer operator `copies · in_flight / v` (its layers' share of the chunks; with tied
    /// layers `copies` is the stage's layers, a multiple of `v`), the embedding and head
    /// `⌈in_flight / v⌉` micro-batches (memory-model's `estimate` counts them so).
    pub fn activation_sets(&self, op: usize, in_flight: u64, virtual_stages: u64) -> u64 {
        let copies = self.graph.ops[op].copies as u64;
        let v = virtual_stages.max(1);
        if self.first_layer[op] {
            copies * in_flight / v
        } else {
            copies * in_flight.div_ceil(v)
        }
    }

    /// Operator `op` under `sharding` as memory-model places it on a stage holding `in_flight`
    /// micro-batches (model chunks, interleaved, with `virtual_stages` per device): its copies,
    /// its activation sets ([`TransformerGraph::activation_sets`]), whether it is in the first
    /// layer block, and its data-parallel replicas (the axes splitting the batch that are
    /// data-parallel).
    pub fn placed_operator(
        &self,
        op: usize,
        sharding: &Sharding,
        mesh: &DeviceMesh,
        in_flight: u64,
        virtual_stages: u64,
    ) -> PlacedOperator<'_> {
        let o = &self.graph.ops[op];
        let copies = o.copies as u64;
        let batch_axes = self.dim_names[op]
            .iter()
            .position(|&d| d == MmDim::Batch)
            .map_or(0, |k| sharding.dim_axes[k]);
        PlacedOperator {
            op: &self.source_ops[op],
            sharding: self.operator_sharding(op, sharding, mesh),
            copies,
            activation_sets: self.activation_sets(op, in_flight, virtual_stages),
            in_layer: self.first_layer[op],
            data_parallel: group_size(mesh, batch_axes & sharding.dp_axes(o)) as u64,
        }
    }

    /// The operator whose output crosses the stage boundary when pipelining (the last of the
    /// first layer block).
    pub fn boundary_operator(&self) -> Option<usize> {
        self.first_layer.iter().rposition(|&l| l)
    }

    /// The operator producing the logits (the output head), if the stage holds it.
    pub fn logits_operator(&self) -> Option<usize> {
        self.source_ops.iter().position(|o| o.name == "lm_head")
    }

    /// Bytes of one device's share of operator `op`'s output under `sharding`, at `elem` bytes
    /// per element.
    pub fn output_bytes(
        &self,
        op: usize,
        sharding: &Sharding,
        mesh: &DeviceMesh,
        elem: u64,
    ) -> u64 {
        let o = &self.graph.ops[op];
        o.output.numel.div_ceil(sharding.shards(mesh, &o.output)) * elem
    }

    /// Memory of operator `op` under `sharding` on a stage of `pipeline` (its in-flight
    /// micro-batches or model chunks, its virtual stages; with several stages it sends and
    /// receives its boundary activation), from memory-model's
    /// [`placed_memory`]: model states and activations of one copy, and the operator's
    /// contributions to the stage's buffers and transients, the boundary buffers and the logits
    /// included, so that the ILP's memory of a choice is [`memory_model::stage_memory`]'s.
    pub fn operator_memory(
        &self,
        op: usize,
        sharding: &Sharding,
        mesh: &DeviceMesh,
        setup: &TrainingSetup,
        pipeline: &PipelineContext,
    ) -> Result<OpMemory> {
        let placed = self.placed_operator(
            op,
            sharding,
            mesh,
            pipeline.in_flight,
            pipeline.virtual_stages,
        );
        let pipelined = pipeline.stages > 1;
        let m = placed_memory(setup, &placed)?;
        let mut terms = m.terms;
        if pipelined && self.boundary_operator() == Some(op) {
            let act = setup.precision.activation_bytes();
            terms.sum[StageTermKind::PipelineBuffers as usize] +=
                2 * self.output_bytes(op, sharding, mesh, act);
        }
        if self.logits_operator() == Some(op) {
            let logits = &mut terms.largest[StageTermKind::RecomputeOrLogits as usize];
            *logits = (*logits).max(self.output_bytes(op, sharding, mesh, 4));
        }
        let copies = placed.copies.max(1);
        let act = m.operator.device.activations;
        let held = act * (placed.activation_sets / copies);
        Ok(OpMemory {
            model_states: m.operator.device.model_states(),
            activations_per_micro_batch: act,
            activations_held: held,
            activations_rest: act * placed.activation_sets - copies * held,
            terms,
        })
    }
}
