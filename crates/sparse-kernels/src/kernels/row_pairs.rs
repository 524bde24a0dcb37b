//! Rows computed in pairs that share their loads of B.
//!
//! A row-wise SpMM loads one element of B for every multiply-add. Where the load ports are as
//! busy as the FMA units (a 256-bit load per 256-bit FMA on Zen 1), that load, not the
//! arithmetic, caps the kernel: the micro-kernel's loop reaches 64–71 % of the register
//! FMA peak with B in L1 (`examples/fma_ceiling.rs`). Neighbouring rows of stencils and
//! finite-element matrices share most of their columns, so rows `2p` and `2p + 1` computed
//! together can multiply each shared row of B by both rows' values after one load.
//!
//! [`RowPairs::new`] is the inspector: it repacks A (a copy of its columns and values, like
//! MKL's `mkl_sparse_optimize`) so that each pair that shares at least half of its nonzeros is
//! three lists — the shared columns with both values, then each row's own columns — and
//! every other row keeps its own list in A's order. [`RowPairs::execute`] is the executor:
//! pairs take register tiles of half the micro-kernel's width per row (4 AVX2 or AVX-512
//! registers each, so both rows' accumulators stay in registers) in three branch-free loops;
//! single rows take the micro-kernel's own path ([`super::micro`]), with its bits.
//!
//! A paired row sums its shared entries first, then its own: its bits may differ from the other
//! kernels' in the last place, and are the same for every thread count and SIMD level.

use super::micro::{self, chunk_len, Dense, Prefetch, SimdJob, Store};
use super::{check_dims, SERIAL_WORK};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;
use std::ops::Range;

/// Most bytes the rows of B of one pair (the union of its columns) may take: an L1 of 32 KiB,
/// so that the passes of the tiles over the pair's lists find them there.
const PAIR_B_BYTES: usize = 32 << 10;

/// Multiply-adds per rayon task (at least one pair): four times LSSM's row chunks, 1–2 %
/// faster than those on `stencil27:64` and as balanced on matrices of 1k–3k rows (2 threads).
const TASK_WORK: usize = 1 << 16;

/// Where pair `p`'s lists end: the shared entries `shared[prev.shared..shared]`, the first
/// row's own `own[prev.second..first]`, the second row's own `own[first..second]`.
#[derive(Debug, Clone, Copy, Default)]
struct PairEnd {
    shared: usize,
    first: usize,
    second: usize,
    /// Whether the pair is computed together (else: two single rows, own lists only).
    paired: bool,
}

/// A copy of a CSR matrix laid out for computing its rows in pairs that share their loads of B
/// (the inspector step of [`RowPairs::execute`]).
///
/// A row-wise SpMM loads one element of B per multiply-add, which caps it below the FMA peak
/// where the load ports are as busy as the FMA units. Rows `2p` and `2p + 1` that share at
/// least half of their nonzeros' columns (neighbouring rows of stencils and finite-element
/// matrices) are stored as three lists — the shared columns with both values, then each row's
/// own — and multiplied together: one load of B for both rows on a shared column. Other rows
/// keep their entries in A's order and take the micro-kernel of the other kernels (with its
/// bits). A paired row sums its shared entries first, then its own, so its bits may differ from
/// the other kernels' in the last place; they do not depend on the thread count or SIMD level.
/// Use it for matrices whose neighbouring rows share columns ([`Self::shared_fraction`] tells);
/// on others it is LSSM's micro-kernel without LSSM's schedule, slower on long rows.
///
/// ```
/// use sparse_kernels::{gen, max_relative_error, spmm_reference, DenseMut, DenseRef, Par, RowPairs};
///
/// let a = gen::stencil_3d_27pt::<f64, u32>(8);
/// let k = 64;
/// let pairs = RowPairs::new(&a, k); // once, outside the timed loop
/// let b = gen::dense::<f64>(a.ncols(), k, 1);
/// let mut c = vec![0.0; a.nrows() * k];
/// pairs.execute(DenseRef::contiguous(&b, a.ncols(), k), DenseMut::contiguous(&mut c, a.nrows(), k), Par::Current)?;
///
/// let mut expected = vec![0.0; a.nrows() * k];
/// spmm_reference(&a, DenseRef::contiguous(&b, a.ncols(), k), DenseMut::contiguous(&mut expected, a.nrows(), k));
/// let err = max_relative_error(DenseRef::contiguous(&c, a.nrows(), k), DenseRef::contiguous(&expected, a.nrows(), k));
/// assert!(err < 1e-12);
/// assert!(pairs.shared_fraction() > 0.6); // a stencil's neighbours share two thirds
/// # Ok::<(), sparse_kernels::SparseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RowPairs<T, I> {
    nrows: usize,
    ncols: usize,
    k: usize,
    ends: Vec<PairEnd>,
    shared_cols: Vec<I>,
    shared_vals: Vec<[T; 2]>,
    own_cols: Vec<I>,
    own_vals: Vec<T>,
    paired_rows: usize,
}

