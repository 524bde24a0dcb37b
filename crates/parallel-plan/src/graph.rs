//! The computation graph the planner shards: operators over named iteration dimensions, the
//! tensors they read, write, hold as parameters and save for backward, and producer → consumer
//! edges. Identical operators of tied layers are one node with `copies > 1`.
//!
//! # JSON format
//! A graph file is the serde form of [`ComputationGraph`]:
//! ```json
//! { "ops": [ { "name": "fc1", "kind": "matmul", "copies": 24,
//!              "dims": [ {"name": "b", "size": 8}, {"name": "i", "size": 2048},
//!                        {"name": "o", "size": 8192} ],
//!              "inputs": [ {"dims": [0, 1], "numel": 16384} ],
//!              "output": {"dims": [0, 2], "numel": 65536},
//!              "reduce_dims": [1],
//!              "weight": {"dims": [1, 2], "numel": 16777216},
//!              "saved": [ {"dims": [0, 1], "numel": 16384} ],
//!              "flops": 268435456.0 } ],
//!   "edges": [ {"from": 0, "to": 1, "input": 0, "copies": 24} ] }
//! ```
//! `dims` of a tensor are indices into the operator's `dims`; a dimension may be split over mesh
//! axes only when `splittable` (default true) and the split divides its `units` (default: its
//! size; e.g. the number of heads for a head dimension). `numel` is the element count of the
//! whole tensor. `kind` is `matmul` (compute-bound, FLOPs) or `elementwise` (memory-bound).
//! Optional fields: `copies` (default 1; identical tied copies, e.g. layers, and on an edge the
//! identical edges it stands for), `reduce_dims`, `weight`, `saved`, `flops` (default 0) and
//! `recomputed` (default false: the forward runs again in backward, activation checkpointing).
//! An edge's `input` is the consumer's input slot.
//!
//! `crates/parallel-plan/examples/mlp_block_graph.json` is a complete example: two tied
//! pre-norm MLP blocks (`norm → fc1 → gelu → fc2`, hidden 1024, FFN 4096, one micro-batch of
//! 8 × 512 tokens) with the block-to-block edge `fc2 → norm` counted once. Plan it with
//! `pardis plan --graph crates/parallel-plan/examples/mlp_block_graph.json` or
//! [`crate::custom_graph::plan_graph`]; memory then follows the rule of [`crate::custom_graph`].

use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};

/// One iteration dimension of an operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dim {
    /// Name, e.g. `b`, `s`, `heads`.
    pub name: String,
    /// Extent (elements).
    pub size: u64,
    /// Indivisible units along the dimension (a split must divide it); defaults to `size`.
    #[serde(default)]
    pub units: Option<u64>,
    /// Whether mesh axes may split this dimension (default true).
    #[serde(default = "yes")]
    pub splittable: bool,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

impl Dim {
    /// A splittable dimension whose units are its elements.
    pub fn new(name: &str, size: u64) -> Self {
        Dim {
            name: name.into(),
            size,
            units: None,
            splittable: true,
        }
    }

    /// Indivisible units along the dimension.
    pub fn units(&self) -> u64 {
        self.units.unwrap_or(self.size)
    }
}

/// A tensor of an operator: which operator dimensions index it and how many elements it has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    /// Operator dimensions (indices into `Operator::dims`) the tensor is laid out over.
    pub dims: Vec<usize>,
    /// Elements of the whole (unsharded) tensor.
    pub numel: u64,
}

/// How an operator's time is charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// Compute-bound: FLOPs at the sustained FLOP/s.
    Matmul,
    /// Memory-bound: bytes read and written at HBM bandwidth.
    Elementwise,
}

/// One operator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Operator {
    /// Name (unique within the graph).
    pub name: String,
    /// Compute- or memory-bound.
    pub kind: OpKind,
    /// Identical copies (tied layers) this node stands for.
    #[serde(default = "one")]
    pub copies: u32,
    /// Iteration dimensions.
    pub dims: Vec<Dim>,
    /// Activation inputs, by slot.
    pub inputs: Vec<TensorSpec>,
    /// Activation output.
    pub output: TensorSpec,
    /// Dimensions summed over: splitting one leaves a partial-sum output.
    #[serde(default)]
    pub reduce_dims: Vec<usize>,
    /// Trainable parameters, if any.
    #[serde(default)]
    pub weight: Option<TensorSpec>,
    /// Tensors saved for the backward pass.
    #[serde(default)]
    pub saved: Vec<TensorSpec>,
    /// Forward FLOPs of the whole (unsharded) operator.
    #[serde(default)]
    pub flops: f64,
    /// The forward pass runs again in the backward pass (activation recomputation), so its
    /// compute counts once more (default false).
    #[serde(default)]
    pub recomputed: bool,
}

/// A producer → consumer edge: the producer's output feeds the consumer's input slot `input`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEdge {
    /// Producer operator index.
    pub from: usize,
    /// Consumer operator index.
    pub to: usize,
    /// Consumer input slot.
    pub input: usize,
    /// Identical edges this one stands for (tied layers).
    #[serde(default = "one")]
    pub copies: u32,
}

