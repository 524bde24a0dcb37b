//! The scatter's receiving side against a corrupt root: a fake root driven by hand over the
//! local transport sends sizes, element ids, halo owners or map entries out of range, and the
//! receiving rank returns [`UnstructuredError::ScatterInconsistent`] (no panic, no hang, no
//! allocation sized by a count the root announced).

use std::time::{Duration, Instant};

use collectives::{run_local_with, tcp::run_tcp_local, Communicator, Config};

// The workspace's counting allocator (one owner, sparse-kernels' tests) in this test binary:
// what a receiving rank allocates is measured, not assumed.
#[path = "../../../../sparse-kernels/tests/it/alloc.rs"]
mod alloc;

use super::shape_fingerprint;
use crate::unstructured::{Backend, Context, DistConfig, Partitioner, UnstructuredError};

/// Declares the program of both ranks: a ring of nodes and edges (`e2n`, arity 2) and a dat
/// `u` on the nodes, with no elements (the root holds the mesh); then a first loop, which
/// receives this rank's part.
fn declare(ctx: &mut Context) -> crate::unstructured::Result<()> {
    declare_ring(ctx, 0)
}

/// The program of [`declare`] on a ring of `n` nodes and edges (edge `e` joins nodes `e` and
/// `e + 1`, `u` = the node's number): what a real root declares.
fn declare_ring(ctx: &mut Context, n: usize) -> crate::unstructured::Result<()> {
    ring_loops(ctx, n, 1)?.remove(0)
}

/// Declares the ring program of `n` elements and runs its loop `loops` times: each run's
/// result.
fn ring_loops(
    ctx: &mut Context,
    n: usize,
    loops: usize,
) -> crate::unstructured::Result<Vec<crate::unstructured::Result<()>>> {
    let nodes = ctx.decl_set("nodes", n)?;
    let edges = ctx.decl_set("edges", n)?;
    let ring = (0..n as u32)
        .flat_map(|e| [e, (e + 1) % n as u32])
        .collect();
    let e2n = ctx.decl_map("e2n", edges, nodes, 2, ring)?;
    let u = ctx.decl_dat("u", nodes, 1, (0..n).map(|i| i as f64).collect())?;
    let s = ctx.decl_dat("s", nodes, 1, vec![0.0; n])?;
    let args = [u.read_via(e2n, 0), s.inc_via(e2n, 1)];
    Ok((0..loops)
        .map(|_| ctx.par_loop("spread", edges, &args, |r, w| w[0][0] += r[0][0]))
        .collect())
}

/// The messages of rank 1's part of the ring 0-1-2-3-0 (edge `e` joins nodes `e` and
/// `e + 1`), rank 1 owning nodes and edges 2 and 3, in the order the scatter sends them.
#[derive(Clone)]
struct Part {
    /// Primary set, edge cut, global size of each set (broadcast).
    summary: Vec<i64>,
    /// `(local elements, owned, owned + exec halo)` per set.
    head: Vec<i64>,
    /// Per set: global ids of the local elements, then the owners of the halo elements.
    sets: Vec<Vec<i64>>,
    /// Local rows of each map.
    maps: Vec<Vec<i64>>,
    /// Local values of each dat.
    dats: Vec<Vec<f64>>,
    /// After the part: the nodes (global ids) the root asks rank 1 for, as an importer.
    ask: Option<Vec<i64>>,
}

fn honest() -> Part {
    Part {
        summary: vec![0, 2, 4, 4],
        // Nodes 2, 3 owned, 0 and 1 non-exec halo; edges 2, 3 owned, 1 exec halo.
        head: vec![4, 2, 2, 3, 2, 3],
        sets: vec![vec![2, 3, 0, 1, 0, 0], vec![2, 3, 1, 0]],
        // Edge 2 = nodes (2, 3), edge 3 = (3, 0), edge 1 = (1, 2), in local node numbers.
        maps: vec![vec![0, 1, 1, 2, 3, 0]],
        dats: vec![vec![2.0, 3.0, 0.0, 1.0], vec![0.0; 4]],
        ask: None,
    }
}

