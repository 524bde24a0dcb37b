//! The ML core shared by every model of the crate: seeded initialisation, differentiable
//! normalisations, parameters and checkpoints, AdamW, the training loop, data loaders.

pub mod alloc_count;
pub mod data;
#[cfg(feature = "collectives")]
pub mod distributed;
pub mod inverse_trig;
pub mod ops;
pub mod optim;
pub mod params;
pub mod rng;
pub mod train;

pub use alloc_count::CountingAllocator;
pub use optim::{AdamW, AdamWConfig};
pub use params::{Param, ParamStore};
pub use rng::SeededInit;
pub use train::{
    EpochMetrics, GradSync, NoCallback, StepMetrics, TrainCallback, TrainConfig, TrainReport,
    Trainer,
};
