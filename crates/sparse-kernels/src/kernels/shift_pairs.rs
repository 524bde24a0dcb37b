//! Shift pairs: rows `r` and `r + 1` whose columns are row `r`'s plus one, entry by entry (the
//! neighbouring points of a grid line in a stencil or structured mesh, the rows of a banded
//! matrix), computed together with the bits of one row at a time.
//!
//! A row-wise SpMM loads one row of B per multiply-add. In a shift pair, row `r + 1`'s entry
//! `e` reads the row of B that row `r`'s entry `e + 1` reads whenever row `r`'s columns `e` and
//! `e + 1` are consecutive (two of every three entries of a 27-point stencil's row), so the
//! pair loads that row once for both: 36 loads instead of 54 for a pair of stencil rows. Each
//! row still sums its entries in its own order, from zero, with the same operations as the
//! micro-kernel's tiles, so the result has the bits of the single-row path (tested).

use super::micro::{Dense, Store};
use super::prefetch_and_stream::write;
use crate::stats::sampled_rows;
use crate::{CsrMatrix, Scalar, SpIndex};

/// Whether row `c2` is row `c1` shifted by one column: as many entries (at least one), each
/// column one more. Branch-free over the entries (vectorised), so that the numeric phase can
/// afford to check every pair it takes: the pairs are found where the rows are computed, and
/// their loads of B stay within B whatever matrix is passed.
#[inline(always)]
pub(super) fn is_shift<I: SpIndex>(c1: &[I], c2: &[I]) -> bool {
    !c1.is_empty()
        && c1.len() == c2.len()
        && c1
            .iter()
            .zip(c2)
            .fold(true, |ok, (x, y)| ok & (y.idx() == x.idx().wrapping_add(1)))
}

/// What shift pairs a matrix offers, from up to 4096 rows `r` spread over it (`sampled_rows`):
/// how many were sampled, how many are followed by their shift (row `r + 1` is row `r` shifted
/// by one column, [`is_shift`]), and those rows' entries and runs of consecutive columns (a
/// pair loads `entries + runs` rows of B for `2 · entries` multiply-adds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ShiftPairs {
    pub(crate) sampled: usize,
    pub(crate) shifted: usize,
    pub(crate) entries: usize,
    pub(crate) runs: usize,
}

impl ShiftPairs {
    /// The sample of `a`. Time O(sampled rows' entries).
    pub(crate) fn of<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>) -> Self {
        let (n, cols) = (a.nrows(), a.indices());
        let mut out = Self::default();
        for r in sampled_rows(n.saturating_sub(1), 4096) {
            out.sampled += 1;
            let first = &cols[a.row_range(r)];
            if is_shift(first, &cols[a.row_range(r + 1)]) {
                out.shifted += 1;
                out.entries += first.len();
                out.runs += 1 + first
                    .windows(2)
                    .filter(|w| w[1].idx() != w[0].idx().wrapping_add(1))
                    .count();
            }
        }
        out
    }

    /// Whether computing the pairs together pays, by the rule measured on the AMD EPYC VM
    /// (benches/README.md, sparse, "Shift pairs"): at least a quarter of the sampled rows are
    /// followed by their shift, the pairs save a quarter of their loads of B
    /// (`entries − runs ≥ entries / 2`), and their rows have at least 8 entries on average
    /// (pairs of short rows were slower where B came from memory: `stencil5:1024` 0.72× at
    /// K = 64, `Franz6` 0.91×).
    pub(crate) fn pay(&self) -> bool {
        self.shifted > 0
            && 4 * self.shifted >= self.sampled
            && 2 * (self.entries - self.runs) >= self.entries
            && self.entries >= 8 * self.shifted
    }
}

