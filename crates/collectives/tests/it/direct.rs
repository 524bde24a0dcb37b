//! Direct receive ([`Config::direct_receive`]): on TCP the reader thread fills posted regions of
//! the receiving collective's buffer (the MPI receiver too: `mpi.rs`). Same results as the staged
//! path on every collective, with rings cut into many pipelined pieces and several in flight at
//! once; frames that do not fit their slot are reported; the path is taken on TCP and not on
//! the local transport (which stages on purpose) or when switched off.

use std::time::Duration;

use collectives::{
    run_local_with, tcp, AllReduceAlgorithm, CollectiveError, Communicator, Config, ReduceOp,
    Result,
};

use crate::correctness::check_all;
use crate::with_timeout;

/// Runs `f` on `n` ranks as threads over the local transport or loopback TCP.
fn run<R: Send>(
    over_tcp: bool,
    cfg: &Config,
    n: usize,
    f: impl Fn(Communicator) -> R + Send + Sync,
) -> Vec<Result<R>> {
    if over_tcp {
        tcp::run_tcp_local(cfg, n, f)
    } else {
        run_local_with(cfg, n, f)
    }
}

/// Every collective, then four ring all-reduces in flight at once; returns the receives that
/// went direct.
fn rings_in_flight(comm: &Communicator, direct: bool) -> u64 {
    let (n, me) = (comm.world_size(), comm.rank());
    check_all::<f64>(comm, 1009);
    check_all::<i32>(comm, 4099);
    let len = 20_011;
    let handles: Vec<_> = (0..4)
        .map(|k| {
            let data: Vec<i64> = (0..len).map(|i| i as i64 * (me as i64 + 1) + k).collect();
            let h = comm
                .iall_reduce_with(data, ReduceOp::Sum, AllReduceAlgorithm::Ring)
                .unwrap();
            (k, h)
        })
        .collect();
    let ranks = n as i64;
    let mut direct_receives = 0;
    for (k, h) in handles {
        let (got, stats) = h.wait_with_stats();
        let ok = got
            .unwrap()
            .iter()
            .enumerate()
            .all(|(i, &x)| x == i as i64 * ranks * (ranks + 1) / 2 + k * ranks);
        assert!(ok, "ring {k}, rank {me} of {n}, direct {direct}");
        direct_receives += stats.direct_receives;
    }
    direct_receives
}

#[test]
fn direct_receive_matches_staged_and_is_used() {
    with_timeout(Duration::from_secs(180), || {
        for over_tcp in [false, true] {
            for direct in [true, false] {
                let cfg = Config {
                    direct_receive: direct,
                    ring_piece_bytes: 384,
                    ..Config::default()
                };
                for n in [2, 3, 4] {
                    let out = run(over_tcp, &cfg, n, |comm| rings_in_flight(&comm, direct));
                    let used: u64 = out.into_iter().map(|o| o.unwrap()).sum();
                    let what = format!("{n} ranks, tcp {over_tcp}");
                    if direct && over_tcp {
                        assert!(used > 0, "no receive went direct on {what}");
                    } else {
                        assert_eq!(used, 0, "{what}");
                    }
                }
                // Frames that do not fit a posted slot take the mailbox path and are reported.
                let out = run(over_tcp, &cfg, 3, |comm| {
                    let len = if comm.rank() == 1 { 30_000 } else { 30_001 };
                    comm.iall_reduce_with(
                        vec![1.0f64; len],
                        ReduceOp::Sum,
                        AllReduceAlgorithm::Ring,
                    )
                    .unwrap()
                    .wait()
                    .map(|v| v.len())
                });
                let errs: Vec<_> = out.into_iter().map(|o| o.unwrap()).collect();
                let count = |e: &Result<usize>| matches!(e, Err(CollectiveError::Mismatch { detail, .. }) if detail.contains("element count"));
                assert!(errs.iter().any(count), "{errs:?}");
                assert!(errs.iter().all(|e| e.is_err()), "{errs:?}");
            }
        }
    });
}
