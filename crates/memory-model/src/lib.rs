//! # memory_model
//!
//! Training memory of large language models, per device and per operator, with redundancy
//! (bytes replicated across devices). Follows the memory analysis of Tang et al., "Training
//! large-scale language models with limited GPU memory: a survey" (FITEE 2025): model
//! parameters, model states (gradients, optimizer states), activations, and the techniques that
//! reduce each (ZeRO, tensor/sequence/context/pipeline/expert parallelism, recomputation, flash
//! attention, offload, LoRA/QLoRA).
//!
//! ## Entry points
//!
//! | what | item |
//! |---|---|
//! | model description | [`ModelConfig`] ([`ModelConfig::preset`], [`ModelConfig::preset_names`], [`ModelConfig::from_hf_config_json`], [`ModelConfig::num_parameters`]) |
//! | training setup | [`TrainingSetup`] with [`Precision`], [`Optimizer`], [`Parallelism`], [`ZeroStage`], [`PipelineSchedule`], [`Recompute`], [`Offload`], [`Peft`] |
//! | operators | [`layer_operators`], [`embedding_operators`], [`head_operators`] → [`Operator`] with [`ParamTensor`]s and saved [`ActTensor`]s in named [`Dim`]s |
//! | per-operator memory | [`OperatorSharding`] (split per [`Dim`], ZeRO flags) → [`operator_memory`] → [`OperatorMemory`] (device / cluster / unique bytes) |
//! | whole model | [`estimate`] → [`MemoryReport`] (per device, per stage, cluster redundancy) |
//! | one stage, any sharding per operator | [`stage_memory`] of [`PlacedOperator`]s and [`StageTensors`] → [`StageMemory`] |
//! | search | [`search`] over (dp, tp, pp, sp, ZeRO, recompute, micro-batch) |
//!
//! Whole-model numbers are [`stage_memory`] of each stage's operators under
//! [`OperatorSharding::megatron`]: sums of [`operator_memory`] plus buffers, transient peaks and
//! overhead. The parallel planner calls the same function with its own shardings: one code path.
//!
//! ## Example
//!
//! ```
//! use memory_model::{estimate, ModelConfig, TrainingSetup, ZeroStage};
//!
//! let model = ModelConfig::preset("llama2-7b")?;
//! assert_eq!(model.num_parameters(), 6_738_415_616);
//!
//! let mut setup = TrainingSetup { micro_batch: 1, seq_len: 4096, ..TrainingSetup::default() };
//! setup.parallel.dp = 8;
//! setup.parallel.zero = ZeroStage::Zero1;
//! let report = estimate(&model, &setup)?;
//! // Mixed-precision Adam with ZeRO-1 over 8 devices: 2 + 2 + 12/8 bytes per parameter.
//! assert_eq!(report.per_device.parameters + report.per_device.gradients
//!     + report.per_device.optimizer_states, 6_738_415_616 * 11 / 2);
//! assert!(report.cluster.redundancy_ratio > 1.0);
//! # Ok::<(), memory_model::MemoryError>(())
//! ```
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod breakdown;
mod error;
mod hf;
pub use hf::MAX_HF_CONFIG_BYTES;
mod layers;
mod model;
mod operator;
mod options;
mod search;
mod setup;
mod sharding;
mod stage;
mod zoo;

pub use breakdown::{
    chunks_in_flight, estimate, host_memory_per_node, layers_per_stage, megatron_stage_tensors,
    sharded_layer, ClusterSummary, DeviceBreakdown, MemoryReport, StageBreakdown,
};
pub use error::{MemoryError, Result};
pub use layers::{embedding_operators, head_operators, layer_operators};
pub use model::{
    MlpKind, ModelConfig, MoeConfig, NormKind, PositionKind, MAX_PARAMETERS, MEGATRON_VOCAB_PADDING,
};
pub use operator::{
    ActDtype, ActTensor, Dim, LoraRanks, OpKind, Operator, ParamKind, ParamTensor, SaveClass,
    Shape, Workload,
};
pub use options::{BaseQuant, BufferConfig, HostConfig, Offload, OffloadTarget, Peft};
pub use search::{search, Rejection, SearchHit, SearchOutcome, SearchSpace};
pub use setup::{
    Optimizer, Parallelism, PipelineSchedule, Precision, Recompute, TrainingSetup, ZeroStage,
    MAX_DEVICES,
};
pub use sharding::{
    dense_model_states, is_kept, operator_memory, quantized_bytes, Categories, OperatorMemory,
    OperatorSharding,
};
pub use stage::{
    placed_memory, stage_memory, stage_terms, PlacedMemory, PlacedOperator, StageMemory,
    StageTensors, StageTerm, StageTermKind, TermValues, STAGE_TERMS,
};
pub use zoo::PRESET_NAMES;
