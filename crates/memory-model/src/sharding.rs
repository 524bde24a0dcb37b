//! Per-operator memory under a sharding: the redundant memory cost model that `parallel-plan`
//! minimises.
//!
//! A sharding splits named dimensions over the operator's model-parallel group (`group`
//! devices, e.g. `tp·cp`), replicates the operator over `dp` data-parallel replicas (each with
//! its own micro-batch), and optionally shards parameters, gradients and optimizer states over
//! `zero_group` of those replicas (ZeRO, Rajbhandari et al. SC'20). Every byte is accounted three
//! ways: on one device, on the whole cluster, and unique (bytes no other device also holds).

use serde::Serialize;

use crate::error::{MemoryError, Result};
use crate::operator::{ActDtype, Dim, OpKind, Operator, ParamKind, ParamTensor, SaveClass, Shape};
use crate::options::{BaseQuant, OffloadTarget};
use crate::setup::{Optimizer, Recompute, TrainingSetup, ZeroStage};

/// How one operator is spread over devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OperatorSharding {
    /// Split factor of each named dimension, indexed by `Dim as usize` (1: not split).
    pub splits: [u64; Dim::COUNT],
    /// Devices the operator is spread over within one data-parallel replica (e.g. `tp·cp`).
    pub group: u64,
    /// Data-parallel replicas (each processes different data).
    pub dp: u64,
    /// Devices over which ZeRO shards the operator's model states (usually `dp`, `dp·cp`,
    /// or `dp·cp/ep` for experts).
    pub zero_group: u64,
    /// What ZeRO shards over `zero_group` ([`ZeroStage::shards_optimizer`],
    /// [`ZeroStage::shards_gradients`], [`ZeroStage::shards_parameters`]: the workspace's one
    /// ZeRO rule).
    pub zero: ZeroStage,
}

impl OperatorSharding {
    /// Fully replicated on `dp` data-parallel devices, nothing split.
    pub fn replicated(dp: u64) -> Self {
        OperatorSharding {
            splits: [1; Dim::COUNT],
            group: 1,
            dp,
            zero_group: dp,
            zero: ZeroStage::Zero0,
        }
    }

    /// Split factor of `dim`.
    pub fn split_of(&self, dim: Dim) -> u64 {
        self.splits[dim as usize]
    }

    /// Multiplies the split of `dim` by `ways`.
    pub fn split(mut self, dim: Dim, ways: u64) -> Self {
        self.splits[dim as usize] *= ways;
        self
    }

    /// The sharding Megatron-LM (with DeepSpeed-style ZeRO) gives `op` under `setup`: tensor
    /// parallelism splits heads, kv heads, FFN and vocabulary; sequence parallelism splits the
    /// sequence of the operators between the tensor-parallel regions (norms, dropouts, residuals,
    /// saved inputs of the column-parallel linears); context parallelism splits every sequence;
    /// expert parallelism splits the experts out of the data-parallel ranks.
    pub fn megatron(op: &Operator, setup: &TrainingSetup) -> Self {
        let p = &setup.parallel;
        let mut s = OperatorSharding::replicated(p.dp);
        s.group = p.tp * p.cp;
        s.zero_group = p.dp * p.cp;
        s.zero = p.zero;
        for d in [Dim::Heads, Dim::KvHeads, Dim::Ffn, Dim::Vocab] {
            s = s.split(d, p.tp);
        }
        s = s.split(Dim::Seq, p.cp);
        let expert_op = op
            .params
            .iter()
            .any(|t| t.shape.size(Dim::Experts).is_some())
            && op.kind != OpKind::Router;
        if expert_op {
            s = s.split(Dim::Experts, p.ep);
            s.zero_group = p.dp * p.cp / p.ep;
        }
        if p.sequence_parallel && in_sequence_parallel_region(op) {
            s = s.split(Dim::Seq, p.tp);
        }
        s
    }

