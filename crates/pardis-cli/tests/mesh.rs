//! `pardis mesh run` end to end: Airfoil distributed over ranks that are processes
//! (`--transport tcp`, started by the command itself) or threads (`local`, `tcp-threads`)
//! equals the sequential run (`--check`), with METIS as the default partitioner.

mod common;
use common::pardis;

#[test]
fn ranks_as_processes_or_threads_match_sequential() {
    for transport in ["tcp", "local", "tcp-threads"] {
        let args = [
            "mesh",
            "run",
            "--gen",
            "cells:600",
            "--backend",
            "dist",
            "--ranks",
            "3",
            "--transport",
            transport,
            "--iters",
            "10",
            "--check",
            "--json",
        ];
        let out = pardis(&args);
        assert!(
            out.status.success(),
            "pardis {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
        let diff = j["check_max_rel_diff"].as_f64().expect("checked");
        assert!(diff <= 1e-12, "{transport}: {diff}");
        assert_eq!(j["plan"]["ranks"], 3, "{transport}");
        assert_eq!(j["plan"]["partitioner"], "metis", "{transport}");
        assert_eq!(j["history"].as_array().map(Vec::len), Some(0));
    }
}

#[cfg(not(feature = "mpi"))]
#[test]
fn the_mpi_transport_without_the_mpi_feature_is_an_error() {
    let out = pardis(&[
        "mesh",
        "run",
        "--backend",
        "dist",
        "--transport",
        "mpi",
        "--iters",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`mpi` feature"), "{err}");
}
