//! `RowPairs` against the reference on matrices whose neighbouring rows share columns (the
//! case it pairs), with rows it must leave single (unsorted, duplicates, little sharing, an
//! odd last row), every tile width and tail of K, and bitwise determinism across thread counts.

use crate::common::{reference, sum_err, tolerance};
use crate::kernels::convert;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, Par, RowPairs, Scalar, SpIndex};

/// Rows in pairs: the second row of a pair is the first with some columns dropped and some
/// added (sorted, distinct), so most pairs share more than half of their nonzeros; `noise` in
/// 0..4 also makes some rows unsorted (with duplicates) or unrelated to their neighbour.
fn paired_csr(rows: usize, cols: usize, noise: u8, seed: u64) -> CsrMatrix<f64, u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut offsets = vec![0u32];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    let mut base: Vec<u32> = Vec::new();
    for r in 0..rows {
        let fresh = r % 2 == 0 || rng.random_range(0..8) < noise;
        let mut row: Vec<u32> = if fresh || cols == 0 {
            let len = rng.random_range(0..=cols.min(40));
            (0..len).map(|_| rng.random_range(0..cols as u32)).collect()
        } else {
            let mut row: Vec<u32> = base
                .iter()
                .copied()
                .filter(|_| rng.random_range(0..5) > 0)
                .collect();
            row.extend((0..rng.random_range(0..4)).map(|_| rng.random_range(0..cols as u32)));
            row
        };
        let unsorted = rng.random_range(0..8) < noise;
        if !unsorted {
            row.sort_unstable();
            row.dedup();
        }
        if r % 2 == 0 {
            base.clone_from(&row);
            base.sort_unstable();
            base.dedup();
        }
        for c in row {
            indices.push(c);
            values.push(rng.random_range(-1.0..1.0));
        }
        offsets.push(indices.len() as u32);
    }
    CsrMatrix::try_new(rows, cols, offsets, indices, values).expect("valid by construction")
}

/// `RowPairs` against the reference, at every `Par`, bit-identical across thread counts.
fn check<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>, k: usize, pad: usize) -> RowPairs<T, I> {
    let (m, n) = (a.nrows(), a.ncols());
    let ldb = k + pad;
    let b_data = gen::dense::<T>(n.max(1), ldb, 5);
    let b = DenseRef::new(&b_data, n, k, ldb);
    let r = reference(a, b);
    let pairs = RowPairs::new(a, k);
    let ldc = k + pad;
    let mut first: Option<Vec<T>> = None;
    for par in [Par::Seq, Par::Threads(2), Par::Threads(3), Par::Current] {
        let mut c = vec![T::from_f64(7.0); m.max(1) * ldc];
        pairs
            .execute(b, DenseMut::new(&mut c, m, k, ldc), par)
            .unwrap();
        let got: Vec<T> = (0..m)
            .flat_map(|i| c[i * ldc..i * ldc + k].to_vec())
            .collect();
        let err = sum_err(a, b, &got, &r);
        assert!(
            err <= tolerance::<T>(),
            "pairs {par:?} {}: error {err} (m={m} n={n} k={k})",
            T::NAME
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert!(*f == got, "pairs differ between Seq and {par:?}"),
        }
    }
    pairs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn row_pairs_match_reference(
        rows in 0usize..60, cols in 1usize..60, noise in 0u8..4, seed in any::<u64>(),
        k in prop_oneof![1usize..20, 31usize..=33, Just(64usize), 60usize..70, 127usize..=129],
        pad in 0usize..3,
    ) {
        let a = paired_csr(rows, cols, noise, seed);
        let pairs = check(&a, k, pad);
        prop_assert!(pairs.paired_rows() <= rows);
        check(&convert::<f32, usize>(&a), k, pad);
    }
}

#[test]
fn stencil_rows_are_paired_and_unrelated_rows_are_not() {
    // Interior neighbours of a 27-point stencil share 18 of 27 columns.
    let stencil = gen::stencil_3d_27pt::<f64, u32>(6);
    let pairs = check(&stencil, 64, 0);
    assert_eq!(pairs.paired_rows(), stencil.nrows());
    let f = pairs.shared_fraction();
    assert!((0.6..=0.8).contains(&f), "stencil shared fraction {f}");
    // Random rows (uniform, few shared columns) stay single: LSSM's path, any K.
    let uniform = gen::uniform::<f64, u32>(300, 5000, 8, 3);
    let pairs = check(&uniform, 37, 1);
    assert_eq!(pairs.paired_rows(), 0);
    assert_eq!(pairs.shared_fraction(), 0.0);
    // Pairs whose rows of B exceed 32 KiB stay single (27-point rows, K = 512 f64: 4 KiB per
    // row of B), and rows longer than a chunk take the chunked path.
    let pairs = check(&gen::stencil_3d_27pt::<f64, u32>(4), 512, 0);
    assert_eq!(pairs.paired_rows(), 0);
    // An odd number of rows: the last row has no partner (and on a grid of odd side, pairs
    // that straddle two grid lines share too little to be paired).
    let odd = gen::stencil_3d_27pt::<f32, u32>(3);
    let pairs = check(&odd, 16, 2);
    assert!(pairs.paired_rows() > 0 && pairs.paired_rows() < odd.nrows() - 1);
}

#[test]
fn empty_and_degenerate_shapes() {
    let empty = CsrMatrix::<f64, u32>::try_new(0, 0, vec![0], vec![], vec![]).unwrap();
    check(&empty, 4, 0);
    let no_entries = CsrMatrix::<f32, u32>::try_new(5, 3, vec![0; 6], vec![], vec![]).unwrap();
    check(&no_entries, 9, 1);
    check(&gen::stencil_3d_27pt::<f64, u32>(3), 0, 0);
    check(&gen::arrow::<f64, u32>(50, 1, 3), 33, 0); // one dense row
}

#[test]
#[should_panic(expected = "B must be")]
fn a_b_of_another_k_than_the_pairs_panics() {
    let a = gen::stencil_3d_27pt::<f64, u32>(3);
    let pairs = RowPairs::new(&a, 8);
    let b = vec![0.0; a.ncols() * 16];
    let mut c = vec![0.0; a.nrows() * 16];
    let _ = pairs.execute(
        DenseRef::contiguous(&b, a.ncols(), 16),
        DenseMut::contiguous(&mut c, a.nrows(), 16),
        Par::Seq,
    );
}

#[test]
fn the_random_pair_matrices_exercise_both_paths() {
    // So that the proptest above runs paired and single rows, tails of K included.
    for seed in 0..8 {
        let a = paired_csr(60, 50, 1, seed);
        let pairs = RowPairs::new(&a, 64);
        assert!(
            pairs.paired_rows() >= 20 && pairs.paired_rows() < 60,
            "seed {seed}: {} of 60 rows paired",
            pairs.paired_rows()
        );
    }
}
