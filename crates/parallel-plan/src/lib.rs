//! # parallel_plan
//!
//! Automatic parallelism with minimal memory redundancy: per-operator sharding strategies on a device mesh, an integer linear program solved with HiGHS, and Megatron-LM baselines.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{PlanError, Result};
