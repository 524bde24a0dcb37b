//! # graph_kernels
//!
//! CSR graphs and parallel breadth-first search: top-down, bottom-up and direction-optimizing, with Graph500 validation and TEPS.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{GraphError, Result};
