//! Every kernel against `spmm_reference` on random matrices (proptest), with the edge cases of
//! the issue: empty matrix, empty rows, one dense row, K = 1, K not a multiple of the vector
//! width, non-square A, u32 and usize indices, f32 and f64; and determinism across runs and
//! thread counts.

use crate::common::{reference, sum_err, tolerance};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sparse_kernels::{
    gen, spmm_merge_path_with, spmm_rode_like_with, spmm_row_parallel_with, BaselineConfig,
    CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par, RowPairs, Scalar, SpIndex, SpmmPlan,
};

/// A random CSR matrix. `kind` 0: short rows with many empty ones; 1: one dense row among short
/// ones; 2: heavy-tailed row lengths; 3: up to four dense rows. Columns are unsorted with
/// possible duplicates for odd seeds, sorted and distinct for even ones (which takes LSSM's
/// column-aligned splitting of long-row groups).
pub(crate) fn random_csr(rows: usize, cols: usize, kind: u8, seed: u64) -> CsrMatrix<f64, u32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let dense_rows: Vec<usize> = match (rows, kind) {
        (0, _) => vec![],
        (_, 3) => (0..4).map(|_| rng.random_range(0..rows)).collect(),
        _ => vec![rng.random_range(0..rows)],
    };
    let sorted = seed.is_multiple_of(2);
    let mut offsets = vec![0u32];
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for r in 0..rows {
        let len = match (cols, kind) {
            (0, _) => 0,
            (_, 1 | 3) if dense_rows.contains(&r) => rng.random_range(cols..=3 * cols + 20),
            (_, 2) => (rng.random_range(0.0f64..1.0).powi(4) * 60.0) as usize,
            _ => rng.random_range(0..=cols.min(6)),
        };
        let mut row: Vec<u32> = (0..len).map(|_| rng.random_range(0..cols) as u32).collect();
        if sorted {
            row.sort_unstable();
            row.dedup();
        }
        for c in row {
            indices.push(c);
            values.push(rng.random_range(-1.0..1.0));
        }
        offsets.push(indices.len() as u32);
    }
    CsrMatrix::try_new(rows, cols, offsets, indices, values).expect("valid by construction")
}

pub(crate) fn convert<T: Scalar, I: SpIndex>(a: &CsrMatrix<f64, u32>) -> CsrMatrix<T, I> {
    let ix = |v: &[u32]| {
        v.iter()
            .map(|&x| I::checked_from(x as usize).unwrap())
            .collect::<Vec<I>>()
    };
    let values = a.values().iter().map(|&v| T::from_f64(v)).collect();
    CsrMatrix::try_new(
        a.nrows(),
        a.ncols(),
        ix(a.offsets()),
        ix(a.indices()),
        values,
    )
    .unwrap()
}

