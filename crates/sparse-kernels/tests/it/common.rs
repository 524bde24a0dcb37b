//! Helpers shared by the test modules.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
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

/// Error of a result `c` of `A · B` against the reference `r`, relative to the size of the
/// terms summed: `max |c − r| / max (|A| · |B|)`. Summing in another order (long rows in
/// segments, sums in groups) moves a result by a few roundings of its terms, not of itself:
/// where the terms cancel, `max |c − r| / max |r|` can exceed any tolerance (a row of 22 `f32`
/// entries in segments of 6: 1.6e-5 against `max |r|`).
pub(crate) fn sum_err<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    c: &[T],
    r: &[T],
) -> f64 {
    let abs = |x: &T| T::from_f64(x.to_f64().abs());
    let abs_a = CsrMatrix::try_new(
        a.nrows(),
        a.ncols(),
        a.offsets().to_vec(),
        a.indices().to_vec(),
        a.values().iter().map(abs).collect(),
    )
    .expect("the same structure");
    let abs_b: Vec<T> = (0..b.rows())
        .flat_map(|i| b.row(i).iter().map(abs).collect::<Vec<_>>())
        .collect();
    let terms = reference(&abs_a, DenseRef::contiguous(&abs_b, b.rows(), b.cols()));
    let diff = c
        .iter()
        .zip(r)
        .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
        .fold(0.0, f64::max);
    diff / terms
        .iter()
        .map(|t| t.to_f64())
        .fold(f64::MIN_POSITIVE, f64::max)
}

/// Tolerance for the element type: 1e-12 for f64, 1e-5 for f32.
pub(crate) fn tolerance<T: Scalar>() -> f64 {
    if T::NAME == "f64" {
        1e-12
    } else {
        1e-5
    }
}

/// A grid of `nx × ny × nz` points numbered x fastest, each coupled to itself and to the
/// neighbours of the 27-point stencil whose bits are set in `mask` (bit `dx + 1 + 3 (dy + 1)
/// + 9 (dz + 1)`), with random values: the grid-like matrices of the sweep and shift-pair tests.
pub(crate) fn random_grid(
    nx: usize,
    ny: usize,
    nz: usize,
    mask: u32,
    seed: u64,
) -> CsrMatrix<f64, u32> {
    let offsets: Vec<(i64, i64, i64)> = (0..27)
        .filter(|bit| mask >> bit & 1 == 1)
        .map(|i| (i % 3 - 1, i / 3 % 3 - 1, i / 9 - 1))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let id = |x: i64, y: i64, z: i64| ((z * ny as i64 + y) * nx as i64 + x) as usize;
    let mut t = Vec::new();
    for z in 0..nz as i64 {
        for y in 0..ny as i64 {
            for x in 0..nx as i64 {
                for &(dx, dy, dz) in offsets.iter().chain(&[(0, 0, 0)]) {
                    let (u, v, w) = (x + dx, y + dy, z + dz);
                    if (0..nx as i64).contains(&u)
                        && (0..ny as i64).contains(&v)
                        && (0..nz as i64).contains(&w)
                    {
                        t.push((id(x, y, z), id(u, v, w), rng.random_range(-1.0..1.0)));
                    }
                }
            }
        }
    }
    let n = nx * ny * nz;
    CsrMatrix::from_triplets(n, n, &t).unwrap()
}
