//! Faults and bad input: lost peers, mismatched collectives, abort, timeouts, invalid
//! arguments — always an error, never a hang.

use std::time::{Duration, Instant};

use collectives::{run_local_with, CollectiveError, Config, ReduceOp};

use crate::with_timeout;

fn quick() -> Config {
    Config {
        op_timeout: Duration::from_secs(10),
        ..Config::default()
    }
}

#[test]
fn panicking_rank_gives_peer_lost_to_all_others() {
    with_timeout(Duration::from_secs(20), || {
        for n in [2, 4, 5] {
            let start = Instant::now();
            let out = run_local_with(&quick(), n, |comm| {
                // One collective succeeds, then rank 1 dies before the second.
                comm.all_reduce(vec![1.0f32; 100], ReduceOp::Sum).unwrap();
                if comm.rank() == 1 {
                    panic!("rank 1 fails on purpose");
                }
                comm.all_reduce(vec![1.0f32; 100_000], ReduceOp::Sum)
            });
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "detection must not wait for the timeout"
            );
            for (r, o) in out.into_iter().enumerate() {
                match (r, o) {
                    (1, Err(CollectiveError::RankPanicked { rank: 1, message })) => {
                        assert!(message.contains("on purpose"))
                    }
                    (
                        _,
                        Ok(Err(CollectiveError::PeerLost {
                            rank: 1,
                            op: "all-reduce",
                            seq: 1,
                        })),
                    ) => {}
                    (r, o) => panic!("n={n} rank {r}: unexpected {o:?}"),
                }
            }
        }
    });
}

#[test]
fn mismatched_collectives_are_reported() {
    with_timeout(Duration::from_secs(20), || {
        // Element count.
        let out = run_local_with(&quick(), 3, |comm| {
            let len = if comm.rank() == 1 { 12 } else { 10 };
            comm.all_reduce(vec![1i64; len], ReduceOp::Sum)
        });
        let errs: Vec<CollectiveError> = out.into_iter().map(|o| o.unwrap().unwrap_err()).collect();
        assert!(errs.iter().any(|e| matches!(e, CollectiveError::Mismatch { detail, .. } if detail.contains("element count"))), "{errs:?}");
        // Dtype.
        let out = run_local_with(&quick(), 2, |comm| {
            if comm.rank() == 0 {
                comm.all_reduce(vec![1i32; 4], ReduceOp::Sum).map(drop)
            } else {
                comm.all_reduce(vec![1f32; 4], ReduceOp::Sum).map(drop)
            }
        });
        for o in out {
            let e = o.unwrap().unwrap_err();
            assert!(
                matches!(&e, CollectiveError::Mismatch { detail, .. } if detail.contains("dtype")),
                "{e}"
            );
        }
        // Collective type and reduce op.
        let out = run_local_with(&quick(), 2, |comm| {
            if comm.rank() == 0 {
                comm.all_gather(vec![1u8; 4]).map(drop)
            } else {
                comm.all_reduce(vec![1u8; 4], ReduceOp::Max).map(drop)
            }
        });
        assert!(out
            .into_iter()
            .all(|o| matches!(o.unwrap(), Err(CollectiveError::Mismatch { .. }))));
        let out = run_local_with(&quick(), 2, |comm| {
            let op = if comm.rank() == 0 {
                ReduceOp::Min
            } else {
                ReduceOp::Max
            };
            comm.all_reduce(vec![1u8; 4], op).map(drop)
        });
        assert!(out.into_iter().all(|o| matches!(o.unwrap(), Err(CollectiveError::Mismatch { detail, .. }) if detail.contains("reduce op"))));
    });
}

