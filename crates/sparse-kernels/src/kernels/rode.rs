//! RoDe-like row decomposition, the second baseline of the LSSM paper.
//!
//! After RoDe (Pang et al., "A Row Decomposition-based Approach for Sparse Matrix
//! Multiplication on GPUs", PPoPP 2024), adapted to CPUs: every row is split into a *regular*
//! part made of whole blocks of [`RODE_BLOCK`] nonzeros and a *residue* of fewer than
//! [`RODE_BLOCK`] nonzeros. Rows shorter than [`RODE_LONG_ROW`] are computed whole, one row per
//! task; the regular parts of longer rows are cut into segments of [`RODE_LONG_ROW`] nonzeros
//! (whole blocks) computed in parallel into scratch vectors, and a second row-parallel pass
//! computes each long row's residue and adds its segments in order. The block and segment sizes
//! are fixed, unlike LSSM's, which adapt to the row profile and K.

use super::{baseline_kernel, micro, min_len, BaselineConfig, Call};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;

/// Nonzeros per regular block.
pub(crate) const RODE_BLOCK: usize = 32;
/// Rows with at least this many nonzeros have their regular part split into segments of this
/// many nonzeros (32 blocks).
pub(crate) const RODE_LONG_ROW: usize = 32 * RODE_BLOCK;

baseline_kernel!(
    /// `C = A · B` by RoDe-style regular/residue row decomposition.
    ///
    /// Complexity: `O(nnz · K)` work; `O(K · Σ_long ⌈regular / rode_long_row⌉)` scratch.
    spmm_rode_like,
    spmm_rode_like_with,
    parallel
);

fn parallel<T: Scalar, I: SpIndex>(call: Call<'_, '_, T, I>) -> Result<()> {
    let (a, b, c, par, config) = call.into_parts();
    let k = b.cols();
    // Segments of the regular parts of long rows, in row order; first_seg[i] indexes them.
    let mut segments: Vec<std::ops::Range<usize>> = Vec::new();
    let mut first_seg = vec![0usize; a.nrows() + 1];
    for i in 0..a.nrows() {
        let r = a.row_range(i);
        let (block, long) = (config.rode_block.max(1), config.rode_long_row.max(1));
        let seg_len = (long / block).max(1) * block;
        if r.len() >= long && r.len() >= block {
            let regular_end = r.start + r.len() / block * block;
            let mut s = r.start;
            while s < regular_end {
                let e = (s + seg_len).min(regular_end);
                segments.push(s..e);
                s = e;
            }
        }
        first_seg[i + 1] = segments.len();
    }
    let mut scratch = vec![T::ZERO; segments.len() * k];
    par.install(|| {
        if k > 0 {
            scratch
                .par_chunks_mut(k)
                .zip(&segments)
                .with_min_len(min_len(par))
                .for_each(|(out, seg)| {
                    micro::segment_into(a, seg.clone(), b, out, micro::Options::default());
                });
        }
        c.into_par_rows()
            .enumerate()
            .with_min_len(min_len(par))
            .for_each(|(i, out)| {
                let segs = first_seg[i]..first_seg[i + 1];
                if segs.is_empty() {
                    micro::rows_into(
                        a,
                        i,
                        b,
                        DenseMut::contiguous(out, 1, k),
                        micro::Options::default(),
                    );
                    return;
                }
                let r = a.row_range(i);
                let residue = segments[segs.end - 1].end..r.end;
                micro::segment_into(a, residue, b, out, micro::Options::default());
                for s in segs {
                    micro::add_into(out, &scratch[s * k..(s + 1) * k]);
                }
            });
    })
}
