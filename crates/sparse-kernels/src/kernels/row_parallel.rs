//! One row per task: the "BS-like" baseline of the LSSM paper.

use super::{baseline_kernel, micro, min_len, BaselineConfig, Call};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;

baseline_kernel!(
    /// `C = A · B` with every row of C an independent rayon task (rayon splits the row range
    /// adaptively, so neighbouring rows may run on one thread, but a long row is never split).
    /// This is the row-splitting baseline (BS-SpMM) that LSSM improves on for skewed rows.
    spmm_row_parallel,
    spmm_row_parallel_with,
    parallel
);

fn parallel<T: Scalar, I: SpIndex>(call: Call<'_, '_, T, I>) -> Result<()> {
    let (a, b, c, par, _) = call.into_parts();
    let k = b.cols();
    par.install(|| {
        c.into_par_rows()
            .enumerate()
            .with_min_len(min_len(par))
            .for_each(|(i, row)| {
                let row = DenseMut::contiguous(row, 1, k);
                micro::rows_into(a, i, b, row, micro::Options::default());
            });
    })
}