/// Rank 0 plays the root: it agrees on the declarations, then sends `part` message by
/// message, stopping after `messages` point-to-point messages, and takes the scatter's
/// agreement round (it owns two nodes and two edges).
fn fake_root(comm: &Communicator, part: &Part, messages: usize) {
    let mut shapes = Context::new(Backend::Sequential);
    let _ = declare(&mut shapes);
    let fp = shape_fingerprint(&shapes.sets, &shapes.maps, &shapes.dats, &shapes.globals, 0);
    comm.all_gather(vec![1, fp as i64, 0]).unwrap();
    comm.broadcast(part.summary.clone(), 0).unwrap();
    let ints = std::iter::once(&part.head)
        .chain(&part.sets)
        .chain(&part.maps);
    let dats = part.dats.iter().map(|v| comm.send(v.clone(), 1));
    let all = ints
        .map(|v| comm.send(v.clone(), 1))
        .chain(dats)
        .take(messages)
        .count();
    // Rank 1 leaves after the message it finds wrong; the agreement round follows either way.
    let _ = comm.all_gather(vec![0i64, 2, 2]);
    match &part.ask {
        Some(ids) if all == 6 => {
            // The import lists of the nodes: ask rank 1 for `ids`.
            comm.all_to_all(vec![0, ids.len() as i64]).unwrap();
            // Rank 1 may refuse the request before receiving it.
            let _ = comm.send(ids.clone(), 1);
            // The halo lists' agreement round: this rank refused nothing.
            let _ = comm.all_gather(vec![-1i64]);
        }
        _ => {}
    }
}

/// Runs the fake root (rank 0) against a real receiving rank (rank 1); returns rank 1's
/// result and the most bytes it held at once while taking its part.
fn receive(part: Part, messages: usize) -> (crate::unstructured::Result<()>, usize) {
    let config = Config {
        op_timeout: Duration::from_secs(2),
        ..Config::default()
    };
    let mut outs = run_local_with(&config, 2, |comm| {
        if comm.rank() == 0 {
            fake_root(&comm, &part, messages);
            return (Ok(()), 0);
        }
        let mut ctx = Context::new(Backend::distributed(
            comm,
            DistConfig {
                partitioner: Partitioner::Graph,
                scatter_from: Some(0),
                ..DistConfig::default()
            },
        ));
        alloc::peak_bytes(|| declare(&mut ctx))
    });
    outs.pop()
        .expect("two ranks")
        .expect("rank 1 does not panic")
}

#[test]
fn an_honest_part_is_taken_and_the_run_goes_on() {
    // The control: the fake root's honest part passes every check; rank 1 then waits for the
    // root in the next step (import/export lists), which the fake root never takes.
    let (r, _) = receive(honest(), usize::MAX);
    assert!(
        matches!(r, Err(UnstructuredError::Comm { rank: 1, .. })),
        "{r:?}"
    );
}

