//! # collectives
//!
//! Deadlock-free collective communication among ranks — threads of one process, processes
//! over TCP — driven by a preemptive progress engine, after DFCCL (Pan et al.,
//! "Comprehensive Deadlock Prevention for GPU Collective Communication", EuroSys 2025).
//!
//! NCCL and MPI require every rank to issue collectives in the same order; ranks that issue
//! collectives on several communicators in different orders deadlock. Here every collective is
//! a resumable state machine (`poll(budget) -> Done | Progressed | Blocked`) with its own
//! buffers and mailbox; each rank's engine preempts a blocked collective and runs another, so
//! any order completes. [`Mode::Ordered`] keeps NCCL/MPI semantics for comparison and reports
//! its deadlocks.
//!
//! ```
//! use collectives::{run_local, ReduceOp};
//!
//! let sums = run_local(4, |comm| {
//!     let mine = vec![comm.rank() as f64; 3];
//!     comm.all_reduce(mine, ReduceOp::Sum).unwrap()
//! })
//! .unwrap();
//! assert!(sums.iter().all(|s| s == &vec![6.0; 3]));
//! ```
//!
//! Two ranks issuing all-reduces on two communicators in opposite orders — a deadlock under
//! NCCL/MPI semantics — complete here:
//!
//! ```
//! use collectives::{run_local, ReduceOp};
//!
//! run_local(2, |comm| {
//!     let (a, b) = (comm.dup().unwrap(), comm.dup().unwrap());
//!     let first = if comm.rank() == 0 { &a } else { &b };
//!     let second = if comm.rank() == 0 { &b } else { &a };
//!     let h1 = first.iall_reduce(vec![1i32; 8], ReduceOp::Sum).unwrap();
//!     let h2 = second.iall_reduce(vec![2i32; 8], ReduceOp::Sum).unwrap();
//!     let (x, y) = (h1.wait().unwrap(), h2.wait().unwrap());
//!     assert_eq!(x[0] + y[0], 6);
//! })
//! .unwrap();
//! ```
//!
//! How it is built: `schedule` compiles each collective algorithm into per-rank steps; a
//! program runs the steps as a resumable state machine ([`Poll`]); each rank's engine schedules
//! its programs, preemptively or in order ([`Mode`], counters in [`EngineStats`] and
//! [`OpStats`]; a thread waiting for a collective runs its rank's engine itself meanwhile);
//! transports move frames into per-collective mailboxes, and on the local transport large
//! all-reduces use no messages at all: every rank reduces its share straight from all ranks'
//! buffers ([`AllReduceAlgorithm::SharedMemory`]). [`bus_factor`] is the nccl-tests
//! bus-bandwidth definition; the measurements themselves (benchmarks, physical-limit
//! references, the paper's random-order "chaos" workload) live in the workspace's unpublished
//! `collectives-bench` crate.
//!
//! Element types: `f32`, `f64`, `i32`, `i64`, `u8` and [`bf16`] (reduced in f32 per element
//! pair). Launchers, one per transport — the same closure runs on any of them:
//!
//! - [`run_local`]`(n, |comm| ..)`: `n` ranks as threads of this process (shared memory).
//! - [`from_env`]`()`: this process joins a multi-process TCP job whose rank, size and
//!   rendezvous address come from environment variables ([`tcp`] documents them). It is the
//!   only place where the crate reads the environment, and only when called; [`tcp::join`]
//!   takes the same settings explicitly.
//! - `mpi::MpiJob::init` (cargo feature `mpi`, off by default): the ranks of an MPI job started
//!   by `mpirun`, over the system's MPI library through rsmpi; see the `mpi` module.
//!
//! [`Launch`] is the same choice as a value (local threads, loopback TCP, a TCP job, an MPI
//! job) with one [`Launch::run`], in the style of timely dataflow's `execute(Config, ..)`, for
//! programs that pick the transport at run time.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.

mod busbw;
mod communicator;
mod completion;
mod config;
mod copy;
mod direct;
mod dtype;
mod engine;
mod error;
mod frame;
mod handle;
mod inbox;
mod job;
mod launch;
mod posts;
mod program;
mod schedule;
mod shm;
pub mod transport;

pub use busbw::bus_factor;
pub use communicator::Communicator;
pub use completion::OpStats;
pub use config::{
    AllReduceAlgorithm, BroadcastAlgorithm, Config, Mode, DEFAULT_BUSY_POLL,
    DEFAULT_DEADLOCK_TIMEOUT, DEFAULT_OP_TIMEOUT, DEFAULT_PIPELINE_CHUNK_BYTES,
    DEFAULT_PIPELINE_THRESHOLD_BYTES, DEFAULT_RECURSIVE_DOUBLING_BYTES, DEFAULT_RING_PIECE_BYTES,
    DEFAULT_SHARED_MEMORY_BYTES, DEFAULT_SHARED_MEMORY_BYTES_WIDE, DEFAULT_SMALL_MESSAGE_BYTES,
    DEFAULT_TCP_HALVING_DOUBLING_BYTES, MAX_BUSY_POLL, MIN_PARK_INTERVAL,
    SHARED_MEMORY_SMALL_MIN_RANKS,
};
pub use dtype::{DType, Element, ReduceOp};
pub use engine::{AbortHandle, EngineStats};
pub use error::{CollectiveError, Result};
pub use frame::OpKind;
/// The bfloat16 element type (from the `half` crate).
pub use half::bf16;
pub use handle::Handle;
pub use job::Launch;
pub use launch::{run_local, run_local_with, MAX_LOCAL_RANKS};
pub use program::Poll;
#[cfg(feature = "mpi")]
pub use transport::mpi;
pub use transport::tcp;
pub use transport::tcp::from_env;

/// Internals that the workspace's measurement crate (`collectives-bench`) times or mirrors: the
/// message copy, the ring's block partition and the local-rank check. Not part of the API (no
/// stability promise) and hidden from the docs.
#[doc(hidden)]
pub mod __private {
    pub use crate::copy::copy_slice;
    pub use crate::launch::check_local_ranks;
    pub use crate::schedule::part;
}