/// One tile of `N` columns at `k0` of a shift pair: `out1 = Σ_e v1_e · B[c_e]` and
/// `out2 = Σ_e v2_e · B[c_e + 1]` over row `r`'s columns `cols`, each sum from zero in entry
/// order, as [`super::micro`]'s `tile` takes it. Row `r`'s entries are taken in runs of
/// consecutive columns `c, c + 1, …, c + l − 1`: rows `c + 1 … c + l − 1` of B serve both
/// rows (row `r`'s entry and row `r + 1`'s entry before it), `c` only row `r` and `c + l` only
/// row `r + 1` — `l + 1` loads for `2 l` multiply-adds. The runs come from `starts`
/// ([`run_starts`]), found once for all the tiles of the pair.
///
/// # Safety
/// `cols` is not empty; every `c` in `cols` and `c + 1` are rows of `b` (see [`Dense`]);
/// `k0 + N <= outs.0.len() == outs.1.len() <= b.ld`; `v1`, `v2` have `cols.len()` entries;
/// `starts == run_starts(cols)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_tile<T: Scalar, I: SpIndex, const N: usize>(
    cols: &[I],
    starts: u64,
    v1: &[T],
    v2: &[T],
    b: Dense<'_, T>,
    k0: usize,
    outs: (&mut [T], &mut [T]),
    store: Store,
) {
    let n = cols.len();
    let mut acc1 = [T::ZERO; N];
    let mut acc2 = [T::ZERO; N];
    // The runs: entries `e..end` between one set bit of `starts` and the next (or `n`).
    let mut rest = starts;
    while rest != 0 {
        let e = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        let end = match rest {
            0 => n,
            more => more.trailing_zeros() as usize,
        };
        let l = end - e;
        // SAFETY: `e < end <= n`, so every index into `cols`, `v1`, `v2` below is below
        // `n == v1.len() == v2.len()` (caller); within a run the columns are consecutive
        // (`run_starts`), so every row of B read is a column of row `r` or the last one's plus
        // one (caller's contract), and `c * ld + k0 + N <= data.len()` as in `tile`; `[T; N]`
        // has the alignment of `T`.
        unsafe {
            let brow = |c: usize| &*b.data.as_ptr().add(c * b.ld + k0).cast::<[T; N]>();
            let c = cols.get_unchecked(e).idx();
            let x = brow(c);
            let v = *v1.get_unchecked(e);
            for j in 0..N {
                acc1[j] = madd(store.fma, v, x[j], acc1[j]);
            }
            for d in 1..l {
                // One load of the row for both rows' multiply-adds.
                let x: [T; N] = *brow(c + d);
                let (u, v) = (*v2.get_unchecked(e + d - 1), *v1.get_unchecked(e + d));
                for j in 0..N {
                    acc2[j] = madd(store.fma, u, x[j], acc2[j]);
                }
                for j in 0..N {
                    acc1[j] = madd(store.fma, v, x[j], acc1[j]);
                }
            }
            let x = brow(c + l);
            let u = *v2.get_unchecked(e + l - 1);
            for j in 0..N {
                acc2[j] = madd(store.fma, u, x[j], acc2[j]);
            }
        }
    }
    store_tile(outs.0, k0, acc1, store);
    store_tile(outs.1, k0, acc2, store);
}

/// The entries of `cols` (at most 64) that start a run of consecutive columns, as bits: entry
/// 0 and every `e` whose column is not the one before plus one.
#[inline(always)]
fn run_starts<I: SpIndex>(cols: &[I]) -> u64 {
    debug_assert!(cols.len() <= 64);
    cols.windows(2)
        .enumerate()
        .take(63)
        .fold(1, |starts, (e, w)| {
            starts | (u64::from(w[1].idx() != w[0].idx().wrapping_add(1)) << (e + 1))
        })
}

/// `out[k0..k0 + N] = acc`, streamed or not as `store` says.
#[inline(always)]
fn store_tile<T: Scalar, const N: usize>(out: &mut [T], k0: usize, acc: [T; N], store: Store) {
    let o: &mut [T; N] = (&mut out[k0..k0 + N]).try_into().expect("tile in bounds");
    if store.stream {
        write(o, acc, true, store.vector_bytes);
    } else {
        *o = acc;
    }
}

