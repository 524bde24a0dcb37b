//! Communicator API: handles, callbacks, split, statistics, Send/Sync.

use std::time::Duration;

use collectives::{run_local, AbortHandle, Communicator, Handle, ReduceOp};

use crate::with_timeout;

#[test]
fn public_handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Communicator>();
    send_sync::<AbortHandle>();
    send_sync::<Handle<f32>>();
}

#[test]
fn wait_timeout_test_callbacks_and_channels() {
    with_timeout(Duration::from_secs(20), || {
        run_local(2, |comm| {
            let peer = 1 - comm.rank();
            if comm.rank() == 0 {
                let mut h = comm.irecv::<i32>(peer, 3).unwrap();
                assert!(!h.test());
                assert!(h.wait_timeout(Duration::from_millis(20)).unwrap().is_none());
                comm.send(vec![0i32], peer).unwrap(); // tells rank 1 to go on
                let got = loop {
                    if let Some(v) = h.wait_timeout(Duration::from_millis(50)).unwrap() {
                        break v;
                    }
                };
                assert_eq!(got, vec![7, 8, 9]);
            } else {
                comm.recv::<i32>(peer, 1).unwrap();
                comm.send(vec![7i32, 8, 9], peer).unwrap();
            }
            let (tx, rx) = std::sync::mpsc::channel();
            comm.iall_reduce(vec![comm.rank() as i64; 2], ReduceOp::Max)
                .unwrap()
                .on_complete(move |r, stats| tx.send((r.unwrap(), stats.op)).unwrap());
            assert_eq!(rx.recv().unwrap(), (vec![1, 1], "all-reduce"));
            let rx = comm
                .iall_gather(vec![comm.rank() as u8])
                .unwrap()
                .into_receiver();
            assert_eq!(rx.recv().unwrap().unwrap(), vec![0, 1]);
            let (r, stats) = comm.ibarrier().unwrap().wait_with_stats();
            r.unwrap();
            assert_eq!(stats.op, "barrier");
            assert!(stats.polls >= 1 && stats.queue_len_at_submit >= 1);
        })
        .unwrap();
    });
}

#[test]
fn split_by_colour_and_key() {
    with_timeout(Duration::from_secs(20), || {
        let out = run_local(6, |world| {
            // Even and odd ranks, ordered by descending world rank.
            let sub = world
                .split((world.rank() % 2) as u64, -(world.rank() as i64))
                .unwrap();
            let members = sub.group().to_vec();
            let sum = sub
                .all_reduce(vec![world.rank() as i32], ReduceOp::Sum)
                .unwrap()[0];
            let nested = sub
                .split(0, 0)
                .unwrap()
                .all_gather(vec![world.rank() as u8])
                .unwrap();
            (
                sub.rank(),
                sub.world_size(),
                members,
                sum,
                nested,
                sub.id() != world.id(),
            )
        })
        .unwrap();
        for (w, (r, size, members, sum, nested, fresh)) in out.into_iter().enumerate() {
            let want: Vec<usize> = if w % 2 == 0 {
                vec![4, 2, 0]
            } else {
                vec![5, 3, 1]
            };
            assert_eq!(size, 3);
            assert_eq!(members, want);
            assert_eq!(members[r], w);
            assert_eq!(sum, if w % 2 == 0 { 6 } else { 9 });
            assert_eq!(nested, want.iter().map(|&x| x as u8).collect::<Vec<_>>());
            assert!(fresh);
        }
    });
}

#[test]
fn engine_counts_submissions_and_completions() {
    with_timeout(Duration::from_secs(20), || {
        let stats = run_local(3, |comm| {
            for _ in 0..5 {
                comm.all_reduce(vec![1.0f32; 10], ReduceOp::Sum).unwrap();
            }
            comm.engine_stats()
        })
        .unwrap();
        for s in stats {
            assert_eq!((s.submitted, s.completed, s.failed), (5, 5, 0));
            assert!(s.max_queue_len >= 1);
        }
    });
}

