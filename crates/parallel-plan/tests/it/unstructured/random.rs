//! Random meshes and a program over them that exercises every access mode; the threaded (and
//! distributed) backends must match the sequential one.

use parallel_plan::unstructured::{Access, Backend, Context, Result};
use proptest::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use super::rel_diff;

/// Two sets `a` (iterated) and `b`, a map `a → b` of arity `arity`, and initial values.
#[derive(Debug, Clone)]
pub(crate) struct RandomMesh {
    pub(crate) nb: usize,
    pub(crate) arity: usize,
    pub(crate) map: Vec<u32>,
    pub(crate) xa: Vec<f64>,
    pub(crate) ia: Vec<i64>,
}

pub(crate) fn random_mesh() -> impl Strategy<Value = RandomMesh> {
    (1usize..60, 1usize..40, 1usize..4).prop_flat_map(|(na, nb, arity)| {
        (
            prop::collection::vec(0..nb as u32, na * arity),
            prop::collection::vec(-1.0f64..1.0, na),
            prop::collection::vec(-1000i64..1000, na),
        )
            .prop_map(move |(map, xa, ia)| RandomMesh {
                nb,
                arity,
                map,
                xa,
                ia,
            })
    })
}

/// What the program computed: integer and float dats on `b`, floats on `a`, the integer sum
/// and the float maximum.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub(crate) ib: Vec<i64>,
    pub(crate) xb: Vec<f64>,
    pub(crate) xa: Vec<f64>,
    pub(crate) isum: i64,
    pub(crate) fmax: f64,
}

pub(crate) fn run_program(backend: Backend, m: &RandomMesh) -> Result<Outcome> {
    let mut ctx = Context::new(backend);
    let na = m.xa.len();
    let a = ctx.decl_set("a", na)?;
    let b = ctx.decl_set("b", m.nb)?;
    let map = ctx.decl_map("a2b", a, b, m.arity, m.map.clone())?;
    let xa = ctx.decl_dat("xa", a, 1, m.xa.clone())?;
    let ia = ctx.decl_dat("ia", a, 1, m.ia.clone())?;
    let ib = ctx.decl_dat("ib", b, 1, vec![0i64; m.nb])?;
    let xb = ctx.decl_dat(
        "xb",
        b,
        2,
        (0..2 * m.nb).map(|k| 1.0 + k as f64 / 7.0).collect(),
    )?;
    let fb = ctx.decl_dat("fb", b, 1, vec![0.0; m.nb])?;
    let isum = ctx.decl_global("isum", vec![0i64])?;
    let fmax = ctx.decl_global("fmax", vec![f64::MIN])?;
    for round in 0..3 {
        let args: Vec<_> = std::iter::once(ia.read())
            .chain((0..m.arity).map(|k| ib.inc_via(map, k)))
            .chain([isum.arg(Access::Inc)])
            .collect();
        ctx.par_loop("int_inc", a, &args, |r, w| {
            let n = w.len() - 1;
            for (k, slot) in w[..n].iter_mut().enumerate() {
                slot[0] += r[0][0] * (k as i64 + 1) + round;
            }
            w[n][0] += r[0][0];
        })?;
        let mut args: Vec<_> = vec![xa.read()];
        args.extend((0..m.arity).map(|k| xb.read_via(map, k)));
        args.extend((0..m.arity).map(|k| fb.inc_via(map, k)));
        ctx.par_loop("flux", a, &args, |r, w| {
            for (k, slot) in w.iter_mut().enumerate() {
                slot[0] += r[0][0] * r[1 + k][0] - 0.5 * r[1 + k][1];
            }
        })?;
        ctx.par_loop(
            "update_b",
            b,
            &[fb.rw(), xb.rw(), fmax.arg(Access::Max)],
            |_, w| {
                w[1][0] = 0.9 * w[1][0] + 0.1 * w[0][0];
                w[1][1] += 0.01 * w[0][0];
                w[2][0] = w[2][0].max(w[0][0]);
                w[0][0] = 0.0;
            },
        )?;
        ctx.par_loop("update_a", a, &[xb.read_via(map, 0), xa.rw()], |r, w| {
            w[0][0] = 0.5 * w[0][0] + 0.25 * r[0][0] * r[0][1];
        })?;
    }
    Ok(Outcome {
        ib: ctx.dat_values(ib)?,
        xb: ctx.dat_values(xb)?,
        xa: ctx.dat_values(xa)?,
        isum: ctx.global_values(isum)?[0],
        fmax: ctx.global_values(fmax)?[0],
    })
}

