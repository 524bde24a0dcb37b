//! The test harness that relaunches the running test binary under `mpirun`: one owner for the
//! MPI tests of `collectives` and of `parallel-plan`'s distributed meshes.
//!
//! A test calls [`run_test_under_mpirun`] with the name of an `#[ignore]`d test that is each
//! rank's body; that body returns at once unless the environment flag is set (as `mpirun -x`
//! sets it) and reports what it found as `RANK <r> ...` lines on stdout.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs the current test binary's test `child_test` (an exact name, run with `--ignored`) on `n`
/// MPI ranks with `env_flag=1` in each rank's environment; returns every `RANK ...` line the
/// ranks printed, in arrival order.
///
/// # Panics
/// This is a test harness: it panics when `mpirun` is not on `PATH`, when the job runs longer
/// than `limit` (it is killed), or when `mpirun` exits unsuccessfully, with the lines gathered
/// so far in the message.
pub fn run_test_under_mpirun(
    n: usize,
    child_test: &str,
    env_flag: &str,
    limit: Duration,
) -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new("mpirun")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            &n.to_string(),
        ])
        .args(["-x", &format!("{env_flag}=1")])
        .arg(exe)
        .args(["--exact", child_test, "--ignored", "--nocapture"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect(
            "`mpirun` must be on PATH for the `mpi` feature's tests (apt-get install openmpi-bin)",
        );
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(i) = line.find("RANK ") {
                let _ = tx.send(line[i..].to_string());
            }
        }
    });
    let end = Instant::now() + limit;
    let mut lines = Vec::new();
    while let Ok(l) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
        lines.push(l);
    }
    let finished = Instant::now() < end;
    if !finished {
        let _ = child.kill();
    }
    let status = child.wait().expect("waiting for mpirun");
    assert!(finished, "MPI job of {n} ranks hung; got {lines:#?}");
    assert!(
        status.success(),
        "mpirun -n {n} failed: {status}; got {lines:#?}"
    );
    lines
}

/// True inside a rank started by `mpirun` (Open MPI sets `OMPI_COMM_WORLD_SIZE`): the launching
/// test must not launch again from there.
pub fn inside_mpi_job() -> bool {
    std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some()
}
