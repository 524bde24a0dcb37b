//! # memory_model
//!
//! Training memory of large language models, per device and per operator, with redundancy (bytes replicated across devices).
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{MemoryError, Result};
