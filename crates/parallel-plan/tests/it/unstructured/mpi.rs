//! Airfoil distributed over MPI ranks (feature `mpi`): the test relaunches this test binary
//! under `mpirun --oversubscribe -n 2/3`; every rank runs Airfoil sequentially and distributed
//! over `collectives`' MPI transport and reports whether they agree within 1e-12.
//!
//! Run by hand: `mpirun --oversubscribe -n 3 -x PARDIS_TEST_MESH_MPI=1 <test binary> --exact
//! unstructured::mpi::mesh_mpi_child --ignored --nocapture`.

use std::time::Duration;

use collectives::mpi::{MpiConfig, MpiJob};
use collectives_bench::mpirun::{inside_mpi_job, run_test_under_mpirun};
use parallel_plan::unstructured::apps::{airfoil, AirfoilConfig};
use parallel_plan::unstructured::{Backend, Context, DistConfig, Grid};

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
            (0..n).all(|r| lines.contains(&format!("RANK {r} OK"))),
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
    let mut ctx = Context::new(Backend::distributed(comm, DistConfig::default()));
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
}