/// Whether `cols` is strictly increasing (sorted, no duplicates): only such rows are merged.
fn strictly_increasing<I: SpIndex>(cols: &[I]) -> bool {
    cols.windows(2).all(|w| w[0].idx() < w[1].idx())
}

/// The number of columns rows `c1` and `c2` (both strictly increasing) share.
fn shared_count<I: SpIndex>(c1: &[I], c2: &[I]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < c1.len() && j < c2.len() {
        match c1[i].idx().cmp(&c2[j].idx()) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => (i, j, n) = (i + 1, j + 1, n + 1),
        }
    }
    n
}

impl<T: Scalar, I: SpIndex> RowPairs<T, I> {
    /// Repacks `a` for products with `k` columns of B: rows `2p` and `2p + 1` are paired when
    /// both have sorted, distinct columns, at least half of their nonzeros lie in columns they
    /// share (`4 · shared ≥ len₁ + len₂`), and the pair's rows of B fit 32 KiB (`union · k ·
    /// size_of::<T>()`, an L1). Time and memory O(nnz): one copy of A's columns and values.
    pub fn new(a: &CsrMatrix<T, I>, k: usize) -> Self {
        let m = a.nrows();
        let mut p = Self {
            nrows: m,
            ncols: a.ncols(),
            k,
            ends: Vec::with_capacity(m.div_ceil(2)),
            shared_cols: Vec::new(),
            shared_vals: Vec::new(),
            own_cols: Vec::with_capacity(a.nnz()),
            own_vals: Vec::with_capacity(a.nnz()),
            paired_rows: 0,
        };
        let row_bytes = k.max(1).saturating_mul(std::mem::size_of::<T>());
        // The second row's own entries of the pair being merged (reused from pair to pair).
        let mut second_own = Vec::new();
        for r in (0..m).step_by(2) {
            let (c1, v1) = a.row(r);
            let (c2, v2) = if r + 1 < m {
                a.row(r + 1)
            } else {
                (&[][..], &[][..])
            };
            let pair = r + 1 < m && strictly_increasing(c1) && strictly_increasing(c2) && {
                let shared = shared_count(c1, c2);
                let union = c1.len() + c2.len() - shared;
                shared > 0
                    && 4 * shared >= c1.len() + c2.len()
                    && union.saturating_mul(row_bytes) <= PAIR_B_BYTES
            };
            if pair {
                p.merge((c1, v1), (c2, v2), &mut second_own);
                p.paired_rows += 2;
            } else {
                p.own_cols.extend_from_slice(c1);
                p.own_vals.extend_from_slice(v1);
                let first = p.own_cols.len();
                p.own_cols.extend_from_slice(c2);
                p.own_vals.extend_from_slice(v2);
                p.ends.push(PairEnd {
                    shared: p.shared_cols.len(),
                    first,
                    second: p.own_cols.len(),
                    paired: false,
                });
            }
        }
        p
    }

