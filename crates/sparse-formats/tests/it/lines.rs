//! Line reading: terminators, numbering, the length cap, gzip by content.

use flate2::{write::GzEncoder, Compression};
use sparse_formats::{open, parse_u64, FormatError, LineReader};
use std::io::Write;

#[test]
fn lines_are_numbered_and_stripped() {
    let mut r = LineReader::new("a b\r\n\nlast".as_bytes());
    assert_eq!(r.next_line().unwrap(), Some((1, &b"a b"[..])));
    assert_eq!(r.next_line().unwrap(), Some((2, &b""[..])));
    assert_eq!(r.next_line().unwrap(), Some((3, &b"last"[..])));
    assert_eq!(r.next_line().unwrap(), None);
    assert_eq!(r.line(), 3);
}

#[test]
fn a_line_at_the_cap_passes_and_one_byte_more_fails() {
    let ok = format!("{}\r\nx\n", "7".repeat(16));
    let mut r = LineReader::with_limit(ok.as_bytes(), 16);
    assert_eq!(r.next_line().unwrap().unwrap().1.len(), 16);
    assert_eq!(r.next_line().unwrap(), Some((2, &b"x"[..])));
    let long = format!("x\n{}\n", "7".repeat(17));
    let mut r = LineReader::with_limit(long.as_bytes(), 16);
    r.next_line().unwrap();
    match r.next_line() {
        Err(FormatError::LineTooLong { line: 2, limit: 16 }) => {}
        other => panic!("expected LineTooLong, got {other:?}"),
    }
}

#[test]
fn an_endless_line_stops_at_the_cap() {
    // `/dev/zero` as a stream: never a newline. Only the cap is read.
    let mut zeros = std::io::BufReader::new(std::io::repeat(0));
    let mut r = LineReader::with_limit(&mut zeros, 1 << 10);
    assert!(matches!(
        r.next_line(),
        Err(FormatError::LineTooLong { line: 1, .. })
    ));
}

#[test]
fn numbers_are_digits_only() {
    assert_eq!(parse_u64(Some(b"0042"), 1, "n").unwrap(), 42);
    for bad in [&b""[..], b"-1", b"+1", b"1e3", b"18446744073709551616"] {
        let e = parse_u64(Some(bad), 7, "count").unwrap_err();
        assert!(matches!(e, FormatError::Parse { line: 7, .. }), "{e}");
    }
    assert!(parse_u64(None, 1, "count")
        .unwrap_err()
        .to_string()
        .contains("missing count"));
    // A long garbage field is not echoed whole.
    let junk = vec![b'x'; 10_000];
    assert!(
        parse_u64(Some(&junk), 1, "id")
            .unwrap_err()
            .to_string()
            .len()
            < 200
    );
}

#[test]
fn open_detects_gzip_by_content_and_names_missing_files() {
    let dir = std::env::temp_dir().join(format!("sparse-formats-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("plain-name.txt");
    let mut gz = GzEncoder::new(std::fs::File::create(&path).unwrap(), Compression::fast());
    gz.write_all(b"1 2\n3 4\n").unwrap();
    gz.finish().unwrap();
    let mut r = LineReader::new(open(&path).unwrap());
    assert_eq!(r.next_line().unwrap(), Some((1, &b"1 2"[..])));
    std::fs::remove_file(&path).unwrap();
    let e = open("/nonexistent/m.mtx".as_ref()).err().unwrap();
    assert!(matches!(e, FormatError::Open { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/m.mtx"), "{e}");
}
