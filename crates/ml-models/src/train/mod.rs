//! The training core shared by every model of the crate: seeded initialisation, differentiable
//! normalisations and inverse trigonometric functions, parameters and checkpoints, AdamW, the
//! training loop, data-parallel gradient synchronisation and a counting allocator.

pub mod alloc_count;
#[cfg(feature = "collectives")]
pub mod distributed;
pub mod inverse_trig;
pub mod ops;
pub mod optim;
pub mod params;
pub mod rng;
pub mod trainer;

pub use alloc_count::CountingAllocator;
pub use optim::{AdamW, AdamWConfig};
pub use params::{Param, ParamStore};
pub use rng::SeededInit;
pub use trainer::{
    EpochMetrics, GradSync, NoCallback, StepMetrics, TrainCallback, TrainConfig, TrainReport,
    Trainer,
};
