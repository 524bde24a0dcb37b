//! Matrix Market and DLMC readers and the Matrix Market writer: every variant, gzip, and typed
//! errors with line numbers.

use flate2::write::GzEncoder;
use proptest::prelude::*;
use sparse_kernels::io::{
    parse_matrix_market, parse_smtx, read_matrix, read_matrix_market, write_matrix_market,
};
use sparse_kernels::{gen, CsrMatrix, SparseError};
use std::io::Write;

fn mm(text: &str) -> Result<CsrMatrix<f64, u32>, SparseError> {
    parse_matrix_market(text.as_bytes())
}

fn dense_of(a: &CsrMatrix<f64, u32>) -> Vec<Vec<f64>> {
    let mut d = vec![vec![0.0; a.ncols()]; a.nrows()];
    for (i, row) in d.iter_mut().enumerate() {
        let (c, v) = a.row(i);
        for (&c, &v) in c.iter().zip(v) {
            row[c as usize] += v;
        }
    }
    d
}

fn parse_error_line(r: Result<CsrMatrix<f64, u32>, SparseError>) -> usize {
    match r {
        Err(SparseError::Parse { line, .. }) => line,
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn coordinate_variants() {
    let general =
        mm("%%MatrixMarket matrix coordinate real general\n% c\n2 3 3\n1 1 1.5\n2 3 -2\n1 3 4e0\n")
            .unwrap();
    assert_eq!(
        dense_of(&general),
        vec![vec![1.5, 0.0, 4.0], vec![0.0, 0.0, -2.0]]
    );
    let sym = mm("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 1\n2 1 3\n").unwrap();
    assert_eq!(dense_of(&sym), vec![vec![1.0, 3.0], vec![3.0, 0.0]]);
    let skew = mm("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n2 1 3\n").unwrap();
    assert_eq!(dense_of(&skew), vec![vec![0.0, -3.0], vec![3.0, 0.0]]);
    let pattern =
        mm("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n\n2 1\n").unwrap();
    assert_eq!(dense_of(&pattern), vec![vec![0.0, 1.0], vec![1.0, 0.0]]);
    let integer =
        mm("%%MatrixMarket MATRIX Coordinate INTEGER General\r\n1 1 1\r\n1 1 -7\r\n").unwrap();
    assert_eq!(integer.values(), &[-7.0]);
}

#[test]
fn array_variants() {
    let general = mm("%%MatrixMarket matrix array real general\n2 2\n1\n2\n0\n4\n").unwrap();
    assert_eq!(dense_of(&general), vec![vec![1.0, 0.0], vec![2.0, 4.0]]);
    assert_eq!(general.nnz(), 3);
    let sym = mm("%%MatrixMarket matrix array real symmetric\n2 2\n1\n2\n3\n").unwrap();
    assert_eq!(dense_of(&sym), vec![vec![1.0, 2.0], vec![2.0, 3.0]]);
    let skew = mm("%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n2\n3\n").unwrap();
    assert_eq!(
        dense_of(&skew),
        vec![
            vec![0.0, -1.0, -2.0],
            vec![1.0, 0.0, -3.0],
            vec![2.0, 3.0, 0.0]
        ]
    );
}

#[test]
fn errors_carry_line_numbers() {
    let h = "%%MatrixMarket matrix coordinate real general\n";
    assert_eq!(parse_error_line(mm(&format!("{h}2 2 1\n1 x 1\n"))), 3);
    assert_eq!(
        parse_error_line(mm(&format!("{h}% c\n2 2 2\n1 1 1\n3 1 1\n"))),
        5
    );
    assert_eq!(parse_error_line(mm(&format!("{h}2 2 1\n0 1 1\n"))), 3);
    assert_eq!(parse_error_line(mm(&format!("{h}2 2 1\n1 1\n"))), 3);
    assert_eq!(
        parse_error_line(mm(&format!("{h}2 2 1\n1 1 1\n2 2 2\n"))),
        4
    );
    assert_eq!(parse_error_line(mm(&format!("{h}2 two 1\n"))), 2);
    assert_eq!(
        parse_error_line(mm("%%MatrixMarket matrix coordinate real\n1 1 0\n")),
        1
    );
    assert_eq!(parse_error_line(mm("hello\n")), 1);
    let sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n";
    assert_eq!(parse_error_line(mm(sym)), 3);
    match mm(&format!("{h}3 3 4\n1 1 1\n2 2 2\n")) {
        Err(SparseError::Truncated {
            expected: 4,
            found: 2,
            line: 4,
            ..
        }) => {}
        other => panic!("expected truncation, got {other:?}"),
    }
    let complex = mm("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n");
    assert!(matches!(complex, Err(SparseError::Unsupported(_))));
    assert!(matches!(mm(""), Err(SparseError::Parse { line: 1, .. })));
    let missing = read_matrix_market::<f64, u32>(std::path::Path::new("/nonexistent/x.mtx"));
    assert!(matches!(missing, Err(SparseError::Io { .. })));
}

#[test]
fn gzip_files_are_detected_by_content() {
    let a = gen::kronecker::<f64, u32>(6, 1);
    let mut text = Vec::new();
    write_matrix_market(&a, &mut text).unwrap();
    let path = std::env::temp_dir().join(format!("sk-test-{}.mtx.gz", std::process::id()));
    let mut gz = GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(&text).unwrap();
    gz.finish().unwrap();
    let back: CsrMatrix<f64, u32> = read_matrix(&path, 0).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(back, a);
}

#[test]
fn smtx_reads_and_rejects() {
    let ok: CsrMatrix<f32, u32> = parse_smtx("2, 4, 3\n0 2 3\n3 0 1\n".as_bytes(), 5).unwrap();
    assert_eq!((ok.nrows(), ok.ncols(), ok.nnz()), (2, 4, 3));
    assert_eq!(ok.indices(), &[3, 0, 1]);
    assert!(!ok.has_sorted_columns());
    assert!(ok.values().iter().all(|v| (-1.0..1.0).contains(v)));
    let again: CsrMatrix<f32, u32> = parse_smtx("2, 4, 3\n0 2 3\n3 0 1\n".as_bytes(), 5).unwrap();
    assert_eq!(ok, again, "values are deterministic");
    let line = |text: &str| match parse_smtx::<f64, u32>(text.as_bytes(), 0) {
        Err(SparseError::Parse { line, .. }) => line,
        other => panic!("expected a parse error, got {other:?}"),
    };
    assert_eq!(line("2 4\n0 1 2\n0 1\n"), 1);
    assert_eq!(line("2, 4, 2\n0 1\n0 1\n"), 2);
    assert_eq!(line("2, 4, 2\n0 3 2\n0 1\n"), 2);
    assert_eq!(line("2, 4, 2\n0 1 2\n0 9\n"), 3);
    assert_eq!(line("2, 4, 2\n0 1 2\n0\n"), 3);
    assert!(matches!(
        parse_smtx::<f64, u32>("2, 4, 2\n0 1 2\n".as_bytes(), 0),
        Err(SparseError::Truncated { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn matrix_market_round_trip(rows in 0usize..20, cols in 1usize..20, per_row in 0usize..5, seed in any::<u64>()) {
        let a = gen::uniform::<f64, u32>(rows, cols, per_row.min(cols), seed);
        let mut text = Vec::new();
        write_matrix_market(&a, &mut text).unwrap();
        let back: CsrMatrix<f64, u32> = parse_matrix_market(text.as_slice()).unwrap();
        prop_assert_eq!(back, a);
    }
}

#[test]
fn hostile_headers_fail_fast_without_large_allocations() {
    let h = "%%MatrixMarket matrix coordinate real general\n";
    // 69 bytes declaring 10^9 rows and one entry: refused at the size line, naming the memory.
    let e = mm(&format!("{h}1000000000 1 1\n1 1 1\n")).unwrap_err();
    assert!(matches!(e, SparseError::Format(_)), "{e:?}");
    assert!(
        e.to_string().contains("line 2") && e.to_string().contains("GB"),
        "{e}"
    );
    // A row count above u32 is rejected like the column count, before any entry is read.
    for size in [
        "5000000000 1 5000000000",
        "1 5000000000 1",
        "1 1 5000000000",
    ] {
        let e = mm(&format!("{h}{size}\n1 1 1\n")).unwrap_err();
        assert!(
            matches!(e, SparseError::IndexOverflow { .. }),
            "{size}: {e:?}"
        );
    }
    // A billion declared entries with one present: truncated, nothing reserved up front.
    let e = mm(&format!("{h}10 10 1000000000\n1 1 1\n")).unwrap_err();
    assert!(
        matches!(e, SparseError::Truncated { found: 1, .. }),
        "{e:?}"
    );
    // Values must be finite in the element type: NaN, inf and f32 overflow are parse errors.
    for value in ["nan", "-inf", "1e400"] {
        assert_eq!(
            parse_error_line(mm(&format!("{h}1 1 1\n1 1 {value}\n"))),
            3,
            "{value}"
        );
    }
    let f32_overflow = format!("{h}1 1 1\n1 1 1e300\n");
    assert!(matches!(
        parse_matrix_market::<f32, u32>(f32_overflow.as_bytes()),
        Err(SparseError::Parse { line: 3, .. })
    ));
    // `--matrix /dev/zero`: one endless line, stopped at the cap.
    let zeros = || std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 4 << 20));
    let e = parse_matrix_market::<f64, u32>(zeros()).unwrap_err();
    assert!(e.to_string().contains("longer than"), "{e}");
    let e = parse_smtx::<f64, u32>(zeros(), 0).unwrap_err();
    assert!(matches!(e, SparseError::Parse { line: 1, .. }), "{e:?}");
    assert!(
        e.to_string().len() < 300,
        "raw bytes are not echoed at length: {e}"
    );
    // DLMC: sizes beyond the index type, and offsets lines longer than the header allows.
    let line = |text: &str| match parse_smtx::<f64, u32>(text.as_bytes(), 0) {
        Err(SparseError::Parse { line, .. }) => line,
        other => panic!("expected a parse error, got {other:?}"),
    };
    assert_eq!(line("5000000000, 1, 0\n0\n"), 1);
    assert_eq!(line("1000000000, 10, 1\n0 1\n0\n"), 2);
    let mut long = String::from("1, 4, 1\n0 1");
    long.push_str(&" 1".repeat(100_000));
    assert_eq!(line(&long), 2);
    assert!(matches!(
        parse_smtx::<f64, u32>("1000000000, 10, 1000000000\n".as_bytes(), 0),
        Err(SparseError::Truncated { .. })
    ));
}

/// The hostile cases above, measured: each fails while holding at most 4 MiB (the 1 MiB line
/// buffer is the largest thing a reader keeps), instead of gigabytes.
#[test]
fn hostile_inputs_allocate_little() {
    use crate::alloc::peak_bytes;
    let h = "%%MatrixMarket matrix coordinate real general\n";
    let zeros = || std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 4 << 20));
    type Case = Box<dyn Fn() -> bool>;
    let cases: Vec<(&str, Case)> = vec![
        (
            "10^9 rows",
            Box::new(move || mm(&format!("{h}1000000000 1 1\n1 1 1\n")).is_err()),
        ),
        (
            "10^9 entries",
            Box::new(move || mm(&format!("{h}10 10 1000000000\n1 1 1\n")).is_err()),
        ),
        (
            "array 10^5 x 10^5",
            Box::new(|| {
                mm("%%MatrixMarket matrix array real general\n100000 100000\n1\n").is_err()
            }),
        ),
        (
            "/dev/zero as .mtx",
            Box::new(move || parse_matrix_market::<f64, u32>(zeros()).is_err()),
        ),
        (
            "/dev/zero as .smtx",
            Box::new(move || parse_smtx::<f64, u32>(zeros(), 0).is_err()),
        ),
        (
            "smtx 10^9 rows",
            Box::new(|| {
                parse_smtx::<f64, u32>("1000000000, 10, 1000000000\n0 1\n".as_bytes(), 0).is_err()
            }),
        ),
        (
            "stencil27:1626",
            Box::new(|| gen::from_spec::<f64, u32>("stencil27:1626", 1).is_err()),
        ),
        (
            "rmat:26:1000000",
            Box::new(|| gen::from_spec::<f64, u32>("rmat:26:1000000", 1).is_err()),
        ),
    ];
    // Control: the counter sees real allocations (kron:12 holds ~1.8 MB of edges and triplets).
    let (a, peak) = peak_bytes(|| gen::from_spec::<f64, u32>("kron:12", 1).unwrap());
    assert!(peak > a.nnz() * 16, "kron:12 measured at {peak} bytes");
    for (name, case) in cases {
        let (failed, peak) = peak_bytes(case);
        assert!(failed, "{name}: accepted");
        assert!(peak < 4 << 20, "{name}: held {peak} bytes");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    /// Arbitrary bytes, alone or after a valid first line, are a matrix or a typed error,
    /// never a panic, for both readers.
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_matrix_market::<f64, u32>(body.as_slice());
        let _ = parse_smtx::<f32, u32>(body.as_slice(), 1);
        let mut text = b"%%MatrixMarket matrix coordinate real skew-symmetric\n".to_vec();
        text.extend_from_slice(&body);
        let _ = parse_matrix_market::<f64, usize>(text.as_slice());
        let mut text = b"3, 3, 2\n".to_vec();
        text.extend_from_slice(&body);
        let _ = parse_smtx::<f64, u32>(text.as_slice(), 1);
    }

    /// DLMC files written from a random CSR read back exactly (the streaming parser against the
    /// structure it came from), with spaces, commas and `\r\n` mixed.
    #[test]
    fn smtx_round_trip(rows in 0usize..20, cols in 1usize..20, per_row in 0usize..5,
                       seed in any::<u64>(), crlf in any::<bool>()) {
        let a = gen::uniform::<f64, u32>(rows, cols, per_row.min(cols), seed);
        let eol = if crlf { "\r\n" } else { "\n" };
        let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let text = format!("{}, {}, {}{eol}{}{eol}{}{eol}", a.nrows(), a.ncols(), a.nnz(),
                           join(a.offsets()), join(a.indices()));
        let back: CsrMatrix<f64, u32> = parse_smtx(text.as_bytes(), 3).unwrap();
        prop_assert_eq!(back.offsets(), a.offsets());
        prop_assert_eq!(back.indices(), a.indices());
    }
}