/// Integers equal, floats within `1e-12` relative.
pub(crate) fn assert_matches(got: &Outcome, want: &Outcome) {
    assert_eq!(got.ib, want.ib);
    assert_eq!(got.isum, want.isum);
    assert!(
        rel_diff(&got.xb, &want.xb) <= 1e-12,
        "xb {}",
        rel_diff(&got.xb, &want.xb)
    );
    assert!(
        rel_diff(&got.xa, &want.xa) <= 1e-12,
        "xa {}",
        rel_diff(&got.xa, &want.xa)
    );
    assert!(rel_diff(&[got.fmax], &[want.fmax]) <= 1e-12);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn threads_match_sequential(m in random_mesh()) {
        let want = run_program(Backend::Sequential, &m).unwrap();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
        let got = pool.install(|| run_program(Backend::Threads, &m)).unwrap();
        assert_matches(&got, &want);
    }
}

/// The reference of the `Inc` fast path (arguments incremented in place unless two slots of an
/// element name one element, then through zeros added back): a loop of integer increments
/// through every slot of the map into a 2-value dat on `b`, directly into a dat on `a` and into
/// a global, run twice and computed by a plain loop.
fn increments_by_hand(m: &RandomMesh) -> (Vec<i64>, Vec<i64>, i64) {
    let mut jb: Vec<i64> = (0..2 * m.nb as i64).collect();
    let mut ja = vec![5i64; m.ia.len()];
    let mut sum = 7;
    for _ in 0..2 {
        for (e, &v) in m.ia.iter().enumerate() {
            for k in 0..m.arity {
                let t = m.map[e * m.arity + k] as usize;
                jb[2 * t] += v * (k as i64 + 1);
                jb[2 * t + 1] -= v;
            }
            ja[e] += 3 * v;
            sum += v;
        }
    }
    (jb, ja, sum)
}

/// Whether two of a kernel's written arguments overlap in memory: a kernel must never get two
/// `&mut` views of one value (two `Inc` arguments naming one element must go through the
/// scratch), which an add-only kernel cannot see in its results.
fn overlapping<T>(w: &[&mut [T]]) -> bool {
    let ranges: Vec<(usize, usize)> = w
        .iter()
        .map(|s| {
            let p = s.as_ptr() as usize;
            (p, p + std::mem::size_of_val(&**s))
        })
        .collect();
    ranges
        .iter()
        .enumerate()
        .any(|(j, a)| ranges[..j].iter().any(|b| a.0 < b.1 && b.0 < a.1))
}