/// Communicators created and dropped in a loop leave no records behind: each `dup` runs a
/// collective and point-to-point messages, and once it is dropped the inbox forgets its
/// finished-collective records (before, one per stream stayed for the life of the rank).
#[test]
fn dropped_communicators_leave_no_finished_records() {
    with_timeout(Duration::from_secs(60), || {
        let stats = run_local(3, |comm| {
            let (me, n) = (comm.rank(), comm.world_size());
            for _ in 0..200 {
                let d = comm.dup().unwrap();
                d.all_reduce(vec![1.0f32; 4], ReduceOp::Sum).unwrap();
                let h = d.isend(vec![me as i32], (me + 1) % n).unwrap();
                let got = d.recv::<i32>((me + n - 1) % n, 1).unwrap();
                assert_eq!(got, vec![((me + n - 1) % n) as i32]);
                h.wait().unwrap();
                d.barrier().unwrap();
            }
            comm.barrier().unwrap();
            comm.engine_stats()
        })
        .unwrap();
        for s in stats {
            // The world's own collectives (the splits' all-gathers and the barrier) only.
            assert!(s.finished_records <= 2, "{s:?}");
            assert_eq!(s.open_mailboxes, 0, "{s:?}");
        }
    });
}

/// Sends to different destinations are different operations on the sending rank: distinct
/// sequence numbers (before, both were `rank << 40 | n` with `n` counted per destination, so
/// they shared a mailbox and a finished-operation record).
#[test]
fn sends_to_different_destinations_have_distinct_keys() {
    with_timeout(Duration::from_secs(30), || {
        let out = run_local(3, |comm| {
            if comm.rank() == 0 {
                let a = comm.isend(vec![1i32], 1).unwrap();
                let b = comm.isend(vec![2i32], 2).unwrap();
                let (ra, sa) = a.wait_with_stats();
                let (rb, sb) = b.wait_with_stats();
                ra.unwrap();
                rb.unwrap();
                assert_ne!(sa.seq, sb.seq, "{sa:?} {sb:?}");
                // Receives from 1 and 2 (keyed by their sender) are distinct too.
                let c = comm.irecv::<i32>(1, 1).unwrap();
                let d = comm.irecv::<i32>(2, 1).unwrap();
                let (rc, sc) = c.wait_with_stats();
                let (rd, sd) = d.wait_with_stats();
                assert_ne!(sc.seq, sd.seq, "{sc:?} {sd:?}");
                // The first send to 1 and the first receive from 1 share the number (peer
                // and count) and are told apart by their direction.
                assert_eq!((sa.op, sc.op), ("send", "recv"), "{sa:?} {sc:?}");
                assert_ne!((sa.op, sa.seq), (sc.op, sc.seq), "{sa:?} {sc:?}");
                vec![rc.unwrap()[0], rd.unwrap()[0]]
            } else {
                let me = comm.rank() as i32;
                let got = comm.recv::<i32>(0, 1).unwrap();
                comm.send(vec![10 * me], 0).unwrap();
                got
            }
        })
        .unwrap();
        assert_eq!(out, vec![vec![10, 20], vec![1], vec![2]]);
    });
}

