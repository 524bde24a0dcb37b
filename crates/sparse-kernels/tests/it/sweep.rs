//! Sweeps of grid-like matrices (`LssmConfig::sweep_rows`): found where the matrix has a
//! period, sized from the cache, and the same bits as the row order.

use crate::common::{random_grid, reference, rel_err, sum_err, tolerance};
use proptest::prelude::*;
use sparse_kernels::{
    gen, per_core_cache_bytes, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan,
};

/// `A · B` with a plan of `sweep_rows`, on `par`; and the plan's sweep.
fn product(
    a: &CsrMatrix<f64, u32>,
    b: &[f64],
    k: usize,
    sweep_rows: Option<usize>,
    par: Par,
) -> (Vec<f64>, Option<(usize, usize)>) {
    let config = LssmConfig {
        sweep_rows,
        serial_work: 0,
        ..LssmConfig::default()
    };
    let plan = SpmmPlan::new(a, k, &config);
    let mut c = vec![f64::NAN; a.nrows() * k];
    let b = DenseRef::contiguous(b, a.ncols(), k);
    plan.execute(a, b, DenseMut::contiguous(&mut c, a.nrows(), k), par)
        .unwrap();
    (c, plan.sweep())
}

#[test]
fn sweeps_give_the_bits_of_the_row_order() {
    let cube = gen::stencil_3d_27pt::<f64, u32>(12);
    let plane = gen::stencil_2d_5pt::<f64, u32>(50, 40);
    for (a, period) in [(&cube, 144), (&plane, 50)] {
        for k in [1, 7, 64] {
            let b = gen::dense::<f64>(a.ncols(), k, 11);
            let (rows, none) = product(a, &b, k, Some(0), Par::Threads(2));
            assert_eq!(none, None, "sweep_rows 0 turns the sweep off");
            let expected = reference(a, DenseRef::contiguous(&b, a.ncols(), k));
            assert!(rel_err(&rows, &expected, a.nrows(), k) <= tolerance::<f64>());
            for width in [1, 7, 30, period, 1000] {
                for par in [Par::Seq, Par::Threads(2), Par::Threads(3)] {
                    let (swept, sweep) = product(a, &b, k, Some(width), par);
                    assert_eq!(sweep, Some((period, width.min(period))));
                    let same = swept
                        .iter()
                        .zip(&rows)
                        .all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "K = {k}, bands of {width} on {par:?}");
                }
            }
        }
    }
}

#[test]
fn the_default_band_fits_two_per_core_caches_in_whole_lines() {
    // `stencil27:32`: period 1024 rows, reach 33, lines of 32. A row of B of 8K bytes such
    // that two per-core caches hold 3 · (4 lines + the halo) rows: bands of at least 4 lines.
    let a = gen::stencil_3d_27pt::<f64, u32>(32);
    let cache = 2 * per_core_cache_bytes();
    let k = (cache / (3 * (4 * 32 + 2 * 33)) / 8).max(1);
    let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
    let (period, width) = plan.sweep().expect("three planes of B do not fit");
    assert_eq!(period, 1024);
    assert!(width >= 4 * 32 && width % 32 == 0, "{width}");
    assert!(
        3 * (width + 2 * 33) * 8 * k <= cache,
        "{width} rows at K = {k}"
    );
    // At K = 1 three planes fit: the row order keeps them.
    assert_eq!(SpmmPlan::new(&a, 1, &LssmConfig::default()).sweep(), None);
    // Matrices without a period are not swept.
    for other in [
        gen::banded::<f64, u32>(40_000, 13, 1),
        gen::kronecker::<f64, u32>(14, 1),
    ] {
        let plan = SpmmPlan::new(&other, k, &LssmConfig::default());
        assert_eq!(plan.sweep(), None);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random grids (random subsets of the 27-point neighbours, random sizes and values) in
    /// random bands: against the reference, and the bits of the row order.
    #[test]
    fn random_grids_in_random_bands_match_the_row_order(
        nx in 2usize..20, ny in 2usize..12, nz in 1usize..10, mask in any::<u32>(),
        seed in any::<u64>(), width in 1usize..300,
        k in prop_oneof![Just(1usize), Just(5usize), Just(64usize)],
    ) {
        let a = random_grid(nx, ny, nz, mask, seed);
        let b = gen::dense::<f64>(a.ncols(), k, seed ^ 3);
        let expected = reference(&a, DenseRef::contiguous(&b, a.ncols(), k));
        let (rows, _) = product(&a, &b, k, Some(0), Par::Threads(2));
        let (swept, _) = product(&a, &b, k, Some(width), Par::Threads(2));
        let bref = DenseRef::contiguous(&b, a.ncols(), k);
        prop_assert!(sum_err(&a, bref, &swept, &expected) <= tolerance::<f64>());
        prop_assert!(swept.iter().zip(&rows).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

#[test]
fn plan_steps_take_every_nonzero_once() {
    use sparse_kernels::PlanStep;
    let swept = LssmConfig {
        sweep_rows: Some(30),
        ..LssmConfig::default()
    };
    let cases = [
        (gen::stencil_3d_27pt::<f64, u32>(12), swept),
        (gen::arrow::<f64, u32>(30_000, 3, 1), LssmConfig::default()),
        (gen::kronecker::<f64, u32>(10, 1), LssmConfig::default()),
        (gen::banded::<f64, u32>(500, 4, 1), LssmConfig::default()),
    ];
    for (i, (a, config)) in cases.iter().enumerate() {
        let plan = SpmmPlan::new(a, 64, config);
        let mut taken = vec![0u8; a.nnz()];
        let mut segments = 0;
        for step in plan.steps() {
            let nz = match step {
                PlanStep::Rows(rows) => {
                    a.row_range(rows.start).start..a.row_range(rows.end - 1).end
                }
                PlanStep::Segment { row, nz } => {
                    segments += 1;
                    assert!(a.row_range(row).contains(&nz.start) && nz.end <= a.row_range(row).end);
                    nz
                }
            };
            for t in &mut taken[nz] {
                *t += 1;
            }
        }
        assert!(taken.iter().all(|&t| t == 1), "{:?}", plan.sweep());
        assert_eq!(segments, plan.num_segments());
        assert!(i != 1 || segments > 3, "the arrow's dense rows are split");
        if plan.sweep().is_some() {
            // A sweep runs band 0 of every plane first: the second step is plane 1's band.
            let second = plan.steps().nth(1);
            assert_eq!(second, Some(PlanStep::Rows(144..174)));
        }
    }
}
