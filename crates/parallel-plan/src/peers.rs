//! The peers a practitioner would otherwise use, each at its strongest: every configuration a
//! framework's own knobs allow, under the framework's own rules, priced in the planner's cost
//! model and memory-model's memory. [`configurations`] lists them, [`evaluate`] prices one.
//!
//! | framework | knobs searched | rules |
//! |---|---|---|
//! | Megatron-LM | TP (divisors of a node), PP, DP, sequence parallelism, distributed optimizer, Megatron-FSDP `optim_grads` / `optim_grads_params` (ZeRO-2/3) without a pipeline, recomputation none/selective/full, micro-batch size, interleaved virtual stages (2, 4) | TP inside a node and dividing the heads; layers divisible by PP (even split); 1F1B, or interleaved 1F1B when PP divides the micro-batches and the virtual stages divide each stage's layers |
//! | DeepSpeed ZeRO | ZeRO stage 1/2/3, optimizer offload to the CPU (ZeRO-Offload, stages 2 and 3) on/off, activation checkpointing on/off, micro-batch size | data parallel over every device; offload priced by [`crate::cost_model::offload_step_time`] |
//! | torchtitan FSDP + TP | TP (divisors of a node), FSDP (ZeRO-3) over the rest (no ZeRO mode of any peer with one data-parallel replica), activation checkpointing none/full and per-operator selective (`op`, priced as pointwise recomputation — norm and activation-function outputs — its nearest mode; it also recomputes every second matmul), micro-batch size | sequence-parallel norms with TP (its TP plan); 2-D, no PP |
//!
//! Not searched: uneven Megatron layer splits (`pardis memory` cannot express per-stage layer
//! counts, so such rows could not be checked against it), context parallelism (pardis's
//! plans do not split the sequence across attention either), parameter offload (ZeRO-Infinity)
//! and NVMe offload.

use memory_model::{
    layers_per_stage, Dim as MmDim, OffloadTarget, Parallelism, PipelineSchedule, Recompute,
    TrainingSetup, ZeroStage,
};
use serde::{Deserialize, Serialize};

use crate::cost_model::{group_size, AxisMask};
use crate::error::{PlanError, Result};
use crate::export::shape::LAYER_LINEARS;
use crate::export::LinearSplit;
use crate::graph::OpKind;
use crate::ilp::IlpObjective;
use crate::mesh::DeviceMesh;
use crate::plan::Plan;
use crate::search::{Candidate, Problem};
use crate::sharding::Sharding;
use crate::transformer::TransformerGraph;

/// A training framework whose configurations pardis compares against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// NVIDIA Megatron-LM (`pretrain_gpt.py`).
    MegatronLm,
    /// Microsoft DeepSpeed with ZeRO data parallelism.
    DeepSpeed,
    /// PyTorch torchtitan: FSDP2 (ZeRO-3) with tensor parallelism.
    Torchtitan,
}

impl Framework {
    /// Every framework, in the order reports list them.
    pub const ALL: [Framework; 3] = [
        Framework::MegatronLm,
        Framework::DeepSpeed,
        Framework::Torchtitan,
    ];

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            Framework::MegatronLm => "Megatron-LM",
            Framework::DeepSpeed => "DeepSpeed",
            Framework::Torchtitan => "torchtitan",
        }
    }
}

impl std::fmt::Display for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One configuration of a peer framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerConfig {
    /// The framework.
    pub framework: Framework,
    /// Tensor-parallel degree (inside a node).
    pub tp: u64,
    /// Pipeline stages.
    pub pp: u64,
    /// Data-parallel degree.
    pub dp: u64,
    /// Sequence parallelism of the norms and dropouts inside the tensor-parallel group.
    pub sequence_parallel: bool,
    /// How model states are sharded over data parallelism: `zero0`, `distributed_optimizer`
    /// (Megatron-LM), `zero1`–`zero3` (DeepSpeed; FSDP is `zero3`).
    pub zero: ZeroStage,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Sequences per data-parallel replica per micro-batch.
    pub micro_batch_size: u64,
    /// Micro-batches per step (gradient accumulation steps; pipeline micro-batches).
    pub micro_batches: u64,
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// Optimizer states, fp32 master weights and gradients on the host, updated by the CPU
    /// (DeepSpeed's `zero_optimization.offload_optimizer.device = "cpu"`); when false, the
    /// problem's own offload setting applies.
    #[serde(default)]
    pub offload_optimizer: bool,
}