/// `acc + v · x`, fused where the SIMD level has fused multiply-adds (as the tiles do).
#[inline(always)]
fn madd<T: Scalar>(fma: bool, v: T, x: T, acc: T) -> T {
    if fma {
        v.mul_add(x, acc)
    } else {
        acc + v * x
    }
}

/// The tile width of a pair for `T` ([`pair_tiles`]): half of the single-row tile, so that
/// both rows' accumulators fit the registers (8 AVX2 or AVX-512 registers for the two).
pub(super) fn pair_width<T: Scalar, const WIDE: bool>() -> usize {
    match (WIDE, T::TILE == 64) {
        (false, true) | (true, false) => 32,
        (false, false) => 16,
        (true, true) => 64,
    }
}

/// A shift pair over all of K in tiles of [`pair_width`] columns.
///
/// # Safety
/// As [`pair_tile`], with `out1.len()` a multiple of [`pair_width`]`::<T, WIDE>()`. Panics with
/// more than 64 entries in `cols`.
#[inline(always)]
pub(super) unsafe fn pair_tiles<T: Scalar, I: SpIndex, const WIDE: bool>(
    cols: &[I],
    v1: &[T],
    v2: &[T],
    b: Dense<'_, T>,
    out1: &mut [T],
    out2: &mut [T],
    store: Store,
) {
    let k = out1.len();
    let width = pair_width::<T, WIDE>();
    // The runs' bits hold 64 entries (the micro-kernel pairs rows of at most one group).
    assert!(cols.len() <= 64, "a shift pair of more than 64 entries");
    let starts = run_starts(cols);
    let mut k0 = 0;
    while k0 + width <= k {
        let outs = (&mut *out1, &mut *out2);
        // SAFETY: caller's contract, `k0 + width <= k`.
        unsafe {
            match width {
                16 => pair_tile::<T, I, 16>(cols, starts, v1, v2, b, k0, outs, store),
                32 => pair_tile::<T, I, 32>(cols, starts, v1, v2, b, k0, outs, store),
                _ => pair_tile::<T, I, 64>(cols, starts, v1, v2, b, k0, outs, store),
            }
        }
        k0 += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::micro::{assert_rows_agree, Options};
    use crate::{gen, CsrMatrix};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn pairs_are_rows_shifted_by_one_column() {
        assert!(is_shift::<u32>(&[3, 7, 8], &[4, 8, 9]));
        assert!(!is_shift::<u32>(&[3, 7, 8], &[4, 8, 10]));
        assert!(!is_shift::<u32>(&[3, 7], &[4, 8, 9]));
        assert!(!is_shift::<u32>(&[], &[]));
        // A banded matrix: rows 0, 1 (3 and 4 entries) and 98, 99 differ in length from their
        // neighbours; rows 2..97 are followed by their shift, one run of 5 each.
        let band = ShiftPairs::of(&gen::banded::<f64, u32>(100, 2, 1));
        assert_eq!(
            band,
            ShiftPairs {
                sampled: 99,
                shifted: 95,
                entries: 95 * 5,
                runs: 95
            }
        );
        assert!(!band.pay(), "rows of 5 entries");
        // A stencil's grid lines: x = 1..4 of 6 are followed by their shift (4 of 6 rows), not
        // the ends; an interior row has 27 entries in 9 runs.
        let grid = ShiftPairs::of(&gen::stencil_3d_27pt::<f64, u32>(6));
        assert_eq!((grid.sampled, grid.shifted), (215, 3 * 36));
        assert!(grid.pay());
        assert!(
            ShiftPairs::of(&gen::stencil_3d_27pt::<f64, u32>(40)).pay(),
            "sampled"
        );
        assert!(ShiftPairs::of(&gen::banded::<f64, u32>(1000, 13, 1)).pay());
        let graph = ShiftPairs::of(&gen::kronecker::<f64, u32>(8, 1));
        assert_eq!(graph.shifted, 0);
        assert!(!graph.pay());
        // A 5-point stencil: runs of 1, 3 and 1 (a fifth of the loads saved, short rows).
        assert!(!ShiftPairs::of(&gen::stencil_2d_5pt::<f64, u32>(30, 30)).pay());
    }

    #[test]
    fn runs_start_where_columns_jump() {
        assert_eq!(run_starts::<u32>(&[3, 4, 5, 9, 10, 20]), 0b101001);
        assert_eq!(run_starts::<u32>(&[7]), 1);
        // Descending or repeated columns start runs too.
        assert_eq!(run_starts::<u32>(&[5, 4, 4, 5]), 0b0111);
        // 64 entries, one run but for the last entry.
        let mut cols: Vec<u32> = (100..164).collect();
        cols[63] = 500;
        assert_eq!(run_starts(&cols), 1 | 1 << 63);
    }

    /// A matrix of `n` rows of which about `shifted` in 4 repeat the row before shifted by one
    /// column, the others random: 0 to 80 entries (beyond one group of sums at K = 64 `f64`),
    /// in runs of consecutive columns or scattered, sorted or not, an empty row now and then.
    pub(super) fn shift_rich<T: Scalar>(n: usize, cols: usize, seed: u64) -> CsrMatrix<T, u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut t: Vec<(usize, usize, T)> = Vec::new();
        let mut prev: Vec<usize> = Vec::new();
        for r in 0..n {
            let shift = !prev.is_empty()
                && prev.iter().all(|&c| c + 1 < cols)
                && rng.random_range(0..4) < 3;
            let row: Vec<usize> = if shift {
                prev.iter().map(|&c| c + 1).collect()
            } else {
                let len = [0, 1, 3, 9, 27, 40, 80][rng.random_range(0..7)];
                let mut row = Vec::new();
                while row.len() < len {
                    let start = rng.random_range(0..cols);
                    for c in start..(start + rng.random_range(1..5)).min(cols) {
                        if row.len() < len && !row.contains(&c) {
                            row.push(c);
                        }
                    }
                }
                if rng.random_range(0..2) == 0 {
                    row.sort_unstable();
                }
                row
            };
            t.extend(
                row.iter()
                    .map(|&c| (r, c, T::from_f64(rng.random_range(-2.0..2.0)))),
            );
            prev = row;
        }
        // `from_triplets` sorts the columns; keep each row's order instead.
        let mut offsets = vec![0u32];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for r in 0..n {
            for &(_, c, v) in t.iter().filter(|e| e.0 == r) {
                indices.push(c as u32);
                values.push(v);
            }
            offsets.push(indices.len() as u32);
        }
        CsrMatrix::try_new(n, cols, offsets, indices, values).unwrap()
    }

    fn pairs_give_the_bits_of_single_rows<T: Scalar>() {
        for seed in 0..4 {
            let a = shift_rich::<T>(300, 500, seed);
            let sample = ShiftPairs::of(&a);
            assert!(
                4 * sample.shifted >= sample.sampled,
                "seed {seed}: too few pairs"
            );
            for k in [1, 2, 7, 16, 17, 32, 48, 64, 96, 100, 128] {
                let mut b = gen::dense::<T>(a.ncols(), k, seed ^ 9);
                // Infinities and a NaN: the same operations give the same bits with them too.
                b[3] = T::from_f64(f64::INFINITY);
                b[k * 7] = T::from_f64(f64::NEG_INFINITY);
                b[k * 11 + k / 2] = T::from_f64(f64::NAN);
                for first in [0, 1, 5] {
                    for stream in [false, true] {
                        let with = Options {
                            stream,
                            shift_pairs: true,
                            ..Options::default()
                        };
                        let without = Options {
                            shift_pairs: false,
                            ..with
                        };
                        let what = format!(
                            "{} seed {seed} K = {k} from row {first}, stream {stream}",
                            T::NAME
                        );
                        assert_rows_agree(&a, &b, k, first, (with, without), &what);
                    }
                }
            }
        }
    }

    #[test]
    fn pairs_give_the_bits_of_single_rows_f64() {
        pairs_give_the_bits_of_single_rows::<f64>();
    }

    #[test]
    fn pairs_give_the_bits_of_single_rows_f32() {
        pairs_give_the_bits_of_single_rows::<f32>();
    }
}
