//! LSSM: long-row splitting and short-row merging.
//!
//! Z. Cao, Y. Wang, Y. Yang, Y. Xia, Z. Guo, W. Liu, "LSSM-SpMM: A Long-Row Splitting and
//! Short-Row Merging Approach for parallel SpMM", ICA3PP 2024 — written for the PEZY-SC3s MIMD
//! processor and adapted here to multicore CPUs:
//!
//! * **Symbolic phase** ([`SpmmPlan::new`]): profile the rows ([`RowStats`]), pick a block size
//!   (nonzeros per task) from the profile and K, classify rows against it. Runs of consecutive
//!   *short* rows are merged into one task of about `block` nonzeros. *Long* rows (more than
//!   `block` nonzeros) are split into segments of about `block` nonzeros; with sorted columns,
//!   groups of [`LssmConfig::long_row_group`] long rows are cut at common column boundaries and
//!   each task takes one column range of every row of its group, so the rows of B in that range are
//!   read from memory once for the whole group (a CPU adaptation: the paper's PEZY-SC3s has no
//!   shared cache to exploit). The task list, the scratch size (one K-vector per extra segment) and
//!   the memory policies of the micro-kernel (prefetching B or its rows' lead rows, streaming
//!   stores to C, shift pairs: a row and the next shifted by one column computed together, one
//!   load of B for both where the columns run on) are fixed here. Tasks are grouped into
//!   *units* by position: a long-row task whose columns are `c..d` (scaled to the rows) goes
//!   with the runs of short rows `c..d` (at most four blocks of them), first the rows, then the
//!   long-row task, so that in matrices with a
//!   structured diagonal (arrow, banded, meshes) one worker reads those rows of B from memory once,
//!   for the short rows, and again from its own cache for the long rows (arrow matrices read B
//!   once). A grid-like matrix without long rows (rows reading the rows of B near their own and one
//!   period, a plane of the grid, before and after) whose three planes of B do not fit the cache is
//!   *swept* instead: each plane is cut into bands of whole grid lines, and a unit takes one band
//!   through consecutive planes, so that the rows of B a step reads were read by the steps just
//!   before ([`SpmmPlan::sweep`]).
//! * **Numeric phase** ([`SpmmPlan::execute`]): each worker runs its own contiguous share of the
//!   units, then takes units from the back of the largest share left, so a worker that finishes
//!   early still takes work at once (the paper hands units out in order from one atomic counter,
//!   its "atomic cache"; contiguous shares keep a sweep's bands on one core); a matrix without
//!   long rows or a sweep falls back to the row-parallel schedule (rayon's adaptive splitting of
//!   the rows, in chunks of a few rows). Each task walks its rows with the
//!   register-tiled SIMD micro-kernel (the paper's "local memory" tile of C). A long row's first
//!   segment writes the row of C; the others write scratch vectors that are added to it afterwards,
//!   always in segment order — the result is bit-identical across runs and thread counts. With
//!   [`LssmConfig::k_panel`] (off by default) the numeric phase runs once per panel of columns of B
//!   and C, each panel of B packed into a contiguous line-aligned buffer, so that the rows a pass
//!   gathers can stay in the last-level cache; same bits as without.
//!
//! The plan depends only on the sparsity pattern and K, so GNN-style workloads that multiply the
//! same A by many B build it once.

mod exec;
mod plan;
mod split;
mod sweep;
mod task;

pub use plan::{last_level_cache_bytes, per_core_cache_bytes, BlockSizing, LssmConfig, SpmmPlan};
pub use task::PlanStep;

use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};

/// `C = A · B` with LSSM, building a default plan for this call.
///
/// To multiply the same A by several B, build a [`SpmmPlan`] once and call
/// [`SpmmPlan::execute`].
///
/// # Errors
/// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
///
/// # Panics
/// If the shapes do not match.
///
/// # Examples
/// ```
/// use sparse_kernels::{gen, spmm_lssm, spmm_reference, max_relative_error, DenseMut, DenseRef, Par};
/// let a = gen::arrow::<f64, u32>(1000, 2, 7);
/// let k = 8;
/// let b: Vec<f64> = (0..1000 * k).map(|i| (i % 13) as f64).collect();
/// let (mut c, mut r) = (vec![0.0; 1000 * k], vec![0.0; 1000 * k]);
/// spmm_lssm(&a, DenseRef::contiguous(&b, 1000, k), DenseMut::contiguous(&mut c, 1000, k), Par::Current)?;
/// spmm_reference(&a, DenseRef::contiguous(&b, 1000, k), DenseMut::contiguous(&mut r, 1000, k));
/// assert!(max_relative_error(DenseRef::contiguous(&c, 1000, k), DenseRef::contiguous(&r, 1000, k)) < 1e-12);
/// # Ok::<(), sparse_kernels::SparseError>(())
/// ```
#[track_caller]
pub fn spmm_lssm<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
    par: Par,
) -> Result<()> {
    let plan = SpmmPlan::new(a, b.cols(), &LssmConfig::default());
    plan.execute(a, b, c, par)
}
