//! Integration tests of `ml_models` (one binary; micro models, seconds).

mod common;
mod core_ops;
#[cfg(feature = "collectives")]
mod distributed;
mod fewshot;
mod gpt;
mod hostile;
mod hyperbolic;
mod incremental;
mod loaders;
mod lora;
mod minilm;
mod nf4;
mod training;