/// Largest forward FLOPs one operator may declare (10²¹: a thousand times a GPT-3 175B layer's
/// matmul on a 2048-token micro-batch of 64 sequences); larger counts are input errors.
pub const MAX_OPERATOR_FLOPS: f64 = 1e21;
/// Largest tensor one operator may declare, elements (2⁴⁸, 512 TiB in bf16).
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 48;

/// Operators and edges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ComputationGraph {
    /// Operators.
    pub ops: Vec<Operator>,
    /// Edges.
    pub edges: Vec<GraphEdge>,
}

impl ComputationGraph {
    /// Parses and validates a graph in the JSON format of the module docs.
    pub fn from_json(text: &str) -> Result<Self> {
        let g: ComputationGraph =
            serde_json::from_str(text).map_err(|e| PlanError::Json(e.to_string()))?;
        g.validate()?;
        Ok(g)
    }

    /// Checks dimension indices, positive sizes, units that divide their dimension, copies,
    /// FLOPs and tensor sizes within [`MAX_OPERATOR_FLOPS`] and [`MAX_TENSOR_ELEMENTS`], that
    /// each tensor's element count is a whole multiple of the product of its dimensions (a spec
    /// may stand for several tensors of one layout, e.g. a norm's scale and bias), and that
    /// each edge joins an output to an input of the same number of elements and rank.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(PlanError::InvalidGraph(m));
        if self.ops.is_empty() {
            return bad("the graph has no operators".into());
        }
        for op in &self.ops {
            if op.copies == 0 {
                return bad(format!("operator `{}` has copies = 0", op.name));
            }
            if let Some(d) = op.dims.iter().find(|d| d.size == 0 || d.units() == 0) {
                return bad(format!(
                    "operator `{}`: dimension `{}` has size 0",
                    op.name, d.name
                ));
            }
            if !(op.flops.is_finite() && op.flops >= 0.0) {
                return bad(format!("operator `{}` has bad FLOPs", op.name));
            }
            if op.flops > MAX_OPERATOR_FLOPS {
                return bad(format!(
                    "operator `{}`: {:e} FLOPs exceeds the bound of {MAX_OPERATOR_FLOPS:e} per operator",
                    op.name, op.flops
                ));
            }
            if let Some(d) = op
                .dims
                .iter()
                .find(|d| d.units() > d.size || !d.size.is_multiple_of(d.units()))
            {
                return bad(format!(
                    "operator `{}`: dimension `{}` of size {} is not a whole number of its {} units",
                    op.name,
                    d.name,
                    d.size,
                    d.units()
                ));
            }
            let tensors = op
                .inputs
                .iter()
                .chain([&op.output])
                .chain(&op.weight)
                .chain(&op.saved);
            for t in tensors {
                if t.dims.iter().any(|&d| d >= op.dims.len()) {
                    return bad(format!("operator `{}` names a dimension it lacks", op.name));
                }
                let mut seen = 0u128;
                let mut laid_out: u128 = 1;
                for &d in &t.dims {
                    if seen & (1 << d.min(127)) != 0 {
                        return bad(format!(
                            "operator `{}`: a tensor names dimension `{}` twice",
                            op.name, op.dims[d].name
                        ));
                    }
                    seen |= 1 << d.min(127);
                    laid_out = laid_out.saturating_mul(op.dims[d].size as u128);
                }
                if laid_out.max(t.numel as u128) > MAX_TENSOR_ELEMENTS as u128 {
                    return bad(format!(
                        "operator `{}`: a tensor of {laid_out} elements exceeds the bound of {MAX_TENSOR_ELEMENTS}",
                        op.name
                    ));
                }
                // A spec may stand for several tensors of one layout (a norm's scale and
                // bias), so its size is a whole multiple of what its dimensions lay out.
                if t.numel == 0 || !(t.numel as u128).is_multiple_of(laid_out) {
                    return bad(format!(
                        "operator `{}`: a tensor over dimensions [{}] (product {laid_out}) declares {} elements",
                        op.name,
                        t.dims
                            .iter()
                            .map(|&d| op.dims[d].name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                        t.numel
                    ));
                }
            }
            if op
                .reduce_dims
                .iter()
                .any(|&d| d >= op.dims.len() || op.output.dims.contains(&d))
            {
                return bad(format!(
                    "operator `{}`: a reduce dimension is bad or in the output",
                    op.name
                ));
            }
        }
        for e in &self.edges {
            let (Some(u), Some(v)) = (self.ops.get(e.from), self.ops.get(e.to)) else {
                return bad(format!(
                    "edge {} → {} names a missing operator",
                    e.from, e.to
                ));
            };
            let Some(input) = v.inputs.get(e.input) else {
                return bad(format!(
                    "edge {} → {}: `{}` has no input {}",
                    u.name, v.name, v.name, e.input
                ));
            };
            if e.copies == 0 || e.from == e.to {
                return bad(format!(
                    "edge {} → {} needs copies ≥ 1 and distinct ends",
                    u.name, v.name
                ));
            }
            if input.numel != u.output.numel || input.dims.len() != u.output.dims.len() {
                return bad(format!(
                    "edge {} → {}: output of {} elements / rank {} feeds an input of {} / rank {}",
                    u.name,
                    v.name,
                    u.output.numel,
                    u.output.dims.len(),
                    input.numel,
                    input.dims.len()
                ));
            }
        }
        Ok(())
    }
}
