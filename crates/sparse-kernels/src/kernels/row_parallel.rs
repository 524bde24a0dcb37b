//! One row per task: the "BS-like" baseline of the LSSM paper.

use super::{check_dims, micro, min_len, run_serially, BaselineConfig};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;

/// `C = A · B` with every row of C an independent rayon task (rayon splits the row range
/// adaptively, so neighbouring rows may run on one thread, but a long row is never split).
/// This is the row-splitting baseline (BS-SpMM) that LSSM improves on for skewed rows.
///
/// # Errors
/// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
///
/// # Panics
/// If the shapes do not match.
#[track_caller]
pub fn spmm_row_parallel<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
    par: Par,
) -> Result<()> {
    spmm_row_parallel_with(a, b, c, par, &BaselineConfig::default())
}

/// [`spmm_row_parallel`] with explicit tuning.
///
/// # Errors
/// As [`spmm_row_parallel`].
///
/// # Panics
/// If the shapes do not match.
#[track_caller]
pub fn spmm_row_parallel_with<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
    par: Par,
    config: &BaselineConfig,
) -> Result<()> {
    check_dims(a, &b, &c);
    if run_serially(a, b.cols(), config) {
        micro::rows_into(a, 0, b, c);
        return Ok(());
    }
    let k = b.cols();
    par.install(|| {
        c.into_par_rows()
            .enumerate()
            .with_min_len(min_len(par))
            .for_each(|(i, row)| {
                micro::rows_into(a, i, b, DenseMut::contiguous(row, 1, k));
            });
    })
}