/// Rooted collectives whose root disagrees between ranks fail with `Mismatch` naming the root
/// on *every* rank, never `Ok` with a wrong result and never by `Timeout`: the root travels
/// in every frame header, and rooted collectives carry agreement rounds whose
/// messages do not depend on the root (`schedule::agreed`). Before it, reduce on 3 ranks with
/// roots `[1, 0, 0]` ended `Ok` on every rank with a wrong sum (every rank believed itself a
/// sender, so no frame crossed the two views). Local (threads) and TCP transports; broadcast
/// (binomial and pipelined) and reduce; every root assignment that is not unanimous on 2 and
/// 3 ranks (local), the named cases on 4 ranks and over TCP.
#[test]
fn mismatched_roots_fail_with_mismatch_on_every_rank() {
    use collectives::tcp::run_tcp_local;
    use collectives::{BroadcastAlgorithm, Communicator, Result};
    with_timeout(Duration::from_secs(120), || {
        let check = |what: &str, out: Vec<Result<Result<()>>>| {
            for (r, o) in out.into_iter().enumerate() {
                match o.unwrap() {
                    Err(CollectiveError::Mismatch { detail, .. }) if detail.contains("root") => {}
                    other => panic!("{what} rank {r}: expected a root Mismatch, got {other:?}"),
                }
            }
        };
        type Body = Box<dyn Fn(Communicator, usize) -> Result<()> + Sync>;
        let ops: Vec<(&str, Config, Body)> = vec![
            (
                "reduce",
                quick(),
                Box::new(|comm, root| {
                    comm.reduce(vec![1.0f64; 1000], ReduceOp::Sum, root)
                        .map(drop)
                }),
            ),
            (
                "broadcast binomial",
                Config {
                    broadcast: BroadcastAlgorithm::Binomial,
                    ..quick()
                },
                Box::new(|comm, root| {
                    comm.broadcast(vec![comm.rank() as i32; 1000], root)
                        .map(drop)
                }),
            ),
            (
                "broadcast pipelined",
                Config {
                    broadcast: BroadcastAlgorithm::Pipelined,
                    pipeline_chunk_bytes: 1024,
                    ..quick()
                },
                Box::new(|comm, root| {
                    comm.broadcast(vec![comm.rank() as i32; 1000], root)
                        .map(drop)
                }),
            ),
        ];
        let mut cases: Vec<Vec<usize>> = vec![vec![0, 1], vec![1, 0]];
        for code in 0..27usize {
            let roots = vec![code % 3, code / 3 % 3, code / 9];
            if roots.iter().any(|&r| r != roots[0]) {
                cases.push(roots);
            }
        }
        cases.extend([vec![2, 0, 0, 0], vec![1, 1, 3, 3], vec![0, 0, 0, 3]]);
        for (name, cfg, body) in &ops {
            for roots in &cases {
                let what = format!("local {name} roots {roots:?}");
                let out = run_local_with(cfg, roots.len(), |comm| {
                    let root = roots[comm.rank()];
                    body(comm, root)
                });
                check(&what, out);
            }
            for roots in [&[1, 0, 0][..], &[0, 0, 1], &[0, 1], &[2, 0, 0, 0]] {
                let what = format!("tcp {name} roots {roots:?}");
                let out = run_tcp_local(cfg, roots.len(), |comm| {
                    let root = roots[comm.rank()];
                    body(comm, root)
                });
                check(&what, out);
            }
        }
        // The wrong result the agreement rounds prevent: with agreeing roots the same calls
        // succeed, and the sum reaches the root.
        let out = run_local_with(&quick(), 3, |comm| {
            comm.reduce(vec![1.0f64; 4], ReduceOp::Sum, 1)
        });
        assert_eq!(out[1].as_ref().unwrap().as_ref().unwrap(), &vec![3.0; 4]);
    });
}

/// Over loopback TCP as with local ranks, a rank whose closure panics is reported with its
/// panic's message, and its peer's collective fails with `PeerLost` (its connections closed
/// as the rank unwound) rather than waiting for the timeout.
#[test]
fn a_panicking_tcp_rank_reports_its_message() {
    use collectives::tcp::run_tcp_local;
    with_timeout(Duration::from_secs(60), || {
        let out = run_tcp_local(&quick(), 2, |comm| {
            if comm.rank() == 1 {
                panic!("rank {} fails on purpose", comm.rank());
            }
            comm.all_reduce(vec![1.0f32; 1000], ReduceOp::Sum)
        });
        for (r, o) in out.into_iter().enumerate() {
            match (r, o) {
                (1, Err(CollectiveError::RankPanicked { rank: 1, message })) => {
                    assert_eq!(message, "rank 1 fails on purpose")
                }
                (0, Ok(Err(CollectiveError::PeerLost { rank: 1, .. }))) => {}
                (r, o) => panic!("rank {r}: unexpected {o:?}"),
            }
        }
    });
}