/// Runs `kernel` into a fresh buffer with leading dimension `ldc` and returns the K columns.
fn run<T: Scalar>(
    rows: usize,
    k: usize,
    ldc: usize,
    kernel: impl FnOnce(DenseMut<'_, T>),
) -> Vec<T> {
    let mut c = vec![T::from_f64(7.0); rows.max(1) * ldc];
    kernel(DenseMut::new(&mut c, rows, k, ldc));
    (0..rows)
        .flat_map(|i| c[i * ldc..i * ldc + k].to_vec())
        .collect()
}

/// Checks every kernel against the reference, and bitwise determinism across thread counts.
fn check_all<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    k: usize,
    pad: usize,
    block: usize,
    parts: usize,
) {
    let (m, n) = (a.nrows(), a.ncols());
    let ldb = k + pad;
    let b_data = gen::dense::<T>(n.max(1), ldb, 11);
    let b = DenseRef::new(&b_data, n, k, ldb);
    let r = reference(a, b);
    let base = BaselineConfig {
        serial_work: 0,
        merge_items_per_part: parts,
        merge_max_parts: 1 << 20,
        rode_block: block,
        rode_long_row: 3 * block,
    };
    let lssm = LssmConfig {
        block_nnz: Some(block),
        serial_work: 0,
        prefetch: Some(block.is_multiple_of(2)), // both paths of the micro-kernel
        // Streamed, not, or by the plan's rule (C of these matrices fits any cache: not).
        streaming_stores: [Some(true), Some(false), None][(block / 2) % 3],
        // Prefetch distances of 1 to 4 nonzeros, or the default (one chunk).
        prefetch_distance: block % 5,
        // Chunks of 1 to 4 rows (without long rows): several chunks even on tiny matrices.
        row_chunk_work: (block % 4 + 1) * k.max(1) * (a.nnz() / a.nrows().max(1) + 1),
        // K-panels of 1 to 8 columns for odd blocks (several passes over A).
        k_panel: (block % 2 == 1).then_some(block),
        // Long rows split alone, in pairs, or in the default groups of 8 (0 counts as 1).
        long_row_group: [0, 2, 8][block % 3],
        // Chunks of a long row from 4 nonzeros up, or by the plan's rule.
        chunk_bytes: [None, Some(1), Some(32 << 10), Some(4096)][(block / 3) % 4],
        ..LssmConfig::default()
    };
    let plan = SpmmPlan::new(a, k, &lssm);
    let pairs = RowPairs::new(a, k);
    let ldc = k + pad;
    for par in [Par::Threads(2), Par::Threads(3), Par::Seq, Par::Current] {
        let outs: [(&str, Vec<T>); 7] = [
            (
                "row",
                run(m, k, ldc, |c| {
                    spmm_row_parallel_with(a, b, c, par, &base).unwrap()
                }),
            ),
            (
                "merge",
                run(m, k, ldc, |c| {
                    spmm_merge_path_with(a, b, c, par, &base).unwrap()
                }),
            ),
            (
                "rode",
                run(m, k, ldc, |c| {
                    spmm_rode_like_with(a, b, c, par, &base).unwrap()
                }),
            ),
            (
                "lssm",
                run(m, k, ldc, |c| plan.execute(a, b, c, par).unwrap()),
            ),
            (
                "lssm-auto",
                run(m, k, ldc, |c| Kernel::Lssm.run(a, b, c, par).unwrap()),
            ),
            (
                "pairs",
                run(m, k, ldc, |c| pairs.execute(b, c, par).unwrap()),
            ),
            (
                "pairs-auto",
                run(m, k, ldc, |c| Kernel::RowPairs.run(a, b, c, par).unwrap()),
            ),
        ];
        for (name, c) in &outs {
            let err = sum_err(a, b, c, &r);
            assert!(
                err <= tolerance::<T>(),
                "{name} {par:?} {}: error {err} (m={m} n={n} k={k})",
                T::NAME
            );
        }
        // Determinism: the same plan gives bit-identical results for every thread count.
        let again = run(m, k, ldc, |c| {
            plan.execute(a, b, c, Par::Threads(2)).unwrap()
        });
        assert!(
            outs[3].1 == again,
            "lssm differs between {par:?} and 2 threads"
        );
        let pairs2 = run(m, k, ldc, |c| pairs.execute(b, c, Par::Threads(2)).unwrap());
        assert!(
            outs[5].1 == pairs2,
            "row pairs differ between {par:?} and 2 threads"
        );
        let merge2 = run(m, k, ldc, |c| {
            spmm_merge_path_with(a, b, c, Par::Threads(2), &base).unwrap()
        });
        assert!(
            outs[1].1 == merge2,
            "merge path differs between {par:?} and 2 threads"
        );
    }
}