    /// Appends the pair of rows `(c1, v1)`, `(c2, v2)` (strictly increasing columns) as its
    /// three lists; `second_own` is scratch.
    fn merge(
        &mut self,
        (c1, v1): (&[I], &[T]),
        (c2, v2): (&[I], &[T]),
        second_own: &mut Vec<usize>,
    ) {
        second_own.clear();
        let (mut i, mut j) = (0, 0);
        while i < c1.len() || j < c2.len() {
            let take_first = j == c2.len() || (i < c1.len() && c1[i].idx() < c2[j].idx());
            let take_second = i == c1.len() || (j < c2.len() && c2[j].idx() < c1[i].idx());
            if take_first {
                self.own_cols.push(c1[i]);
                self.own_vals.push(v1[i]);
                i += 1;
            } else if take_second {
                second_own.push(j);
                j += 1;
            } else {
                self.shared_cols.push(c1[i]);
                self.shared_vals.push([v1[i], v2[j]]);
                (i, j) = (i + 1, j + 1);
            }
        }
        let first = self.own_cols.len();
        for &j in second_own.iter() {
            self.own_cols.push(c2[j]);
            self.own_vals.push(v2[j]);
        }
        self.ends.push(PairEnd {
            shared: self.shared_cols.len(),
            first,
            second: self.own_cols.len(),
            paired: true,
        });
    }

    /// Rows of A computed in pairs.
    pub fn paired_rows(&self) -> usize {
        self.paired_rows
    }

    /// The share of A's nonzeros in shared entries (each counted for both rows): the loads of
    /// B the pairs save, over all loads of B a row-wise kernel makes.
    pub fn shared_fraction(&self) -> f64 {
        let nnz = 2 * self.shared_cols.len() + self.own_cols.len();
        (2 * self.shared_cols.len()) as f64 / nnz.max(1) as f64
    }

    /// The K these pairs were sized for.
    pub fn k(&self) -> usize {
        self.k
    }

    /// `C = A · B` for the A these pairs were built from, overwriting C, in the caller's rayon
    /// pool as `par` says (tasks of whole pairs; the result does not depend on the thread
    /// count).
    ///
    /// # Errors
    /// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
    ///
    /// # Panics
    /// If B is not `ncols × k` or C not `nrows × k` (the shape of A and the K of [`Self::new`]).
    #[track_caller]
    pub fn execute(&self, b: DenseRef<'_, T>, c: DenseMut<'_, T>, par: Par) -> Result<()> {
        assert_eq!(
            (b.rows(), b.cols()),
            (self.ncols, self.k),
            "B must be {} × {} (A's columns × the K of the pairs)",
            self.ncols,
            self.k
        );
        assert_eq!(
            (c.rows(), c.cols()),
            (self.nrows, self.k),
            "C must be {} × {} (A's rows × the K of the pairs)",
            self.nrows,
            self.k
        );
        let nnz = 2 * self.shared_cols.len() + self.own_cols.len();
        if self.k == 0 || self.nrows == 0 {
            return Ok(());
        }
        if nnz.saturating_mul(self.k) < SERIAL_WORK || par.is_seq() {
            self.pairs_into(0, b, c);
            return Ok(());
        }
        // Whole pairs per task, about TASK_WORK multiply-adds each.
        let per_row = (nnz / self.nrows).max(1).saturating_mul(self.k);
        let rows_per_task = (TASK_WORK / per_row).max(1).next_multiple_of(2);
        par.install(|| {
            c.into_par_row_chunks(rows_per_task)
                .enumerate()
                .for_each(|(i, rows)| self.pairs_into(i * rows_per_task / 2, b, rows));
        })
    }

    /// Rows `2 · first_pair ..` of C into `c` (`c.rows()` rows from an even row).
    fn pairs_into(&self, first_pair: usize, b: DenseRef<'_, T>, c: DenseMut<'_, T>) {
        let job = Job {
            pairs: self,
            first_pair,
            b,
            c,
        };
        micro::dispatch(job);
    }

    /// Column and both values of shared entry `e`.
    ///
    /// # Safety
    /// `e < self.shared_cols.len()` (`== self.shared_vals.len()`).
    #[inline(always)]
    unsafe fn shared_entry(&self, e: usize) -> (I, [T; 2]) {
        // SAFETY: caller; the two arrays have one element per shared entry.
        unsafe {
            (
                *self.shared_cols.get_unchecked(e),
                *self.shared_vals.get_unchecked(e),
            )
        }
    }

