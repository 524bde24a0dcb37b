//! Unstructured-mesh programs (OP2's model) that run sequentially, multi-threaded or
//! distributed over ranks with no distribution code in the program, after Lei, Chen, Che & Xu,
//! "MARO: Enabling Full MPI Automatic Refactoring in DSL-Based Programming Framework"
//! (ICA3PP 2024).
//!
//! A program declares [`Set`]s (nodes, edges, cells…), [`Map`]s between them with an arity
//! (edge → 2 nodes), [`Dat`]s (values per element) and [`Global`]s (constants and reductions),
//! all in global numbering, then runs [`Context::par_loop`]s: a kernel over small slices,
//! applied to every element of a set, each argument a dat accessed directly or through a map
//! with an [`Access`] mode (`Read`, `Write`, `ReadWrite`, `Inc`) or a global (`Read`, `Inc`,
//! `Min`, `Max`). The [`Backend`] chosen at run time decides how the loops run:
//!
//! - [`Backend::Sequential`]: in element order, the reference;
//! - [`Backend::Threads`]: in the caller's rayon pool; loops that write through maps run in
//!   OP2's coloured blocks of nearby elements, so that indirect increments never race;
//! - `Backend::Distributed` (cargo feature `distributed`): one rank of a `collectives`
//!   communicator (threads, TCP or MPI). At the first loop the mesh is partitioned (METIS
//!   with the `metis` feature, see [`Partitioner`]), every set
//!   renumbered owned-first, then exec halo, then non-exec halo, and the maps and dats
//!   localised; before each loop the halos of dats it reads that are dirty are exchanged;
//!   reductions are all-reduced. This is MARO's generated MPI pre-processing, done at run time.
//!
//! ## Example: one Jacobi sweep on a 4-node ring
//!
//! ```
//! use parallel_plan::unstructured::{Access, Backend, Context};
//!
//! let mut ctx = Context::new(Backend::Sequential);
//! let nodes = ctx.decl_set("nodes", 4)?;
//! let edges = ctx.decl_set("edges", 4)?;
//! let e2n = ctx.decl_map("e2n", edges, nodes, 2, vec![0, 1, 1, 2, 2, 3, 3, 0])?;
//! let u = ctx.decl_dat("u", nodes, 1, vec![1.0, 0.0, 0.0, 0.0])?;
//! let sum = ctx.decl_dat("sum", nodes, 1, vec![0.0; 4])?;
//! // sum[n] = Σ u over neighbours of n
//! ctx.par_loop("gather", edges,
//!     &[u.read_via(e2n, 0), u.read_via(e2n, 1), sum.inc_via(e2n, 0), sum.inc_via(e2n, 1)],
//!     |r, w| { w[0][0] += r[1][0]; w[1][0] += r[0][0]; })?;
//! let change = ctx.decl_global("change", vec![0.0])?;
//! ctx.par_loop("update", nodes, &[sum.read(), u.write(), change.arg(Access::Max)],
//!     |r, w| {
//!         let new = r[0][0] / 2.0;
//!         w[1][0] = w[1][0].max(new.abs());
//!         w[0][0] = new;
//!     })?;
//! assert_eq!(ctx.dat_values(u)?, vec![0.0, 0.5, 0.0, 0.5]);
//! assert_eq!(ctx.global_values(change)?, vec![0.5]);
//! # Ok::<(), parallel_plan::unstructured::UnstructuredError>(())
//! ```

pub mod apps;
mod colour;
mod context;
mod decl;
#[cfg(feature = "distributed")]
mod distributed;
mod error;
mod exec;
mod fixed;
mod grid;
mod hooks;
#[cfg(any(feature = "distributed", test))]
mod layout;
#[cfg(feature = "distributed")]
mod ownership;
pub mod partition;
mod renumber;
mod run;
mod scalar;
mod stats;

pub use context::{Backend, Context};
pub use decl::{Access, Arg, Dat, Global, Map, Set};
#[cfg(feature = "distributed")]
pub use distributed::{DistConfig, PlanReport, Runtime, SetPlan};
pub use error::{Result, UnstructuredError};
pub use exec::MAX_ARGS;
pub use fixed::{FixedArg, FixedArgs, Rd, Wr};
pub use grid::Grid;
pub use partition::Partitioner;
pub use scalar::{Scalar, Storage, Wire};
pub use stats::{LoopStats, RunStats};