fn k_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        Just(1usize),
        2usize..20,
        // Multiples of the widest tiles (32 / 64 / 128 columns: AVX2 and AVX-512, f64 and f32),
        // which skip the narrower tiles, and their neighbours; 96 ends a 64-wide tile with a
        // 32-wide one.
        31usize..=33,
        Just(64usize),
        60usize..70,
        Just(96usize),
        127usize..=129,
        Just(133usize)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn kernels_match_reference_f64_u32(
        rows in 0usize..40, cols in 0usize..40, kind in 0u8..4, seed in any::<u64>(),
        k in k_strategy(), pad in 0usize..3, block in 1usize..9, parts in 2usize..12,
    ) {
        check_all(&random_csr(rows, cols, kind, seed), k, pad, block, parts);
    }

    #[test]
    fn kernels_match_reference_f32_usize(
        rows in 0usize..40, cols in 0usize..40, kind in 0u8..4, seed in any::<u64>(),
        k in k_strategy(), pad in 0usize..3, block in 1usize..9, parts in 2usize..12,
    ) {
        check_all(&convert::<f32, usize>(&random_csr(rows, cols, kind, seed)), k, pad, block, parts);
    }

    #[test]
    fn kernels_match_reference_f64_usize_and_f32_u32(
        rows in 1usize..30, cols in 1usize..30, seed in any::<u64>(), k in k_strategy(),
    ) {
        let a = random_csr(rows, cols, 1, seed);
        check_all(&convert::<f64, usize>(&a), k, 1, 4, 5);
        check_all(&convert::<f32, u32>(&a), k, 0, 3, 7);
    }
}

#[test]
fn edge_cases_by_name() {
    let empty = CsrMatrix::<f64, u32>::try_new(0, 0, vec![0], vec![], vec![]).unwrap();
    check_all(&empty, 4, 0, 2, 3);
    let no_entries = CsrMatrix::<f32, u32>::try_new(5, 3, vec![0; 6], vec![], vec![]).unwrap();
    check_all(&no_entries, 9, 1, 2, 3);
    let one_dense_row = gen::arrow::<f64, u32>(50, 1, 3);
    check_all(&one_dense_row, 1, 0, 4, 6); // SpMV
    check_all(&one_dense_row, 37, 2, 4, 6);
    let wide = gen::uniform::<f64, usize>(7, 300, 40, 2); // non-square
    check_all(&wide, 70, 0, 16, 50);
}

#[test]
fn default_settings_take_the_parallel_paths_on_larger_matrices() {
    for a in [
        gen::kronecker::<f64, u32>(10, 5),
        gen::arrow::<f64, u32>(3000, 2, 5),
    ] {
        let k = 24;
        let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
        assert!(!plan.is_serial());
        assert!(plan.num_long_rows() > 0, "the test matrices have long rows");
        check_all(
            &a,
            k,
            0,
            plan.block_nnz(),
            BaselineConfig::default().merge_items_per_part,
        );
    }
}

#[test]
fn plan_classifies_long_and_short_rows() {
    let a = gen::arrow::<f64, u32>(1000, 1, 1);
    let plan = SpmmPlan::new(
        &a,
        16,
        &LssmConfig {
            block_nnz: Some(100),
            serial_work: 0,
            ..LssmConfig::default()
        },
    );
    assert_eq!(plan.num_long_rows(), 1);
    assert_eq!(plan.num_short_rows(), 999);
    assert_eq!(plan.num_segments(), 10);
    assert_eq!(plan.scratch_len(), 9 * 16);
    // 999 short rows of 2 nonzeros (+1 write each) merged into runs cut at the columns of the
    // 10 long-row tasks (100 rows each, cost 300, under the cap of 4 blocks).
    assert_eq!(plan.num_tasks(), 10 + 10);
    // Four dense rows with sorted columns: split together at common column boundaries, so
    // each of the 4000 / 100 tasks holds one segment of every dense row.
    let arrow4 = gen::arrow::<f64, u32>(1000, 4, 1);
    let config = LssmConfig {
        block_nnz: Some(100),
        serial_work: 0,
        ..LssmConfig::default()
    };
    let plan4 = SpmmPlan::new(&arrow4, 16, &config);
    assert_eq!(plan4.num_long_rows(), 4);
    assert_eq!(plan4.num_segments(), 4 * 40);
    assert_eq!(plan4.scratch_len(), (4 * 40 - 4) * 16);
    check_all(&arrow4, 16, 1, 100, 64);
    let auto = SpmmPlan::new(&a, 64, &LssmConfig::default());
    assert_eq!(
        auto.block_nnz(),
        SpmmPlan::auto_block_size(auto.stats(), 64)
    );
}

