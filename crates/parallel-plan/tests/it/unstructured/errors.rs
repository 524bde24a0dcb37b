use parallel_plan::unstructured::{Access, Backend, Context, UnstructuredError};

type Ring = (
    Context,
    parallel_plan::unstructured::Set,
    parallel_plan::unstructured::Set,
    parallel_plan::unstructured::Map,
);

fn ring() -> Ring {
    ring_on(Backend::Sequential)
}

fn ring_on(backend: Backend) -> Ring {
    let mut ctx = Context::new(backend);
    let nodes = ctx.decl_set("nodes", 4).unwrap();
    let edges = ctx.decl_set("edges", 4).unwrap();
    let e2n = ctx
        .decl_map("e2n", edges, nodes, 2, vec![0, 1, 1, 2, 2, 3, 3, 0])
        .unwrap();
    (ctx, nodes, edges, e2n)
}

#[test]
fn bad_maps_are_rejected() {
    let (mut ctx, nodes, edges, _) = ring();
    assert!(matches!(
        ctx.decl_map("short", edges, nodes, 2, vec![0; 7]),
        Err(UnstructuredError::InvalidDeclaration { .. })
    ));
    match ctx.decl_map("far", edges, nodes, 2, vec![0, 1, 1, 2, 2, 9, 3, 0]) {
        Err(UnstructuredError::MapOutOfRange {
            entry: 5,
            element: 2,
            slot: 1,
            value: 9,
            to_size: 4,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        ctx.decl_dat("d", nodes, 2, vec![0.0; 7]),
        Err(UnstructuredError::InvalidDeclaration { .. })
    ));
}

#[test]
fn conflicting_indirect_writes_are_rejected() {
    let (mut ctx, nodes, edges, e2n) = ring();
    let d = ctx.decl_dat("d", nodes, 1, vec![0.0; 4]).unwrap();
    // Every node is slot 0 of exactly one edge: a Write through slot 0 is fine.
    ctx.par_loop("ok", edges, &[d.via(e2n, 0, Access::Write)], |_, w| {
        w[0][0] = 1.0
    })
    .unwrap();
    // Two edges share slot 0 here.
    let bad = ctx.decl_set("more", 2);
    assert!(matches!(
        bad,
        Err(UnstructuredError::DeclaredAfterDistribution { .. })
    ));
    let (mut ctx, nodes, edges, _) = ring();
    let m = ctx
        .decl_map("star", edges, nodes, 1, vec![0, 1, 0, 2])
        .unwrap();
    let d = ctx.decl_dat("d", nodes, 1, vec![0.0; 4]).unwrap();
    // Refused every time, not only the first (the verdict is cached per map slot).
    for _ in 0..2 {
        match ctx.par_loop("bad", edges, &[d.via(m, 0, Access::ReadWrite)], |_, w| {
            w[0][0] += 1.0
        }) {
            Err(UnstructuredError::ConflictingIndirectWrite {
                first: 0,
                second: 2,
                target: 0,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    // Increments through the same map are fine.
    ctx.par_loop("inc", edges, &[d.via(m, 0, Access::Inc)], |_, w| {
        w[0][0] += 1.0
    })
    .unwrap();
    assert_eq!(ctx.dat_values(d).unwrap(), vec![2.0, 1.0, 1.0, 0.0]);
}

#[test]
fn threaded_runs_speak_in_the_declared_numbering() {
    // The threaded backend renumbers the mesh for locality at its first loop; collisions and
    // dat values are still reported in the declared numbering, as sequentially.
    let n = 50u32;
    let ring: Vec<u32> = (0..n)
        .flat_map(|e| [(e * 17) % n, (e * 17 + 17) % n])
        .collect();
    let star: Vec<u32> = (0..n)
        .map(|e| if e == 31 { 5 } else { (e * 7) % n })
        .collect();
    for backend in [Backend::Sequential, Backend::Threads] {
        let mut ctx = Context::new(backend);
        let nodes = ctx.decl_set("nodes", n as usize).unwrap();
        let edges = ctx.decl_set("edges", n as usize).unwrap();
        let e2n = ctx.decl_map("e2n", edges, nodes, 2, ring.clone()).unwrap();
        let m = ctx.decl_map("star", edges, nodes, 1, star.clone()).unwrap();
        let d = ctx.decl_dat("d", nodes, 1, vec![0.0; n as usize]).unwrap();
        let e = ctx
            .decl_dat("e", edges, 1, (0..n).map(f64::from).collect())
            .unwrap();
        ctx.par_loop(
            "spread",
            edges,
            &[e.read(), d.inc_via(e2n, 0), d.inc_via(e2n, 1)],
            |r, w| {
                w[0][0] += r[0][0];
                w[1][0] += 2.0 * r[0][0];
            },
        )
        .unwrap();
        let mut want = vec![0.0; n as usize];
        for k in 0..n as usize {
            want[ring[2 * k] as usize] += k as f64;
            want[ring[2 * k + 1] as usize] += 2.0 * k as f64;
        }
        assert_eq!(ctx.dat_values(d).unwrap(), want);
        assert_eq!(
            ctx.dat_values(e).unwrap(),
            (0..n).map(f64::from).collect::<Vec<_>>()
        );
        // Edges 15 (15 × 7 = 105 ≡ 5) and 31 both write node 5.
        match ctx.par_loop("bad", edges, &[d.via(m, 0, Access::Write)], |_, w| {
            w[0][0] = 1.0
        }) {
            Err(UnstructuredError::ConflictingIndirectWrite {
                first: 15,
                second: 31,
                target: 5,
                ..
            }) => {}
            other => panic!("{}: {other:?}", ctx.backend_name()),
        }
    }
}

#[test]
fn conflicting_modes_and_misfit_arguments_are_rejected() {
    let (mut ctx, nodes, edges, e2n) = ring();
    let d = ctx.decl_dat("d", nodes, 1, vec![0.0; 4]).unwrap();
    let e = ctx.decl_dat("e", edges, 1, vec![0.0; 4]).unwrap();
    let i = ctx.decl_dat("i", nodes, 1, vec![0i64; 4]).unwrap();
    let g = ctx.decl_global("g", vec![0.0]).unwrap();
    let r = ctx.par_loop(
        "rw",
        edges,
        &[d.read_via(e2n, 0), d.inc_via(e2n, 1)],
        |_, _| {},
    );
    assert!(
        matches!(
            r,
            Err(UnstructuredError::ConflictingAccess {
                first_arg: 0,
                second_arg: 1,
                ..
            })
        ),
        "{r:?}"
    );
    let r = ctx.par_loop("set", edges, &[d.read()], |_, _| {});
    assert!(
        matches!(r, Err(UnstructuredError::InvalidArgument { arg: 0, .. })),
        "{r:?}"
    );
    let r = ctx.par_loop("slot", edges, &[d.read_via(e2n, 2)], |_, _| {});
    assert!(
        matches!(r, Err(UnstructuredError::InvalidArgument { arg: 0, .. })),
        "{r:?}"
    );
    let r = ctx.par_loop("map", nodes, &[e.read_via(e2n, 0)], |_, _| {});
    assert!(
        matches!(r, Err(UnstructuredError::InvalidArgument { .. })),
        "{r:?}"
    );
    let r = ctx.par_loop("min", nodes, &[d.direct(Access::Min)], |_, _| {});
    assert!(
        matches!(r, Err(UnstructuredError::InvalidArgument { .. })),
        "{r:?}"
    );
    let r = ctx.par_loop("gw", nodes, &[g.arg(Access::Write)], |_, _| {});
    assert!(
        matches!(r, Err(UnstructuredError::InvalidArgument { .. })),
        "{r:?}"
    );
    // Element type of a handle from another declaration order.
    let r = ctx.par_loop::<i64, _>("type", nodes, &[i.read()], |_, _| {});
    assert!(r.is_ok());
}

#[test]
fn reductions_and_constants() {
    let (mut ctx, nodes, _, _) = ring();
    let d = ctx
        .decl_dat("d", nodes, 1, vec![3.0, -1.0, 4.0, 1.5])
        .unwrap();
    let c = ctx.decl_global("c", vec![2.0]).unwrap();
    let (s, lo, hi) = (
        ctx.decl_global("s", vec![10.0]).unwrap(),
        ctx.decl_global("lo", vec![0.0]).unwrap(),
        ctx.decl_global("hi", vec![0.0]).unwrap(),
    );
    ctx.par_loop(
        "red",
        nodes,
        &[
            d.read(),
            c.arg(Access::Read),
            s.arg(Access::Inc),
            lo.arg(Access::Min),
            hi.arg(Access::Max),
        ],
        |r, w| {
            w[0][0] += r[0][0] * r[1][0];
            w[1][0] = w[1][0].min(r[0][0]);
            w[2][0] = w[2][0].max(r[0][0]);
        },
    )
    .unwrap();
    assert_eq!(ctx.global_values(s).unwrap(), vec![10.0 + 15.0]);
    assert_eq!(ctx.global_values(lo).unwrap(), vec![-1.0]);
    assert_eq!(ctx.global_values(hi).unwrap(), vec![4.0]);
    assert_eq!(ctx.stats().loops["red"].calls, 1);
}

#[test]
fn write_arguments_start_from_zeros_and_read_write_from_the_values() {
    // `Write` and `ReadWrite` arguments reach the kernel in place (no gather/scatter copy):
    // a `Write` still starts from zeros, directly and through a map, on every backend.
    for backend in [Backend::Sequential, Backend::Threads] {
        let (mut ctx, nodes, edges, e2n) = ring_on(backend);
        let d = ctx.decl_dat("d", edges, 2, vec![7.0; 8]).unwrap();
        let rw = ctx
            .decl_dat("rw", edges, 1, vec![1.0, 2.0, 3.0, 4.0])
            .unwrap();
        let n = ctx.decl_dat("n", nodes, 2, vec![5.0; 8]).unwrap();
        ctx.par_loop(
            "w",
            edges,
            &[d.write(), rw.rw(), n.via(e2n, 0, Access::Write)],
            |_, w| {
                w[0][1] = 1.0;
                w[1][0] *= 10.0;
                w[2][0] = 2.0;
            },
        )
        .unwrap();
        assert_eq!(ctx.dat_values(d).unwrap(), [0.0, 1.0].repeat(4));
        assert_eq!(ctx.dat_values(rw).unwrap(), vec![10.0, 20.0, 30.0, 40.0]);
        assert_eq!(ctx.dat_values(n).unwrap(), [2.0, 0.0].repeat(4));
    }
}

/// A 50-edge ring (`e2n`) and a map `star` of arity 1 in which edges 7, 19, 31 and 44 all
/// write node 49 and edges 12 and 40 node 34 (every other edge its own node): the collision
/// the sequential order meets first is edges 7 and 19 on node 49.
pub(crate) fn three_colliders_program(backend: Backend) -> Result<(), UnstructuredError> {
    let n = 50u32;
    let mut ctx = Context::new(backend);
    let nodes = ctx.decl_set("nodes", n as usize)?;
    let edges = ctx.decl_set("edges", n as usize)?;
    let ring: Vec<u32> = (0..n)
        .flat_map(|e| [(e * 17) % n, (e * 17 + 17) % n])
        .collect();
    let e2n = ctx.decl_map("e2n", edges, nodes, 2, ring)?;
    let star: Vec<u32> = (0..n)
        .map(|e| match e {
            7 | 19 | 31 | 44 => 49,
            12 | 40 => 34,
            e => (e * 7) % n,
        })
        .collect();
    let m = ctx.decl_map("star", edges, nodes, 1, star)?;
    let d = ctx.decl_dat("d", nodes, 1, vec![0.0; n as usize])?;
    // A first loop that distributes / renumbers the mesh.
    ctx.par_loop(
        "spread",
        edges,
        &[d.inc_via(e2n, 0), d.inc_via(e2n, 1)],
        |_, w| {
            w[0][0] += 1.0;
            w[1][0] += 1.0;
        },
    )?;
    ctx.par_loop("bad", edges, &[d.via(m, 0, Access::Write)], |_, w| {
        w[0][0] = 1.0
    })
}

pub(crate) fn assert_lowest_pair(r: Result<(), UnstructuredError>, who: &str) {
    match r {
        Err(UnstructuredError::ConflictingIndirectWrite {
            first: 7,
            second: 19,
            target: 49,
            ..
        }) => {}
        other => panic!("{who}: {other:?}"),
    }
}

#[test]
fn with_three_or_more_colliders_every_backend_names_the_sequential_pair() {
    // The threaded backend renumbers the mesh first; it used to report the first collision
    // of the renumbered order (another pair of the four writers of node 49, or 12 and 40).
    assert_lowest_pair(three_colliders_program(Backend::Sequential), "seq");
    for threads in [1, 2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let r = pool.install(|| three_colliders_program(Backend::Threads));
        assert_lowest_pair(r, &format!("{threads} threads"));
    }
}
