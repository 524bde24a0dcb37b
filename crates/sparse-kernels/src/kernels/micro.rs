//! The register-tiled micro-kernel shared by every parallel kernel.
//!
//! For one row (or row segment) of A it computes `out[0..K] (+)= Σ_e a_e · B[col_e, 0..K]`,
//! walking K in tiles of `T::TILE` columns (256 bytes: 8 AVX2 registers) whose accumulators stay
//! in registers while the row's nonzeros stream past — the "local memory" tile of C in the LSSM
//! paper. The tail of K is handled with tiles of half, a quarter and an eighth of that width
//! (down to one register) and a scalar loop. The loops have compile-time trip counts over
//! fixed-size arrays, so LLVM emits packed instructions; [`pulp::Arch::dispatch`] compiles them
//! once per CPU level (AVX2+FMA "x86-v3" or the SSE2 baseline) and picks at run time. The
//! generated code was checked with `objdump -d` on the release build (packed `vmulps/vaddps` on
//! `ymm` registers for `f32`, `vmulpd/vaddpd` for `f64`; see the crate README).

use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Scalar, SpIndex};
use pulp::{Simd, WithSimd};

/// Accumulates one tile of `N` columns starting at `k0`.
#[inline(always)]
fn tile<T: Scalar, I: SpIndex, const N: usize>(
    cols: &[I],
    vals: &[T],
    b: &[T],
    ld: usize,
    k0: usize,
    out: &mut [T],
    accumulate: bool,
) {
    let mut acc = [T::ZERO; N];
    for (&c, &v) in cols.iter().zip(vals) {
        let start = c.idx() * ld + k0;
        let brow: &[T; N] = b[start..start + N].try_into().expect("tile in bounds");
        for j in 0..N {
            acc[j] += v * brow[j];
        }
    }
    let o: &mut [T; N] = (&mut out[k0..k0 + N]).try_into().expect("tile in bounds");
    if accumulate {
        for j in 0..N {
            o[j] += acc[j];
        }
    } else {
        *o = acc;
    }
}

/// Full tiles of `W` columns, then one tile each of `H`, `Q`, `E` columns where they fit, then
/// a scalar tail shorter than `E`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn tiles<T: Scalar, I: SpIndex, const W: usize, const H: usize, const Q: usize, const E: usize>(
    cols: &[I],
    vals: &[T],
    b: &[T],
    ld: usize,
    out: &mut [T],
    accumulate: bool,
) {
    let k = out.len();
    let mut k0 = 0;
    while k0 + W <= k {
        tile::<T, I, W>(cols, vals, b, ld, k0, out, accumulate);
        k0 += W;
    }
    if k0 + H <= k {
        tile::<T, I, H>(cols, vals, b, ld, k0, out, accumulate);
        k0 += H;
    }
    if k0 + Q <= k {
        tile::<T, I, Q>(cols, vals, b, ld, k0, out, accumulate);
        k0 += Q;
    }
    if k0 + E <= k {
        tile::<T, I, E>(cols, vals, b, ld, k0, out, accumulate);
        k0 += E;
    }
    for j in k0..k {
        let mut acc = T::ZERO;
        for (&c, &v) in cols.iter().zip(vals) {
            acc += v * b[c.idx() * ld + j];
        }
        out[j] = if accumulate { out[j] + acc } else { acc };
    }
}

/// `out (+)= vals · B[cols, ..]` for one row or row segment; `out.len()` is K.
#[inline(always)]
fn row_segment<T: Scalar, I: SpIndex>(
    cols: &[I],
    vals: &[T],
    b: DenseRef<'_, T>,
    out: &mut [T],
    accumulate: bool,
) {
    debug_assert_eq!(out.len(), b.cols());
    let (data, ld) = (b.data(), b.ld());
    if T::TILE == 64 {
        tiles::<T, I, 64, 32, 16, 8>(cols, vals, data, ld, out, accumulate);
    } else {
        tiles::<T, I, 32, 16, 8, 4>(cols, vals, data, ld, out, accumulate);
    }
}

/// Rows `first..first + c.rows()` of A times B into the rows of `c` (overwriting).
struct RowsJob<'a, 'c, T, I> {
    a: &'a CsrMatrix<T, I>,
    first: usize,
    b: DenseRef<'a, T>,
    c: DenseMut<'c, T>,
}

impl<T: Scalar, I: SpIndex> WithSimd for RowsJob<'_, '_, T, I> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Self { a, first, b, mut c } = self;
        for (i, out) in c.rows_mut().enumerate() {
            let (cols, vals) = a.row(first + i);
            row_segment(cols, vals, b, out, false);
        }
    }
}

/// One segment of nonzeros (of a single row) times B into `out`.
struct SegmentJob<'a, 'c, T, I> {
    cols: &'a [I],
    vals: &'a [T],
    b: DenseRef<'a, T>,
    out: &'c mut [T],
    accumulate: bool,
}

impl<T: Scalar, I: SpIndex> WithSimd for SegmentJob<'_, '_, T, I> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        row_segment(self.cols, self.vals, self.b, self.out, self.accumulate);
    }
}

/// Computes rows `first..first + c.rows()` of `A·B` into `c`, overwriting it.
pub(crate) fn rows_into<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    first: usize,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
) {
    pulp::Arch::new().dispatch(RowsJob { a, first, b, c });
}

/// Computes `out (+)= Σ vals[e] · B[cols[e], ..]` for one row segment.
pub(crate) fn segment_into<T: Scalar, I: SpIndex>(
    cols: &[I],
    vals: &[T],
    b: DenseRef<'_, T>,
    out: &mut [T],
    accumulate: bool,
) {
    pulp::Arch::new().dispatch(SegmentJob {
        cols,
        vals,
        b,
        out,
        accumulate,
    });
}

/// `out += x`, elementwise (the deterministic combination step of split rows).
pub(crate) fn add_into<T: Scalar>(out: &mut [T], x: &[T]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += v;
    }
}