#[test]
#[should_panic(expected = "B has")]
fn shape_mismatch_panics() {
    let a = gen::arrow::<f64, u32>(10, 1, 1);
    let b = vec![0.0; 9 * 2];
    let mut c = vec![0.0; 10 * 2];
    let _ = Kernel::RowParallel.run(
        &a,
        DenseRef::contiguous(&b, 9, 2),
        DenseMut::contiguous(&mut c, 10, 2),
        Par::Seq,
    );
}

#[test]
fn operands_on_huge_pages_give_the_same_bits() {
    let a = gen::kronecker::<f64, u32>(10, 3);
    let k = 16;
    let b = gen::dense::<f64>(a.ncols(), k, 5);
    let mut b_huge = sparse_kernels::zeroed_on_huge_pages::<f64>(b.len());
    assert_eq!(b_huge.len(), b.len());
    assert!(b_huge.iter().all(|&x| x == 0.0));
    b_huge.copy_from_slice(&b);
    let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
    let run_on = |data: &[f64]| {
        run(a.nrows(), k, k, |c| {
            plan.execute(
                &a,
                DenseRef::contiguous(data, a.ncols(), k),
                c,
                Par::Threads(2),
            )
            .unwrap()
        })
    };
    assert_eq!(run_on(&b), run_on(&b_huge));
    assert!(sparse_kernels::zeroed_on_huge_pages::<f32>(0).is_empty());
}

#[test]
fn block_sizing_is_configurable_and_defaults_to_the_automatic_block() {
    use sparse_kernels::{BlockSizing, RowStats};
    let a = gen::kronecker::<f64, u32>(10, 5);
    let stats = RowStats::of(&a);
    for k in [1, 16, 64, 1024] {
        let auto = SpmmPlan::auto_block_size(&stats, k);
        assert_eq!(BlockSizing::default().block_size(&stats, k), auto);
        assert_eq!(
            SpmmPlan::new(&a, k, &LssmConfig::default()).block_nnz(),
            auto
        );
    }
    let fixed = BlockSizing {
        work: 0,
        min: 40,
        max: 40,
        min_tasks: 1,
    };
    let config = LssmConfig {
        block_sizing: fixed,
        ..LssmConfig::default()
    };
    assert_eq!(SpmmPlan::new(&a, 16, &config).block_nnz(), 40);
    // Degenerate settings give a positive block, never a panic.
    let zero = BlockSizing {
        work: 0,
        min: 0,
        max: 0,
        min_tasks: 0,
    };
    assert!(zero.block_size(&stats, 16) >= 1);
}