    /// Column and value of own entry `e`.
    ///
    /// # Safety
    /// `e < self.own_cols.len()` (`== self.own_vals.len()`).
    #[inline(always)]
    unsafe fn own_entry(&self, e: usize) -> (I, T) {
        // SAFETY: caller; the two arrays have one element per own entry.
        unsafe {
            (
                *self.own_cols.get_unchecked(e),
                *self.own_vals.get_unchecked(e),
            )
        }
    }

    /// Pair `p`'s lists: its shared entries `shared[s0..s1]`, the first row's own entries
    /// `own[o0..o1]` and the second row's `own[o1..o2]`, as `[s0, s1, o0, o1, o2]`, and
    /// whether it is computed as a pair.
    #[inline(always)]
    fn lists(&self, p: usize) -> ([usize; 5], bool) {
        let prev = if p == 0 {
            PairEnd::default()
        } else {
            self.ends[p - 1]
        };
        let end = self.ends[p];
        (
            [prev.shared, end.shared, prev.second, end.first, end.second],
            end.paired,
        )
    }
}

/// `out1 = Σ shared v·B + Σ own₁ v·B` and `out2` likewise over columns `k0..k0 + N`, for the
/// pair whose lists are `l` (see [`RowPairs::lists`]). Indexes the repacked arrays directly,
/// one induction variable per loop, so that few values stay live besides the accumulators.
///
/// # Safety
/// `l` are the lists of a pair of `p` (ranges within its arrays); every column is a row of `b`
/// (see [`Dense`]); `k0 + N <= out1.len() == out2.len() <= b.ld`.
#[inline(always)]
unsafe fn pair_tile<T: Scalar, I: SpIndex, const N: usize>(
    p: &RowPairs<T, I>,
    l: [usize; 5],
    b: Dense<'_, T>,
    k0: usize,
    (out1, out2): (&mut [T], &mut [T]),
    fma: bool,
) {
    let madd = |v: T, x: T, acc: T| if fma { v.mul_add(x, acc) } else { acc + v * x };
    // SAFETY: every column of the pair's lists is a row of `b` and `k0 + N <= k <= ld`
    // (caller), so `c · ld + k0 + N <= (rows - 1) · ld + k <= data.len()`, as in `micro::tile`;
    // `[T; N]` has the alignment of `T`.
    let brow = |c: I| unsafe { &*b.data.as_ptr().add(c.idx() * b.ld + k0).cast::<[T; N]>() };
    // Each row of B is read into a local first and each row's sums take their own loop, as in
    // the shift pairs' tile: read through the reference, the AVX-512 instance versioned the
    // loops against B aliasing the accumulators and kept both rows' accumulators on the stack
    // (benches/README.md, sparse, "Row pairs on AVX-512").
    let (mut x, mut y) = ([T::ZERO; N], [T::ZERO; N]);
    for e in l[0]..l[1] {
        // SAFETY: `e` is in the pair's shared range (caller).
        let (c, [v, w]) = unsafe { p.shared_entry(e) };
        let r: [T; N] = *brow(c);
        for j in 0..N {
            x[j] = madd(v, r[j], x[j]);
        }
        for j in 0..N {
            y[j] = madd(w, r[j], y[j]);
        }
    }
    for e in l[2]..l[3] {
        // SAFETY: `e` is an own entry of the first row (caller).
        let (c, v) = unsafe { p.own_entry(e) };
        let r: [T; N] = *brow(c);
        for j in 0..N {
            x[j] = madd(v, r[j], x[j]);
        }
    }
    for e in l[3]..l[4] {
        // SAFETY: `e` is an own entry of the second row (caller).
        let (c, v) = unsafe { p.own_entry(e) };
        let r: [T; N] = *brow(c);
        for j in 0..N {
            y[j] = madd(v, r[j], y[j]);
        }
    }
    out1[k0..k0 + N].copy_from_slice(&x);
    out2[k0..k0 + N].copy_from_slice(&y);
}

/// Full pair tiles of `W` columns, one each of `H`, `Q`, `E` where they fit, then a scalar
/// tail doing a tile column's operations in the same order (so the bits do not depend on
/// which tile a column falls in).
///
/// # Safety
/// As [`pair_tile`] with `out1.len()` for `k0 + N`.
#[inline(always)]
unsafe fn pair_tiles<
    T: Scalar,
    I: SpIndex,
    const W: usize,
    const H: usize,
    const Q: usize,
    const E: usize,
