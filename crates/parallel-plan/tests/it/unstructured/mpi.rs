//! Airfoil distributed over MPI ranks (feature `mpi`): the test relaunches this test binary
//! under `mpirun --oversubscribe -n 2/3`; every rank runs Airfoil sequentially and distributed
//! over `collectives`' MPI transport and reports whether they agree within 1e-12, then Airfoil
//! with the mesh scattered from the last rank (the scatter and its agreement round over MPI),
//! then a program that one rank declares differently (every rank must get the typed error of
//! the declarations' agreement round).
//!
//! Run by hand: `mpirun --oversubscribe -n 3 -x PARDIS_TEST_MESH_MPI=1 <test binary> --exact
//! unstructured::mpi::mesh_mpi_child --ignored --nocapture`.

use std::time::Duration;

use collectives::mpi::{MpiConfig, MpiJob};
use collectives_bench::mpirun::{inside_mpi_job, run_test_under_mpirun};
use parallel_plan::unstructured::apps::{airfoil, AirfoilConfig};
use parallel_plan::unstructured::{Backend, Context, DistConfig, Grid, UnstructuredError};

use super::rel_diff;

/// Set (through `mpirun -x`) in the ranks started by [`airfoil_over_mpi_matches_sequential`].
const CHILD: &str = "PARDIS_TEST_MESH_MPI";

#[test]
fn airfoil_over_mpi_matches_sequential() {
    if inside_mpi_job() {
        return;
    }
    for n in [2, 3] {
        let lines = run_mpi(n, Duration::from_secs(300));
        assert!(
            (0..n).all(|r| ["OK", "SCATTER OK", "MISMATCH OK"]
                .iter()
                .all(|what| lines.contains(&format!("RANK {r} {what}")))),
            "{n} MPI ranks reported {lines:#?}"
        );
    }
}

/// Runs `mesh_mpi_child` on `n` MPI ranks; returns the `RANK ...` lines.
fn run_mpi(n: usize, limit: Duration) -> Vec<String> {
    run_test_under_mpirun(n, "unstructured::mpi::mesh_mpi_child", CHILD, limit)
}

/// Body of each MPI rank; does nothing when run as an ordinary (ignored) test.
#[test]
#[ignore = "run under mpirun by airfoil_over_mpi_matches_sequential"]
fn mesh_mpi_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let job = MpiJob::init(&MpiConfig::default()).unwrap();
    let comm = job.world().clone();
    let me = comm.rank();
    let g = Grid::generate(500, 6).unwrap();
    let cfg = AirfoilConfig {
        iterations: 30,
        report_every: 10,
    };
    let seq = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    let mut ctx = Context::new(Backend::distributed(comm.clone(), DistConfig::default()));
    let out = airfoil(&mut ctx, &g, &cfg).unwrap();
    let d = rel_diff(&out.q, &seq.q);
    let rms_same = out
        .rms
        .iter()
        .zip(&seq.rms)
        .all(|(a, b)| (a.1 - b.1).abs() <= 1e-12 * b.1.abs());
    if d <= 1e-12 && rms_same {
        println!("RANK {me} OK");
    } else {
        println!("RANK {me} DIFFERS {d:e}");
    }

    // The mesh scattered from the last rank: the others declare the program with no elements.
    let root = comm.world_size() - 1;
    let empty = Grid {
        x: vec![],
        cell: vec![],
        edge: vec![],
        ecell: vec![],
        bedge: vec![],
        becell: vec![],
        bound: vec![],
    };
    let scatter = DistConfig {
        scatter_from: Some(root),
        ..DistConfig::default()
    };
    let mut ctx = Context::new(Backend::distributed(comm.clone(), scatter.clone()));
    let mesh = if me == root { &g } else { &empty };
    match airfoil(&mut ctx, mesh, &cfg) {
        Ok(o) if rel_diff(&o.q, &seq.q) <= 1e-12 => println!("RANK {me} SCATTER OK"),
        Ok(o) => println!("RANK {me} SCATTER DIFFERS {:e}", rel_diff(&o.q, &seq.q)),
        Err(e) => println!("RANK {me} SCATTER FAILED {e}"),
    }

    // Rank 1 declares its dat with another dimension: every rank gets the declarations'
    // mismatch naming rank 1 from the agreement round, none waits for a peer.
    let mut ctx = Context::new(Backend::distributed(comm, scatter));
    let mismatch = (|| {
        let n = if me == root { 4 } else { 0 };
        let s = ctx.decl_set("s", n)?;
        let dim = if me == 1 { 2 } else { 1 };
        let d = ctx.decl_dat("d", s, dim, vec![1.0; n * dim])?;
        ctx.par_loop("scale", s, &[d.rw()], |_, w| w[0][0] *= 2.0)
    })();
    match mismatch {
        Err(UnstructuredError::DistributionMismatch {
            what: "declarations",
            ranks,
        }) if ranks == [1] => println!("RANK {me} MISMATCH OK"),
        other => println!("RANK {me} MISMATCH GOT {other:?}"),
    }
}
