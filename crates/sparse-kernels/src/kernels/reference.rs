//! The serial, obviously correct kernel every other kernel is tested against.

use super::check_dims;
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Scalar, SpIndex};

/// `C = A · B`, serially, one entry of A at a time, accumulating in the element type.
///
/// Complexity: `O(nnz · K)` multiply-adds, no extra memory.
///
/// # Panics
/// If the shapes do not match (`B.rows == A.ncols`, `C` is `A.nrows × B.cols`).
///
/// # Examples
/// ```
/// use sparse_kernels::{spmm_reference, CsrMatrix, DenseMut, DenseRef};
/// let a = CsrMatrix::<f64>::from_triplets(2, 2, &[(0, 0, 2.0), (1, 0, 1.0), (1, 1, 3.0)])?;
/// let b = [1.0, 2.0, 3.0, 4.0];
/// let mut c = [0.0; 4];
/// spmm_reference(&a, DenseRef::contiguous(&b, 2, 2), DenseMut::contiguous(&mut c, 2, 2));
/// assert_eq!(c, [2.0, 4.0, 10.0, 14.0]);
/// # Ok::<(), sparse_kernels::SparseError>(())
/// ```
#[track_caller]
pub fn spmm_reference<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    mut c: DenseMut<'_, T>,
) {
    check_dims(a, &b, &c);
    for i in 0..a.nrows() {
        let out = c.row_mut(i);
        out.fill(T::ZERO);
        let (cols, vals) = a.row(i);
        for (&col, &v) in cols.iter().zip(vals) {
            for (o, &x) in out.iter_mut().zip(b.row(col.idx())) {
                *o += v * x;
            }
        }
    }
}
