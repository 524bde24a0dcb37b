//! K-panelled LSSM plans (one pass over A per panel of columns of B and C): against the
//! reference, bit-identical to the unpanelled plan whatever the panel width and the alignment
//! of B, and the automatic choice of the panel width.

use crate::common::{reference, rel_err, tolerance};
use crate::kernels::{convert, random_csr};
use proptest::prelude::*;
use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, Scalar, SpmmPlan};

/// Runs `plan` on B stored from element `offset` of its buffer (moves its alignment) with
/// leading dimension `k + pad`, into a C with the same leading dimension; returns C's K columns.
fn run_plan<T: Scalar>(
    a: &CsrMatrix<T, u32>,
    plan: &SpmmPlan,
    b_all: &[T],
    offset: usize,
    pad: usize,
    par: Par,
) -> Vec<T> {
    let (m, n, k) = (a.nrows(), a.ncols(), plan.k());
    let ld = k + pad;
    let b = DenseRef::new(&b_all[offset..], n, k, ld);
    let mut c = vec![T::from_f64(3.0); m.max(1) * ld];
    plan.execute(a, b, DenseMut::new(&mut c, m, k, ld), par)
        .unwrap();
    (0..m)
        .flat_map(|i| c[i * ld..i * ld + k].to_vec())
        .collect()
}

/// Panelled and unpanelled plans (same block size and memory policies) on the same B.
fn check_panels<T: Scalar>(
    a: &CsrMatrix<T, u32>,
    k: usize,
    panel: usize,
    block: usize,
    offset: usize,
    pad: usize,
) {
    let config = LssmConfig {
        block_nnz: Some(block),
        serial_work: 0,
        prefetch: Some(block.is_multiple_of(2)),
        ..LssmConfig::default()
    };
    let whole = SpmmPlan::new(
        a,
        k,
        &LssmConfig {
            k_panel: Some(0),
            ..config.clone()
        },
    );
    let panelled = SpmmPlan::new(
        a,
        k,
        &LssmConfig {
            k_panel: Some(panel),
            ..config
        },
    );
    assert_eq!(whole.k_panel(), k);
    assert_eq!(panelled.k_panel(), if panel < k { panel } else { k });
    let n = a.ncols();
    let b_all = gen::dense::<T>(n.max(1) * (k + pad) + 8, 1, 5);
    let r = {
        let b = DenseRef::new(&b_all[offset..], n, k, k + pad);
        reference(a, b)
    };
    let base = run_plan(a, &whole, &b_all, offset, pad, Par::Seq);
    for par in [Par::Seq, Par::Threads(2), Par::Threads(3)] {
        let c = run_plan(a, &panelled, &b_all, offset, pad, par);
        let err = rel_err(&c, &r, a.nrows(), k);
        assert!(
            err <= tolerance::<T>(),
            "panel {panel} {par:?}: error {err}"
        );
        assert!(
            c == base,
            "panel {panel} {par:?} (B offset {offset}) differs from unpanelled"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn k_panels_match_reference_and_unpanelled_bits(
        rows in 0usize..40, cols in 0usize..40, kind in 0u8..4, seed in any::<u64>(),
        k in prop_oneof![Just(1usize), 2usize..20, Just(32usize), Just(64usize), 60usize..70,
            Just(128usize)], panel in 1usize..40,
        block in 1usize..9, offset in 0usize..8, pad in 0usize..9,
    ) {
        let a = random_csr(rows, cols, kind, seed);
        check_panels(&a, k, panel, block, offset, pad);
        check_panels(&convert::<f32, u32>(&a), k, panel, block, offset, pad);
    }
}

#[test]
fn panels_of_whole_lines_on_larger_matrices() {
    // Line-sized panels (8 f64 / 16 f32) with every alignment of B: first and last panels
    // absorb the partial lines.
    let a = gen::kronecker::<f64, u32>(10, 3);
    for offset in 0..8 {
        check_panels(&a, 64, 8, 64, offset, 0);
        check_panels(&a, 37, 16, 64, offset, 3);
    }
    check_panels(&convert::<f32, u32>(&a), 64, 16, 64, 5, 0);
}

#[test]
fn panel_sizing_only_for_random_gathers_beyond_the_cache() {
    let kron = gen::kronecker::<f64, u32>(12, 1); // 4096 columns, B = 2 MiB at K = 64
    let stencil = gen::stencil_3d_27pt::<f64, u32>(16); // 4096 columns, local gathers
    let (lk, ls) = (
        SpmmPlan::column_locality(&kron),
        SpmmPlan::column_locality(&stencil),
    );
    assert!(lk < 0.5 && ls >= 0.5, "locality kron {lk}, stencil {ls}");
    let width =
        |locality: f64, cache: usize| SpmmPlan::auto_k_panel::<f64>(4096, 64, locality, cache);
    // B fits in half the cache: no panels.
    assert_eq!(width(lk, 8 << 20), 64);
    // 1 MiB of cache: half of it holds 16 columns of B (4096 rows × 16 × 8 bytes).
    assert_eq!(width(lk, 1 << 20), 16);
    // Not even one 64-byte line per row of B fits: no panels.
    assert_eq!(width(lk, 256 << 10), 64);
    // Stencil: B is gathered in order, the caches serve it; no panels.
    assert_eq!(width(ls, 1 << 20), 64);
    assert_eq!(SpmmPlan::auto_k_panel::<f32>(4096, 64, lk, 1 << 20), 32);
    assert!(sparse_kernels::last_level_cache_bytes() >= 1 << 16);
    // Off by default; on when asked for, and only below K.
    assert_eq!(
        SpmmPlan::new(&kron, 64, &LssmConfig::default()).k_panel(),
        64
    );
    let with = |p| LssmConfig {
        k_panel: Some(p),
        ..LssmConfig::default()
    };
    assert_eq!(SpmmPlan::new(&kron, 64, &with(16)).k_panel(), 16);
    assert_eq!(SpmmPlan::new(&kron, 64, &with(64)).k_panel(), 64);
    assert_eq!(SpmmPlan::new(&kron, 64, &with(0)).k_panel(), 64);
}
