//! Helpers shared by the test modules.

use sparse_kernels::{
    max_relative_error, spmm_reference, CsrMatrix, DenseMut, DenseRef, Scalar, SpIndex,
};
use std::path::PathBuf;

/// The shared matrices directory: `$PARDIS_DATA`, then `<workspace>/datasets/cache/`, then
/// `<workspace>/../shared/datasets/`, each with `matrices/` below it.
pub(crate) fn matrices_dir() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        std::env::var_os("PARDIS_DATA").map(PathBuf::from),
        Some(root.join("datasets/cache")),
        Some(root.join("../shared/datasets")),
    ];
    candidates
        .into_iter()
        .flatten()
        .map(|d| d.join("matrices"))
        .find(|d| d.is_dir())
}

/// `C = A·B` by the reference kernel, as a new contiguous buffer.
pub(crate) fn reference<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>, b: DenseRef<'_, T>) -> Vec<T> {
    let mut c = vec![T::ZERO; a.nrows() * b.cols()];
    spmm_reference(a, b, DenseMut::contiguous(&mut c, a.nrows(), b.cols()));
    c
}

/// Relative error of a contiguous result against the reference.
pub(crate) fn rel_err<T: Scalar>(c: &[T], r: &[T], rows: usize, k: usize) -> f64 {
    max_relative_error(
        DenseRef::contiguous(c, rows, k),
        DenseRef::contiguous(r, rows, k),
    )
}

/// Tolerance for the element type: 1e-12 for f64, 1e-5 for f32.
pub(crate) fn tolerance<T: Scalar>() -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        1e-5
    }
}
