//! Plans that run on real engines: for a [`Problem`] and a chosen [`Plan`], the nearest
//! configuration Megatron-LM, torchtitan or DeepSpeed can express, priced in the same cost model
//! (memory from memory-model, time from the planner's cost model), labelled [`Fidelity::Exact`]
//! or [`Fidelity::NearestExpressible`] with a typed list of what it had to give up
//! ([`GivenUp`]), and the engine's own files ([`EmittedFile`]).
//!
//! | engine | files | where the options are defined |
//! |---|---|---|
//! | Megatron-LM | `megatron_args.sh`: a bash array of `pretrain_gpt.py` arguments | `megatron/training/arguments.py` (every flag of [`megatron::ALLOWED_ARGUMENTS`]) |
//! | torchtitan | `torchtitan.toml` (`[parallelism]`, `[activation_checkpoint]`, `[training]`); `torchtitan_tp_plan.py` (`parallelize_module` plan) | `torchtitan/config/job_config.py` (classes `Parallelism`, `ActivationCheckpoint`, `Training`; [`torchtitan::ALLOWED_OPTIONS`]); `torch/distributed/tensor/parallel/style.py` (`ColwiseParallel`, `RowwiseParallel`, `SequenceParallel`, `PrepareModuleInput`, `PrepareModuleInputOutput`) |
//! | DeepSpeed | `deepspeed.json` | `deepspeed/runtime/config.py` and `deepspeed/runtime/constants.py` (batch keys, `bf16`), `deepspeed/runtime/zero/config.py` and `zero/offload_config.py` (`zero_optimization`), `deepspeed/runtime/activation_checkpointing/config.py`, `deepspeed/runtime/tensor_parallel/config.py` (AutoTP `tensor_parallel`, `partition_config.layer_specs`; [`deepspeed::ALLOWED_KEYS`]) |
//!
//! How a plan becomes an engine configuration ([`export`]): the tensor-parallel degree is the
//! number of ways the layer linears split a model dimension (weighted by their parameters when
//! they differ), sequence parallelism is read from the norms, the ZeRO stage from the operators
//! holding parameters (weighted the same way), the micro-batch per replica from the plan's
//! micro-batch and data-parallel degree; each engine then applies its own rules (Megatron-LM:
//! column-parallel q/k/v and MLP-up, row-parallel out-projection and MLP-down, the distributed
//! optimizer for ZeRO-1, Megatron-FSDP for ZeRO-2/3 without a pipeline, no GPipe; DeepSpeed: no pipeline, AutoTP only with ZeRO ≤ 2,
//! no sequence parallelism, whole-layer checkpointing; torchtitan: FSDP (ZeRO-3) or DDP,
//! sequence-parallel norms with TP, each linear split as the plan splits it when that is at the
//! engine's degree or not at all). The result is priced like a peer ([`crate::peers`]) with
//! its layer split, then compared operator by operator with the plan: it is exact only when
//! every operator is split the same number of ways with the same ZeRO stage and the memory and
//! step time agree.
//!
//! What no export carries: data, tokenizer, optimizer hyperparameters, checkpoints and logging
//! (they are the user's); the device placement of each mesh axis (engines place tensor
//! parallelism innermost).

mod compare;
pub mod deepspeed;
pub mod megatron;
pub(crate) mod shape;
pub mod torchtitan;

use memory_model::{OffloadTarget, PipelineSchedule, Recompute, ZeroStage};
use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};
use crate::peers::{self, Framework, PeerConfig};
use crate::plan::Plan;
use crate::search::Problem;

pub use shape::{LinearSplit, PlanShape};

/// A training engine a plan can be exported to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// NVIDIA Megatron-LM (`pretrain_gpt.py`).
    Megatron,
    /// PyTorch torchtitan.
    Torchtitan,
    /// Microsoft DeepSpeed.
    DeepSpeed,
}

impl Engine {
    /// Every engine, in the order `--emit all` writes them.
    pub const ALL: [Engine; 3] = [Engine::Megatron, Engine::Torchtitan, Engine::DeepSpeed];

    /// The peer framework whose rules the engine follows.
    pub fn framework(self) -> Framework {
        match self {
            Engine::Megatron => Framework::MegatronLm,
            Engine::Torchtitan => Framework::Torchtitan,
            Engine::DeepSpeed => Framework::DeepSpeed,
        }
    }