#[test]
fn a_corrupt_root_gives_the_receiving_rank_a_typed_error() {
    type Corrupt = fn(&mut Part) -> usize;
    // Each case corrupts one message and sends the part up to the message the receiver checks
    // it with (the count returned; a set's sizes are checked when its ids are received).
    let cases: [(&str, Corrupt); 15] = [
        ("primary set past the sets", |p| {
            p.summary[0] = 2;
            0
        }),
        ("negative edge cut", |p| {
            p.summary[1] = -1;
            0
        }),
        ("negative set size", |p| {
            p.summary[2] = -1;
            1
        }),
        ("set size past u32", |p| {
            // The edges: set 0 (the nodes) is received first.
            p.summary[3] = 1 << 33;
            2
        }),
        ("more local elements than the set", |p| {
            p.head[0] = 5;
            1
        }),
        ("more owned than executed", |p| {
            p.head[1] = 3;
            1
        }),
        ("more executed than local", |p| {
            p.head[5] = 4;
            2
        }),
        ("negative owned count", |p| {
            p.head[4] = -1;
            2
        }),
        ("element id past the set", |p| {
            p.sets[0][3] = 4;
            2
        }),
        ("negative element id", |p| {
            p.sets[1][2] = -3;
            3
        }),
        ("halo owner past the ranks", |p| {
            p.sets[0][4] = 2;
            2
        }),
        ("element listed twice", |p| {
            p.sets[1][1] = 2;
            3
        }),
        ("halo element owned by the receiver", |p| {
            p.sets[0][5] = 1;
            2
        }),
        ("map entry past the local elements", |p| {
            p.maps[0][5] = 4;
            4
        }),
        ("negative map entry", |p| {
            p.maps[0][0] = -1;
            4
        }),
    ];
    for (what, corrupt) in cases {
        let mut part = honest();
        let messages = corrupt(&mut part);
        match receive(part, messages).0 {
            Err(UnstructuredError::ScatterInconsistent {
                root: 0, rank: 1, ..
            }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn a_peer_that_asks_for_elements_this_rank_does_not_own_gets_a_typed_error() {
    // After an honest part, the root asks rank 1 for node 0 (rank 1 owns nodes 2 and 3): rank
    // 1 answers requests from its own elements only (a binary search, nothing per global
    // element), so the request is a typed error, not an index out of bounds.
    for ask in [vec![0], vec![3, 9], vec![-1], vec![2, 3, 2]] {
        let part = Part {
            ask: Some(ask.clone()),
            ..honest()
        };
        match receive(part, usize::MAX).0 {
            Err(UnstructuredError::DistributionMismatch {
                what: "halo lists",
                ranks,
            }) => assert_eq!(ranks, vec![0], "{ask:?}"),
            other => panic!("{ask:?}: {other:?}"),
        }
    }
}

#[test]
fn announced_counts_allocate_nothing_before_the_data_arrives() {
    // A root may announce any count up to the size it claims (below u32::MAX): a receiving
    // rank takes each vector in messages of at most 64 Ki elements and grows its buffer as
    // they arrive, so a huge announcement costs nothing, and the short message that follows
    // it is a typed error. A huge size with an honest part is caught by the agreement round:
    // the ranks own 4 nodes together, not 2^31 (else `gather` would allocate by it).
    type Corrupt = fn(&mut Part) -> usize;
    let cases: [(&str, Corrupt); 4] = [
        ("a node count near u32::MAX", |p| {
            p.summary[2] = i64::from(u32::MAX) - 1;
            p.head[0] = i64::from(u32::MAX) - 1;
            2
        }),
        ("an owned edge count near u32::MAX", |p| {
            p.summary[3] = i64::from(u32::MAX) - 1;
            p.head[3] = i64::from(u32::MAX) - 1;
            p.head[4] = i64::from(u32::MAX) - 2;
            p.head[5] = i64::from(u32::MAX) - 2;
            3
        }),
        ("a node set of 2^31 elements with a part of 4", |p| {
            p.summary[2] = 1 << 31;
            usize::MAX
        }),
        ("an edge set of 2^32 - 2 elements with a part of 4", |p| {
            p.summary[3] = i64::from(u32::MAX) - 1;
            usize::MAX
        }),
    ];
    for (what, corrupt) in cases {
        let mut part = honest();
        let messages = corrupt(&mut part);
        let (r, peak) = receive(part, messages);
        match r {
            Err(UnstructuredError::ScatterInconsistent {
                root: 0, rank: 1, ..
            }) => {}
            other => panic!("{what}: {other:?}"),
        }
        assert!(peak < 16 << 20, "{what}: rank 1 held {peak} bytes at once");
    }
}

/// The launchers of the agreement tests: ranks as threads (local transport) and over loopback
/// TCP, with a generous `op_timeout` that an agreed failure must come well before.
fn on_both_transports<R: Send>(
    n: usize,
    f: impl Fn(Communicator) -> R + Send + Sync,
) -> Vec<(&'static str, Vec<R>, Duration)> {
    let config = Config {
        op_timeout: Duration::from_secs(30),
        ..Config::default()
    };
    let mut out = Vec::new();
    for transport in ["local", "tcp"] {
        let t = Instant::now();
        let outs = match transport {
            "local" => run_local_with(&config, n, &f),
            _ => run_tcp_local(&config, n, &f),
        };
        let outs = outs
            .into_iter()
            .map(|o| o.expect("no rank panics"))
            .collect();
        out.push((transport, outs, t.elapsed()));
    }
    out
}

fn scatter_rank(comm: Communicator) -> Context {
    Context::new(Backend::distributed(
        comm,
        DistConfig {
            partitioner: Partitioner::Graph,
            scatter_from: Some(0),
            ..DistConfig::default()
        },
    ))
}

#[test]
fn a_receiver_that_rejects_its_part_fails_every_rank_at_once() {
    // Three ranks: a fake root sends rank 1 a part with an element id past its set and rank 2
    // an empty (consistent) part. Rank 1 returns `ScatterInconsistent`, rank 2 learns it in
    // the scatter's agreement round (`PeerFailed`, rank 1) instead of waiting in the next
    // exchange until op_timeout; a second loop fails at once, without communicating.
    let mut corrupt = honest();
    corrupt.sets[0][3] = 4;
    let empty = Part {
        head: vec![0; 6],
        sets: vec![vec![], vec![]],
        maps: vec![vec![]],
        dats: vec![vec![], vec![]],
        ..honest()
    };
    let runs = on_both_transports(3, |comm| {
        if comm.rank() != 0 {
            return ring_loops(&mut scatter_rank(comm), 0, 2).unwrap_or_else(|e| vec![Err(e)]);
        }
        let mut shapes = Context::new(Backend::Sequential);
        let _ = declare(&mut shapes);
        let fp = shape_fingerprint(&shapes.sets, &shapes.maps, &shapes.dats, &shapes.globals, 0);
        comm.all_gather(vec![1, fp as i64, 0]).unwrap();
        comm.broadcast(corrupt.summary.clone(), 0).unwrap();
        // Rank 1's part up to its corrupt ids, then all of rank 2's.
        for v in [&corrupt.head, &corrupt.sets[0]] {
            comm.send(v.clone(), 1).unwrap();
        }
        let ints = std::iter::once(&empty.head)
            .chain(&empty.sets)
            .chain(&empty.maps);
        for v in ints {
            comm.send(v.clone(), 2).unwrap();
        }
        for v in &empty.dats {
            comm.send(v.clone(), 2).unwrap();
        }
        // The agreement round, as the root: which ranks failed.
        let flags = comm.all_gather(vec![0i64, 2, 2]).unwrap();
        vec![Err(UnstructuredError::PeerFailed {
            rank: flags
                .chunks(3)
                .position(|c| c[0] != 0)
                .unwrap_or(usize::MAX),
            step: "fake root".into(),
        })]
    });
    for (transport, outs, took) in runs {
        let peer_failed = |r: &crate::unstructured::Result<()>| matches!(r, Err(UnstructuredError::PeerFailed { rank: 1, step }) if step == "scatter");
        assert!(
            matches!(
                outs[0][..],
                [Err(UnstructuredError::PeerFailed { rank: 1, .. })]
            ),
            "{transport}: the root saw {:?}",
            outs[0]
        );
        assert!(
            matches!(
                outs[1][0],
                Err(UnstructuredError::ScatterInconsistent {
                    root: 0,
                    rank: 1,
                    ..
                })
            ) && peer_failed(&outs[1][1]),
            "{transport}: rank 1 {:?}",
            outs[1]
        );
        assert!(
            outs[2].len() == 2 && outs[2].iter().all(peer_failed),
            "{transport}: rank 2 {:?}",
            outs[2]
        );
        assert!(took < Duration::from_secs(10), "{transport}: {took:?}");
    }
}

#[test]
fn a_real_root_and_receiver_learn_a_receivers_failure_at_once() {
    // Three ranks: a real root (rank 0) holding a ring of 6 nodes, a real receiver (rank 2),
    // and rank 1 playing a receiver that rejects the root's summary and takes the agreement
    // round with its failure. The root and rank 2 return `PeerFailed` (rank 1, `scatter`)
    // well before op_timeout, on threads and over TCP.
    let runs = on_both_transports(3, |comm| match comm.rank() {
        1 => {
            let mut shapes = Context::new(Backend::Sequential);
            let _ = declare(&mut shapes);
            let fp =
                shape_fingerprint(&shapes.sets, &shapes.maps, &shapes.dats, &shapes.globals, 0);
            comm.all_gather(vec![1, fp as i64, 0]).unwrap();
            comm.broadcast(vec![0i64; 4], 0).unwrap();
            comm.all_gather(vec![1i64, 0, 0]).unwrap();
            Ok(())
        }
        r => declare_ring(&mut scatter_rank(comm), if r == 0 { 6 } else { 0 }),
    });
    for (transport, outs, took) in runs {
        for r in [0, 2] {
            assert!(
                matches!(&outs[r], Err(UnstructuredError::PeerFailed { rank: 1, step }) if step == "scatter"),
                "{transport}: rank {r} {:?}",
                outs[r]
            );
        }
        assert!(took < Duration::from_secs(10), "{transport}: {took:?}");
    }
}

#[test]
fn a_refused_halo_request_fails_every_rank_at_once() {
    // Three ranks: a fake root (rank 0) sends rank 1 its honest part and rank 2 an empty one,
    // then, in the nodes' import/export lists, asks rank 1 for node 0, which rank 1 does not
    // own. Rank 1 returns `DistributionMismatch` (halo lists, naming rank 0), and rank 2
    // learns it in the lists' agreement round (`PeerFailed`, rank 1, `halo lists`) well
    // before op_timeout instead of waiting for rank 1 in the next set's lists; a second loop
    // fails at once, without communicating. On threads and over TCP.
    let part = honest();
    let empty = Part {
        head: vec![0; 6],
        sets: vec![vec![], vec![]],
        maps: vec![vec![]],
        dats: vec![vec![], vec![]],
        ..honest()
    };
    let runs = on_both_transports(3, |comm| {
        if comm.rank() != 0 {
            return ring_loops(&mut scatter_rank(comm), 0, 2).unwrap_or_else(|e| vec![Err(e)]);
        }
        let mut shapes = Context::new(Backend::Sequential);
        let _ = declare(&mut shapes);
        let fp = shape_fingerprint(&shapes.sets, &shapes.maps, &shapes.dats, &shapes.globals, 0);
        comm.all_gather(vec![1, fp as i64, 0]).unwrap();
        comm.broadcast(part.summary.clone(), 0).unwrap();
        for (p, dst) in [(&part, 1), (&empty, 2)] {
            let ints = std::iter::once(&p.head).chain(&p.sets).chain(&p.maps);
            for v in ints {
                comm.send(v.clone(), dst).unwrap();
            }
            for v in &p.dats {
                comm.send(v.clone(), dst).unwrap();
            }
        }
        // The scatter's agreement round: the root owns 2 nodes and 2 edges.
        comm.all_gather(vec![0i64, 2, 2]).unwrap();
        // The nodes' lists: ask rank 1 for node 0, then the lists' agreement round.
        comm.all_to_all(vec![0i64, 1, 0]).unwrap();
        comm.send(vec![0i64], 1).unwrap();
        let refused = comm.all_gather(vec![-1i64]).unwrap();
        vec![Err(UnstructuredError::PeerFailed {
            rank: refused.iter().position(|&q| q >= 0).unwrap_or(usize::MAX),
            step: "fake root".into(),
        })]
    });
    for (transport, outs, took) in runs {
        let peer_failed = |r: &crate::unstructured::Result<()>| matches!(r, Err(UnstructuredError::PeerFailed { rank: 1, step }) if step == "halo lists");
        assert!(
            matches!(
                outs[0][..],
                [Err(UnstructuredError::PeerFailed { rank: 1, .. })]
            ),
            "{transport}: the root saw {:?}",
            outs[0]
        );
        assert!(
            matches!(
                &outs[1][0],
                Err(UnstructuredError::DistributionMismatch { what: "halo lists", ranks }) if ranks == &[0]
            ) && peer_failed(&outs[1][1]),
            "{transport}: rank 1 {:?}",
            outs[1]
        );
        assert!(
            outs[2].len() == 2 && outs[2].iter().all(peer_failed),
            "{transport}: rank 2 {:?}",
            outs[2]
        );
        assert!(took < Duration::from_secs(10), "{transport}: {took:?}");
    }
}

thread_local! {
    /// In a test's scatter root (a thread): the rank whose part it fails to send after the
    /// part's first message (`Runtime::send_part`).
    pub(super) static FAIL_PART_OF: std::cell::Cell<Option<usize>> =
        const { std::cell::Cell::new(None) };
}

#[test]
fn a_root_that_fails_partway_through_the_scatter_fails_every_rank_at_once() {
    // Three real ranks, the root (rank 0) holding a ring of 6 nodes: the root's send of rank
    // 1's part fails after its first message (injected). Rank 1, waiting for the rest of its
    // part, and rank 2, waiting for its whole part, get a typed error well before op_timeout
    // (the root aborts its communicator, so it counts as lost), on threads and over TCP.
    let runs = on_both_transports(3, |comm| {
        let r = comm.rank();
        if r == 0 {
            FAIL_PART_OF.with(|f| f.set(Some(1)));
        }
        declare_ring(&mut scatter_rank(comm), if r == 0 { 6 } else { 0 })
    });
    for (transport, outs, took) in runs {
        assert!(
            matches!(&outs[0], Err(UnstructuredError::PeerFailed { rank: 1, step }) if step == "scatter (injected)"),
            "{transport}: the root {:?}",
            outs[0]
        );
        for r in [1, 2] {
            assert!(
                matches!(&outs[r], Err(UnstructuredError::Comm { rank, .. }) if *rank == r),
                "{transport}: rank {r} {:?}",
                outs[r]
            );
        }
        assert!(took < Duration::from_secs(10), "{transport}: {took:?}");
    }
}
