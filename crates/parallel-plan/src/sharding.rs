//! SPMD shardings of one operator on a mesh (Alpa-style) and what they cost in time.
//!
//! A [`Sharding`] assigns every mesh axis either to one splittable dimension of the
//! operator's iteration space or to nothing (the operator is replicated along it), and picks a
//! ZeRO stage for the operator's parameters over its data-parallel axes (the axes that split
//! dimensions the weight does not have, e.g. the batch). From it follow the layouts of every
//! tensor ([`Layout`]), the collectives that resharding between two layouts needs
//! ([`reshard`]), and the operator's own compute and parameter-synchronisation time.

use serde::{Deserialize, Serialize};

use crate::cost_model::{
    collective_time, compute_time, exposed, group_size, memory_bound_time, AxisMask, Collective,
    BACKWARD_FLOP_FACTOR,
};
use crate::graph::{OpKind, Operator, TensorSpec};
use crate::mesh::DeviceMesh;
use memory_model::ZeroStage;

/// The sharding of one operator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sharding {
    /// Per operator dimension, the mesh axes splitting it.
    pub dim_axes: Vec<AxisMask>,
    /// ZeRO stage over the data-parallel axes.
    pub zero: ZeroStage,
    /// Axes over which a matmul keeps its saved input split along the sequence (Megatron
    /// sequence parallelism's trick): the input is replicated along them for the forward pass,
    /// stored as a `1/n` slice, and all-gathered again in the backward pass. Empty by default.
    #[serde(default)]
    pub saved_seq_axes: AxisMask,
    /// Data-parallel axes the ZeRO sharding leaves out (their gradients are all-reduced
    /// instead): Megatron-LM's distributed optimizer shards the states of sequence-parallel
    /// norms over the data-parallel group only, not over the tensor-parallel axis that splits
    /// their sequence. Empty by default.
    #[serde(default)]
    pub zero_skip_axes: AxisMask,
}

/// Layout of one tensor: the axes splitting each of its dimensions, and the axes over which it
/// is a partial sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Per tensor dimension (up to 4), the axes splitting it.
    pub split: [AxisMask; 4],
    /// Axes over which the tensor holds partial sums.
    pub partial: AxisMask,
}

/// Bytes per element of activations and of communicated parameters/gradients (bf16).
pub const ACTIVATION_BYTES: u64 = 2;

impl Sharding {
    /// Axes used by any dimension.
    pub fn used_axes(&self) -> AxisMask {
        self.dim_axes.iter().fold(0, |m, &a| m | a)
    }

    /// Axes splitting the dimensions of `t`.
    pub fn tensor_axes(&self, t: &TensorSpec) -> AxisMask {
        t.dims.iter().fold(0, |m, &d| m | self.dim_axes[d])
    }

    /// Layout of `t` (not partial).
    pub fn layout(&self, t: &TensorSpec) -> Layout {
        let mut split = [0; 4];
        for (k, &d) in t.dims.iter().enumerate().take(4) {
            split[k] = self.dim_axes[d];
        }
        Layout { split, partial: 0 }
    }

    /// Layout of the operator's output: partial over the axes of its reduce dimensions.
    pub fn output_layout(&self, op: &Operator) -> Layout {
        let partial = op.reduce_dims.iter().fold(0, |m, &d| m | self.dim_axes[d]);
        Layout {
            partial,
            ..self.layout(&op.output)
        }
    }

    /// Layout of the gradient of input `slot` as the backward pass produces it: partial over
    /// the axes of dimensions the input lacks (e.g. the output dimension of a matmul).
    pub fn input_grad_layout(&self, op: &Operator, slot: usize) -> Layout {
        let t = &op.inputs[slot];
        let partial = self.used_axes() & !self.tensor_axes(t);
        Layout {
            partial,
            ..self.layout(t)
        }
    }

    /// Data-parallel axes of the weight: axes splitting dimensions the weight does not have.
    pub fn dp_axes(&self, op: &Operator) -> AxisMask {
        match &op.weight {
            Some(w) => self.used_axes() & !self.tensor_axes(w),
            None => 0,
        }
    }

    /// Axes over which ZeRO shards the operator's model states: the data-parallel axes less
    /// [`Sharding::zero_skip_axes`].
    pub fn zero_axes(&self, op: &Operator) -> AxisMask {
        self.dp_axes(op) & !self.zero_skip_axes
    }

    /// Number of shards of `t` (product of the sizes of the axes splitting it).
    pub fn shards(&self, mesh: &DeviceMesh, t: &TensorSpec) -> u64 {
        group_size(mesh, self.tensor_axes(t)) as u64
    }