    fn parts(&self, shape: &Shape) -> u64 {
        shape.0.iter().map(|&(d, _)| self.split_of(d)).product()
    }

    fn elements(&self, shape: &Shape) -> u64 {
        shape
            .0
            .iter()
            .map(|&(d, n)| n.div_ceil(self.split_of(d)))
            .product()
    }
}

/// Whether every saved tensor of `op` is a `[batch, seq, hidden]`-like tensor that Megatron's
/// sequence parallelism keeps sequence-sharded.
fn in_sequence_parallel_region(op: &Operator) -> bool {
    let sp_dims = |s: &Shape| {
        s.0.iter().all(|&(d, _)| {
            matches!(
                d,
                Dim::Batch | Dim::Seq | Dim::Hidden | Dim::Experts | Dim::LoraRank
            )
        })
    };
    !op.saved.is_empty() && op.saved.iter().all(|t| sp_dims(&t.shape))
        || op.kind == OpKind::ResidualAdd
}

/// Bytes in the four categories that belong to operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Categories {
    /// Parameters (stored precision; quantized base weights under QLoRA).
    pub parameters: u64,
    /// Gradients.
    pub gradients: u64,
    /// Optimizer states, including fp32 master weights.
    pub optimizer_states: u64,
    /// Activations saved for backward (one micro-batch).
    pub activations: u64,
}

impl Categories {
    /// Sum of the four categories.
    pub fn total(&self) -> u64 {
        self.parameters + self.gradients + self.optimizer_states + self.activations
    }

    /// Model states: parameters + gradients + optimizer states.
    pub fn model_states(&self) -> u64 {
        self.parameters + self.gradients + self.optimizer_states
    }

    /// Element-wise sum.
    pub fn add(&mut self, o: &Categories) {
        self.parameters += o.parameters;
        self.gradients += o.gradients;
        self.optimizer_states += o.optimizer_states;
        self.activations += o.activations;
    }

    /// Every category multiplied by `k` (activations by `act_k`).
    pub fn scaled(&self, k: u64, act_k: u64) -> Categories {
        Categories {
            parameters: self.parameters * k,
            gradients: self.gradients * k,
            optimizer_states: self.optimizer_states * k,
            activations: self.activations * act_k,
        }
    }
}

/// Memory of one operator under a sharding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct OperatorMemory {
    /// Bytes on one device.
    pub device: Categories,
    /// Bytes on all `group · dp` devices together.
    pub cluster: Categories,
    /// Distinct bytes among them (one copy of each parameter; each replica's own activations).
    pub unique: Categories,
    /// Bytes one device moved to host memory (offload); not in `device`.
    pub host: Categories,
    /// Parameter bytes one device gathers before computing under ZeRO-3 (the model-parallel
    /// shard, in stored precision); 0 for parameter-free operators.
    pub gathered_parameters: u64,
}

impl OperatorMemory {
    /// Bytes held on the cluster that are copies of bytes another device also holds.
    pub fn replicated(&self) -> Categories {
        Categories {
            parameters: self
                .cluster
                .parameters
                .saturating_sub(self.unique.parameters),
            gradients: self.cluster.gradients.saturating_sub(self.unique.gradients),
            optimizer_states: self
                .cluster
                .optimizer_states
                .saturating_sub(self.unique.optimizer_states),
            activations: self
                .cluster
                .activations
                .saturating_sub(self.unique.activations),
        }
    }
}

/// Whether a saved tensor of class `class` is kept under `recompute`.
pub fn is_kept(class: SaveClass, recompute: Recompute) -> bool {
    match (class, recompute) {
        (SaveClass::Always, _) => true,
        (SaveClass::Checkpoint, r) => r == Recompute::Full,
        (SaveClass::Layer, r) => r != Recompute::Full,
        (SaveClass::AttentionCore, r) => r == Recompute::None,
        (SaveClass::PointwiseOutput, r) => matches!(r, Recompute::None | Recompute::Selective),
    }
}