impl PeerConfig {
    /// memory-model's parallelism for this configuration (what `pardis memory` takes).
    pub fn parallelism(&self) -> Parallelism {
        Parallelism {
            dp: self.dp,
            tp: self.tp,
            pp: self.pp,
            sequence_parallel: self.sequence_parallel,
            schedule: self.schedule,
            zero: self.zero,
            ..Parallelism::default()
        }
    }

    /// memory-model's training setup for this configuration of `problem`.
    pub fn training_setup(&self, problem: &Problem) -> TrainingSetup {
        let mut setup = problem.setup.clone();
        setup.micro_batch = self.micro_batch_size;
        setup.num_microbatches = self.micro_batches;
        setup.recompute = self.recompute;
        setup.parallel = self.parallelism();
        setup.offload.optimizer = self.offload_target(problem);
        setup
    }

    /// Where this configuration keeps its optimizer states in `problem`: the host with
    /// [`PeerConfig::offload_optimizer`], else where the problem's setup says.
    pub fn offload_target(&self, problem: &Problem) -> OffloadTarget {
        if self.offload_optimizer {
            OffloadTarget::Cpu
        } else {
            problem.setup.offload.optimizer
        }
    }

    /// A short description: `tp8 pp2 dp4 sp dist-opt rc-full b2`.
    pub fn label(&self) -> String {
        let mut parts = vec![format!("tp{} pp{} dp{}", self.tp, self.pp, self.dp)];
        if self.sequence_parallel {
            parts.push("sp".into());
        }
        let zero = match self.zero {
            ZeroStage::Zero0 => None,
            ZeroStage::DistributedOptimizer => Some("dist-opt".to_string()),
            z if self.framework == Framework::Torchtitan && z == ZeroStage::Zero3 => {
                Some("fsdp".into())
            }
            // Megatron-FSDP's `optim_grads` / `optim_grads_params`.
            z @ (ZeroStage::Zero2 | ZeroStage::Zero3)
                if self.framework == Framework::MegatronLm =>
            {
                Some(format!("mfsdp-zero{}", z.number()))
            }
            z => Some(format!("zero{}", z.number())),
        };
        parts.extend(zero);
        if self.offload_optimizer {
            parts.push("offload".into());
        }
        if self.recompute != Recompute::None {
            parts.push(format!("rc-{}", self.recompute));
        }
        parts.push(format!("b{}", self.micro_batch_size));
        if let PipelineSchedule::Interleaved { virtual_stages } = self.schedule {
            parts.push(format!("vp{virtual_stages}"));
        }
        parts.join(" ")
    }

    /// The outer-search point this configuration runs as: its pipeline, a stage mesh whose
    /// innermost axis is the tensor-parallel group, an even layer split.
    ///
    /// # Errors
    /// [`PlanError::InvalidInput`] when the stage cannot be laid out on the mesh that way.
    pub fn candidate(&self, problem: &Problem) -> Result<Candidate> {
        let n = problem.mesh.num_devices() as u64;
        if self.tp * self.pp * self.dp != n {
            return Err(PlanError::InvalidInput(format!(
                "tp·pp·dp = {} ≠ {n} devices",
                self.tp * self.pp * self.dp
            )));
        }
        let stage = problem.mesh.stage_mesh((n / self.pp) as usize)?;
        let inner = stage.axes.last().map_or(1, |a| a.size as u64);
        let stage_mesh = if self.tp <= 1 || inner == self.tp {
            stage
        } else {
            stage.split_innermost(self.tp as usize).ok_or_else(|| {
                PlanError::InvalidInput(format!(
                    "tensor parallelism {} does not split the stage mesh {}",
                    self.tp,
                    stage.shape_string()
                ))
            })?
        };
        Ok(Candidate {
            pp: self.pp,
            stage_mesh,
            micro_batches: self.micro_batches,
            layers: layers_per_stage(problem.model.num_layers, self.pp),
            schedule: self.schedule,
            recompute: self.recompute,
            recompute_stages: self.pp,
        })
    }

    /// This configuration's sharding of operator `op` on its stage mesh (see
    /// [`PeerConfig::candidate`]): heads, FFN or vocabulary split over the innermost axis when
    /// `tp > 1` (else the sequence of sequence-parallel operators), the batch over every other
    /// axis, model states sharded over the batch axes as the ZeRO stage says.
    pub fn sharding(&self, g: &TransformerGraph, op: usize, mesh: &DeviceMesh) -> Sharding {
        self.sharding_with_layout(g, op, mesh, None)
    }

