//! The scatter's receiving side against a corrupt root: a fake root driven by hand over the
//! local transport sends sizes, element ids, halo owners or map entries out of range, and the
//! receiving rank returns [`UnstructuredError::ScatterInconsistent`] (no panic, no hang).

use std::time::Duration;

use collectives::{run_local_with, Communicator, Config};

use super::shape_fingerprint;
use crate::unstructured::{Backend, Context, DistConfig, Partitioner, UnstructuredError};

/// Declares the program of both ranks: a ring of nodes and edges (`e2n`, arity 2) and a dat
/// `u` on the nodes, with no elements (the root holds the mesh); then a first loop, which
/// receives this rank's part.
fn declare(ctx: &mut Context) -> crate::unstructured::Result<()> {
    let nodes = ctx.decl_set("nodes", 0)?;
    let edges = ctx.decl_set("edges", 0)?;
    let e2n = ctx.decl_map("e2n", edges, nodes, 2, vec![])?;
    let u = ctx.decl_dat("u", nodes, 1, Vec::<f64>::new())?;
    let s = ctx.decl_dat("s", nodes, 1, Vec::<f64>::new())?;
    ctx.par_loop(
        "spread",
        edges,
        &[u.read_via(e2n, 0), s.inc_via(e2n, 1)],
        |r, w| w[0][0] += r[0][0],
    )
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
/// message, stopping after `messages` point-to-point messages.
fn fake_root(comm: &Communicator, part: &Part, messages: usize) {
    let mut shapes = Context::new(Backend::Sequential);
    let _ = declare(&mut shapes);
    let fp = shape_fingerprint(&shapes.sets, &shapes.maps, &shapes.dats, &shapes.globals, 0);
    comm.all_gather(vec![1, fp as i64, 0]).unwrap();
    comm.broadcast(part.summary.clone(), 0).unwrap();
    let ints = std::iter::once(&part.head)
        .chain(&part.sets)
        .chain(&part.maps);
    let mut sent = 0;
    for v in ints {
        if sent == messages {
            return;
        }
        comm.send(v.clone(), 1).unwrap();
        sent += 1;
    }
    for v in &part.dats {
        if sent == messages {
            return;
        }
        comm.send(v.clone(), 1).unwrap();
        sent += 1;
    }
    if let Some(ids) = &part.ask {
        // The import lists of the nodes: ask rank 1 for `ids`.
        comm.all_to_all(vec![0, ids.len() as i64]).unwrap();
        // Rank 1 may refuse the request before receiving it.
        let _ = comm.send(ids.clone(), 1);
    }
}

/// Runs the fake root (rank 0) against a real receiving rank (rank 1); returns rank 1's
/// result.
fn receive(part: Part, messages: usize) -> crate::unstructured::Result<()> {
    let config = Config {
        op_timeout: Duration::from_secs(2),
        ..Config::default()
    };
    let mut outs = run_local_with(&config, 2, |comm| {
        if comm.rank() == 0 {
            fake_root(&comm, &part, messages);
            return Ok(());
        }
        let mut ctx = Context::new(Backend::distributed(
            comm,
            DistConfig {
                partitioner: Partitioner::Graph,
                scatter_from: Some(0),
                ..DistConfig::default()
            },
        ));
        declare(&mut ctx)
    });
    outs.pop()
        .expect("two ranks")
        .expect("rank 1 does not panic")
}

#[test]
fn an_honest_part_is_taken_and_the_run_goes_on() {
    // The control: the fake root's honest part passes every check; rank 1 then waits for the
    // root in the next step (import/export lists), which the fake root never takes.
    let r = receive(honest(), usize::MAX);
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
        match receive(part, messages) {
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
        match receive(part, usize::MAX) {
            Err(UnstructuredError::DistributionMismatch {
                what: "halo lists",
                ranks,
            }) => assert_eq!(ranks, vec![0], "{ask:?}"),
            other => panic!("{ask:?}: {other:?}"),
        }
    }
}