    /// Elements of `t` on one device (rounded up).
    pub fn local_numel(&self, mesh: &DeviceMesh, t: &TensorSpec) -> u64 {
        t.numel.div_ceil(self.shards(mesh, t))
    }

    /// Whether every split divides its dimension's units.
    pub fn is_valid(&self, mesh: &DeviceMesh, op: &Operator) -> bool {
        op.dims.iter().zip(&self.dim_axes).all(|(d, &a)| {
            let n = group_size(mesh, a) as u64;
            a == 0 || (d.splittable && d.units() % n == 0)
        })
    }

    /// One forward pass of the operator's own computation on one device, seconds.
    fn forward_time(&self, mesh: &DeviceMesh, op: &Operator) -> f64 {
        let parallel = group_size(mesh, self.used_axes()) as f64;
        match op.kind {
            OpKind::Matmul => compute_time(mesh, op.flops / parallel),
            OpKind::Elementwise => {
                let bytes: u64 = op
                    .inputs
                    .iter()
                    .chain([&op.output])
                    .map(|t| self.local_numel(mesh, t))
                    .sum();
                memory_bound_time(mesh, (bytes * ACTIVATION_BYTES) as f64)
            }
        }
    }

    /// Per-micro-batch time of the operator itself (forward + backward compute, plus the
    /// parameter collectives ZeRO-2/3 repeat every micro-batch, less what overlaps the
    /// computation; see [`crate::cost_model`]), seconds.
    pub fn micro_batch_time(&self, mesh: &DeviceMesh, op: &Operator) -> f64 {
        let compute = self.forward_time(mesh, op);
        let recompute = if op.recomputed { 1.0 } else { 0.0 };
        let busy = compute * (1.0 + BACKWARD_FLOP_FACTOR + recompute);
        let mut time = busy;
        if self.saved_seq_axes != 0 {
            let input = &op.inputs[0];
            let bytes = (self.local_numel(mesh, input) * ACTIVATION_BYTES) as f64;
            time += collective_time(mesh, Collective::AllGather, self.saved_seq_axes, bytes);
        }
        if let Some(w) = &op.weight {
            let dp = self.zero_axes(op);
            let bytes = (self.local_numel(mesh, w) * ACTIVATION_BYTES) as f64;
            let mut zero = 0.0;
            if self.zero.shards_gradients() {
                zero += collective_time(mesh, Collective::ReduceScatter, dp, bytes);
            }
            if self.zero.shards_parameters() {
                zero += 2.0 * collective_time(mesh, Collective::AllGather, dp, bytes);
            }
            time += exposed(mesh, zero, busy);
        }
        time
    }

    /// Once-per-step time: gradient synchronisation over the data-parallel axes (all-reduce for
    /// ZeRO-0; reduce-scatter + all-gather of updated parameters for ZeRO-1; the all-gather
    /// alone for ZeRO-2, whose reduce-scatters are per micro-batch; nothing more for ZeRO-3),
    /// less what overlaps the last micro-batch's backward pass.
    pub fn step_time(&self, mesh: &DeviceMesh, op: &Operator) -> f64 {
        let Some(w) = &op.weight else { return 0.0 };
        let dp = self.zero_axes(op);
        let bytes = (self.local_numel(mesh, w) * ACTIVATION_BYTES) as f64;
        let skipped = self.dp_axes(op) & self.zero_skip_axes;
        let skipped_sync = if skipped != 0 {
            collective_time(mesh, Collective::AllReduce, skipped, bytes)
        } else {
            0.0
        };
        let sync = skipped_sync
            + match self.zero {
                ZeroStage::Zero0 | ZeroStage::Zero1 | ZeroStage::DistributedOptimizer => {
                    collective_time(mesh, Collective::AllReduce, dp, bytes)
                }
                ZeroStage::Zero2 => collective_time(mesh, Collective::AllGather, dp, bytes),
                ZeroStage::Zero3 => 0.0,
            };
        let backward = self.forward_time(mesh, op) * BACKWARD_FLOP_FACTOR;
        exposed(mesh, sync, backward)
    }
}