/// Bytes of `n` elements of a frozen base weight stored as `quant` (`fan_in` input features).
pub fn quantized_bytes(n: u64, fan_in: u64, quant: BaseQuant, fallback_bytes: u64) -> u64 {
    match quant {
        BaseQuant::None => n * fallback_bytes,
        BaseQuant::Int8 => n + 4 * n.div_ceil(fan_in.max(1)),
        BaseQuant::Nf4 {
            double_quant: false,
        } => n.div_ceil(2) + 4 * n.div_ceil(64),
        BaseQuant::Nf4 { double_quant: true } => {
            let blocks = n.div_ceil(64);
            n.div_ceil(2) + blocks + 4 * blocks.div_ceil(256)
        }
    }
}

/// Optimizer-state bytes (moments only) of `n` elements whose last dimension has `cols` elements.
fn state_bytes(opt: Optimizer, n: u64, cols: u64, elem: u64) -> u64 {
    match opt {
        Optimizer::Adam => 2 * n * elem,
        Optimizer::Sgd { momentum } => u64::from(momentum) * n * elem,
        Optimizer::Adafactor if cols > 0 && cols < n => (n / cols + cols) * elem,
        Optimizer::Adafactor => n * elem,
        Optimizer::Adam8bit if n >= 4096 => 2 * (n + 4 * n.div_ceil(2048)),
        Optimizer::Adam8bit => 2 * n * 4,
    }
}

/// Memory of `op` under `sharding` for `setup` (precision, optimizer, recomputation, PEFT,
/// offload). Activations are for one micro-batch.
///
/// # Errors
/// [`MemoryError::InvalidSharding`] when a stored tensor is split more ways than the devices
/// that hold it, or when a size in the sharding is zero.
pub fn operator_memory(
    op: &Operator,
    sharding: &OperatorSharding,
    setup: &TrainingSetup,
) -> Result<OperatorMemory> {
    let sh = sharding;
    if sh.group == 0 || sh.dp == 0 || sh.zero_group == 0 || sh.splits.contains(&0) {
        return Err(MemoryError::InvalidInput(format!(
            "operator `{}`: sharding sizes must be positive",
            op.name
        )));
    }
    let devices = sh.group * sh.dp;
    let mut m = OperatorMemory::default();
    for t in &op.params {
        let zero = if sh.zero.shards_optimizer() {
            sh.zero_group
        } else {
            1
        };
        check_split(op, t.name, sh.parts(&t.shape) * zero, devices)?;
        param_memory(t, sh, setup, devices, &mut m);
    }
    for t in op
        .saved
        .iter()
        .filter(|t| is_kept(t.class, setup.recompute))
    {
        let parts = sh.parts(&t.shape);
        check_split(op, t.name, parts, sh.group)?;
        let elem = match t.dtype {
            ActDtype::Act => setup.precision.activation_bytes(),
            ActDtype::Mask => 1,
            ActDtype::Fp32 => 4,
            ActDtype::Int64 => 8,
        };
        let bytes = sh.elements(&t.shape) * elem;
        m.device.activations += bytes;
        m.cluster.activations += bytes * devices;
        m.unique.activations += t.shape.elements() * elem * sh.dp;
    }
    Ok(m)
}

fn check_split(op: &Operator, tensor: &str, parts: u64, devices: u64) -> Result<()> {
    if parts > devices {
        return Err(MemoryError::InvalidSharding {
            operator: op.name.to_string(),
            tensor: tensor.to_string(),
            splits: parts,
            group: devices,
        });
    }
    Ok(())
}

