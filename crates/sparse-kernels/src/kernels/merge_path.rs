//! Merge-path SpMM: every partition gets the same number of rows + nonzeros.
//!
//! D. Merrill and M. Garland, "Merge-based parallel sparse matrix-vector multiplication",
//! SC 2016. The CSR row ends and the nonzero indices form two sorted lists; splitting their
//! merge path into equal diagonals gives each partition an equal share of `rows + nnz`. A row
//! cut by a partition boundary is finished by the partition that reaches its end (which owns
//! the row of C); the earlier pieces go to per-partition carry vectors that a serial fix-up adds
//! in partition order, so the result does not depend on the thread count.

use super::{baseline_kernel, micro, min_len, BaselineConfig, Call};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;

/// Rows + nonzeros per partition (at most [`MERGE_MAX_PARTS`] partitions).
pub(crate) const MERGE_ITEMS_PER_PART: usize = 4096;
/// Upper bound on the number of merge-path partitions (independent of the thread count).
pub(crate) const MERGE_MAX_PARTS: usize = 256;

/// Coordinate on the merge path: `(rows completed, nonzeros consumed)` at diagonal `d`.
fn merge_path_search<I: SpIndex>(offsets: &[I], d: usize) -> (usize, usize) {
    let nrows = offsets.len() - 1;
    let nnz = offsets[nrows].idx();
    let (mut lo, mut hi) = (d.saturating_sub(nnz), d.min(nrows));
    while lo < hi {
        let pivot = (lo + hi) / 2;
        // Row `pivot` ends before nonzero `d - pivot - 1` is consumed: move right.
        if offsets[pivot + 1].idx() < d - pivot {
            lo = pivot + 1;
        } else {
            hi = pivot;
        }
    }
    (lo, d - lo)
}

baseline_kernel!(
    /// `C = A · B` with merge-path partitioning over `rows + nnz`.
    ///
    /// Complexity: `O(nnz · K)` work, `O(P · K)` extra memory for the carries of `P` partitions.
    spmm_merge_path,
    spmm_merge_path_with,
    parallel
);

fn parallel<T: Scalar, I: SpIndex>(call: Call<'_, '_, T, I>) -> Result<()> {
    let (a, b, mut c, par, config) = call.into_parts();
    let k = b.cols();
    let items = a.nrows() + a.nnz();
    let parts = items
        .div_ceil(config.merge_items_per_part.max(1))
        .clamp(1, config.merge_max_parts.max(1));
    let coords: Vec<(usize, usize)> = (0..=parts)
        .map(|p| merge_path_search(a.offsets(), items * p / parts))
        .collect();
    // Partition p owns the rows of C it completes: coords[p].0 .. coords[p + 1].0.
    let mut c_parts = Vec::with_capacity(parts);
    let mut rest = c.reborrow();
    for w in coords.windows(2) {
        let (own, tail) = rest.split_at_row(w[1].0 - w[0].0);
        c_parts.push(own);
        rest = tail;
    }
    let mut carries = vec![T::ZERO; parts * k.max(1)];
    let has_carry: Vec<bool> = par.install(|| {
        c_parts
            .into_par_iter()
            .zip(carries.par_chunks_mut(k.max(1)))
            .enumerate()
            .with_min_len(min_len(par))
            .map(|(p, (mut own, carry))| {
                let ((r0, j0), (r1, j1)) = (coords[p], coords[p + 1]);
                if r0 < r1 {
                    let first = a.row_range(r0).start.max(j0)..a.row_range(r0).end;
                    micro::segment_into(a, first, b, own.row_mut(0), micro::Options::default());
                    let (_, later) = own.split_at_row(1);
                    micro::rows_into(a, r0 + 1, b, later, micro::Options::default());
                }
                let tail = a.row_range(r1.min(a.nrows() - 1)).start.max(j0)..j1;
                let carried = r1 < a.nrows() && !tail.is_empty();
                if carried {
                    micro::segment_into(a, tail, b, &mut carry[..k], micro::Options::default());
                }
                carried
            })
            .collect()
    })?;
    // Fix-up in partition order: deterministic for any thread count.
    for (p, carried) in has_carry.into_iter().enumerate() {
        if carried {
            micro::add_into(c.row_mut(coords[p + 1].0), &carries[p * k..(p + 1) * k]);
        }
    }
    Ok(())
}