>(
    p: &RowPairs<T, I>,
    l: [usize; 5],
    b: Dense<'_, T>,
    out: (&mut [T], &mut [T]),
    fma: bool,
) {
    let (out1, out2) = out;
    let k = out1.len();
    let mut k0 = 0;
    while k0 + W <= k {
        // SAFETY: caller's contract, `k0 + W <= k`.
        unsafe { pair_tile::<T, I, W>(p, l, b, k0, (&mut *out1, &mut *out2), fma) };
        k0 += W;
    }
    if k0 == k {
        return;
    }
    if k0 + H <= k {
        // SAFETY: caller's contract, `k0 + H <= k`.
        unsafe { pair_tile::<T, I, H>(p, l, b, k0, (&mut *out1, &mut *out2), fma) };
        k0 += H;
    }
    if k0 + Q <= k {
        // SAFETY: caller's contract, `k0 + Q <= k`.
        unsafe { pair_tile::<T, I, Q>(p, l, b, k0, (&mut *out1, &mut *out2), fma) };
        k0 += Q;
    }
    if k0 + E <= k {
        // SAFETY: caller's contract, `k0 + E <= k`.
        unsafe { pair_tile::<T, I, E>(p, l, b, k0, (&mut *out1, &mut *out2), fma) };
        k0 += E;
    }
    let madd = |v: T, x: T, acc: T| if fma { v.mul_add(x, acc) } else { acc + v * x };
    for j in k0..k {
        // SAFETY: as in `pair_tile`, with `j < k <= ld`.
        let bj = |c: I| unsafe { *b.data.get_unchecked(c.idx() * b.ld + j) };
        let (mut x, mut y) = (T::ZERO, T::ZERO);
        for e in l[0]..l[1] {
            // SAFETY: `e` is in the pair's shared range (caller).
            let (c, [v, w]) = unsafe { p.shared_entry(e) };
            x = madd(v, bj(c), x);
            y = madd(w, bj(c), y);
        }
        for e in l[2]..l[3] {
            // SAFETY: `e` is in one of the pair's own ranges (caller).
            let (c, v) = unsafe { p.own_entry(e) };
            x = madd(v, bj(c), x);
        }
        for e in l[3]..l[4] {
            // SAFETY: `e` is in one of the pair's own ranges (caller).
            let (c, v) = unsafe { p.own_entry(e) };
            y = madd(v, bj(c), y);
        }
        out1[j] = x;
        out2[j] = y;
    }
}

/// The pairs of rows `2 · first_pair ..` into the rows of `c`, for [`micro::dispatch`].
struct Job<'a, 'c, T, I> {
    pairs: &'a RowPairs<T, I>,
    first_pair: usize,
    b: DenseRef<'a, T>,
    c: DenseMut<'c, T>,
}

impl<T: Scalar, I: SpIndex> SimdJob for Job<'_, '_, T, I> {
    #[inline(always)]
    fn run<const WIDE: bool>(self, fma: bool) {
        let Self {
            pairs: p,
            first_pair,
            b,
            mut c,
        } = self;
        let dense = Dense {
            data: b.data(),
            ld: b.ld(),
        };
        let chunk = chunk_len::<T>(p.k, 0);
        let single = Store {
            fma,
            accumulate: false,
            stream: false,
            group: chunk,
            vector_bytes: 16,
        };
        // The contract of every unchecked call below: `execute` checked B: ncols × k with
        // `k <= ld` and C: nrows × k; the lists hold columns of a validated CSR (< ncols); the
        // pairs `first_pair..` cover the rows of `c` (`execute` splits C at even rows).
        let mut rows = c.rows_mut();
        let mut q = first_pair;
        while let Some(out1) = rows.next() {
            let (l, paired) = p.lists(q);
            let out2 = rows.next();
            q += 1;
            match out2 {
                Some(out2) if paired => {
                    let out = (out1, out2);
                    // SAFETY: see above.
                    unsafe {
                        match (WIDE, T::TILE == 64) {
                            (false, true) => {
                                pair_tiles::<T, I, 32, 16, 8, 4>(p, l, dense, out, fma)
                            }
                            (false, false) => {
                                pair_tiles::<T, I, 16, 8, 4, 2>(p, l, dense, out, fma)
                            }
                            (true, true) => {
                                pair_tiles::<T, I, 64, 32, 16, 8>(p, l, dense, out, fma)
                            }
                            (true, false) => {
                                pair_tiles::<T, I, 32, 16, 8, 4>(p, l, dense, out, fma)
                            }
                        }
                    }
                }
                out2 => {
                    let own = |r: Range<usize>| (&p.own_cols[r.clone()], &p.own_vals[r]);
                    // SAFETY: see above.
                    unsafe {
                        single_row::<T, I, WIDE>(own(l[2]..l[3]), chunk, dense, out1, single)
                    };
                    if let Some(out2) = out2 {
                        // SAFETY: see above.
                        unsafe {
                            single_row::<T, I, WIDE>(own(l[3]..l[4]), chunk, dense, out2, single)
                        };
                    }
                }
            }
        }
    }
}