    /// Lower-case name: `megatron`, `torchtitan`, `deepspeed`.
    pub fn key(self) -> &'static str {
        match self {
            Engine::Megatron => "megatron",
            Engine::Torchtitan => "torchtitan",
            Engine::DeepSpeed => "deepspeed",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.framework().name())
    }
}

/// Whether the engine runs the plan itself or the nearest configuration it can express.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fidelity {
    /// Every operator split the same ways, same ZeRO stages, same memory and step time.
    Exact,
    /// The nearest configuration the engine expresses; see [`Export::given_up`].
    NearestExpressible,
}

impl std::fmt::Display for Fidelity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Fidelity::Exact => "exact",
            Fidelity::NearestExpressible => "nearest expressible",
        })
    }
}

/// Something of the plan the engine configuration could not keep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GivenUp {
    /// The layer linears are split different numbers of ways (e.g. q/k/v unlike the MLP); the
    /// engine has one tensor-parallel degree.
    MixedTensorParallel {
        /// Per linear, the ways it is split in the plan.
        plan: Vec<(String, u64)>,
        /// The engine's degree.
        engine: u64,
    },
    /// Pipeline stages split their linears different numbers of ways; the engine has one
    /// degree for every stage.
    StageTensorParallel {
        /// Per stage, its degree in the plan.
        plan: Vec<u64>,
        /// The engine's degree.
        engine: u64,
    },
    /// The plan's tensor-parallel degree is not one the engine can lay out here.
    TensorParallel {
        /// The plan's degree.
        plan: u64,
        /// The engine's degree.
        engine: u64,
    },
    /// A linear split row-wise where the engine splits it column-wise, or the reverse.
    LinearLayout {
        /// The linear.
        linear: String,
        /// How the plan splits it.
        plan: LinearSplit,
        /// How the engine splits it.
        engine: LinearSplit,
    },
    /// Operators with parameters use different ZeRO stages; the engine has one.
    MixedZero {
        /// Per operator, its ZeRO stage in the plan.
        plan: Vec<(String, u8)>,
        /// The engine's stage.
        engine: u8,
    },
    /// The engine shards model states at another ZeRO stage.
    ZeroStage {
        /// The plan's (dominant) stage.
        plan: u8,
        /// The engine's stage (Megatron-LM's distributed optimizer is 1).
        engine: u8,
    },
    /// The engine runs another layer split over the pipeline stages.
    LayerSplit {
        /// The plan's layers per stage.
        plan: Vec<u64>,
        /// The engine's layers per stage.
        engine: Vec<u64>,
    },
    /// The engine runs another pipeline degree.
    Pipeline {
        /// The plan's.
        plan: u64,
        /// The engine's.
        engine: u64,
    },
    /// The engine runs another pipeline schedule.
    Schedule {
        /// The plan's.
        plan: PipelineSchedule,
        /// The engine's.
        engine: PipelineSchedule,
    },
    /// The engine recomputes activations differently.
    Recompute {
        /// The plan's.
        plan: Recompute,
        /// The engine's.
        engine: Recompute,
    },
    /// The plan recomputes on its first `plan` of `stages` stages only; the engine recomputes
    /// on every stage.
    RecomputeStages {
        /// Leading stages that recompute in the plan.
        plan: u64,
        /// Pipeline stages.
        stages: u64,
    },
    /// Sequence parallelism of the norms differs.
    SequenceParallel {
        /// The plan's.
        plan: bool,
        /// The engine's.
        engine: bool,
    },
    /// Another micro-batch shape: sequences per replica × micro-batches.
    MicroBatch {
        /// The plan's (sequences per micro-batch over the stage, micro-batches).
        plan: (u64, u64),
        /// The engine's (sequences per replica, micro-batches).
        engine: (u64, u64),
    },
    /// An operator split differently after all the above (ways per dimension, ZeRO stage).
    OperatorSharding {
        /// The operator.
        operator: String,
        /// The plan's split, e.g. `batch×2 heads×4 zero1`.
        plan: String,
        /// The engine's.
        engine: String,
    },
    /// Memory or time differ although every operator is split the same ways (the placement of
    /// mesh axes, or sequence-split saved inputs).
    CostDifference {
        /// Engine minus plan, bytes per device.
        memory_bytes: i64,
        /// Engine minus plan, seconds per step.
        step_time_s: f64,
    },
}