    /// [`PeerConfig::sharding`], with the layer linears split as `layout` says (in
    /// `LAYER_LINEARS` order) instead of the standard column/row pairs: an engine that takes a
    /// per-linear tensor-parallel plan (torchtitan's `parallelize_module`).
    pub(crate) fn sharding_with_layout(
        &self,
        g: &TransformerGraph,
        op: usize,
        mesh: &DeviceMesh,
        layout: Option<&LinearLayout>,
    ) -> Sharding {
        let o = &g.graph.ops[op];
        let names = &g.dim_names[op];
        let all: AxisMask = ((1u16 << mesh.axes.len()) - 1) as AxisMask;
        let tp: AxisMask = if self.tp > 1 {
            1 << (mesh.axes.len() - 1)
        } else {
            0
        };
        let mut dim_axes = vec![0; o.dims.len()];
        if tp != 0 {
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
                    seq.filter(|&k| self.sequence_parallel && o.dims[k].splittable)
                });
            let target = match layout.and_then(|l| {
                linear_override(l, g.source_ops[op].name)
                    .or_else(|| interior_override(l, target.map(|k| names[k])))
            }) {
                // The standard split: heads or FFN, as found above.
                Some(LinearOverride::Standard) | None => target,
                Some(LinearOverride::Hidden) => names
                    .iter()
                    .position(|&d| d == MmDim::Hidden)
                    .filter(|&k| o.dims[k].splittable),
                Some(LinearOverride::Replicated) => None,
            };
            if let Some(k) = target {
                dim_axes[k] = tp;
            }
        }
        if let Some(k) = names.iter().position(|&d| d == MmDim::Batch) {
            dim_axes[k] |= all & !tp;
        }
        let mut s = Sharding {
            dim_axes,
            zero: self.zero.placement(),
            saved_seq_axes: 0,
            zero_skip_axes: 0,
        };
        if self.sequence_parallel && tp != 0 {
            // Column-parallel linears (and the vocabulary-parallel embedding and head) keep their
            // input sequence-split (Korthikanti et al. 2022); ZeRO shards the states of
            // sequence-parallel norms over the data-parallel group only.
            s.zero_skip_axes = s.dp_axes(o) & tp;
            let input_axes = o.inputs.first().map_or(0, |t| s.tensor_axes(t));
            let has_seq = o
                .inputs
                .first()
                .is_some_and(|t| t.dims.iter().any(|&d| names[d] == MmDim::Seq));
            if (o.weight.is_some() || matches!(o.kind, OpKind::Matmul))
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

/// Largest micro-batch size (sequences per replica) the peers' searches try.
pub const MAX_PEER_MICRO_BATCH: u64 = 32;

/// Every configuration of `framework` for `problem` that its rules allow (see the module docs).
pub fn configurations(problem: &Problem, framework: Framework) -> Vec<PeerConfig> {
    let n = problem.mesh.num_devices() as u64;
    let node = problem.mesh.axes.last().map_or(1, |a| a.size as u64);
    let model = &problem.model;
    let layers = model.num_layers;
    let divisors = |x: u64| (1..=x).filter(move |d| x.is_multiple_of(*d));
    let tps: Vec<u64> = match framework {
        Framework::DeepSpeed => vec![1],
        _ => divisors(node)
            .filter(|&t| {
                model.num_heads.is_multiple_of(t)
                    && model.num_kv_heads.is_multiple_of(t)
                    && n.is_multiple_of(t)
            })
            .collect(),
    };
    let recomputes = problem.effective_recomputes_of(match framework {
        // DeepSpeed's activation checkpointing checkpoints whole layers.
        Framework::DeepSpeed => &[Recompute::None, Recompute::Full],
        // torchtitan's one selective setting (per-operator, `op`) recomputes the pointwise
        // operators (and every second matmul): priced as pointwise, its nearest mode.
        Framework::Torchtitan => &[Recompute::None, Recompute::Pointwise, Recompute::Full],
        // Megatron-LM has no pointwise mode: `--recompute-modules layernorm` recomputes only
        // unfused norms (with Transformer Engine's fused LayerNormLinear, its default, the
        // input norm is an `IdentityOp`; megatron/core/transformer/transformer_layer.py) and
        // no dense MLP's activation function (`moe_act` is for grouped-GEMM experts).
        Framework::MegatronLm => &[Recompute::None, Recompute::Selective, Recompute::Full],
    });
    let mut out = Vec::new();
    for &tp in &tps {
        let pps: Vec<u64> = match framework {
            Framework::MegatronLm => divisors(n / tp)
                .filter(|&p| layers.is_multiple_of(p))
                .collect(),
            _ => vec![1],
        };
        for pp in pps {
            let dp = n / (tp * pp);
            let sps: &[bool] = match framework {
                Framework::MegatronLm if tp > 1 => &[false, true],
                Framework::Torchtitan if tp > 1 => &[true],
                _ => &[false],
            };
            // One data-parallel replica shards nothing: every framework's ZeRO / FSDP modes
            // equal plain training there (and are priced as such), so they are not repeated.
            let zeros: &[ZeroStage] = match framework {
                _ if dp == 1 => &[ZeroStage::Zero0],
                // Megatron-FSDP (`optim_grads`, `optim_grads_params`) without a pipeline.
                Framework::MegatronLm if dp > 1 && pp == 1 => &[
                    ZeroStage::Zero0,
                    ZeroStage::DistributedOptimizer,
                    ZeroStage::Zero2,
                    ZeroStage::Zero3,
                ],
                Framework::MegatronLm if dp > 1 => {
                    &[ZeroStage::Zero0, ZeroStage::DistributedOptimizer]
                }
                Framework::MegatronLm => &[ZeroStage::Zero0],
                Framework::DeepSpeed => &[ZeroStage::Zero1, ZeroStage::Zero2, ZeroStage::Zero3],
                Framework::Torchtitan => &[ZeroStage::Zero3],
            };
            // ZeRO-Offload moves the optimizer to the host (DeepSpeed's stages 2 and 3; stage 1
            // keeps the whole 16-bit gradients on the device until the step, which
            // memory-model's offload accounting does not describe).
            let offloads = |zero: ZeroStage| -> &[bool] {
                match (framework, zero) {
                    (Framework::DeepSpeed, ZeroStage::Zero2 | ZeroStage::Zero3) => &[false, true],
                    _ => &[false],
                }
            };
            let per_replica = problem.global_batch / dp;
            if per_replica == 0 || !problem.global_batch.is_multiple_of(dp) {
                continue;
            }
            let mut b = 1;
            while b <= per_replica.min(MAX_PEER_MICRO_BATCH) {
                let m = per_replica / b;
                // Megatron-LM's interleaved schedule (`--num-layers-per-virtual-pipeline-stage`)
                // needs PP | micro-batches and whole layers per virtual stage.
                let mut schedules = vec![PipelineSchedule::OneFOneB];
                if framework == Framework::MegatronLm && pp > 1 && m.is_multiple_of(pp) {
                    schedules.extend(
                        [2, 4]
                            .into_iter()
                            .filter(|&v| (layers / pp).is_multiple_of(v))
                            .map(|v| PipelineSchedule::Interleaved { virtual_stages: v }),
                    );
                }
                if per_replica.is_multiple_of(b) && m >= pp {
                    for &sequence_parallel in sps {
                        for &zero in zeros {
                            for &recompute in &recomputes {
                                for &schedule in &schedules {
                                    for &offload_optimizer in offloads(zero) {
                                        out.push(PeerConfig {
                                            framework,
                                            tp,
                                            pp,
                                            dp,
                                            sequence_parallel,
                                            zero,
                                            recompute,
                                            micro_batch_size: b,
                                            micro_batches: m,
                                            schedule,
                                            offload_optimizer,
                                        });
                                    }
                                }
                            }
                        }
                    }
                }
                b *= 2;
            }
        }
    }
    out
}

/// `cfg` priced in the planner's cost model: its plan (memory from memory-model, step time from
/// the cost model), named after the framework and its configuration.
///
/// # Errors
/// [`PlanError::InvalidInput`] when the configuration cannot be laid out on the mesh or a
/// pinned sharding is invalid for an operator; solver and memory-model errors.
pub fn evaluate(problem: &Problem, cfg: &PeerConfig) -> Result<Plan> {
    evaluate_pinned(problem, cfg, cfg.candidate(problem)?, None)
}

/// `cfg` with the pipeline layer split `layers` (the even split of [`evaluate`] or an uneven
/// one an engine can express), priced as [`evaluate`] prices it.
///
/// # Errors
/// [`PlanError::InvalidInput`] when `layers` is not `pp` stages summing to the model's layers;
/// the errors of [`evaluate`].
pub fn evaluate_with_layers(problem: &Problem, cfg: &PeerConfig, layers: &[u64]) -> Result<Plan> {
    let cand = candidate_with_layers(problem, cfg, layers)?;
    evaluate_pinned(problem, cfg, cand, None)
}

/// Per layer linear — `qkv_proj`, `out_proj`, `mlp_up`, `mlp_down`, in this order — how an
/// engine that takes a plan per linear splits it over the tensor-parallel group.
pub type LinearLayout = [LinearSplit; LAYER_LINEARS.len()];

/// How `layout` moves a layer linear's tensor-parallel split off the standard one.
enum LinearOverride {
    /// The standard split (column-parallel q/k/v and MLP-up, row-parallel out/down).
    Standard,
    /// The other one: the hidden dimension split.
    Hidden,
    /// Not split over the tensor-parallel group.
    Replicated,
}

fn linear_override(layout: &LinearLayout, name: &str) -> Option<LinearOverride> {
    let i = LAYER_LINEARS.iter().position(|(n, _)| *n == name)?;
    Some(match layout[i] {
        LinearSplit::Replicated => LinearOverride::Replicated,
        split if split == LAYER_LINEARS[i].1 => LinearOverride::Standard,
        LinearSplit::Column | LinearSplit::Row => LinearOverride::Hidden,
        LinearSplit::Both => LinearOverride::Standard,
    })
}

/// The operators between a block's two linears (attention core on heads, MLP activation on
/// FFN) run split only when the first linears are column-parallel and leave their outputs
/// split; otherwise on whole tensors.
fn interior_override(layout: &LinearLayout, target: Option<MmDim>) -> Option<LinearOverride> {
    let first = match target? {
        MmDim::Heads => layout[0],
        MmDim::Ffn => layout[2],
        _ => return None,
    };
    Some(if first == LinearSplit::Column {
        LinearOverride::Standard
    } else {
        LinearOverride::Replicated
    })
}

/// `cfg` with the layer split `layers` and the layer linears split as `layout` says (a
/// torchtitan-style per-linear tensor-parallel plan; [`LinearSplit::Both`] means the standard
/// split), priced as [`evaluate`] prices a configuration.
///
/// # Errors
/// The errors of [`evaluate_with_layers`]; [`PlanError::InvalidInput`] when a linear cannot be
/// split as asked.
pub fn evaluate_with_layout(
    problem: &Problem,
    cfg: &PeerConfig,
    layers: &[u64],
    layout: &LinearLayout,
) -> Result<Plan> {
    let cand = candidate_with_layers(problem, cfg, layers)?;
    evaluate_pinned(problem, cfg, cand, Some(*layout))
}

fn candidate_with_layers(problem: &Problem, cfg: &PeerConfig, layers: &[u64]) -> Result<Candidate> {
    if layers.len() as u64 != cfg.pp || layers.iter().sum::<u64>() != problem.model.num_layers {
        return Err(PlanError::InvalidInput(format!(
            "layer split {layers:?} is not {} stages of {} layers",
            cfg.pp, problem.model.num_layers
        )));
    }
    let mut cand = cfg.candidate(problem)?;
    cand.layers = layers.to_vec();
    Ok(cand)
}

fn evaluate_pinned(
    problem: &Problem,
    cfg: &PeerConfig,
    cand: Candidate,
    layout: Option<LinearLayout>,
) -> Result<Plan> {
    // The configuration's optimizer offload.
    let owned;
    let problem = if problem.setup.offload.optimizer == cfg.offload_target(problem) {
        problem
    } else {
        let mut p = problem.clone();
        p.setup.offload.optimizer = cfg.offload_target(problem);
        owned = p;
        &owned
    };
    let pinned = *cfg;
    let pin = move |g: &TransformerGraph, op: usize, s: &Sharding, mesh: &DeviceMesh| {
        s == &pinned.sharding_with_layout(g, op, mesh, layout.as_ref())
    };
    let stages = problem.build(&cand, Some(&pin))?;
    let name = format!("{} {}", cfg.framework, cfg.label());
    problem.solve(
        &name,
        &cand,
        &stages,
        IlpObjective::MinTime {
            memory_budget: None,
        },
    )
}
