//! Integration tests of `collectives` (one binary; see the module docs).

mod api;
mod chaos;
mod correctness;
mod direct;
mod faults;
#[cfg(feature = "mpi")]
mod mpi;
mod shm;
mod tcp;

use std::time::Duration;

/// Runs `f` on a helper thread and fails the test if it takes longer than `limit` (a hang is a
/// failure, not a stuck CI).
pub(crate) fn with_timeout<R: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => {
            t.join().expect("test thread");
            r
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: surface its panic.
            std::panic::resume_unwind(t.join().expect_err("thread panicked"))
        }
        Err(_) => panic!("test did not finish within {limit:?} (hang)"),
    }
}