/// The collectives (and their time) that turn a tensor of `numel` elements in layout `from`
/// into layout `to`, axis by axis: a partial sum becomes a reduce-scatter when `to` splits
/// along the axis and an all-reduce otherwise; a split that `to` lacks is all-gathered; a split
/// moved to another dimension is an all-to-all; a split that only `to` has is a free local slice.
pub fn reshard(
    mesh: &DeviceMesh,
    numel: u64,
    from: Layout,
    to: Layout,
) -> (f64, Vec<(Collective, AxisMask)>) {
    let mut time = 0.0;
    let mut ops = Vec::new();
    let dim_of = |l: &Layout, k: usize| l.split.iter().position(|&m| m & (1 << k) != 0);
    for k in 0..mesh.axes.len() {
        let (src, dst) = (dim_of(&from, k), dim_of(&to, k));
        let collective = if from.partial & (1 << k) != 0 {
            Some(if dst.is_some() {
                Collective::ReduceScatter
            } else {
                Collective::AllReduce
            })
        } else {
            match (src, dst) {
                (Some(a), Some(b)) if a != b => Some(Collective::AllToAll),
                (Some(_), None) => Some(Collective::AllGather),
                _ => None,
            }
        };
        if let Some(c) = collective {
            let other = from.split.iter().fold(0, |m, &a| m | a) & !(1u8 << k);
            let bytes = (numel * ACTIVATION_BYTES) as f64 / group_size(mesh, other) as f64;
            time += collective_time(mesh, c, 1 << k, bytes);
            ops.push((c, 1u8 << k));
        }
    }
    (time, ops)
}

/// Every valid sharding of `op` on `mesh`: each axis to one splittable dimension or to none,
/// splits dividing the dimension's units, and for operators with parameters each ZeRO stage
/// that differs from ZeRO-0 (i.e. when some axis is data-parallel).
pub fn enumerate_shardings(mesh: &DeviceMesh, op: &Operator) -> Vec<Sharding> {
    let n_axes = mesh.axes.len();
    let choices = op.dims.len() + 1;
    let mut out = Vec::new();
    let total = choices.pow(n_axes as u32);
    for code in 0..total {
        let mut dim_axes = vec![0u8; op.dims.len()];
        let mut c = code;
        for k in 0..n_axes {
            let pick = c % choices;
            c /= choices;
            if pick > 0 {
                dim_axes[pick - 1] |= 1 << k;
            }
        }
        let base = Sharding {
            dim_axes,
            zero: ZeroStage::Zero0,
            saved_seq_axes: 0,
            zero_skip_axes: 0,
        };
        if !base.is_valid(mesh, op) {
            continue;
        }
        let mut variants = vec![base.clone()];
        if let Some(seq_axes) = seq_shardable_axes(mesh, op, &base) {
            variants.push(Sharding {
                saved_seq_axes: seq_axes,
                ..base.clone()
            });
        }
        let dp = base.dp_axes(op);
        // ZeRO over every data-parallel axis, and (when some of them split a dimension other
        // than the batch, e.g. a sequence-parallel norm) over the batch axes only.
        let not_batch = op
            .dims
            .iter()
            .zip(&base.dim_axes)
            .filter(|(d, _)| d.name != BATCH_DIM_NAME)
            .fold(0, |m, (_, &a)| m | a)
            & dp;
        let mut skips = vec![0];
        if not_batch != 0 && group_size(mesh, dp & !not_batch) > 1 {
            skips.push(not_batch);
        }
        for v in variants {
            for &skip in &skips {
                if group_size(mesh, dp & !skip) > 1 {
                    for zero in [ZeroStage::Zero1, ZeroStage::Zero2, ZeroStage::Zero3] {
                        out.push(Sharding {
                            zero,
                            zero_skip_axes: skip,
                            ..v.clone()
                        });
                    }
                }
            }
            out.push(v);
        }
    }
    out
}

/// For a matmul, or an operator with parameters (an embedding lookup), whose first input has a sequence dimension (named `seq`) and
/// is replicated along some axes the operator splits: those axes, if the sequence divides.
fn seq_shardable_axes(mesh: &DeviceMesh, op: &Operator, s: &Sharding) -> Option<AxisMask> {
    if op.kind != OpKind::Matmul && op.weight.is_none() {
        return None;
    }
    let input = op.inputs.first()?;
    let seq = input
        .dims
        .iter()
        .copied()
        .find(|&d| op.dims[d].name == SEQ_DIM_NAME)?;
    let axes = s.used_axes() & !s.tensor_axes(input);
    let n = group_size(mesh, axes) as u64;
    (axes != 0 && n > 1 && op.dims[seq].size.is_multiple_of(n)).then_some(axes)
}

/// Name of the sequence dimension in graphs built from memory-model operators.
pub const SEQ_DIM_NAME: &str = "seq";
/// Name of the batch dimension in graphs built from memory-model operators.
pub const BATCH_DIM_NAME: &str = "batch";
