//! Shift pairs (`LssmConfig::shift_pairs`): chosen where rows pair up, and the bits of one row
//! at a time.

use crate::common::{random_grid, reference, rel_err, sum_err, tolerance};
use proptest::prelude::*;
use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan};

/// `A · B` with a plan of `shift_pairs` and `lead_prefetch` on 2 threads (and the default
/// sweep).
fn product(
    a: &CsrMatrix<f64, u32>,
    b: &[f64],
    k: usize,
    shift_pairs: bool,
    lead_prefetch: bool,
) -> Vec<f64> {
    let config = LssmConfig {
        shift_pairs: Some(shift_pairs),
        lead_prefetch: Some(lead_prefetch),
        serial_work: 0,
        ..LssmConfig::default()
    };
    let plan = SpmmPlan::new(a, k, &config);
    assert_eq!(plan.shift_pairs(), shift_pairs);
    assert_eq!(plan.lead_prefetch(), lead_prefetch);
    let mut c = vec![f64::NAN; a.nrows() * k];
    let b = DenseRef::contiguous(b, a.ncols(), k);
    plan.execute(
        a,
        b,
        DenseMut::contiguous(&mut c, a.nrows(), k),
        Par::Threads(2),
    )
    .unwrap();
    c
}

#[test]
fn the_default_plan_pairs_grids_and_bands_not_graphs_or_short_rows() {
    let pairs =
        |a: &CsrMatrix<f64, u32>| SpmmPlan::new(a, 64, &LssmConfig::default()).shift_pairs();
    assert!(pairs(&gen::stencil_3d_27pt(16)));
    assert!(pairs(&gen::banded(5000, 13, 1)));
    assert!(!pairs(&gen::kronecker(12, 1)));
    assert!(
        !pairs(&gen::stencil_2d_5pt(100, 100)),
        "rows of five entries"
    );
    assert!(!pairs(&gen::uniform(5000, 5000, 16, 1)));
}

/// Lead rows (`LssmConfig::lead_prefetch`): prefetched by default only where B is larger than
/// the last-level cache and read in order.
#[test]
fn the_default_plan_prefetches_lead_rows_of_a_large_b_read_in_order() {
    let lead =
        |a: &CsrMatrix<f64, u32>, k| SpmmPlan::new(a, k, &LssmConfig::default()).lead_prefetch();
    // K large enough for B (5000 rows) to exceed the cache: the plan is symbolic, no B is made.
    let k_large = sparse_kernels::last_level_cache_bytes() / (5000 * 8) + 1;
    let band = gen::banded(5000, 13, 1);
    assert!(lead(&band, k_large));
    assert!(!lead(&band, 64), "B of 2.5 MB fits the cache");
    let graph = gen::kronecker(12, 1);
    let k_graph = sparse_kernels::last_level_cache_bytes() / (graph.ncols() * 8) + 1;
    assert!(!lead(&graph, k_graph), "rows of B at random");
    let prefetching = LssmConfig {
        prefetch: Some(true),
        lead_prefetch: Some(true),
        ..LssmConfig::default()
    };
    assert!(
        !SpmmPlan::new(&band, 64, &prefetching).lead_prefetch(),
        "every row of B is prefetched already"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random grids (random subsets of the 27-point neighbours, random sizes and values): with
    /// shift pairs, against the reference and with the bits of the plan without them (one of
    /// the two prefetching each row's lead row of B, which must not change anything).
    #[test]
    fn random_grids_in_pairs_match_single_rows(
        nx in 2usize..20, ny in 1usize..12, nz in 1usize..8, mask in any::<u32>(),
        seed in any::<u64>(),
        k in prop_oneof![Just(1usize), Just(5usize), Just(16usize), Just(32usize), Just(64usize), Just(96usize)],
    ) {
        let a = random_grid(nx, ny, nz, mask, seed);
        let b = gen::dense::<f64>(a.ncols(), k, seed ^ 3);
        let expected = reference(&a, DenseRef::contiguous(&b, a.ncols(), k));
        let (paired, single) = (product(&a, &b, k, true, false), product(&a, &b, k, false, true));
        let bref = DenseRef::contiguous(&b, a.ncols(), k);
        prop_assert!(sum_err(&a, bref, &paired, &expected) <= tolerance::<f64>());
        prop_assert!(paired.iter().zip(&single).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

/// Narrow pairs (`LssmConfig::narrow_pairs`): taken where K is one narrow tile, the bits of one
/// row at a time on 2 threads, with long rows (segments) and a sweep beside them.
#[test]
fn narrow_pairs_are_taken_at_a_narrow_k_and_keep_the_bits() {
    let narrow =
        |a: &CsrMatrix<f64, u32>, k| SpmmPlan::new(a, k, &LssmConfig::default()).narrow_pairs();
    let g = gen::kronecker::<f64, u32>(10, 1);
    assert!(narrow(&g, 8) && narrow(&g, 16));
    assert!(!narrow(&g, 4) && !narrow(&g, 32) && !narrow(&g, 64));
    let panelled = LssmConfig {
        k_panel: Some(16),
        ..LssmConfig::default()
    };
    assert!(
        SpmmPlan::new(&g, 64, &panelled).narrow_pairs(),
        "16-column panels"
    );
    for a in [
        g,
        gen::arrow::<f64, u32>(3000, 2, 1),
        gen::stencil_3d_27pt::<f64, u32>(20),
        gen::uniform::<f64, u32>(999, 700, 7, 3),
    ] {
        for k in [8, 16] {
            let b = gen::dense::<f64>(a.ncols(), k, 9);
            let run = |narrow_pairs| {
                let config = LssmConfig {
                    narrow_pairs: Some(narrow_pairs),
                    serial_work: 0,
                    ..LssmConfig::default()
                };
                let plan = SpmmPlan::new(&a, k, &config);
                assert_eq!(plan.narrow_pairs(), narrow_pairs);
                let mut c = vec![f64::NAN; a.nrows() * k];
                let bref = DenseRef::contiguous(&b, a.ncols(), k);
                let cm = DenseMut::contiguous(&mut c, a.nrows(), k);
                plan.execute(&a, bref, cm, Par::Threads(2)).unwrap();
                c
            };
            let (with, without) = (run(true), run(false));
            let expected = reference(&a, DenseRef::contiguous(&b, a.ncols(), k));
            assert!(rel_err(&with, &expected, a.nrows(), k) <= tolerance::<f64>());
            assert!(
                with.iter()
                    .zip(&without)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "K = {k}"
            );
        }
    }
}