/// A root out of range on only some ranks fails there with `InvalidInput` and on every other
/// rank promptly with a root `Mismatch` — not by `Timeout` after `op_timeout` (10 s here):
/// the refusing rank submits the collective as a refused one, whose failure notice reaches the
/// peers. The communicator stays usable afterwards (sequence numbers stay aligned). Local
/// threads and TCP; reduce and both broadcasts; every rank out of range, too.
#[test]
fn out_of_range_root_on_some_ranks_fails_promptly_on_every_rank() {
    use collectives::tcp::run_tcp_local;
    use collectives::{BroadcastAlgorithm, Communicator, Result};
    with_timeout(Duration::from_secs(120), || {
        let check = |what: &str, roots: &[usize], out: Vec<Result<Result<Vec<f64>>>>| {
            let n = roots.len();
            for (r, o) in out.into_iter().enumerate() {
                match o.unwrap() {
                    Err(CollectiveError::InvalidInput(m))
                        if roots[r] >= n && m.contains("out of range") => {}
                    Err(CollectiveError::Mismatch { detail, .. })
                        if roots[r] < n && detail.contains("root") => {}
                    other => panic!("{what} rank {r}: got {other:?}"),
                }
            }
        };
        type Body = Box<dyn Fn(&Communicator, usize) -> Result<Vec<f64>> + Sync>;
        let ops: Vec<(&str, Body)> = vec![
            (
                "reduce",
                Box::new(|comm, root| comm.reduce(vec![1.0; 1000], ReduceOp::Sum, root)),
            ),
            (
                "broadcast binomial",
                Box::new(|comm, root| {
                    comm.ibroadcast_with(vec![1.0; 1000], root, BroadcastAlgorithm::Binomial)?
                        .wait()
                }),
            ),
            (
                "broadcast pipelined",
                Box::new(|comm, root| {
                    comm.ibroadcast_with(vec![1.0; 1000], root, BroadcastAlgorithm::Pipelined)?
                        .wait()
                }),
            ),
        ];
        let cases: [&[usize]; 6] = [
            &[0, 2],
            &[5, 1],
            &[0, 0, 3],
            &[usize::MAX, 1, 1],
            &[1, 4, 1, 4],
            &[7, 7],
        ];
        for (name, body) in &ops {
            for roots in cases {
                for tcp in [false, true] {
                    let what = format!("{} {name} roots {roots:?}", ["local", "tcp"][tcp as usize]);
                    let start = Instant::now();
                    let rank = |comm: Communicator| {
                        let r = body(&comm, roots[comm.rank()]);
                        // Still usable: the next collective lines up on every rank.
                        let sum = comm.all_reduce(vec![1i32; 3], ReduceOp::Sum).unwrap();
                        assert_eq!(sum, vec![roots.len() as i32; 3]);
                        r
                    };
                    let out = if tcp {
                        run_tcp_local(&quick(), roots.len(), rank)
                    } else {
                        run_local_with(&quick(), roots.len(), rank)
                    };
                    assert!(
                        start.elapsed() < Duration::from_secs(3),
                        "{what}: {:?}, op_timeout is 10 s",
                        start.elapsed()
                    );
                    check(&what, roots, out);
                }
            }
        }
    });
}

