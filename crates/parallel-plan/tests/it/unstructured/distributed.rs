//! Distributed runs over `collectives` ranks (threads and loopback TCP) against sequential.

use std::time::Duration;

use collectives::{run_local_with, tcp::run_tcp_local, Config};
use parallel_plan::unstructured::apps::{
    airfoil, jacobi, AirfoilConfig, AirfoilOutcome, JacobiConfig,
};
use parallel_plan::unstructured::{
    Backend, Context, DistConfig, Grid, Partitioner, UnstructuredError,
};
use proptest::prelude::*;

use super::random::{assert_matches, random_mesh, run_program};
use super::rel_diff;

/// Every collective of these tests finishes in well under this; a lost peer fails fast.
fn config() -> Config {
    Config {
        op_timeout: Duration::from_secs(30),
        ..Config::default()
    }
}

fn dist(comm: collectives::Communicator, partitioner: Partitioner) -> Context {
    Context::new(Backend::distributed(
        comm,
        DistConfig {
            partitioner,
            ..DistConfig::default()
        },
    ))
}

fn same(a: &AirfoilOutcome, b: &AirfoilOutcome) {
    assert!(
        rel_diff(&a.q, &b.q) <= 1e-12,
        "q differs by {}",
        rel_diff(&a.q, &b.q)
    );
    let (x, y): (Vec<f64>, Vec<f64>) = a.rms.iter().zip(&b.rms).map(|(x, y)| (x.1, y.1)).unzip();
    assert!(rel_diff(&x, &y) <= 1e-12, "rms {x:?} vs {y:?}");
}

#[test]
fn airfoil_on_1_to_4_local_ranks_matches_sequential() {
    let g = Grid::generate(600, 11).unwrap();
    let cfg = AirfoilConfig {
        iterations: 60,
        report_every: 20,
    };
    let seq = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    for ranks in 1..=4 {
        let outs = run_local_with(&config(), ranks, |comm| {
            // METIS with the `metis` feature, the built-in graph bisection without.
            let mut ctx = dist(comm, Partitioner::default());
            let out = airfoil(&mut ctx, &g, &cfg).unwrap();
            (
                out,
                ctx.plan_report().cloned().unwrap(),
                ctx.stats().clone(),
            )
        });
        for o in outs {
            let (out, report, stats) = o.unwrap();
            same(&out, &seq);
            assert_eq!(report.ranks, ranks);
            for s in &report.sets {
                let n = match s.name.as_str() {
                    "nodes" => g.nnode(),
                    "cells" => g.ncell(),
                    "edges" => g.nedge(),
                    _ => g.nbedge(),
                };
                assert_eq!(s.owned.iter().sum::<usize>(), n, "{}", s.name);
            }
            assert_eq!(report.primary.as_deref(), Some("nodes"));
            if ranks > 1 {
                assert!(report.edge_cut > 0);
                // Dirty bits: x is never written, so never exchanged; q and adt are exchanged
                // before each res_calc (except q before the first, still as distributed), and
                // are clean again for bres_calc.
                let res = stats.loops["res_calc"];
                let bres = stats.loops["bres_calc"];
                assert_eq!(res.exchanges, 2 * res.calls - 1);
                assert_eq!(res.skipped_exchanges, res.calls + 1);
                assert_eq!(bres.exchanges, 0);
                // x, q, adt through maps, and bound directly on the exec halo: all clean.
                assert_eq!(bres.skipped_exchanges, 4 * bres.calls);
                assert_eq!(stats.loops["adt_calc"].exchanges, 0);
            }
        }
    }
}

#[test]
fn airfoil_over_tcp_and_with_rcb_matches_sequential() {
    let g = Grid::generate(500, 4).unwrap();
    let cfg = AirfoilConfig {
        iterations: 30,
        report_every: 10,
    };
    let seq = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    for ranks in 1..=4 {
        for o in run_tcp_local(&config(), ranks, |comm| {
            airfoil(&mut dist(comm, Partitioner::default()), &g, &cfg)
        }) {
            same(&o.unwrap().unwrap(), &seq);
        }
    }
    for p in [Partitioner::Rcb, Partitioner::Graph] {
        for o in run_local_with(&config(), 4, |comm| airfoil(&mut dist(comm, p), &g, &cfg)) {
            same(&o.unwrap().unwrap(), &seq);
        }
    }
}