fn increments(backend: Backend, m: &RandomMesh) -> Result<(Vec<i64>, Vec<i64>, i64)> {
    let mut ctx = Context::new(backend);
    let a = ctx.decl_set("a", m.ia.len())?;
    let b = ctx.decl_set("b", m.nb)?;
    let map = ctx.decl_map("a2b", a, b, m.arity, m.map.clone())?;
    let ia = ctx.decl_dat("ia", a, 1, m.ia.clone())?;
    let jb = ctx.decl_dat("jb", b, 2, (0..2 * m.nb as i64).collect())?;
    let ja = ctx.decl_dat("ja", a, 1, vec![5i64; m.ia.len()])?;
    let sum = ctx.decl_global("sum", vec![7i64])?;
    let args: Vec<_> = std::iter::once(ia.read())
        .chain((0..m.arity).map(|k| jb.inc_via(map, k)))
        .chain([ja.inc(), sum.arg(Access::Inc)])
        .collect();
    let aliased = AtomicBool::new(false);
    for _ in 0..2 {
        ctx.par_loop("increments", a, &args, |r, w| {
            if overlapping(w) {
                aliased.store(true, Ordering::Relaxed);
            }
            let n = w.len() - 2;
            for (k, slot) in w[..n].iter_mut().enumerate() {
                slot[0] += r[0][0] * (k as i64 + 1);
                slot[1] -= r[0][0];
            }
            w[n][0] += 3 * r[0][0];
            w[n + 1][0] += r[0][0];
        })?;
    }
    assert!(
        !aliased.load(Ordering::Relaxed),
        "two written arguments of one element overlapped"
    );
    Ok((
        ctx.dat_values(jb)?,
        ctx.dat_values(ja)?,
        ctx.global_values(sum)?[0],
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn increments_match_a_plain_loop(m in random_mesh()) {
        // Small `b` sets make rows that name one element twice common (the scratch path).
        let want = increments_by_hand(&m);
        prop_assert_eq!(increments(Backend::Sequential, &m).unwrap(), want.clone());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        prop_assert_eq!(pool.install(|| increments(Backend::Threads, &m)).unwrap(), want);
    }
}

/// The outcome of [`fixed_program`]: the float dats on `b` and `a`, the integer dat on `b`,
/// the float sum and the integer maximum.
type FixedOutcome = (Vec<f64>, Vec<f64>, Vec<i64>, f64, i64);

/// One program over the first and last slots of the map (the same slot when the arity is 1,
/// so that every element's two `Inc` arguments name one element), its loops written with
/// [`Context::par_loop_fixed`] (`fixed`) or [`Context::par_loop`], the same arithmetic in
/// the same order: every mode (direct and indirect reads, `Write`, `ReadWrite`, indirect and
/// direct `Inc`, global `Read`, `Inc` and `Max`) and every kind of typed loop (arguments all
/// through the map, none, both). Panics if a kernel gets two overlapping
/// written arguments.
fn fixed_program(backend: Backend, m: &RandomMesh, fixed: bool) -> Result<FixedOutcome> {
    let mut ctx = Context::new(backend);
    let na = m.xa.len();
    let a = ctx.decl_set("a", na)?;
    let b = ctx.decl_set("b", m.nb)?;
    let map = ctx.decl_map("a2b", a, b, m.arity, m.map.clone())?;
    let (s0, s1) = (0, m.arity - 1);
    let xa = ctx.decl_dat("xa", a, 1, m.xa.clone())?;
    let ya = ctx.decl_dat("ya", a, 3, vec![0.0; 3 * na])?;
    let ia = ctx.decl_dat("ia", a, 1, m.ia.clone())?;
    let xb = ctx.decl_dat(
        "xb",
        b,
        2,
        (0..2 * m.nb).map(|k| 1.0 + k as f64 / 7.0).collect(),
    )?;
    let fb = ctx.decl_dat("fb", b, 2, vec![0.5; 2 * m.nb])?;
    let ib = ctx.decl_dat("ib", b, 1, vec![0i64; m.nb])?;
    let scale = ctx.decl_global("scale", vec![0.75, -0.25])?;
    let fsum = ctx.decl_global("fsum", vec![0.0])?;
    let imax = ctx.decl_global("imax", vec![i64::MIN])?;
    let aliased = AtomicBool::new(false);
    let flag = |w: &[&mut [f64]]| {
        if overlapping(w) {
            aliased.store(true, Ordering::Relaxed);
        }
    };
    // Each kernel once, over arrays; the slice path converts.
    let flux = |x: &[f64; 1],
                p: &[f64; 2],
                q: &[f64; 2],
                s: &[f64; 2],
                y: &mut [f64; 3],
                f0: &mut [f64; 2],
                f1: &mut [f64; 2],
                sum: &mut [f64; 1]| {
        let v = x[0] * s[0] + s[1];
        y[0] = v * p[0];
        y[1] = v * q[1];
        y[2] = p[1] - q[0];
        f0[0] += v * p[1];
        f0[1] -= 0.5 * q[0];
        f1[0] += y[2] * 0.25;
        f0[0] += 0.125 * y[0];
        f1[1] += v;
        sum[0] += v * v;
    };
    let spread = |x: &[f64; 2], f: &mut [f64; 2]| {
        f[0] += 0.5 * x[1];
        f[1] -= x[0];
    };
    let relax = |f: &mut [f64; 2], x: &mut [f64; 2]| {
        x[0] = 0.9 * x[0] + 0.1 * f[0];
        x[1] += 0.01 * f[1];
        f[0] *= 0.5;
        f[1] = 0.0;
    };
    for round in 0..3i64 {
        if fixed {
            ctx.par_loop_fixed(
                "flux",
                a,
                (
                    xa.read().fixed_read::<1>(),
                    xb.read_via(map, s0).fixed_read::<2>(),
                    xb.read_via(map, s1).fixed_read::<2>(),
                    scale.arg(Access::Read).fixed_read::<2>(),
                    ya.write().fixed_write::<3>(),
                    fb.inc_via(map, s0).fixed_write::<2>(),
                    fb.inc_via(map, s1).fixed_write::<2>(),
                    fsum.arg(Access::Inc).fixed_write::<1>(),
                ),
                |(x, p, q, s, y, f0, f1, sum)| {
                    flag(&[&mut y[..], &mut f0[..], &mut f1[..], &mut sum[..]]);
                    flux(x, p, q, s, y, f0, f1, sum)
                },
            )?;
            // Every argument through the map (the loop kind that tests nothing per element).
            ctx.par_loop_fixed(
                "spread",
                a,
                (
                    xb.read_via(map, s1).fixed_read::<2>(),
                    fb.inc_via(map, s0).fixed_write::<2>(),
                ),
                |(x, f)| spread(x, f),
            )?;
            ctx.par_loop_fixed(
                "count",
                a,
                (
                    ia.read().fixed_read::<1>(),
                    ib.inc_via(map, s1).fixed_write::<1>(),
                    ib.inc_via(map, s0).fixed_write::<1>(),
                    imax.arg(Access::Max).fixed_write::<1>(),
                ),
                |(i, c1, c0, mx)| {
                    c1[0] += i[0] + round;
                    c0[0] += 2 * i[0];
                    mx[0] = mx[0].max(i[0] * (round + 1));
                },
            )?;
            ctx.par_loop_fixed(
                "relax",
                b,
                (fb.rw().fixed_write::<2>(), xb.rw().fixed_write::<2>()),
                |(f, x)| relax(f, x),
            )?;
        } else {
            ctx.par_loop(
                "flux",
                a,
                &[
                    xa.read(),
                    xb.read_via(map, s0),
                    xb.read_via(map, s1),
                    scale.arg(Access::Read),
                    ya.write(),
                    fb.inc_via(map, s0),
                    fb.inc_via(map, s1),
                    fsum.arg(Access::Inc),
                ],
                |r, w| {
                    flag(w);
                    let [y, f0, f1, sum] = w else { unreachable!() };
                    flux(
                        r[0].try_into().unwrap(),
                        r[1].try_into().unwrap(),
                        r[2].try_into().unwrap(),
                        r[3].try_into().unwrap(),
                        (&mut **y).try_into().unwrap(),
                        (&mut **f0).try_into().unwrap(),
                        (&mut **f1).try_into().unwrap(),
                        (&mut **sum).try_into().unwrap(),
                    )
                },
            )?;
            ctx.par_loop(
                "spread",
                a,
                &[xb.read_via(map, s1), fb.inc_via(map, s0)],
                |r, w| spread(r[0].try_into().unwrap(), (&mut *w[0]).try_into().unwrap()),
            )?;
            ctx.par_loop(
                "count",
                a,
                &[
                    ia.read(),
                    ib.inc_via(map, s1),
                    ib.inc_via(map, s0),
                    imax.arg(Access::Max),
                ],
                |r, w| {
                    w[0][0] += r[0][0] + round;
                    w[1][0] += 2 * r[0][0];
                    w[2][0] = w[2][0].max(r[0][0] * (round + 1));
                },
            )?;
            ctx.par_loop("relax", b, &[fb.rw(), xb.rw()], |_, w| {
                let (f, x) = w.split_at_mut(1);
                relax(
                    (&mut *f[0]).try_into().unwrap(),
                    (&mut *x[0]).try_into().unwrap(),
                )
            })?;
        }
    }
    assert!(
        !aliased.load(Ordering::Relaxed),
        "two written arguments of one element overlapped"
    );
    Ok((
        ctx.dat_values(fb)?,
        ctx.dat_values(ya)?,
        ctx.dat_values(ib)?,
        ctx.global_values(fsum)?[0],
        ctx.global_values(imax)?[0],
    ))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// The typed loops (`par_loop_fixed`: the monomorphised element loop, or the slice loop
    /// when an element's two `Inc` arguments name one element) give bit for bit what the
    /// slice loops give, sequentially and on 2 threads.
    #[test]
    fn fixed_loops_match_slice_loops(m in random_mesh()) {
        let want = fixed_program(Backend::Sequential, &m, false).unwrap();
        prop_assert_eq!(fixed_program(Backend::Sequential, &m, true).unwrap(), want.clone());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let thr = |fixed| pool.install(|| fixed_program(Backend::Threads, &m, fixed)).unwrap();
        // The threaded backend combines reductions per block: the same on both paths.
        prop_assert_eq!(thr(true), thr(false));
    }
}
