//! Loaders: formats, typed errors with line numbers, gzip and truncated gzip.

use flate2::{write::GzEncoder, Compression};
use graph_kernels::io::{
    load_graph, read_dimacs, read_matrix_market, read_snap, GraphFormat, LoadOptions,
};
use graph_kernels::GraphError;
use sparse_formats::FormatError;
use std::io::Write;
use std::path::PathBuf;

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("graph-kernels-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// The line number inside an error, unwrapping `InFile`.
fn error_line(e: &GraphError) -> Option<usize> {
    match e {
        GraphError::InFile { error, .. } => error_line(error),
        GraphError::Parse { line, .. }
        | GraphError::VertexOutOfRange { line, .. }
        | GraphError::Read { line, .. } => Some(*line),
        _ => None,
    }
}

#[test]
fn snap_reads_comments_tabs_spaces_and_directedness() {
    let text = "# comment\n\n0\t1\n1 2 7\n2\t0\r\n5 5\n";
    let g = read_snap(text.as_bytes(), false).unwrap();
    assert_eq!((g.num_vertices(), g.num_edges()), (6, 3));
    assert_eq!(g.out_degree(5), 0, "self loop dropped");
    let d = read_snap(text.as_bytes(), true).unwrap();
    assert!(d.is_directed());
    assert_eq!(
        (d.out_neighbors(0), d.in_neighbors(0)),
        (&[1][..], &[2][..])
    );
}

#[test]
fn snap_errors_carry_line_numbers() {
    let e = read_snap("# c\n0 1\n2\n".as_bytes(), false).unwrap_err();
    assert!(matches!(e, GraphError::Parse { line: 3, .. }), "{e}");
    let e = read_snap("0 1\n1 x\n".as_bytes(), false).unwrap_err();
    assert_eq!(error_line(&e), Some(2));
    assert!(e.to_string().contains("`x`"), "{e}");
    let e = read_snap("0 99999999999\n".as_bytes(), false).unwrap_err();
    assert!(
        matches!(e, GraphError::VertexOutOfRange { line: 1, .. }),
        "{e}"
    );
    let e = read_snap("0 4000000000\n".as_bytes(), false).unwrap_err();
    assert!(matches!(e, GraphError::TooLarge(_)), "{e}");
    let e = read_snap("0 -1\n".as_bytes(), false).unwrap_err();
    assert_eq!(error_line(&e), Some(1));
}

#[test]
fn dimacs_and_pace_headers() {
    let gr = "c road\np sp 4 3\na 1 2 10\na 2 3 5\na 3 4 1\n";
    let g = read_dimacs(gr.as_bytes(), false).unwrap();
    assert_eq!((g.num_vertices(), g.num_edges()), (4, 3));
    let pace = "p tw 3 2\n1 2\n2 3\n";
    assert_eq!(read_dimacs(pace.as_bytes(), false).unwrap().num_edges(), 2);
    let col = "p edge 3 1\ne 1 3\n";
    assert_eq!(
        read_dimacs(col.as_bytes(), false).unwrap().out_neighbors(2),
        &[0]
    );
    let e = read_dimacs("p tw 3 1\n1 4\n".as_bytes(), false).unwrap_err();
    assert!(
        matches!(e, GraphError::VertexOutOfRange { line: 2, id: 4, .. }),
        "{e}"
    );
    let e = read_dimacs("p tw 3 1\n0 1\n".as_bytes(), false).unwrap_err();
    assert!(e.to_string().contains("1-based"), "{e}");
    let e = read_dimacs("c x\n1 2\n".as_bytes(), false).unwrap_err();
    assert_eq!(error_line(&e), Some(2));
    let e = read_dimacs("p tw 3\n".as_bytes(), false).unwrap_err();
    assert_eq!(error_line(&e), Some(1));
    assert!(read_dimacs("c only comments\n".as_bytes(), false).is_err());
    // The edge count must match the header (Matrix Market's rule too).
    let e = read_dimacs("c x\np sp 3 2\na 1 2 1\n".as_bytes(), false).unwrap_err();
    assert!(matches!(e, GraphError::Parse { line: 2, .. }), "{e}");
    assert!(read_dimacs("p sp 3 1\na 1 2 1\na 2 3 1\n".as_bytes(), false).is_err());
    let e = read_dimacs("p tw 4000000000 1\n1 2\n".as_bytes(), false).unwrap_err();
    assert!(matches!(e, GraphError::TooLarge(_)), "{e}");
}

fn mm_error(text: &str) -> GraphError {
    read_matrix_market(text.as_bytes(), false).unwrap_err()
}

#[test]
fn matrix_market_general_symmetric_and_errors() {
    let general = "%%MatrixMarket matrix coordinate real general\n% c\n3 3 2\n1 2 0.5\n3 1 2\n";
    let g = read_matrix_market(general.as_bytes(), true).unwrap();
    assert!(g.is_directed());
    assert_eq!(g.in_neighbors(0), &[2]);
    let e = mm_error("%%MatrixMarket matrix coordinate real general\n2 3 0\n");
    assert_eq!(error_line(&e), Some(2));
    let e = mm_error("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n");
    assert!(
        matches!(
            e,
            GraphError::Format(FormatError::Truncated {
                expected: 2,
                found: 1,
                ..
            })
        ),
        "{e}"
    );
    let e = mm_error("%%MatrixMarket matrix array real general\n");
    assert_eq!(error_line(&e), Some(1));
    let e = mm_error("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n4 1\n");
    assert!(
        matches!(e, GraphError::VertexOutOfRange { line: 3, .. }),
        "{e}"
    );
}

#[test]
fn gzip_files_load_and_truncation_is_a_read_error() {
    let mut text = String::from("# big enough to span several deflate blocks\n");
    for i in 0..20_000u32 {
        text.push_str(&format!("{i}\t{}\n", (i * 7919) % 20_000));
    }
    let gz = gzip(text.as_bytes());
    let path = temp_file("edges.txt.gz", &gz);
    let g = load_graph(&path, LoadOptions::default()).unwrap();
    assert_eq!(g.num_vertices(), 20_000);
    let cut = temp_file("cut.txt.gz", &gz[..gz.len() / 2]);
    let e = load_graph(&cut, LoadOptions::default()).unwrap_err();
    match &e {
        GraphError::InFile { error, .. } => {
            assert!(matches!(**error, GraphError::Read { .. }), "{e}")
        }
        other => panic!("expected InFile(Read), got {other}"),
    }
    let line = error_line(&e).unwrap();
    assert!(line > 100 && line < 20_001, "line {line}: {e}");
    assert!(e.to_string().contains("cut.txt.gz"), "{e}");
}

#[test]
fn format_guess_and_missing_file() {
    assert_eq!(
        GraphFormat::from_path("a/road.gr.gz".as_ref()),
        GraphFormat::Dimacs
    );
    assert_eq!(
        GraphFormat::from_path("m.mtx".as_ref()),
        GraphFormat::MatrixMarket
    );
    assert_eq!(
        GraphFormat::from_path("email-Enron.txt.gz".as_ref()),
        GraphFormat::Snap
    );
    let mm = temp_file(
        "tiny.mtx",
        b"%%MatrixMarket matrix coordinate pattern symmetric\n2 2 1\n2 1\n",
    );
    assert_eq!(
        load_graph(&mm, LoadOptions::default()).unwrap().num_edges(),
        1
    );
    let e = load_graph("/nonexistent/graph.txt", LoadOptions::default()).unwrap_err();
    assert!(matches!(e, GraphError::Open { .. }), "{e}");
}

#[test]
fn hostile_inputs_fail_fast_without_large_allocations() {
    // `--graph /dev/zero`: one endless line, stopped at the 1 MiB cap, in every format.
    let zeros = || std::io::BufReader::new(std::io::Read::take(std::io::repeat(0), 4 << 20));
    for e in [
        read_snap(zeros(), false).unwrap_err(),
        read_dimacs(zeros(), false).unwrap_err(),
        read_matrix_market(zeros(), false).unwrap_err(),
    ] {
        assert!(
            matches!(
                e,
                GraphError::Format(FormatError::LineTooLong { line: 1, .. })
            ),
            "{e}"
        );
    }
    let path = temp_file("zeros.txt", &[0u8; 16]);
    let e = load_graph(&path, LoadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("zeros.txt"), "{e}");
    // Tiny files, huge headers: a billion vertices for one edge, a trillion declared edges.
    let e = mm_error(
        "%%MatrixMarket matrix coordinate pattern general\n1000000000 1000000000 1\n1 1\n",
    );
    assert!(
        matches!(e, GraphError::TooLarge(_)) && e.to_string().contains("GB"),
        "{e}"
    );
    let e = mm_error("%%MatrixMarket matrix coordinate pattern general\n3 3 1000000000000\n1 2\n");
    assert!(
        matches!(
            e,
            GraphError::Format(FormatError::Truncated { found: 1, .. })
        ),
        "{e}"
    );
    let e = read_dimacs("p sp 1000000000 1000000000000\na 1 2\n".as_bytes(), false).unwrap_err();
    assert!(matches!(e, GraphError::TooLarge(_)), "{e}");
    // Raw bytes are not echoed: a long binary field is cut and escaped.
    let e = read_snap(
        &[b'1', b' ', 0xff, 0x1b, b'[', b'2', b'J', b'\n'][..],
        false,
    )
    .unwrap_err();
    assert!(!e.to_string().contains('\u{1b}'), "{e}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
    /// Arbitrary bytes, alone or after a valid first line, are a graph or a typed error for
    /// every loader, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let _ = read_snap(body.as_slice(), false);
        let _ = read_dimacs(body.as_slice(), true);
        let _ = read_matrix_market(body.as_slice(), false);
        for first in [&b"p sp 5 4\n"[..], b"%%MatrixMarket matrix coordinate pattern symmetric\n5 5 3\n"] {
            let mut text = first.to_vec();
            text.extend_from_slice(&body);
            let _ = read_dimacs(text.as_slice(), false);
            let _ = read_matrix_market(text.as_slice(), true);
        }
    }
}
