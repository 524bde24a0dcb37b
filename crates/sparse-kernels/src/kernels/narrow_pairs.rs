//! Narrow pairs: where K is one short tile (64 or 128 bytes of a row of C: 2 or 4 AVX2
//! registers), two consecutive short rows computed in one interleaved loop.
//!
//! With a tile that narrow, each nonzero is a handful of multiply-adds into 2–4 accumulators,
//! each waiting for the one before it and for its row of B; when a row of B comes from L2 or
//! further, the chains stall and the loop runs far below the FMA peak (`Franz6` at K = 16:
//! 6 GFLOP/s on one core). Two rows in one loop give the core twice the independent chains and
//! twice the loads of B in flight. Each row still sums its own entries in its own order from
//! zero, so the bits are those of one row at a time.

use super::micro::{Dense, Store};
use super::prefetch_and_stream::write;
use crate::{Scalar, SpIndex};

/// Whether K (`k` elements of `T`) is a narrow tile: 64 or 128 bytes.
#[inline(always)]
pub(crate) fn is_narrow<T>(k: usize) -> bool {
    matches!(k * std::mem::size_of::<T>(), 64 | 128)
}

/// `out1 = Σ v1 · B[c1]`, `out2 = Σ v2 · B[c2]` over all of K (`N` columns), each sum from zero
/// in entry order, the two rows' first `min(n1, n2)` entries interleaved.
///
/// # Safety
/// Every column in `c1`, `c2` is a row of `b` (see [`Dense`]); `out1.len() == out2.len() == N
/// <= b.ld`; `v1`, `v2` as long as `c1`, `c2`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pair<T: Scalar, I: SpIndex, const N: usize>(
    c1: &[I],
    v1: &[T],
    c2: &[I],
    v2: &[T],
    b: Dense<'_, T>,
    out1: &mut [T],
    out2: &mut [T],
    store: Store,
) {
    let mut a1 = [T::ZERO; N];
    let mut a2 = [T::ZERO; N];
    // SAFETY: every column is `< rows` of B and `N <= ld` (caller), so each row read ends
    // within `data` as in `micro::tile`; `[T; N]` has the alignment of `T`.
    let brow = |c: usize| unsafe { &*b.data.as_ptr().add(c * b.ld).cast::<[T; N]>() };
    let madd = |v: T, x: T, acc: T| {
        if store.fma {
            v.mul_add(x, acc)
        } else {
            acc + v * x
        }
    };
    let both = c1.len().min(c2.len());
    // Zipped, so that the loop has no bounds checks (`both` is the shorter row's length).
    let firsts = c1.iter().zip(v1).zip(c2.iter().zip(v2));
    for ((c1e, &u1), (c2e, &u2)) in firsts {
        let (x1, x2) = (brow(c1e.idx()), brow(c2e.idx()));
        for j in 0..N {
            a1[j] = madd(u1, x1[j], a1[j]);
        }
        for j in 0..N {
            a2[j] = madd(u2, x2[j], a2[j]);
        }
    }
    for (&c, &v) in c1[both..].iter().zip(&v1[both..]) {
        let x = brow(c.idx());
        for j in 0..N {
            a1[j] = madd(v, x[j], a1[j]);
        }
    }
    for (&c, &v) in c2[both..].iter().zip(&v2[both..]) {
        let x = brow(c.idx());
        for j in 0..N {
            a2[j] = madd(v, x[j], a2[j]);
        }
    }
    for (out, acc) in [(out1, a1), (out2, a2)] {
        let o: &mut [T; N] = out.try_into().expect("a narrow tile");
        if store.stream {
            write(o, acc, true, store.vector_bytes);
        } else {
            *o = acc;
        }
    }
}

/// Two rows over a narrow K ([`is_narrow`]).
///
/// # Safety
/// As [`pair`], with `out1.len() == out2.len()` a narrow K (else it reads and writes nothing).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn narrow_pair<T: Scalar, I: SpIndex>(
    c1: &[I],
    v1: &[T],
    c2: &[I],
    v2: &[T],
    b: Dense<'_, T>,
    out1: &mut [T],
    out2: &mut [T],
    store: Store,
) {
    // SAFETY: caller's contract; N is K.
    unsafe {
        match (std::mem::size_of_val(out1), std::mem::size_of::<T>()) {
            (64, 8) => pair::<T, I, 8>(c1, v1, c2, v2, b, out1, out2, store),
            (128, 8) => pair::<T, I, 16>(c1, v1, c2, v2, b, out1, out2, store),
            (64, 4) => pair::<T, I, 16>(c1, v1, c2, v2, b, out1, out2, store),
            (128, 4) => pair::<T, I, 32>(c1, v1, c2, v2, b, out1, out2, store),
            // Not a narrow K: the caller broke the contract; nothing is read or written.
            _ => debug_assert!(false, "narrow pairs need a narrow K (`is_narrow`)"),
        }
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
    fn narrow_means_one_tile_of_64_or_128_bytes() {
        assert!(is_narrow::<f64>(8) && is_narrow::<f64>(16));
        assert!(is_narrow::<f32>(16) && is_narrow::<f32>(32));
        assert!(!is_narrow::<f64>(4) && !is_narrow::<f64>(32) && !is_narrow::<f64>(12));
        assert!(!is_narrow::<f32>(8) && !is_narrow::<f32>(64));
    }

    /// `n` rows of random length (empty, short, one group of 64 and beyond it), random columns
    /// in random order.
    fn ragged<T: Scalar>(n: usize, cols: usize, seed: u64) -> CsrMatrix<T, u32> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut offsets = vec![0u32];
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for _ in 0..n {
            let len = [0, 1, 2, 5, 9, 27, 63, 64, 65, 90][rng.random_range(0..10)];
            let mut row: Vec<u32> = Vec::new();
            while row.len() < len {
                let c = rng.random_range(0..cols as u32);
                if !row.contains(&c) {
                    row.push(c);
                }
            }
            values.extend((0..len).map(|_| T::from_f64(rng.random_range(-2.0..2.0))));
            indices.extend(row);
            offsets.push(indices.len() as u32);
        }
        CsrMatrix::try_new(n, cols, offsets, indices, values).unwrap()
    }

    fn pairs_give_the_bits_of_single_rows<T: Scalar>() {
        let size = std::mem::size_of::<T>();
        for seed in 0..3 {
            let a = ragged::<T>(301, 400, seed);
            let grid = gen::stencil_3d_27pt::<T, u32>(6);
            for a in [&a, &grid] {
                for k in [64 / size, 128 / size] {
                    let mut b = gen::dense::<T>(a.ncols(), k, seed ^ 5);
                    // Infinities and a NaN: the same operations give the same bits with them.
                    b[2] = T::from_f64(f64::INFINITY);
                    b[k * 5 + 1] = T::from_f64(f64::NEG_INFINITY);
                    b[k * 9] = T::from_f64(f64::NAN);
                    for first in [0, 1, 4] {
                        for (stream, shift_pairs) in [(false, false), (true, false), (true, true)] {
                            let with = Options {
                                stream,
                                shift_pairs,
                                narrow_pairs: true,
                                ..Options::default()
                            };
                            let without = Options {
                                narrow_pairs: false,
                                ..with
                            };
                            let what = format!(
                                "{} seed {seed} K = {k} from row {first}, stream {stream}",
                                T::NAME
                            );
                            assert_rows_agree(a, &b, k, first, (with, without), &what);
                        }
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
