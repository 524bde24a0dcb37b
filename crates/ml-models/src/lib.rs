//! # ml_models
//!
//! Machine-learning models on candle: NF4 quantization with LoRA, hyperbolic contrastive relation extraction, class-incremental learning and tabular anomaly detection.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{MlError, Result};
