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

#[test]
fn a_mesh_scattered_from_rank_0_matches_sequential() {
    // `--scatter`: rank 0 alone reads the mesh file and sends every other rank its part;
    // ranks as processes (the others never open the file) and as threads.
    let dir = std::env::temp_dir().join(format!("pardis-mesh-scatter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grid.dat");
    let gen = pardis(&[
        "mesh",
        "gen",
        "--cells",
        "500",
        "--out",
        file.to_str().unwrap(),
        "--force",
    ]);
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    for (transport, app) in [("tcp", "airfoil"), ("local", "jacobi")] {
        let args = [
            "mesh",
            "run",
            "--app",
            app,
            "--mesh",
            file.to_str().unwrap(),
            "--backend",
            "dist",
            "--ranks",
            "3",
            "--transport",
            transport,
            "--partitioner",
            "graph",
            "--scatter",
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
        assert!(
            j["check_max_rel_diff"].as_f64().expect("checked") <= 1e-12,
            "{transport}"
        );
        assert_eq!(j["scatter_from"], 0, "{transport}");
        assert_eq!(j["plan"]["ranks"], 3, "{transport}");
        // Every rank owns a part of the mesh that only rank 0 read.
        let owned = &j["plan"]["sets"][1]["owned"];
        assert!(
            owned
                .as_array()
                .unwrap()
                .iter()
                .all(|o| o.as_u64() > Some(0)),
            "{owned}"
        );
        assert!(j["mesh"]["cells"].as_u64() > Some(400));
    }
    // Without a distributed backend there is nothing to scatter: an error, not a silent run.
    let out = pardis(&[
        "mesh",
        "run",
        "--gen",
        "cells:100",
        "--scatter",
        "--iters",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--backend dist"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_mesh_on_rank_0_of_a_scatter_stops_every_rank_at_once() {
    // `--scatter` over processes: only rank 0 opens the file. When it cannot, it tells the
    // others, which stop with its reason instead of waiting for their parts until the
    // timeout (600 s): the run fails fast, non-zero, naming the file on every rank.
    let missing = std::env::temp_dir().join(format!(
        "pardis-mesh-missing-{}/grid.dat",
        std::process::id()
    ));
    let t = std::time::Instant::now();
    let out = pardis(&[
        "mesh",
        "run",
        "--mesh",
        missing.to_str().unwrap(),
        "--backend",
        "dist",
        "--ranks",
        "3",
        "--transport",
        "tcp",
        "--scatter",
        "--iters",
        "1",
    ]);
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Ranks 1 and 2 report rank 0's reason; the launcher, which ranks failed.
    assert_eq!(
        err.matches("rank 0 could not load the mesh").count(),
        2,
        "{err}"
    );
    assert!(
        err.matches("grid.dat").count() >= 3,
        "rank 0 and both others name the file: {err}"
    );
    assert!(
        err.contains("ranks [0, 1, 2] of the TCP run failed"),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}