#[test]
fn jacobi_on_3_ranks_matches_sequential_and_rcb_needs_coordinates() {
    let g = Grid::generate(400, 9).unwrap();
    let cfg = JacobiConfig {
        iterations: 50,
        report_every: 25,
    };
    let seq = jacobi(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    for o in run_local_with(&config(), 3, |comm| {
        jacobi(&mut dist(comm, Partitioner::Graph), &g, &cfg)
    }) {
        let o = o.unwrap().unwrap();
        assert!(rel_diff(&o.u, &seq.u) <= 1e-12);
    }
    // RCB over a named coordinate dat that Jacobi does not declare: a typed error on every
    // rank. Without a name it takes the first 2-D/3-D f64 dat on the nodes (still correct).
    let named = DistConfig {
        partitioner: Partitioner::Rcb,
        coordinates: Some("x".into()),
        ..DistConfig::default()
    };
    for o in run_local_with(&config(), 2, |comm| {
        jacobi(
            &mut Context::new(Backend::distributed(comm, named.clone())),
            &g,
            &cfg,
        )
    }) {
        assert!(matches!(
            o.unwrap(),
            Err(UnstructuredError::InvalidDeclaration { .. })
        ));
    }
    for o in run_local_with(&config(), 2, |comm| {
        jacobi(&mut dist(comm, Partitioner::Rcb), &g, &cfg)
    }) {
        assert!(rel_diff(&o.unwrap().unwrap().u, &seq.u) <= 1e-12);
    }
}

#[cfg(not(feature = "metis"))]
#[test]
fn metis_without_its_feature_is_a_typed_error() {
    let g = Grid::generate(200, 1).unwrap();
    let cfg = JacobiConfig {
        iterations: 1,
        report_every: 1,
    };
    for o in run_local_with(&config(), 2, |comm| {
        jacobi(&mut dist(comm, Partitioner::Metis), &g, &cfg)
    }) {
        assert!(matches!(
            o.unwrap(),
            Err(UnstructuredError::Partition { .. })
        ));
    }
}

#[test]
fn ranks_that_disagree_on_the_distribution_all_get_a_typed_error() {
    let (g, other) = (
        Grid::generate(600, 11).unwrap(),
        Grid::generate(600, 12).unwrap(),
    );
    let cfg = AirfoilConfig {
        iterations: 2,
        report_every: 0,
    };
    // Rank 1 partitions by coordinates, ranks 0 and 2 by graph bisection: the same mesh, two
    // partitions (this made ranks index halo elements their peers never sent, and panic).
    // Then rank 2 holds another numbering of the mesh.
    for (case, what, bad) in [(0, "partition", 1), (1, "declarations", 2)] {
        let outs = run_local_with(&config(), 3, |comm| {
            let rank = comm.rank();
            let p = if case == 0 && rank == 1 {
                Partitioner::Rcb
            } else {
                Partitioner::Graph
            };
            let mesh = if case == 1 && rank == 2 { &other } else { &g };
            airfoil(&mut dist(comm, p), mesh, &cfg).map(|_| ())
        });
        for (rank, o) in outs.into_iter().enumerate() {
            match o.unwrap() {
                Err(UnstructuredError::DistributionMismatch { what: w, ranks }) => {
                    assert_eq!((w, ranks), (what, vec![bad]), "rank {rank}");
                }
                r => panic!("rank {rank}: {r:?}"),
            }
        }
    }
}

#[test]
fn a_mesh_scattered_from_one_rank_runs_as_if_every_rank_read_it() {
    let g = Grid::generate(600, 11).unwrap();
    // What a rank without the mesh file passes: the same program, no elements.
    let empty = Grid {
        x: vec![],
        cell: vec![],
        edge: vec![],
        ecell: vec![],
        bedge: vec![],
        becell: vec![],
        bound: vec![],
    };
    let cfg = AirfoilConfig {
        iterations: 30,
        report_every: 10,
    };
    let body = |scatter: Option<usize>| {
        let (g, empty) = (&g, &empty);
        move |comm: collectives::Communicator| {
            let rank = comm.rank();
            let mesh = if scatter.is_none_or(|r| r == rank) {
                g
            } else {
                empty
            };
            let mut ctx = Context::new(Backend::distributed(
                comm,
                DistConfig {
                    partitioner: Partitioner::Graph,
                    scatter_from: scatter,
                    ..DistConfig::default()
                },
            ));
            let out = airfoil(&mut ctx, mesh, &cfg)?;
            let r = ctx.plan_report().cloned().expect("distributed");
            let bytes = ctx.stats().total().halo_bytes;
            Ok::<_, UnstructuredError>((out, r.sets, r.edge_cut, r.primary, bytes))
        }
    };
    for ranks in [2, 3] {
        let every: Vec<_> = run_local_with(&config(), ranks, body(None))
            .into_iter()
            .map(|o| o.unwrap().unwrap())
            .collect();
        for root in [0, ranks - 1] {
            let outs = if ranks == 3 && root == 2 {
                run_tcp_local(&config(), ranks, body(Some(root)))
            } else {
                run_local_with(&config(), ranks, body(Some(root)))
            };
            for (rank, (o, want)) in outs.into_iter().zip(&every).enumerate() {
                // The same partition, layouts and arithmetic: the same bits.
                assert_eq!(
                    &o.unwrap().unwrap(),
                    want,
                    "{ranks} ranks, root {root}, rank {rank}"
                );
            }
        }
    }
    // A root outside the run is a typed error on every rank.
    for o in run_local_with(&config(), 2, body(Some(2))) {
        assert!(matches!(
            o.unwrap(),
            Err(UnstructuredError::InvalidDeclaration { .. })
        ));
    }
}

#[test]
fn a_rank_that_dies_gives_the_others_a_typed_error() {
    let n = 200u32;
    let ring: Vec<u32> = (0..n).flat_map(|e| [e, (e + 1) % n]).collect();
    let outs = run_local_with(&config(), 3, |comm| -> Result<(), UnstructuredError> {
        let rank = comm.rank();
        let mut ctx = dist(comm, Partitioner::Graph);
        let nodes = ctx.decl_set("nodes", n as usize)?;
        let edges = ctx.decl_set("edges", n as usize)?;
        let e2n = ctx.decl_map("e2n", edges, nodes, 2, ring.clone())?;
        let u = ctx.decl_dat("u", nodes, 1, (0..n).map(f64::from).collect())?;
        let s = ctx.decl_dat("s", nodes, 1, vec![0.0; n as usize])?;
        for it in 0..50 {
            ctx.par_loop(
                "spread",
                edges,
                &[
                    u.read_via(e2n, 0),
                    u.read_via(e2n, 1),
                    s.inc_via(e2n, 0),
                    s.inc_via(e2n, 1),
                ],
                |r, w| {
                    w[0][0] += r[1][0];
                    w[1][0] += r[0][0];
                },
            )?;
            ctx.par_loop("update", nodes, &[s.rw(), u.write()], |_, w| {
                assert!(!(rank == 1 && it == 10), "rank 1 dies in iteration 10");
                w[1][0] = 0.5 * w[0][0];
                w[0][0] = 0.0;
            })?;
        }
        Ok(())
    });
    assert!(matches!(
        outs[1],
        Err(collectives::CollectiveError::RankPanicked { rank: 1, .. })
    ));
    for r in [0, 2] {
        match &outs[r] {
            Ok(Err(UnstructuredError::Comm { rank, .. })) => assert_eq!(*rank, r),
            other => panic!("rank {r}: {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn random_meshes_on_1_to_4_ranks_match_sequential(m in random_mesh(), ranks in 1usize..5) {
        let want = run_program(Backend::Sequential, &m).unwrap();
        for o in run_local_with(&config(), ranks, |comm| run_program(Backend::distributed(comm, DistConfig::default()), &m)) {
            assert_matches(&o.unwrap().unwrap(), &want);
        }
    }
}

#[test]
fn every_rank_names_the_sequential_pair_of_three_or_more_colliders() {
    // Four edges write one node: each rank sees some of them (the owner of the node all), and
    // every rank reports the pair the sequential order meets first.
    for ranks in 1..=4 {
        for p in [Partitioner::Graph, Partitioner::default()] {
            let outs = run_local_with(&config(), ranks, |comm| {
                super::errors::three_colliders_program(Backend::distributed(
                    comm,
                    DistConfig {
                        partitioner: p,
                        ..DistConfig::default()
                    },
                ))
            });
            for (rank, o) in outs.into_iter().enumerate() {
                super::errors::assert_lowest_pair(
                    o.unwrap(),
                    &format!("{ranks} ranks, rank {rank}"),
                );
            }
        }
    }
}

/// What [`late_coordinates_program`] returns: the first loop's failure (if any), then cell and
/// node values in declared numbering.
type LateOutcome = (Option<UnstructuredError>, Vec<f64>, Vec<f64>);

/// On a generated grid: node values `u`; a first loop (if `fail_first`) before the node
/// coordinates `x` are declared; then cell values from `x` and `u` through cell → 4 nodes,
/// spread to the nodes through the edges' cells and nodes.
fn late_coordinates_program(
    backend: Backend,
    g: &Grid,
    fail_first: bool,
) -> Result<LateOutcome, UnstructuredError> {
    let mut ctx = Context::new(backend);
    let nodes = ctx.decl_set("nodes", g.nnode())?;
    let cells = ctx.decl_set("cells", g.ncell())?;
    let edges = ctx.decl_set("edges", g.nedge())?;
    let c2n = ctx.decl_map("c2n", cells, nodes, 4, g.cell.clone())?;
    let e2n = ctx.decl_map("e2n", edges, nodes, 2, g.edge.clone())?;
    let e2c = ctx.decl_map("e2c", edges, cells, 2, g.ecell.clone())?;
    let u = ctx.decl_dat("u", nodes, 1, (0..g.nnode()).map(|k| k as f64).collect())?;
    let c = ctx.decl_dat("c", cells, 1, vec![0.0; g.ncell()])?;
    let s = ctx.decl_dat("s", nodes, 1, vec![0.0; g.nnode()])?;
    let spread = |ctx: &mut Context| {
        ctx.par_loop(
            "spread",
            edges,
            &[
                c.read_via(e2c, 0),
                c.read_via(e2c, 1),
                s.inc_via(e2n, 0),
                s.inc_via(e2n, 1),
            ],
            |r, w| {
                w[0][0] += r[0][0] - 0.5 * r[1][0];
                w[1][0] += r[1][0] - 0.25 * r[0][0];
            },
        )
    };
    // Without coordinates, recursive coordinate bisection cannot partition: the first loop
    // fails after the mesh was renumbered for locality.
    let failure = if fail_first {
        spread(&mut ctx).err()
    } else {
        None
    };
    let x = ctx.decl_dat("x", nodes, 2, g.x.clone())?;
    let args: Vec<_> = (0..4)
        .map(|k| x.read_via(c2n, k))
        .chain((0..4).map(|k| u.read_via(c2n, k)))
        .chain([c.write()])
        .collect();
    ctx.par_loop("centre", cells, &args, |r, w| {
        w[0][0] = (0..4)
            .map(|k| r[k][0] + 2.0 * r[k][1] + r[4 + k][0])
            .sum::<f64>()
            / 4.0;
    })?;
    spread(&mut ctx)?;
    Ok((failure, ctx.dat_values(c)?, ctx.dat_values(s)?))
}

#[test]
fn a_failed_first_loop_leaves_the_declared_mesh_for_the_next() {
    // The first loop renumbers the mesh, then fails to partition it; the program declares the
    // coordinates and goes on. The next loop must start from the declared mesh again (it
    // used to renumber the renumbered maps and dats a second time, and the new dat once).
    let g = Grid::generate(300, 5).unwrap();
    let (_, want_c, want_s) = late_coordinates_program(Backend::Sequential, &g, false).unwrap();
    for ranks in 1..=3 {
        for o in run_local_with(&config(), ranks, |comm| {
            let rcb = DistConfig {
                partitioner: Partitioner::Rcb,
                ..DistConfig::default()
            };
            late_coordinates_program(Backend::distributed(comm, rcb), &g, true)
        }) {
            let (failure, cv, sv) = o.unwrap().unwrap();
            assert!(
                matches!(failure, Some(UnstructuredError::InvalidDeclaration { .. })),
                "{failure:?}"
            );
            assert!(rel_diff(&cv, &want_c) <= 1e-12, "{ranks} ranks: cells");
            assert!(rel_diff(&sv, &want_s) <= 1e-12, "{ranks} ranks: nodes");
        }
    }
}

#[test]
fn a_rank_that_declares_other_dats_gets_a_typed_error_on_every_rank() {
    // The mesh (sets, maps) is the same on every rank; one rank declares an extra dat, a dat
    // of another dimension, type or name, or other initial values. Without the dats in the
    // declarations' fingerprint the ranks exchanged halos of different widths.
    let n = 40u32;
    let ring: Vec<u32> = (0..n).flat_map(|e| [e, (e + 1) % n]).collect();
    let program = |comm: collectives::Communicator, case: usize, scatter: bool| {
        let rank = comm.rank();
        let odd = rank == 1 + case % 2;
        let root = scatter.then_some(0);
        let mut ctx = Context::new(Backend::distributed(
            comm,
            DistConfig {
                partitioner: Partitioner::Graph,
                scatter_from: root,
                ..DistConfig::default()
            },
        ));
        let size = if root.is_some_and(|r| r != rank) {
            0
        } else {
            n as usize
        };
        let nodes = ctx.decl_set("nodes", size)?;
        let edges = ctx.decl_set("edges", size)?;
        let e2n = ctx.decl_map("e2n", edges, nodes, 2, ring[..2 * size].to_vec())?;
        let dim = if odd && case == 1 { 2 } else { 1 };
        let mut init: Vec<f64> = (0..dim * size).map(|k| k as f64).collect();
        if odd && case == 4 && size > 0 {
            init[3] = -1.0;
        }
        let name = if odd && case == 3 { "v" } else { "u" };
        let u = ctx.decl_dat(name, nodes, dim, init)?;
        if odd && case == 0 {
            ctx.decl_dat("extra", edges, 1, vec![0.0; size])?;
        }
        if odd && case == 2 {
            ctx.decl_dat("w", nodes, 1, vec![0i64; size])?;
        } else {
            ctx.decl_dat("w", nodes, 1, vec![0.0; size])?;
        }
        let s = ctx.decl_dat("s", nodes, 1, vec![0.0; size])?;
        ctx.par_loop(
            "spread",
            edges,
            &[
                u.read_via(e2n, 0),
                u.read_via(e2n, 1),
                s.inc_via(e2n, 0),
                s.inc_via(e2n, 1),
            ],
            |r, w| {
                w[0][0] += r[1][0];
                w[1][0] += r[0][0];
            },
        )
    };
    // Cases 0-4 as above; values (case 4) only count when every rank holds the mesh.
    for (case, scatter) in [
        (0, false),
        (1, false),
        (2, false),
        (3, false),
        (4, false),
        (0, true),
        (1, true),
        (3, true),
    ] {
        let bad = 1 + case % 2;
        let outs = run_local_with(&config(), 3, |comm| program(comm, case, scatter));
        for (rank, o) in outs.into_iter().enumerate() {
            match o.unwrap() {
                Err(UnstructuredError::DistributionMismatch { what, ranks }) => {
                    assert_eq!(
                        (what, ranks),
                        ("declarations", vec![bad]),
                        "case {case}, rank {rank}"
                    );
                }
                r => panic!("case {case} (scatter {scatter}), rank {rank}: {r:?}"),
            }
        }
    }
}
