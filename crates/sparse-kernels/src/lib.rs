//! # sparse_kernels
//!
//! Parallel sparse × dense matrix multiplication (SpMM, `C = A · B` with A in CSR and B, C
//! dense row-major) on multicore CPUs, built around LSSM — long-row splitting and short-row
//! merging (Cao et al., ICA3PP 2024) — with the baselines it is measured against, the I/O and
//! generators to feed them, and row-length statistics that size the LSSM plan.
//!
//! * Data: [`CsrMatrix`] (validated, `u32` or `usize` indices, moves to and from
//!   [`sprs::CsMatI`]), [`DenseRef`]/[`DenseMut`] row-major views with an explicit leading
//!   dimension (and ndarray interop).
//! * I/O: [`io`] reads Matrix Market (coordinate/array, real/integer/pattern,
//!   general/symmetric/skew-symmetric, gzip; the reader shared with the graph kernels, from
//!   `sparse_formats`) and DLMC `.smtx`, writes Matrix Market. Headers are checked against the
//!   index type and the entry count before anything is allocated.
//! * Generators: [`gen`] (stencils, R-MAT/Kronecker from the shared Graph500 generator,
//!   uniform, arrow, banded).
//! * Kernels, each for `f32` and `f64`: [`spmm_reference`] (serial oracle),
//!   [`spmm_row_parallel`], [`spmm_merge_path`], [`spmm_rode_like`], [`spmm_lssm`] /
//!   [`SpmmPlan`] (symbolic phase once, numeric phase per B), and [`spmm_row_pairs`] /
//!   [`RowPairs`] (neighbouring rows that share most columns computed in pairs that share
//!   their loads of B; a repacked copy of A built once, like an inspector).
//! * Parallelism is the caller's: every parallel kernel takes a [`Par`] and runs in the
//!   caller's rayon pool (or a dedicated one of a given size); the library never builds the
//!   global pool, never prints, never reads the environment.
//! * SIMD: the shared micro-kernel runs AVX-512 where the CPU has it, else AVX2+FMA (or NEON,
//!   or scalar), chosen at run time with the same bits on every level; [`set_simd_limit`] caps
//!   it.
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.
//!
//! ## Example
//!
//! ```
//! use sparse_kernels::{gen, max_relative_error, spmm_reference, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan};
//!
//! // A power-law graph with 2^10 vertices, multiplied by 3 different B with 32 columns.
//! let a = gen::kronecker::<f32, u32>(10, 42);
//! let k = 32;
//! let plan = SpmmPlan::new(&a, k, &LssmConfig::default()); // symbolic phase, once
//! for seed in 0..3 {
//!     let b = gen::dense::<f32>(a.ncols(), k, seed);
//!     let mut c = vec![0.0f32; a.nrows() * k];
//!     plan.execute(&a, DenseRef::contiguous(&b, a.ncols(), k), DenseMut::contiguous(&mut c, a.nrows(), k), Par::Current)?;
//!
//!     let mut expected = vec![0.0f32; a.nrows() * k];
//!     spmm_reference(&a, DenseRef::contiguous(&b, a.ncols(), k), DenseMut::contiguous(&mut expected, a.nrows(), k));
//!     let err = max_relative_error(DenseRef::contiguous(&c, a.nrows(), k), DenseRef::contiguous(&expected, a.nrows(), k));
//!     assert!(err < 1e-5);
//! }
//! println!("{} tasks, block of {} nonzeros", plan.num_tasks(), plan.block_nnz());
//! # Ok::<(), sparse_kernels::SparseError>(())
//! ```

mod aligned;
mod csr;
mod dense;
mod error;
pub mod gen;
mod huge;
pub mod io;
mod kernels;
mod lssm;
mod par;
mod scalar;
mod simd;
mod stats;

pub use aligned::{AlignedVec, LINE_BYTES};
pub use csr::CsrMatrix;
pub use dense::{max_relative_error, DenseMut, DenseRef};
pub use error::{Result, SparseError};
pub use huge::{zeroed_on_huge_pages, HUGE_PAGE_BYTES};
pub use kernels::{
    spmm_merge_path, spmm_merge_path_with, spmm_reference, spmm_rode_like, spmm_rode_like_with,
    spmm_row_pairs, spmm_row_parallel, spmm_row_parallel_with, BaselineConfig, Kernel, RowPairs,
};
pub use lssm::{
    last_level_cache_bytes, per_core_cache_bytes, spmm_lssm, BlockSizing, LssmConfig, PlanStep,
    SpmmPlan,
};
pub use par::Par;
pub use scalar::{Scalar, SpIndex};
pub use simd::{
    avx512_in_use, cpu_has_avx512, set_simd_limit, simd_level, simd_level_for_row_bytes,
    simd_limit, SimdLimit, AVX2_ROW_BYTES,
};
pub use stats::{MatrixClass, RowStats, DENSE_ROW_RATIO, REGULAR_CV};