impl std::fmt::Display for GivenUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GivenUp::MixedTensorParallel { plan, engine } => {
                let ways: Vec<String> = plan.iter().map(|(n, w)| format!("{n}×{w}")).collect();
                write!(
                    f,
                    "linears split unevenly ({}), one TP degree {engine}",
                    ways.join(" ")
                )
            }
            GivenUp::StageTensorParallel { plan, engine } => {
                let s: Vec<String> = plan.iter().map(u64::to_string).collect();
                write!(f, "TP per stage {} → {engine} on every stage", s.join("/"))
            }
            GivenUp::TensorParallel { plan, engine } => write!(f, "TP {plan} → {engine}"),
            GivenUp::LinearLayout {
                linear,
                plan,
                engine,
            } => {
                write!(f, "{linear} {plan} → {engine}")
            }
            GivenUp::MixedZero { plan, engine } => {
                let z: Vec<String> = plan.iter().map(|(n, s)| format!("{n}:{s}")).collect();
                write!(
                    f,
                    "ZeRO per operator ({}) → one stage {engine}",
                    z.join(" ")
                )
            }
            GivenUp::ZeroStage { plan, engine } => write!(f, "ZeRO-{plan} → ZeRO-{engine}"),
            GivenUp::LayerSplit { plan, engine } => {
                let s = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join("/");
                write!(f, "layer split {} → {}", s(plan), s(engine))
            }
            GivenUp::Pipeline { plan, engine } => write!(f, "pipeline {plan} → {engine}"),
            GivenUp::Schedule { plan, engine } => write!(f, "schedule {plan} → {engine}"),
            GivenUp::Recompute { plan, engine } => write!(f, "recompute {plan} → {engine}"),
            GivenUp::RecomputeStages { plan, stages } => write!(
                f,
                "recompute on the first {plan} of {stages} stages → on every stage"
            ),
            GivenUp::SequenceParallel { plan, engine } => {
                write!(f, "sequence parallel {plan} → {engine}")
            }
            GivenUp::MicroBatch { plan, engine } => write!(
                f,
                "micro-batch {} seq × m{} → {} seq/replica × m{}",
                plan.0, plan.1, engine.0, engine.1
            ),
            GivenUp::OperatorSharding {
                operator,
                plan,
                engine,
            } => write!(f, "{operator} {plan} → {engine}"),
            GivenUp::CostDifference {
                memory_bytes,
                step_time_s,
            } => write!(
                f,
                "same splits, memory {memory_bytes:+} B, time {step_time_s:+.4} s (placement)"
            ),
        }
    }
}

/// One file an export writes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmittedFile {
    /// File name (no directory), e.g. `deepspeed.json`.
    pub name: String,
    /// Its contents.
    pub contents: String,
}

/// A plan exported to one engine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Export {
    /// The engine.
    pub engine: Engine,
    /// Exact, or the nearest the engine expresses.
    pub fidelity: Fidelity,
    /// The engine configuration (degrees, ZeRO, recomputation, micro-batches, schedule).
    pub config: PeerConfig,
    /// Its layers per pipeline stage.
    pub layers_per_stage: Vec<u64>,
    /// The configuration priced in the planner's cost model (memory from memory-model).
    pub plan: Plan,
    /// The exported plan's own per-device memory (peak stage), bytes, for comparison.
    pub source_memory: u64,
    /// The exported plan's own step time, seconds.
    pub source_step_time_s: f64,
    /// What the configuration gave up of the plan (empty when exact).
    pub given_up: Vec<GivenUp>,
    /// The engine's files.
    pub files: Vec<EmittedFile>,
}

impl Export {
    /// `Megatron-LM: nearest expressible (ZeRO-3 → ZeRO-1; ...), 12.3 GiB, 4.271 s`.
    pub fn summary(&self) -> String {
        let gib = self.plan.per_device_memory.total() as f64 / (1u64 << 30) as f64;
        let mut s = format!(
            "{}: {} [{}], {gib:.2} GiB/device, step {:.3} s{}",
            self.engine,
            self.fidelity,
            self.config.label(),
            self.plan.step_time_s,
            if self.plan.fits {
                ""
            } else {
                " (does not fit)"
            }
        );
        if !self.given_up.is_empty() {
            let items: Vec<String> = self.given_up.iter().map(ToString::to_string).collect();
            s.push_str(&format!("; gave up: {}", items.join("; ")));
        }
        s
    }
}