/// A buffer that does not divide into blocks on one rank only (reduce-scatter, all-to-all):
/// `InvalidInput` there, a `Mismatch` on the others at once (the refused collective's notice),
/// and the communicator usable afterwards. Local threads and TCP. The refusing rank's length is
/// 7 (an element-count difference with the peers' blocks of 2) or 2: its fingerprint then
/// equals the peers', and the notice itself reports the mismatch (it used to arrive as
/// `Remote`).
#[test]
fn indivisible_buffer_on_one_rank_fails_promptly_on_every_rank() {
    use collectives::tcp::run_tcp_local;
    use collectives::{Communicator, Result};
    with_timeout(Duration::from_secs(60), || {
        type Body = fn(&Communicator, usize) -> Result<Vec<i32>>;
        let ops: [(&str, Body); 2] = [
            ("reduce-scatter", |comm, len| {
                comm.reduce_scatter(vec![1; len], ReduceOp::Sum)
            }),
            ("all-to-all", |comm, len| comm.all_to_all(vec![1; len])),
        ];
        for (name, body) in ops {
            for (tcp, odd) in [(false, 7), (true, 7), (false, 2), (true, 2)] {
                let start = Instant::now();
                let rank = |comm: Communicator| {
                    let len = if comm.rank() == 2 { odd } else { 6 };
                    let r = body(&comm, len);
                    let sum = comm.all_reduce(vec![1i32; 3], ReduceOp::Sum).unwrap();
                    assert_eq!(sum, vec![3; 3]);
                    r
                };
                let out = if tcp {
                    run_tcp_local(&quick(), 3, rank)
                } else {
                    run_local_with(&quick(), 3, rank)
                };
                assert!(
                    start.elapsed() < Duration::from_secs(3),
                    "{name} tcp {tcp} length {odd}: {:?}, op_timeout is 10 s",
                    start.elapsed()
                );
                for (r, o) in out.into_iter().enumerate() {
                    match o.unwrap() {
                        Err(CollectiveError::InvalidInput(m))
                            if r == 2 && m.contains("divisible") => {}
                        Err(CollectiveError::Mismatch { detail, .. })
                            if r < 2 && odd == 7 && detail.contains("element count") => {}
                        Err(CollectiveError::Mismatch { detail, .. })
                            if r < 2 && odd == 2 && detail.contains("not divisible") => {}
                        other => panic!("{name} tcp {tcp} length {odd} rank {r}: got {other:?}"),
                    }
                }
            }
        }
    });
}

/// Failure notices that arrive after their collective finished here (the receive of a
/// point-to-point message fails on a count mismatch after the sender's send completed; a
/// collective whose notice is passed on by every rank that fails) are dropped: the number of
/// open mailboxes stays bounded over many failed operations instead of growing by one or more
/// per failure. Local threads and TCP, 3 ranks (rank 2 is not a party to the messages).
#[test]
fn late_failure_notices_leave_no_mailboxes_behind() {
    use collectives::tcp::run_tcp_local;
    use collectives::Communicator;
    const ROUNDS: usize = 60;
    with_timeout(Duration::from_secs(120), || {
        for tcp in [false, true] {
            let rank = |comm: Communicator| {
                for _ in 0..ROUNDS {
                    match comm.rank() {
                        0 => comm.send(vec![1i32; 4], 1).unwrap(),
                        1 => {
                            let r = comm.recv::<i32>(0, 5);
                            assert!(matches!(r, Err(CollectiveError::Mismatch { .. })), "{r:?}");
                        }
                        _ => {}
                    }
                    // Refused on rank 2, failed on the others, each passing the notice on.
                    let len = if comm.rank() == 2 { 7 } else { 6 };
                    let r = comm.reduce_scatter(vec![1i32; len], ReduceOp::Sum);
                    assert!(r.is_err(), "{r:?}");
                    comm.barrier().unwrap();
                }
                // Notices sent before the barrier have arrived once it is done, except the
                // last round's on ranks the barrier did not hear from directly: a few at most.
                comm.barrier().unwrap();
                comm.barrier().unwrap();
                let stats = comm.engine_stats();
                assert_eq!(
                    stats.failed as usize,
                    ROUNDS * (1 + usize::from(comm.rank() == 1))
                );
                stats.open_mailboxes
            };
            let out = if tcp {
                run_tcp_local(&quick(), 3, rank)
            } else {
                run_local_with(&quick(), 3, rank)
            };
            for (r, o) in out.into_iter().enumerate() {
                let open = o.unwrap();
                assert!(
                    open <= 2,
                    "tcp {tcp} rank {r}: {open} mailboxes open after {ROUNDS} rounds"
                );
            }
        }
    });
}