/// One unpaired row by the micro-kernel's path (one pass of its tiles, or chunks of a long
/// row): LSSM's bits.
///
/// # Safety
/// As [`micro::segment`].
#[inline(always)]
unsafe fn single_row<T: Scalar, I: SpIndex, const WIDE: bool>(
    (cols, vals): (&[I], &[T]),
    chunk: usize,
    b: Dense<'_, T>,
    out: &mut [T],
    store: Store,
) {
    if cols.len() <= chunk {
        // SAFETY: caller's contract.
        unsafe { micro::all_tiles::<T, I, WIDE>(cols, vals, b, out, store) };
    } else {
        let mut no_prefetch = Prefetch {
            done: 0,
            end: 0,
            chunk,
            distance: chunk,
        };
        // SAFETY: caller's contract; `0..len` are the row's entries, `end` 0: no prefetching.
        unsafe {
            micro::segment::<T, I, WIDE>(cols, vals, 0..cols.len(), &mut no_prefetch, b, out, store)
        };
    }
}

/// `C = A · B` with rows computed in pairs that share their loads of B: builds [`RowPairs`]
/// (one copy of A) and executes it once; to multiply several B by one A, build the pairs once.
///
/// # Errors
/// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
///
/// # Panics
/// If the shapes do not match.
#[track_caller]
pub fn spmm_row_pairs<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
    par: Par,
) -> Result<()> {
    check_dims(a, &b, &c);
    RowPairs::new(a, b.cols()).execute(b, c, par)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    /// C of `pairs` for `b`, computed on `level`.
    fn product<T: Scalar>(
        pairs: &RowPairs<T, u32>,
        b: &[T],
        rows: usize,
        level: micro::Level,
    ) -> Vec<T> {
        let k = pairs.k();
        let mut c = vec![T::ZERO; rows * k];
        level.run(Job {
            pairs,
            first_pair: 0,
            b: DenseRef::contiguous(b, pairs.ncols, k),
            c: DenseMut::contiguous(&mut c, rows, k),
        });
        c
    }

    fn same_bits<T: Scalar>() {
        if !crate::cpu_has_avx512() {
            eprintln!("skipped: this CPU has no AVX-512");
            return;
        }
        // Paired stencil rows, and an arrow matrix's unpaired long rows (chunked).
        let mats: [CsrMatrix<T, u32>; 2] = [gen::stencil_3d_27pt(5), gen::arrow(300, 3, 5)];
        for a in &mats {
            for k in [1, 3, 8, 17, 32, 64, 100, 129] {
                let pairs = RowPairs::new(a, k);
                let b = gen::dense::<T>(a.ncols(), k, 11);
                let what = format!("{} K = {k}, pairs", T::NAME);
                micro::assert_levels_agree(&what, |level| product(&pairs, &b, a.nrows(), level));
            }
        }
    }

    #[test]
    fn avx512_pairs_give_the_bits_of_the_avx2_pairs() {
        same_bits::<f64>();
        same_bits::<f32>();
    }
}
