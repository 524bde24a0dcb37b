//! CSR construction, validation, sprs conversion, dense views, statistics and generators.

use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, MatrixClass, RowStats, SparseError};

#[test]
fn try_new_rejects_bad_structure() {
    let bad_len = CsrMatrix::<f64, u32>::try_new(2, 2, vec![0, 1], vec![0], vec![1.0]);
    assert!(matches!(bad_len, Err(SparseError::InvalidStructure(_))));
    let decreasing =
        CsrMatrix::<f64, u32>::try_new(2, 2, vec![0, 2, 1], vec![0, 1], vec![1.0, 2.0]);
    assert!(matches!(decreasing, Err(SparseError::InvalidStructure(_))));
    let col = CsrMatrix::<f64, u32>::try_new(1, 2, vec![0, 1], vec![2], vec![1.0]);
    assert!(matches!(
        col,
        Err(SparseError::ColumnOutOfRange {
            row: 0,
            col: 2,
            ncols: 2
        })
    ));
    let values = CsrMatrix::<f64, u32>::try_new(1, 2, vec![0, 1], vec![1], vec![]);
    assert!(matches!(values, Err(SparseError::InvalidStructure(_))));
    let end = CsrMatrix::<f64, u32>::try_new(1, 2, vec![0, 2], vec![1], vec![1.0]);
    assert!(matches!(end, Err(SparseError::InvalidStructure(_))));
    let too_wide = CsrMatrix::<f64, u32>::try_new(0, 1 << 33, vec![0], vec![], vec![]);
    assert!(matches!(too_wide, Err(SparseError::IndexOverflow { .. })));
}

#[test]
fn sorted_columns_are_detected_and_duplicates_summed() {
    let unsorted =
        CsrMatrix::<f64, u32>::try_new(1, 3, vec![0, 2], vec![2, 0], vec![1.0, 2.0]).unwrap();
    assert!(!unsorted.has_sorted_columns());
    let t = [(0, 2, 1.0), (0, 0, 2.0), (0, 2, 0.5)];
    let summed = CsrMatrix::<f64, usize>::from_triplets(1, 3, &t).unwrap();
    assert!(summed.has_sorted_columns());
    assert_eq!(summed.indices(), &[0, 2]);
    assert_eq!(summed.values(), &[2.0, 1.5]);
}

#[test]
fn sprs_round_trip_moves_the_arrays() {
    let a = gen::kronecker::<f64, u32>(8, 3);
    let s: sprs::CsMatI<f64, u32> = a.clone().into();
    assert_eq!(
        (s.rows(), s.cols(), s.nnz()),
        (a.nrows(), a.ncols(), a.nnz())
    );
    let back = CsrMatrix::try_from(s).unwrap();
    assert_eq!(back, a);
    // Unsorted input is sorted on the way to sprs.
    let unsorted =
        CsrMatrix::<f64, usize>::try_new(2, 3, vec![0, 2, 3], vec![2, 0, 1], vec![1.0, 2.0, 3.0])
            .unwrap();
    let s: sprs::CsMatI<f64, usize> = unsorted.into();
    assert_eq!(s.indices(), &[0, 2, 1]);
    assert_eq!(s.data(), &[2.0, 1.0, 3.0]);
}

#[test]
fn dense_views_respect_the_leading_dimension() {
    let data: Vec<f64> = (0..12).map(f64::from).collect();
    let v = DenseRef::new(&data, 3, 2, 4);
    assert_eq!(v.row(2), &[8.0, 9.0]);
    let nd = v.to_ndarray();
    assert_eq!(nd[[1, 1]], 5.0);
    let owned = ndarray::Array2::from_shape_vec((2, 3), (0..6).map(f64::from).collect()).unwrap();
    let w = DenseRef::from_ndarray(owned.view()).unwrap();
    assert_eq!((w.rows(), w.cols(), w.ld()), (2, 3, 3));
    assert!(DenseRef::from_ndarray(owned.t()).is_none());
    let mut buf = vec![0.0f64; 12];
    let mut m = DenseMut::new(&mut buf, 3, 2, 4);
    m.row_mut(1)[1] = 7.0;
    assert_eq!(buf[5], 7.0);
}

#[test]
#[should_panic(expected = "leading dimension")]
fn dense_view_with_small_leading_dimension_panics() {
    let data = [0.0f32; 8];
    let _ = DenseRef::new(&data, 2, 4, 3);
}