#[test]
fn a_failed_send_tells_its_destination() {
    use collectives::tcp::run_tcp_local;
    use collectives::{Communicator, Mode};
    // Ordered mode: rank 0's all-reduce (which rank 1 never joins) deadlocks, and the send
    // queued behind it is aborted with it. Rank 1 then posts the matching receive: it must
    // fail with rank 0's reason, not with a deadlock (or timeout) of its own.
    let cfg = Config {
        mode: Mode::Ordered,
        deadlock_timeout: Duration::from_millis(300),
        ..quick()
    };
    with_timeout(Duration::from_secs(60), move || {
        for tcp in [false, true] {
            let sent = std::sync::Barrier::new(2);
            let rank = |comm: Communicator| {
                if comm.rank() == 0 {
                    let stuck = comm.iall_reduce(vec![1.0f32; 4], ReduceOp::Sum).unwrap();
                    let send = comm.isend(vec![1u8; 4], 1).unwrap();
                    assert!(matches!(
                        stuck.wait(),
                        Err(CollectiveError::Deadlock { .. })
                    ));
                    let r = send.wait();
                    assert!(matches!(r, Err(CollectiveError::Aborted(_))), "{r:?}");
                    sent.wait();
                    Ok(())
                } else {
                    sent.wait();
                    comm.recv::<u8>(0, 4).map(drop)
                }
            };
            let out = if tcp {
                run_tcp_local(&cfg, 2, rank)
            } else {
                run_local_with(&cfg, 2, rank)
            };
            out[0].as_ref().unwrap().as_ref().unwrap();
            assert!(
                matches!(&out[1], Ok(Err(CollectiveError::Remote { rank: 0, reason, .. }))
                    if reason.contains("deadlocked")),
                "tcp {tcp}: {:?}",
                out[1]
            );
        }
    });
}

#[test]
fn abort_from_another_thread_ends_pending_operations() {
    with_timeout(Duration::from_secs(20), || {
        let out = run_local_with(&quick(), 2, |comm| {
            if comm.rank() == 1 {
                // Never joins the all-reduce; just waits until rank 0 gave up.
                return comm.recv::<u8>(0, 1).map(drop);
            }
            let abort = comm.abort_handle();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                abort.abort("stopped by the test");
            });
            let r = comm.all_reduce(vec![1.0f64; 8], ReduceOp::Sum);
            t.join().unwrap();
            assert!(
                matches!(&r, Err(CollectiveError::Aborted(m)) if m.contains("stopped by the test")),
                "{r:?}"
            );
            // Later operations fail at once.
            let later = comm.send(vec![1u8], 1);
            assert!(
                matches!(later, Err(CollectiveError::Aborted(_))),
                "{later:?}"
            );
            Ok(())
        });
        out[0].as_ref().unwrap().as_ref().unwrap();
        // Rank 1's receive from the aborted rank fails instead of hanging.
        assert!(
            matches!(&out[1], Ok(Err(CollectiveError::PeerLost { rank: 0, .. }))),
            "{:?}",
            out[1]
        );
    });
}

#[test]
fn absent_peer_times_out_naming_it() {
    with_timeout(Duration::from_secs(20), || {
        let cfg = Config {
            op_timeout: Duration::from_millis(200),
            ..Config::default()
        };
        let out = run_local_with(&cfg, 3, |comm| {
            if comm.rank() == 2 {
                std::thread::sleep(Duration::from_millis(600));
                return Ok(());
            }
            comm.barrier()
        });
        let timeouts = out
            .iter()
            .filter(|o| matches!(o, Ok(Err(CollectiveError::Timeout { waiting_on, .. })) if waiting_on.contains(&2)))
            .count();
        assert!(timeouts >= 1, "{out:?}");
        assert!(out[..2].iter().all(|o| o.as_ref().unwrap().is_err()));
    });
}

