//! # parallel_plan
//!
//! Automatic parallelism with minimal memory redundancy, after Shi, Liang, Zheng, Qiao & Li,
//! "Automatic parallelism strategy generation with minimal memory redundancy" (FITEE 2025):
//! every operator of a transformer gets an SPMD sharding on a device mesh (data, tensor,
//! sequence splits and ZeRO-style sharding of its model states), chosen by an integer linear
//! program solved with HiGHS, inside an outer search over pipeline degree, mesh factorization,
//! layer split, micro-batch count, pipeline schedule and activation recomputation. The memory
//! of every operator under every sharding comes from `memory_model::operator_memory`, so the
//! planner and `pardis memory` agree byte for byte.
//!
//! | concept | module |
//! |---|---|
//! | device mesh (1–3 axes, presets, JSON) | [`mesh`] |
//! | alpha-beta communication and compute costs | [`cost_model`] |
//! | the time model against Narayanan et al. (SC'21) Table 1 | [`narayanan`] |
//! | computation graph and its JSON format | [`graph`] |
//! | a transformer (stage) as a graph, from memory-model | [`transformer`] |
//! | shardings, layouts, resharding | [`sharding`] |
//! | strategies and costs → ILP input | `strategy` (internal) |
//! | the ILP (Alpa's linearisation, layer tying) on HiGHS | `ilp` (internal) |
//! | outer search (pipeline, mesh, layer split, micro-batches, schedule, recomputation) | [`search`] |
//! | custom JSON graphs on a mesh | [`custom_graph`] |
//! | the peers at their strongest: Megatron-LM, DeepSpeed ZeRO, torchtitan FSDP + TP | [`peers`] |
//! | objectives, report | [`planner`], [`mod@plan`] |
//! | plans exported to Megatron-LM, torchtitan, DeepSpeed (nearest expressible, priced) | [`mod@export`] |
//! | unstructured-mesh programs (OP2 model) run sequentially, threaded or distributed (MARO) | [`unstructured`] |
//!
//! ## Example
//!
//! ```
//! use memory_model::ModelConfig;
//! use parallel_plan::{plan, DeviceMesh, Objective, Problem, SolveStatus};
//!
//! let mut model = ModelConfig::preset("gpt3-125m")?;
//! model.num_layers = 2; // keep the doctest small
//! model.vocab_pad_multiple = 1024; // Megatron-LM's padding, so the vocabulary splits 8 ways
//! let mesh = DeviceMesh::preset("dgx-a100-80g", 1)?.stage_mesh(2)?; // 2 GPUs on NVLink
//! let mut problem = Problem::new(model, mesh);
//! problem.global_batch = 8;
//! problem.setup.seq_len = 512;
//! problem.solver.time_limit_s = 60.0; // prove optimality even on a loaded machine
//! let report = plan(&problem, Objective::MinMemory { slack: 0.0 }, &|_, _, _| {})?;
//! // Held to the strongest peer's step time (Megatron-LM, DeepSpeed and torchtitan each
//! // searched over their own knobs), and at least as lean as any peer within that time.
//! let best = &report.plan;
//! assert!(best.fits && best.step_time_s <= report.objective.time_budget_s * (1.0 + 1e-9));
//! let peer = report.peer_reference.as_ref().unwrap();
//! assert!(best.per_device_memory.total() <= peer.plan.per_device_memory.total());
//! assert_eq!(best.ilp.status, SolveStatus::Optimal);
//! # Ok::<(), parallel_plan::PlanError>(())
//! ```
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

//! The types a user needs are re-exported at the crate root; the modules hold the rest. The
//! solver's internals ([`ilp`]'s strategy graph, [`strategy`]'s ILP input, [`search`]'s
//! per-stage problem) stay public for benches and tests but are not part of the documented
//! API.

pub mod cost_model;
pub mod custom_graph;
mod error;
pub mod export;
pub mod graph;
#[doc(hidden)]
pub mod ilp;
pub mod mesh;
pub mod narayanan;
pub mod peers;
pub mod plan;
pub mod planner;
pub mod search;
pub mod sharding;
#[doc(hidden)]
pub mod strategy;
pub mod transformer;
pub mod unstructured;

pub use custom_graph::{plan_graph, GraphPlan};
pub use error::{PlanError, Result};
pub use export::{export, Engine, Export};
pub use graph::ComputationGraph;
pub use ilp::{IlpStats, SolveStatus, SolverConfig};
pub use memory_model::ZeroStage;
pub use mesh::{DeviceMesh, HostSide};
pub use peers::{Framework, PeerConfig};
pub use plan::{OperatorPlan, Plan, StagePlan};
pub use planner::{pareto, plan, Objective, PeerPlan, PlanReport, TimeReference};
pub use search::{Problem, DEFAULT_GLOBAL_BATCH, DEFAULT_SEQ_LEN};
pub use sharding::Sharding;