/// A send and a receive with the same peer and count are different operations: a failure
/// of the send (the receiver refuses it) does not fail the receive from the same rank.
#[test]
fn a_failed_send_does_not_fail_the_receive_with_the_same_number() {
    with_timeout(Duration::from_secs(30), || {
        let out = run_local(2, |comm| {
            if comm.rank() == 0 {
                let s = comm.isend(vec![1i32], 1).unwrap();
                let r = comm.irecv::<i32>(1, 1).unwrap();
                let (got, stats) = r.wait_with_stats();
                assert_eq!(stats.op, "recv");
                // The send may have finished before the refusal came (then it is dropped).
                let (sent, st) = s.wait_with_stats();
                assert_eq!(st.op, "send");
                if let Err(e) = sent {
                    assert!(e.to_string().contains("send #"), "{e}");
                }
                comm.barrier().unwrap();
                // The refusal went to the send's own key: no stray mailbox was opened for it.
                assert_eq!(comm.engine_stats().open_mailboxes, 0);
                got.unwrap()
            } else {
                let e = comm.recv::<i64>(0, 1).unwrap_err();
                assert!(e.to_string().contains("recv #"), "{e}");
                comm.send(vec![7i32], 0).unwrap();
                comm.barrier().unwrap();
                assert_eq!(comm.engine_stats().open_mailboxes, 0);
                vec![0]
            }
        })
        .unwrap();
        assert_eq!(out, vec![vec![7], vec![0]]);
    });
}

/// One launcher over the transports: the same closure gives the same sums on local threads, on
/// loopback TCP and as the only rank of a TCP job; an impossible world is a typed error.
#[test]
fn one_launcher_runs_the_same_closure_on_every_transport() {
    use collectives::tcp::TcpConfig;
    use collectives::{CollectiveError, Config, Launch};

    with_timeout(Duration::from_secs(30), || {
        let body = |comm: Communicator| {
            let n = comm.world_size() as i64;
            let sum = comm.all_reduce(vec![comm.rank() as i64 + 1; 5], ReduceOp::Sum)?;
            assert_eq!(sum, vec![n * (n + 1) / 2; 5]);
            Ok::<_, CollectiveError>((comm.rank(), comm.world_size()))
        };
        for launch in [
            Launch::threads(3),
            Launch::LocalTcp {
                ranks: 3,
                engine: Config::default(),
            },
        ] {
            let out: Vec<_> = launch
                .run(body)
                .unwrap()
                .into_iter()
                .collect::<Result<_, _>>()
                .unwrap();
            assert_eq!(out, vec![(0, 3), (1, 3), (2, 3)], "{launch:?}");
        }
        let alone = Launch::Tcp(TcpConfig::new(0, 1, "127.0.0.1:0"));
        assert_eq!(alone.run(body).unwrap().pop().unwrap().unwrap(), (0, 1));
        for bad in [
            Launch::threads(0),
            Launch::LocalTcp {
                ranks: 0,
                engine: Config::default(),
            },
        ] {
            assert!(
                matches!(bad.run(|_| ()), Err(CollectiveError::InvalidInput(_))),
                "{bad:?}"
            );
        }
        let bad = Launch::Tcp(TcpConfig::new(3, 2, "127.0.0.1:0"));
        assert!(matches!(
            bad.run(|_| ()),
            Err(CollectiveError::Rendezvous(_))
        ));
    });
}

/// An honest sender may run any number of blocking sends ahead of a receiver that starts
/// late (a blocking send returns once the transport has the data): 70 000 of them, above the
/// 65 536 frame-opened mailboxes a per-peer cap once allowed (the sender then counted as lost
/// and the receives failed), all arrive, in order, and the sender stays a live peer.
#[test]
fn blocking_sends_may_run_far_ahead_of_a_late_receiver() {
    const N: i32 = 70_000;
    with_timeout(Duration::from_secs(300), || {
        let sent_all = std::sync::Barrier::new(2);
        let out = run_local(2, |comm| {
            if comm.rank() == 0 {
                for i in 0..N {
                    comm.send(vec![i], 1).unwrap();
                }
                sent_all.wait();
                comm.recv::<i32>(1, 1).unwrap()
            } else {
                sent_all.wait();
                for i in 0..N {
                    assert_eq!(comm.recv::<i32>(0, 1).unwrap(), vec![i]);
                }
                comm.send(vec![N], 0).unwrap();
                vec![]
            }
        })
        .unwrap();
        assert_eq!(out, vec![vec![N], vec![]]);
    });
}