#[test]
fn row_statistics_classify_the_generators() {
    let stencil = RowStats::of(&gen::stencil_3d_27pt::<f64, u32>(8));
    assert_eq!(stencil.max, 27);
    assert_eq!(stencil.min, 8);
    assert_eq!(stencil.class(), MatrixClass::Regular);
    let arrow = RowStats::of(&gen::arrow::<f64, u32>(2000, 1, 1));
    assert_eq!(arrow.max, 2000);
    assert_eq!(arrow.class(), MatrixClass::DenseRows);
    let kron = RowStats::of(&gen::kronecker::<f64, u32>(12, 1));
    assert!(kron.cv > 1.0, "cv = {}", kron.cv);
    assert_eq!(kron.class(), MatrixClass::Irregular);
    assert!(kron.empty_rows > 0);
    let s5 = gen::stencil_2d_5pt::<f64, u32>(10, 7);
    assert_eq!(s5.nnz(), 5 * 70 - 2 * 10 - 2 * 7);
    let band = gen::banded::<f32, usize>(100, 3, 1);
    assert_eq!(band.nnz(), 7 * 100 - 2 * (1 + 2 + 3));
    let uni = gen::uniform::<f64, u32>(50, 40, 9, 5);
    assert!((0..50).all(|i| uni.row_nnz(i) == 9));
}

#[test]
fn striped_rows_are_nine_runs_of_three() {
    let a = gen::from_spec::<f64, u32>("striped:1000:17", 1).unwrap();
    let cols = |i: usize| a.indices()[a.row_range(i)].to_vec();
    // An interior row: runs at i − 69, i − 52, …, i + 67, each of three columns.
    let expected: Vec<u32> = (0..9)
        .flat_map(|r| (0..3).map(move |j| 500 + r * 17 + j - 69))
        .collect();
    assert_eq!(cols(500), expected);
    // Rows near the ends keep the columns within the matrix; row 0 has the last five runs but
    // the first column of the fifth (column −1).
    assert_eq!(cols(0).len(), 14);
    assert_eq!(a.row_nnz(999), 14);
    // Spacing 3: the band of half-width 13.
    let band = gen::banded::<f64, u32>(200, 13, 1);
    let striped = gen::striped::<f64, u32>(200, 3, 1);
    assert_eq!(band.offsets(), striped.offsets());
    assert_eq!(band.indices(), striped.indices());
}

#[test]
fn generator_specs_parse_and_reject() {
    let m = gen::from_spec::<f32, u32>("kron:6", 1).unwrap();
    assert_eq!(m.nrows(), 64);
    assert_eq!(
        gen::from_spec::<f32, u32>("stencil27:4", 1)
            .unwrap()
            .nrows(),
        64
    );
    assert!(matches!(
        gen::from_spec::<f32, u32>("kron:x", 1),
        Err(SparseError::InvalidInput(_))
    ));
    assert!(gen::from_spec::<f32, u32>("nope:3", 1).is_err());
    assert!(gen::from_spec::<f32, u32>("kron:40", 1).is_err());
    // Sizes beyond the index type are refused before allocating, naming the memory needed.
    for spec in [
        "stencil27:1626",
        "stencil5:65536",
        "rmat:26:1000000",
        "uniform:4294967296:1",
        "banded:100000000:100",
        "striped:200000000:64",
        "arrow:18446744073709551615:2",
    ] {
        let e = gen::from_spec::<f32, u32>(spec, 1).unwrap_err();
        assert!(
            matches!(e, SparseError::InvalidInput(_)) && e.to_string().contains("would need"),
            "{spec}: {e}"
        );
    }
    for spec in ["striped:100:2", "striped:100:101"] {
        assert!(gen::from_spec::<f32, u32>(spec, 1).is_err(), "{spec}");
    }
    // usize indices: the 2^40-entry bound still applies.
    assert!(gen::from_spec::<f32, usize>("stencil27:100000", 1).is_err());
    // Same seed, same matrix; another seed, another one.
    assert_eq!(
        gen::kronecker::<f64, u32>(7, 9),
        gen::kronecker::<f64, u32>(7, 9)
    );
    assert_ne!(
        gen::kronecker::<f64, u32>(7, 9),
        gen::kronecker::<f64, u32>(7, 10)
    );
}