/// Per-device model states of a trainable, unquantised parameter tensor that a planner placed
/// itself: `local` elements on each device before ZeRO (after its own splits), of which the
/// last dimension holds `cols` (Adafactor factors by it; pass `local` for an unshaped tensor),
/// with `zero` sharding over `zero_group` devices. The same bytes and the same ZeRO rule as
/// [`operator_memory`] gives a dense tensor; no activations.
pub fn dense_model_states(
    local: u64,
    cols: u64,
    zero: ZeroStage,
    zero_group: u64,
    setup: &TrainingSetup,
) -> Categories {
    let shard = |on: bool| {
        if on {
            local.div_ceil(zero_group.max(1))
        } else {
            local
        }
    };
    let prec = setup.precision;
    let n_o = shard(zero.shards_optimizer());
    Categories {
        parameters: shard(zero.shards_parameters()) * prec.param_bytes(),
        gradients: shard(zero.shards_gradients()) * setup.grad_bytes(),
        optimizer_states: state_bytes(setup.optimizer, n_o, cols.min(n_o), prec.state_bytes())
            + n_o * prec.master_bytes(),
        activations: 0,
    }
}

/// Adds the parameter, gradient and optimizer bytes of one parameter tensor.
fn param_memory(
    t: &ParamTensor,
    sh: &OperatorSharding,
    setup: &TrainingSetup,
    devices: u64,
    m: &mut OperatorMemory,
) {
    let prec = setup.precision;
    let local = sh.elements(&t.shape);
    let zero = |on: bool| {
        if on {
            local.div_ceil(sh.zero_group)
        } else {
            local
        }
    };
    let trainable = setup.peft.is_none() || t.kind == ParamKind::Adapter;
    let unique_factor = u64::from(!t.tied_copy);
    let full = t.shape.elements();
    // Parameters.
    let stored = |n: u64| match (trainable, t.kind, setup.peft) {
        (false, ParamKind::Weight, Some(p)) => {
            quantized_bytes(n, t.fan_in, p.base, prec.param_bytes())
        }
        _ => n * prec.param_bytes(),
    };
    let p_dev = stored(zero(sh.zero.shards_parameters()));
    m.gathered_parameters += stored(local);
    let p_off = setup.offload.parameters != OffloadTarget::None;
    let p_cluster = p_dev * devices;
    let p_unique = stored(full) * unique_factor;
    if p_off {
        m.host.parameters += if setup.offload.parameters == OffloadTarget::Cpu {
            p_dev
        } else {
            0
        };
    } else {
        m.device.parameters += p_dev;
        m.cluster.parameters += p_cluster;
        m.unique.parameters += p_unique;
    }
    if !trainable {
        return;
    }
    // Gradients and optimizer states (moments + fp32 master weights).
    let g_elem = setup.grad_bytes();
    let cols = t
        .shape
        .0
        .last()
        .map_or(0, |&(d, n)| n.div_ceil(sh.split_of(d)));
    let n_o = zero(sh.zero.shards_optimizer());
    let opt_bytes = |n: u64, c: u64| {
        state_bytes(setup.optimizer, n, c, prec.state_bytes()) + n * prec.master_bytes()
    };
    let full_cols = t.shape.0.last().map_or(0, |&(_, n)| n);
    let (g_dev, o_dev) = (
        zero(sh.zero.shards_gradients()) * g_elem,
        opt_bytes(n_o, cols.min(n_o)),
    );
    let (g_unique, o_unique) = (
        full * g_elem * unique_factor,
        opt_bytes(full, full_cols) * unique_factor,
    );
    match setup.offload.optimizer {
        OffloadTarget::None => {
            m.device.gradients += g_dev;
            m.device.optimizer_states += o_dev;
            m.cluster.gradients += g_dev * devices;
            m.cluster.optimizer_states += o_dev * devices;
            m.unique.gradients += g_unique;
            m.unique.optimizer_states += o_unique;
        }
        // ZeRO-Offload keeps the fp32 gradient partition and the optimizer on the host.
        OffloadTarget::Cpu => {
            m.host.gradients += n_o * 4;
            m.host.optimizer_states += o_dev;
        }
        OffloadTarget::Nvme => {}
    }
}
