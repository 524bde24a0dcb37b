//! The Matrix Market reader against a simple reference: every entry written is read back.

use proptest::prelude::*;
use sparse_formats::matrix_market::{MatrixMarketReader, MmField, MmFormat, MmSymmetry};
use sparse_formats::FormatError;

fn entries(text: &str) -> Result<Vec<(usize, usize, f64)>, FormatError> {
    let mut mm = MatrixMarketReader::new(text.as_bytes())?;
    let mut out = Vec::new();
    while let Some(e) = mm.next_entry()? {
        out.push((e.row, e.col, e.value));
    }
    Ok(out)
}

fn error_line(e: &FormatError) -> usize {
    match e {
        FormatError::Parse { line, .. } | FormatError::OutOfRange { line, .. } => *line,
        other => panic!("expected an error with a line, got {other:?}"),
    }
}

#[test]
fn banner_variants() {
    let mm = MatrixMarketReader::new("%%MatrixMarket MATRIX Array Integer Hermitian\n".as_bytes())
        .unwrap();
    assert_eq!(mm.header().format, MmFormat::Array);
    assert_eq!(mm.header().field, MmField::Integer);
    assert_eq!(mm.header().symmetry, MmSymmetry::Hermitian);
    for bad in [
        "",
        "hello\n",
        "%%MatrixMarket matrix coordinate real\n",
        "%%MatrixMarket matrix sparse real general\n",
        "%%MatrixMarket matrix array pattern general\n",
        "%%MatrixMarket matrix coordinate real lower\n",
    ] {
        let e = MatrixMarketReader::new(bad.as_bytes()).unwrap_err();
        assert!(
            matches!(e, FormatError::Parse { line: 1, .. }),
            "{bad:?}: {e}"
        );
    }
    let e = MatrixMarketReader::new("%%MatrixMarket vector coordinate real general\n".as_bytes())
        .unwrap_err();
    assert!(matches!(e, FormatError::Unsupported(_)), "{e}");
}

#[test]
fn coordinate_array_and_symmetric_storage() {
    let text =
        "%%MatrixMarket matrix coordinate real general\n% c\n\n2 3 2\n1 3 -2.5\n  2 1 4e0  \r\n";
    assert_eq!(entries(text).unwrap(), [(0, 2, -2.5), (1, 0, 4.0)]);
    let array = "%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n";
    assert_eq!(
        entries(array).unwrap(),
        [(1, 0, 1.0), (2, 0, 2.0), (2, 1, 3.0)]
    );
    let sym = "%%MatrixMarket matrix array integer symmetric\n2 2\n1\n2\n3\n";
    assert_eq!(
        entries(sym).unwrap(),
        [(0, 0, 1.0), (1, 0, 2.0), (1, 1, 3.0)]
    );
    let complex = "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n2 1 1.5 -1\n";
    assert_eq!(entries(complex).unwrap(), [(1, 0, 1.5)]);
}

#[test]
fn malformed_entries_carry_their_line() {
    let h = "%%MatrixMarket matrix coordinate real general\n";
    for (body, line) in [
        ("2 2 1\n1 x 1\n", 3),
        ("% c\n2 2 2\n1 1 1\n3 1 1\n", 5),
        ("2 2 1\n0 1 1\n", 3),
        ("2 2 1\n1 1\n", 3),
        ("2 2 1\n1 1 1 1\n", 3),
        ("2 2 1\n1 1 1\n2 2 2\n", 4),
        ("2 two 1\n", 2),
        ("2 2 1 9\n", 2),
        ("2 2 1\n1 1 nan\n", 3),
        ("2 2 1\n1 1 1e400\n", 3),
    ] {
        let e = entries(&format!("{h}{body}")).unwrap_err();
        assert_eq!(error_line(&e), line, "{body:?}: {e}");
    }
    let sym = "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 2 1\n";
    assert_eq!(error_line(&entries(sym).unwrap_err()), 3);
    let skew = "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n";
    assert_eq!(error_line(&entries(skew).unwrap_err()), 3);
    let rect = "%%MatrixMarket matrix coordinate real symmetric\n2 3 0\n";
    assert_eq!(error_line(&entries(rect).unwrap_err()), 2);
    match entries(&format!("{h}3 3 4\n1 1 1\n2 2 2\n")) {
        Err(FormatError::Truncated {
            expected: 4,
            found: 2,
            line: 4,
            ..
        }) => {}
        other => panic!("expected truncation, got {other:?}"),
    }
    assert!(matches!(
        entries(h),
        Err(FormatError::Truncated {
            what: "size line",
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Whatever is written (coordinate, any layout of blank lines and comments) reads back.
    #[test]
    fn written_entries_read_back(
        rows in 1usize..40, cols in 1usize..40,
        raw in proptest::collection::vec((0usize..40, 0usize..40, -1e6f64..1e6), 0..60),
        comments in proptest::collection::vec(any::<bool>(), 60),
    ) {
        let want: Vec<(usize, usize, f64)> =
            raw.into_iter().map(|(i, j, v)| (i % rows, j % cols, v)).collect();
        let mut text = format!("%%MatrixMarket matrix coordinate real general\n%\n{rows} {cols} {}\n", want.len());
        for (k, (i, j, v)) in want.iter().enumerate() {
            if comments[k] {
                text.push_str("% between entries\n\n");
            }
            text.push_str(&format!("{} {} {v:?}\n", i + 1, j + 1));
        }
        prop_assert_eq!(entries(&text).unwrap(), want);
    }
}
