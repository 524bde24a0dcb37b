//! # pardis
//!
//! Parallel and distributed computing for training large models on many devices and for the
//! irregular kernels (sparse, graph, collective) underneath. This crate holds no logic: it
//! re-exports the focused crates of the workspace, one feature per crate, so that a user builds
//! only what they need.
//!
//! ## Feature flags
//!
//! | feature | module | crate | what it does |
//! |---|---|---|---|
//! | `memory` | [`memory`] | `memory-model` | training memory per device and per operator, with redundancy |
//! | `plan` | [`plan`] | `parallel-plan` | memory-minimal automatic parallelism (ILP on HiGHS), Megatron-LM baselines |
//! | `mesh` | [`plan::unstructured`] | `parallel-plan` + `collectives` | unstructured-mesh programs (OP2 model) distributed automatically over threads, TCP, MPI (MARO) |
//! | `sparse` | [`sparse`] | `sparse-kernels` | parallel CSR SpMM (LSSM) |
//! | `graph` | [`graph`] | `graph-kernels` | parallel direction-optimizing BFS, Graph500 validation |
//! | `sparse` or `graph` | [`formats`] | `sparse-formats` | what both kernel crates read: Matrix Market, gzip-aware capped line reading, the Graph500 R-MAT generator |
//! | `collectives` | [`collectives`] | `collectives` | deadlock-free collectives over threads, TCP, MPI |
//! | `ml` | [`ml`] | `ml-models` | training core, GPT and BERT/MiniLM models, data loaders; QLoRA, PCL-AD anomaly detection, class-incremental learning, PO-HRL few-shot relation extraction |
//! | `full` | all of the above | | the default |
//!
//! Build only the sparse kernels, without HiGHS or candle:
//!
//! ```toml
//! pardis = { version = "0.1", default-features = false, features = ["sparse"] }
//! ```

#![no_std]

#[cfg(feature = "memory")]
#[doc(inline)]
pub use memory_model as memory;

#[cfg(feature = "plan")]
#[doc(inline)]
pub use parallel_plan as plan;

#[cfg(feature = "sparse")]
#[doc(inline)]
pub use sparse_kernels as sparse;

#[cfg(feature = "graph")]
#[doc(inline)]
pub use graph_kernels as graph;

#[cfg(any(feature = "sparse", feature = "graph"))]
#[doc(inline)]
pub use sparse_formats as formats;

#[cfg(feature = "collectives")]
#[doc(inline)]
pub use collectives;

#[cfg(feature = "ml")]
#[doc(inline)]
pub use ml_models as ml;
