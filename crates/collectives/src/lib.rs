//! # collectives
//!
//! Deadlock-free collective communication among ranks (threads, TCP processes, MPI) with a preemptive progress engine.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod error;

pub use error::{CollectiveError, Result};
