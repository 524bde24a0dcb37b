//! Hand-designed strategies expressed in the planner's own cost model: Megatron-LM (tensor
//! parallel within a node, pipeline across nodes, data parallel for the rest; ± sequence
//! parallelism, ± distributed optimizer), pure data parallelism, and ZeRO-3 / FSDP.

use memory_model::Dim as MmDim;

use crate::cost_model::{group_size, AxisMask};
use crate::mesh::DeviceMesh;
use crate::search::RestrictFn;
use crate::sharding::{Sharding, ZeroStage};
use crate::transformer::TransformerGraph;

/// A baseline strategy family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    /// Megatron-LM: TP over the GPUs of a node, PP over nodes, DP over the remaining nodes.
    Megatron {
        /// Sequence parallelism in the tensor-parallel group.
        sequence_parallel: bool,
        /// Distributed optimizer (optimizer states sharded over data parallel, as ZeRO-1).
        distributed_optimizer: bool,
    },
    /// Every axis splits the batch; everything replicated.
    DataParallel,
    /// Every axis splits the batch; parameters, gradients and optimizer states sharded (ZeRO-3).
    Zero3,
}

impl Baseline {
    /// The baselines `pardis plan` compares against.
    pub const ALL: [Baseline; 6] = [
        Baseline::Megatron {
            sequence_parallel: false,
            distributed_optimizer: false,
        },
        Baseline::Megatron {
            sequence_parallel: true,
            distributed_optimizer: false,
        },
        Baseline::Megatron {
            sequence_parallel: false,
            distributed_optimizer: true,
        },
        Baseline::Megatron {
            sequence_parallel: true,
            distributed_optimizer: true,
        },
        Baseline::DataParallel,
        Baseline::Zero3,
    ];

    /// Display name.
    pub fn name(self) -> String {
        match self {
            Baseline::Megatron {
                sequence_parallel,
                distributed_optimizer,
            } => {
                let mut n = "Megatron-LM".to_string();
                if sequence_parallel {
                    n.push_str(" +SP");
                }
                if distributed_optimizer {
                    n.push_str(" +dist-opt");
                }
                n
            }
            Baseline::DataParallel => "pure data parallel".into(),
            Baseline::Zero3 => "ZeRO-3 / FSDP".into(),
        }
    }

    /// Whether the baseline pipelines over nodes (only Megatron does).
    pub fn pipelines(self) -> bool {
        matches!(self, Baseline::Megatron { .. })
    }

    /// The restriction that pins every operator to this baseline's sharding on a stage mesh
    /// whose last axis is the GPUs of a node (tensor parallel) and whose other axes are data
    /// parallel.
    pub fn restriction(self) -> Box<RestrictFn> {
        Box::new(
            move |g: &TransformerGraph, op: usize, s: &Sharding, mesh: &DeviceMesh| {
                s == &self.sharding(g, op, mesh)
            },
        )
    }

    /// This baseline's sharding of operator `op` on `mesh`.
    pub fn sharding(self, g: &TransformerGraph, op: usize, mesh: &DeviceMesh) -> Sharding {
        let o = &g.graph.ops[op];
        let names = &g.dim_names[op];
        let all: AxisMask = ((1u16 << mesh.axes.len()) - 1) as AxisMask;
        let batch = names.iter().position(|&d| d == MmDim::Batch);
        let mut dim_axes = vec![0; o.dims.len()];
        let (dp_mask, zero) = match self {
            Baseline::Megatron {
                sequence_parallel,
                distributed_optimizer,
            } => {
                let tp: AxisMask = 1 << (mesh.axes.len() - 1);
                let target = [MmDim::Heads, MmDim::Ffn, MmDim::Vocab]
                    .iter()
                    .find_map(|want| {
                        names
                            .iter()
                            .position(|d| d == want)
                            .filter(|&k| o.dims[k].splittable)
                    })
                    .or_else(|| {
                        let seq = names.iter().position(|&d| d == MmDim::Seq);
                        seq.filter(|&k| sequence_parallel && o.dims[k].splittable)
                    });
                if let Some(k) = target {
                    dim_axes[k] = tp;
                }
                let z = if distributed_optimizer {
                    ZeroStage::Zero1
                } else {
                    ZeroStage::Zero0
                };
                (all & !tp, z)
            }
            Baseline::DataParallel => (all, ZeroStage::Zero0),
            Baseline::Zero3 => (all, ZeroStage::Zero3),
        };
        if let Some(k) = batch {
            dim_axes[k] |= dp_mask;
        }
        let mut s = Sharding {
            dim_axes,
            zero,
            saved_seq_axes: 0,
            zero_skip_axes: 0,
        };
        if let Baseline::Megatron {
            sequence_parallel: true,
            ..
        } = self
        {
            // Column-parallel linears (and the vocabulary-parallel embedding and head) keep their
            // input sequence-split (Korthikanti et al. 2022); the distributed optimizer shards
            // the states of sequence-parallel norms over the data-parallel group only.
            let tp: AxisMask = 1 << (mesh.axes.len() - 1);
            s.zero_skip_axes = s.dp_axes(o) & tp;
            let input_axes = o.inputs.first().map_or(0, |t| s.tensor_axes(t));
            let has_seq = o
                .inputs
                .first()
                .is_some_and(|t| t.dims.iter().any(|&d| names[d] == MmDim::Seq));
            if (o.weight.is_some() || matches!(o.kind, crate::graph::OpKind::Matmul))
                && s.used_axes() & tp != 0
                && input_axes & tp == 0
                && has_seq
            {
                s.saved_seq_axes = tp;
            }
        }
        if group_size(mesh, s.zero_axes(o)) <= 1 {
            s.zero = ZeroStage::Zero0;
        }
        if s.zero == ZeroStage::Zero0 {
            s.zero_skip_axes = 0;
        }
        s
    }
}