/// What every emitted file says first: the configuration, its price beside the plan's, and what
/// it gave up.
pub(crate) struct Header {
    pub(crate) engine: Engine,
    pub(crate) fidelity: Fidelity,
    pub(crate) label: String,
    pub(crate) memory: u64,
    pub(crate) step_time_s: f64,
    pub(crate) fits: bool,
    pub(crate) source_memory: u64,
    pub(crate) source_step_time_s: f64,
    pub(crate) given_up: Vec<String>,
}

impl Header {
    /// The header as lines (no comment marker).
    pub(crate) fn lines(&self, file: &str) -> Vec<String> {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let mut out = vec![
            format!(
                "pardis plan -> {} {file}: {} ({})",
                self.engine, self.fidelity, self.label
            ),
            format!(
                "this configuration: {:.2} GiB per device (memory-model, peak stage{}), {:.3} s per step (cost model); the pardis plan: {:.2} GiB, {:.3} s",
                gib(self.memory),
                if self.fits { "" } else { ", does NOT fit" },
                self.step_time_s,
                gib(self.source_memory),
                self.source_step_time_s
            ),
        ];
        out.extend(self.given_up.iter().map(|g| format!("gave up: {g}")));
        out
    }

    /// The header as `# ` comment lines.
    pub(crate) fn comment(&self, file: &str) -> String {
        self.lines(file)
            .iter()
            .map(|l| format!("# {l}\n"))
            .collect()
    }
}

/// The nearest configuration of an engine, before pricing.
#[derive(Debug, Clone)]
pub(crate) struct Nearest {
    pub(crate) config: PeerConfig,
    pub(crate) layers: Vec<u64>,
    pub(crate) given_up: Vec<GivenUp>,
    /// The layer linears' splits when the engine takes a plan per linear (torchtitan); `None`:
    /// the engine's standard column/row pairs.
    pub(crate) linear_layout: Option<crate::peers::LinearLayout>,
}

