//! # sparse_kernels
//!
//! Parallel CSR SpMM on multicore CPUs with long-row splitting and short-row merging (LSSM).
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{SparseError, Result};