#[test]
fn invalid_arguments_are_typed_errors() {
    with_timeout(Duration::from_secs(10), || {
        let out = run_local_with(&quick(), 3, |comm| {
            let errs = [
                comm.ibroadcast(vec![1u8], 3).err(),
                comm.ireduce(vec![1u8], ReduceOp::Sum, 7).err(),
                comm.ireduce_scatter(vec![1u8; 4], ReduceOp::Sum).err(),
                comm.iall_to_all(vec![1u8; 5]).err(),
                comm.isend(vec![1u8], comm.rank()).err(),
                comm.irecv::<u8>(9, 1).err(),
            ];
            errs.into_iter()
                .all(|e| matches!(e, Some(CollectiveError::InvalidInput(_))))
        });
        assert!(out.into_iter().all(|o| o.unwrap()));
    });
}

/// Resource bounds (issue 30): world sizes that would spawn threads without bound are typed
/// errors before anything runs (the chaos and benchmark bounds: collectives-bench's tests).
#[test]
fn resource_bounds_are_typed_errors_before_anything_runs() {
    use collectives::tcp::run_tcp_local;
    use collectives::{run_local, MAX_LOCAL_RANKS};

    let invalid = |r: Result<(), CollectiveError>, what: &str| match r {
        Err(CollectiveError::InvalidInput(m)) => m,
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    };
    with_timeout(Duration::from_secs(20), move || {
        // World sizes: nothing is spawned for 0, MAX + 1 or usize::MAX ranks.
        for n in [0, MAX_LOCAL_RANKS + 1, usize::MAX] {
            let calls = std::sync::atomic::AtomicUsize::new(0);
            let r = run_local(n, |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            });
            let m = invalid(r.map(drop), "run_local");
            assert!(m.contains("local ranks"), "{m}");
            assert_eq!(calls.into_inner(), 0);
            let out = run_local_with(&quick(), n, |_| ());
            assert_eq!(out.len(), 1);
            let out = run_tcp_local(&quick(), n, |_| ());
            assert!(matches!(out[..], [Err(CollectiveError::InvalidInput(_))]));
        }
        // Engine settings out of their documented bounds (Config::validate): refused before
        // any rank starts, on both launchers.
        let spinning = Config {
            busy_poll: collectives::MAX_BUSY_POLL * 2,
            ..quick()
        };
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let out = run_local_with(&spinning, 2, |_| {
            calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        assert!(
            matches!(&out[..], [Err(CollectiveError::InvalidInput(m))] if m.contains("busy_poll")),
            "{out:?}"
        );
        assert_eq!(calls.into_inner(), 0);
        let out = run_tcp_local(&spinning, 2, |_| ());
        assert!(
            matches!(&out[..], [Err(CollectiveError::InvalidInput(m))] if m.contains("busy_poll")),
            "{out:?}"
        );
        let never_parks = Config {
            park_interval: std::time::Duration::ZERO,
            ..quick()
        };
        let out = run_local_with(&never_parks, 2, |_| ());
        assert!(
            matches!(&out[..], [Err(CollectiveError::InvalidInput(m))] if m.contains("park_interval")),
            "{out:?}"
        );
    });
}

/// Loopback TCP ranks in one process are refused up front, naming the need and the limit, when
/// their sockets would exceed the open-file limit (200 ranks used to fail after 30 s with a
/// misleading "peer rank 129 was lost").
#[test]
fn tcp_ranks_beyond_the_open_file_limit_are_refused_up_front() {
    use collectives::tcp::{local_descriptors, run_tcp_local};
    use collectives::MAX_LOCAL_RANKS;

    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let Some(limit) = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u64>().ok())
    else {
        eprintln!("skipped: no open-file limit to test against");
        return;
    };
    let Some(n) = (2..=MAX_LOCAL_RANKS).find(|&n| local_descriptors(n) > limit) else {
        eprintln!("skipped: the open-file limit {limit} fits {MAX_LOCAL_RANKS} ranks");
        return;
    };
    with_timeout(Duration::from_secs(10), move || {
        // Refused before any rendezvous (which would take its 30 s timeout: the watchdog).
        let out = run_tcp_local(&quick(), n, |_| ());
        match &out[..] {
            [Err(CollectiveError::InvalidInput(m))] => {
                assert!(m.contains("too many open files"), "{m}");
                assert!(m.contains(&limit.to_string()), "{m}");
            }
            other => panic!("expected one InvalidInput, got {other:?}"),
        }
    });
}