/// Exports `plan` (a plan of `problem`) to `engine`: the nearest configuration the engine
/// expresses, priced, compared with the plan, and the engine's files.
///
/// # Errors
/// [`PlanError::InvalidInput`] when the plan does not belong to the problem (stage mesh, batch)
/// or no configuration of the engine can be laid out on the mesh; solver and memory-model
/// errors.
pub fn export(problem: &Problem, plan: &Plan, engine: Engine) -> Result<Export> {
    let shape = PlanShape::read(problem, plan)?;
    let mut last_err = None;
    // The plan's TP degree first, then smaller ones the mesh can lay out.
    for tp in shape.tp_choices(problem) {
        let nearest = match engine {
            Engine::Megatron => megatron::nearest(problem, plan, &shape, tp),
            Engine::Torchtitan => torchtitan::nearest(problem, plan, &shape, tp),
            Engine::DeepSpeed => deepspeed::nearest(problem, plan, &shape, tp),
        };
        let mut nearest = match nearest {
            Ok(n) => n,
            Err(e @ PlanError::InvalidInput(_)) => {
                last_err = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let priced = match &nearest.linear_layout {
            Some(layout) => {
                peers::evaluate_with_layout(problem, &nearest.config, &nearest.layers, layout)
            }
            None => peers::evaluate_with_layers(problem, &nearest.config, &nearest.layers),
        };
        let priced = match priced {
            Ok(p) => p,
            Err(e @ PlanError::InvalidInput(_)) => {
                last_err = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        if tp != shape.tp {
            nearest.given_up.insert(
                0,
                GivenUp::TensorParallel {
                    plan: shape.tp,
                    engine: tp,
                },
            );
        }
        compare::residual_differences(plan, &priced, &mut nearest.given_up)?;
        let fidelity = if nearest.given_up.is_empty() {
            Fidelity::Exact
        } else {
            Fidelity::NearestExpressible
        };
        let header = Header {
            engine,
            fidelity,
            label: nearest.config.label(),
            memory: priced.per_device_memory.total(),
            step_time_s: priced.step_time_s,
            fits: priced.fits,
            source_memory: plan.per_device_memory.total(),
            source_step_time_s: plan.step_time_s,
            given_up: nearest.given_up.iter().map(ToString::to_string).collect(),
        };
        let files = match engine {
            Engine::Megatron => megatron::files(problem, &nearest, &header)?,
            Engine::Torchtitan => torchtitan::files(problem, &nearest, &header)?,
            Engine::DeepSpeed => deepspeed::files(problem, &nearest, &header)?,
        };
        return Ok(Export {
            engine,
            fidelity,
            config: nearest.config,
            layers_per_stage: nearest.layers,
            plan: priced,
            source_memory: plan.per_device_memory.total(),
            source_step_time_s: plan.step_time_s,
            given_up: nearest.given_up,
            files,
        });
    }
    Err(last_err.unwrap_or_else(|| {
        PlanError::InvalidInput(format!("no {engine} configuration fits this mesh"))
    }))
}

/// The configuration every engine starts from: the plan's shape at tensor-parallel degree
/// `tp`, with the micro-batch per replica derived (and recorded when it had to change).
pub(crate) fn base_config(
    problem: &Problem,
    plan: &Plan,
    shape: &PlanShape,
    framework: Framework,
    tp: u64,
    pp: u64,
    given_up: &mut Vec<GivenUp>,
) -> Result<PeerConfig> {
    let n = problem.mesh.num_devices() as u64;
    let dp = n / (tp * pp);
    if dp == 0 || tp * pp * dp != n {
        return Err(PlanError::InvalidInput(format!(
            "tp {tp} × pp {pp} does not divide {n} devices"
        )));
    }
    let per_replica_step = problem.global_batch / dp;
    if per_replica_step == 0 || !problem.global_batch.is_multiple_of(dp) {
        return Err(PlanError::InvalidInput(format!(
            "global batch {} does not split over {dp} data-parallel replicas",
            problem.global_batch
        )));
    }
    let wanted_b = (plan.micro_batch_size / dp).max(1);
    let mut b = wanted_b.min(per_replica_step);
    while !per_replica_step.is_multiple_of(b) || per_replica_step / b < pp {
        b -= 1;
        if b == 0 {
            return Err(PlanError::InvalidInput(format!(
                "no micro-batch of {per_replica_step} sequences per replica fills {pp} stages"
            )));
        }
    }
    let m = per_replica_step / b;
    if plan.recompute != Recompute::None && plan.recompute_stages < plan.pipeline_stages {
        given_up.push(GivenUp::RecomputeStages {
            plan: plan.recompute_stages,
            stages: plan.pipeline_stages,
        });
    }
    if b * dp != plan.micro_batch_size || m != plan.micro_batches {
        given_up.push(GivenUp::MicroBatch {
            plan: (plan.micro_batch_size, plan.micro_batches),
            engine: (b, m),
        });
    }
    Ok(PeerConfig {
        framework,
        tp,
        pp,
        dp,
        sequence_parallel: shape.sequence_parallel && tp > 1,
        zero: ZeroStage::Zero0,
        recompute: plan.recompute,
        micro_batch_size: b,
        micro_batches: m,
        // No pipeline, no interleaving.
        schedule: if pp > 1 {
            plan.schedule
        } else {
            PipelineSchedule::OneFOneB
        },
        offload_optimizer: framework == Framework::DeepSpeed
            && problem.setup.offload.optimizer == OffloadTarget::Cpu,
    })
}

/// memory-model's ZeRO stage for a number 0–3 (1: `distributed` picks Megatron-LM's
/// distributed optimizer).
pub(crate) fn zero_of(stage: u8, distributed: bool) -> ZeroStage {
    match stage {
        0 => ZeroStage::Zero0,
        1 if distributed => ZeroStage::DistributedOptimizer,
        1 => ZeroStage::Zero1,
        2 => ZeroStage::Zero2,
        _ => ZeroStage::Zero3,
    }
}

/// Records the ZeRO change from the plan's dominant stage (and its mix) to `engine`.
pub(crate) fn note_zero(shape: &PlanShape, engine: u8, given_up: &mut Vec<GivenUp>) {
    if shape.zero_mixed() {
        given_up.push(GivenUp::MixedZero {
            plan: shape.zero_by_operator.clone(),
            engine,
        });
    } else if shape.zero != engine {
        given_up.push(GivenUp::ZeroStage {
            plan: shape.zero,
            engine,
        });
    }
}

#[cfg(test)]
mod tests;
