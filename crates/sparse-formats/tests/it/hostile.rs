//! Hostile inputs: tiny files with huge headers fail fast, without a large allocation, and
//! arbitrary bytes never panic.

use proptest::prelude::*;
use sparse_formats::matrix_market::MatrixMarketReader;
use sparse_formats::{FormatError, LineReader};

fn read_all(bytes: &[u8]) -> Result<usize, FormatError> {
    let mut mm = MatrixMarketReader::new(bytes)?;
    let mut n = 0;
    while mm.next_entry()?.is_some() {
        n += 1;
    }
    Ok(n)
}

#[test]
fn huge_headers_fail_before_allocating() {
    let h = "%%MatrixMarket matrix coordinate real general\n";
    // 10^9 rows, one entry: the row offsets alone would be 8 GB.
    let e = read_all(format!("{h}1000000000 1 1\n1 1 1\n").as_bytes()).unwrap_err();
    assert!(matches!(e, FormatError::TooLarge(_)), "{e}");
    assert!(
        e.to_string().contains("8.0 GB") && e.to_string().contains("line 2"),
        "{e}"
    );
    // Sizes beyond u64 and dense arrays beyond usize.
    let e = read_all(format!("{h}99999999999999999999 1 1\n").as_bytes()).unwrap_err();
    assert!(matches!(e, FormatError::Parse { line: 2, .. }), "{e}");
    let array = "%%MatrixMarket matrix array real general\n4294967296 4294967296\n1\n";
    assert!(matches!(
        read_all(array.as_bytes()),
        Err(FormatError::TooLarge(_))
    ));
    // A declared count of 10^15 entries with one present: truncated, nothing reserved.
    let e = read_all(format!("{h}10 10 1000000000000000\n1 1 1\n").as_bytes()).unwrap_err();
    assert!(matches!(e, FormatError::Truncated { found: 1, .. }), "{e}");
    // Zero columns do not excuse a billion rows.
    let e = read_all("%%MatrixMarket matrix array real general\n1000000000 0\n".as_bytes());
    assert!(matches!(e, Err(FormatError::TooLarge(_))));
}

#[test]
fn endless_streams_stop_at_the_line_cap() {
    let zeros = std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 8 << 20));
    let e = MatrixMarketReader::new(zeros).unwrap_err();
    assert!(matches!(e, FormatError::LineTooLong { line: 1, .. }), "{e}");
    let mut spaces = "%%MatrixMarket matrix coordinate real general\n".to_string();
    spaces.push_str(&" ".repeat(2 << 20));
    let e = read_all(spaces.as_bytes()).unwrap_err();
    assert!(matches!(e, FormatError::LineTooLong { line: 2, .. }), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Any bytes after a valid banner give entries or a typed error, never a panic; a line
    /// reader over any bytes never returns a line longer than its cap.
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut text = b"%%MatrixMarket matrix coordinate real symmetric\n".to_vec();
        text.extend_from_slice(&body);
        let _ = read_all(&text);
        let _ = read_all(&body);
        let mut lines = LineReader::with_limit(body.as_slice(), 16);
        while let Ok(Some((_, l))) = lines.next_line() {
            prop_assert!(l.len() <= 16);
        }
    }

    /// Size lines of digits and spaces: a typed error or a bounded read, never a panic or a
    /// large allocation (sizes up to u64::MAX).
    #[test]
    fn arbitrary_size_lines(rows in any::<u64>(), cols in any::<u64>(), nnz in any::<u64>()) {
        for banner in ["coordinate real general", "array real general", "array real symmetric",
                       "coordinate pattern skew-symmetric"] {
            let text = format!("%%MatrixMarket matrix {banner}\n{rows} {cols} {nnz}\n1 1 1\n");
            let _ = read_all(text.as_bytes());
            let text = format!("%%MatrixMarket matrix {banner}\n{rows} {cols}\n1\n");
            let _ = read_all(text.as_bytes());
        }
    }
}