/// The default plan streams C exactly when C is larger than the last-level cache; a
/// configuration that decides is followed either way.
/// Chunks of one, two or four groups of nonzeros give the same bits: rows of 200 nonzeros
/// (several groups at every K here), long-row segments of 100, short rows of 60.
#[test]
fn the_chunk_size_does_not_change_the_bits() {
    let arrow = gen::arrow::<f64, u32>(3000, 2, 5);
    let rows = gen::uniform::<f64, u32>(600, 2000, 60, 9);
    for (a, block) in [(&arrow, Some(200)), (&rows, None)] {
        for k in [16, 64, 100] {
            let b = gen::dense::<f64>(a.ncols(), k, 3);
            let b = DenseRef::new(&b, a.ncols(), k, k);
            let product = |chunk_bytes: usize| {
                let config = LssmConfig {
                    block_nnz: block,
                    chunk_bytes: Some(chunk_bytes),
                    serial_work: 0,
                    ..LssmConfig::default()
                };
                let plan = SpmmPlan::new(a, k, &config);
                let mut c = vec![0.0; a.nrows() * k];
                let out = DenseMut::contiguous(&mut c, a.nrows(), k);
                plan.execute(a, b, out, Par::Threads(2)).unwrap();
                c
            };
            let one = product(16 << 10);
            for bytes in [32 << 10, 64 << 10] {
                let other = product(bytes);
                let same = one
                    .iter()
                    .zip(&other)
                    .all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "K = {k}: chunks of 16 and {bytes} bytes differ");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Rows long enough for chunks of several groups (up to 400 nonzeros, long-row segments of
    /// 40 to 300): against the reference, and the same bits for chunks of one, two and four
    /// groups, serial or on 2 threads.
    #[test]
    fn chunks_of_several_groups_match_the_reference_and_each_other(
        rows in 1usize..300, cols in 1usize..600, kind in 0u8..4, seed in any::<u64>(),
        k in prop_oneof![Just(1usize), Just(7usize), Just(64usize), Just(100usize)],
        block in 40usize..300,
    ) {
        let a = random_csr(rows, cols, kind, seed);
        let b = gen::dense::<f64>(cols, k, seed ^ 5);
        let b = DenseRef::new(&b, cols, k, k);
        let expected = reference(&a, b);
        let mut first: Option<Vec<f64>> = None;
        for (bytes, par) in [(16 << 10, Par::Seq), (32 << 10, Par::Threads(2)), (64 << 10, Par::Threads(2))] {
            let config = LssmConfig {
                block_nnz: Some(block),
                chunk_bytes: Some(bytes),
                serial_work: 0,
                ..LssmConfig::default()
            };
            let plan = SpmmPlan::new(&a, k, &config);
            let c = run(rows, k, k, |c| plan.execute(&a, b, c, par).unwrap());
            prop_assert!(sum_err(&a, b, &c, &expected) <= tolerance::<f64>());
            match &first {
                None => first = Some(c),
                Some(f) => prop_assert!(*f == c, "chunks of {} bytes differ", bytes),
            }
        }
    }
}

#[test]
fn default_plan_takes_longer_chunks_where_b_is_gathered_at_random_from_memory() {
    let llc = sparse_kernels::last_level_cache_bytes();
    let graph = gen::kronecker::<f64, u32>(12, 3);
    let grid = gen::stencil_3d_27pt::<f64, u32>(16);
    // A K that puts B (never allocated here) beyond the last-level cache.
    let k_over = |a: &CsrMatrix<f64, u32>| llc / (a.ncols() * 8) + 1;
    let chunk = |a: &CsrMatrix<f64, u32>, k, chunk_bytes| {
        let config = LssmConfig {
            chunk_bytes,
            ..LssmConfig::default()
        };
        SpmmPlan::new(a, k, &config).chunk_bytes()
    };
    assert!(SpmmPlan::column_locality(&graph) < 0.5);
    assert!(SpmmPlan::column_locality(&grid) >= 0.5);
    assert_eq!(chunk(&graph, k_over(&graph), None), 32 << 10, "LLC {llc} B");
    assert_eq!(chunk(&graph, 16, None), 16 << 10, "B in cache");
    assert_eq!(
        chunk(&grid, k_over(&grid), None),
        16 << 10,
        "rows of B read in order"
    );
    assert_eq!(chunk(&graph, 16, Some(8192)), 8192);
}

#[test]
fn default_plan_streams_a_c_larger_than_the_cache() {
    let k = 64;
    let llc = sparse_kernels::last_level_cache_bytes();
    let rows_over = llc / (k * 8) + 1;
    let big = gen::banded::<f64, u32>(rows_over, 0, 1);
    let small = gen::banded::<f64, u32>(64, 0, 1);
    let plan = |a: &CsrMatrix<f64, u32>, streaming_stores| {
        let config = LssmConfig {
            streaming_stores,
            ..LssmConfig::default()
        };
        SpmmPlan::new(a, k, &config).streams_c()
    };
    assert!(plan(&big, None), "C of {rows_over} × {k} f64, LLC {llc} B");
    assert!(!plan(&small, None));
    assert!(!plan(&big, Some(false)));
    assert!(plan(&small, Some(true)));
}
