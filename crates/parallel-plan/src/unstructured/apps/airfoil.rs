//! OP2's Airfoil: a 2-D finite-volume Euler solver (cell-centred, scalar artificial
//! dissipation, local time stepping, two-stage update), the OP2 standard benchmark. Loops and
//! kernels as in OP2's `airfoil.cpp`: `save_soln`, `adt_calc`, `res_calc`, `bres_calc`,
//! `update`; the rms residual is recorded every `report_every` iterations.

use crate::unstructured::{Access, Context, Grid, Result};

const GAM: f64 = 1.4;
const GM1: f64 = GAM - 1.0;
const CFL: f64 = 0.9;
const EPS: f64 = 0.05;

/// Free-stream state: Mach 0.4, angle of attack 3°, `p = r = 1` (OP2's values).
pub fn qinf() -> [f64; 4] {
    let mach = 0.4;
    let (p, r) = (1.0, 1.0);
    let u = (GAM * p / r).sqrt() * mach;
    let e = p / (r * GM1) + 0.5 * u * u;
    [r, r * u, 0.0, r * e]
}

/// Settings of an Airfoil run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AirfoilConfig {
    /// Time steps (OP2: 1000).
    pub iterations: usize,
    /// Record the rms residual every this many iterations (OP2: 100).
    pub report_every: usize,
}

impl Default for AirfoilConfig {
    fn default() -> Self {
        Self {
            iterations: 1000,
            report_every: 100,
        }
    }
}

/// What an Airfoil run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct AirfoilOutcome {
    /// `(iteration, rms)` every `report_every` iterations.
    pub rms: Vec<(usize, f64)>,
    /// The flow state `q` (4 per cell), in the grid's cell numbering.
    pub q: Vec<f64>,
}

fn pressure(q: &[f64; 4]) -> f64 {
    GM1 * (q[3] - 0.5 * (q[1] * q[1] + q[2] * q[2]) / q[0])
}

/// `res_calc`: the flux through an interior edge, added to one cell and subtracted from the
/// other. (OP2's kernel signature, one argument per loop argument.)
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn res_calc(
    x1: &[f64; 2],
    x2: &[f64; 2],
    q1: &[f64; 4],
    q2: &[f64; 4],
    adt1: f64,
    adt2: f64,
    res1: &mut [f64; 4],
    res2: &mut [f64; 4],
) {
    let dx = x1[0] - x2[0];
    let dy = x1[1] - x2[1];
    let mut ri = 1.0 / q1[0];
    let p1 = GM1 * (q1[3] - 0.5 * ri * (q1[1] * q1[1] + q1[2] * q1[2]));
    let vol1 = ri * (q1[1] * dy - q1[2] * dx);
    ri = 1.0 / q2[0];
    let p2 = GM1 * (q2[3] - 0.5 * ri * (q2[1] * q2[1] + q2[2] * q2[2]));
    let vol2 = ri * (q2[1] * dy - q2[2] * dx);
    let mu = 0.5 * (adt1 + adt2) * EPS;
    let mut f = 0.5 * (vol1 * q1[0] + vol2 * q2[0]) + mu * (q1[0] - q2[0]);
    res1[0] += f;
    res2[0] -= f;
    f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * q2[1] + p2 * dy) + mu * (q1[1] - q2[1]);
    res1[1] += f;
    res2[1] -= f;
    f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * q2[2] - p2 * dx) + mu * (q1[2] - q2[2]);
    res1[2] += f;
    res2[2] -= f;
    f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (q2[3] + p2)) + mu * (q1[3] - q2[3]);
    res1[3] += f;
    res2[3] -= f;
}

/// `bres_calc`: the flux through a boundary edge (wall: pressure only; far field: against
/// the free stream).
#[inline(always)]
fn bres_calc(
    x1: &[f64; 2],
    x2: &[f64; 2],
    q1: &[f64; 4],
    adt1: f64,
    bound: f64,
    res1: &mut [f64; 4],
    qinf: &[f64; 4],
) {
    let dx = x1[0] - x2[0];
    let dy = x1[1] - x2[1];
    let ri = 1.0 / q1[0];
    let p1 = pressure(q1);
    if bound == 1.0 {
        res1[1] += p1 * dy;
        res1[2] += -p1 * dx;
    } else {
        let vol1 = ri * (q1[1] * dy - q1[2] * dx);
        let ri2 = 1.0 / qinf[0];
        let p2 = pressure(qinf);
        let vol2 = ri2 * (qinf[1] * dy - qinf[2] * dx);
        let mu = adt1 * EPS;
        let mut f = 0.5 * (vol1 * q1[0] + vol2 * qinf[0]) + mu * (q1[0] - qinf[0]);
        res1[0] += f;
        f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * qinf[1] + p2 * dy) + mu * (q1[1] - qinf[1]);
        res1[1] += f;
        f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * qinf[2] - p2 * dx) + mu * (q1[2] - qinf[2]);
        res1[2] += f;
        f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (qinf[3] + p2)) + mu * (q1[3] - qinf[3]);
        res1[3] += f;
    }
}

/// `adt_calc`: the local time step of a cell from its four nodes.
#[inline(always)]
fn adt_calc(x: [&[f64; 2]; 4], q: &[f64; 4]) -> f64 {
    let ri = 1.0 / q[0];
    let u = ri * q[1];
    let v = ri * q[2];
    let c = (GAM * GM1 * (ri * q[3] - 0.5 * (u * u + v * v))).sqrt();
    let mut adt = 0.0;
    for k in 0..4 {
        let (a, b) = (x[k], x[(k + 1) % 4]);
        let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
        adt += (u * dy - v * dx).abs() + c * (dx * dx + dy * dy).sqrt();
    }
    adt / CFL
}

/// Runs Airfoil on `grid` from the free stream.
///
/// # Errors
/// Those of the declarations and loops (on distributed runs, communication errors).
pub fn airfoil(ctx: &mut Context, grid: &Grid, cfg: &AirfoilConfig) -> Result<AirfoilOutcome> {
    let qinf = qinf();
    let (nnode, ncell) = (grid.nnode(), grid.ncell());
    let nodes = ctx.decl_set("nodes", nnode)?;
    let cells = ctx.decl_set("cells", ncell)?;
    let edges = ctx.decl_set("edges", grid.nedge())?;
    let bedges = ctx.decl_set("bedges", grid.nbedge())?;
    let pcell = ctx.decl_map("pcell", cells, nodes, 4, grid.cell.clone())?;
    let pedge = ctx.decl_map("pedge", edges, nodes, 2, grid.edge.clone())?;
    let pecell = ctx.decl_map("pecell", edges, cells, 2, grid.ecell.clone())?;
    let pbedge = ctx.decl_map("pbedge", bedges, nodes, 2, grid.bedge.clone())?;
    let pbecell = ctx.decl_map("pbecell", bedges, cells, 1, grid.becell.clone())?;
    let p_x = ctx.decl_dat("p_x", nodes, 2, grid.x.clone())?;
    let p_q = ctx.decl_dat("p_q", cells, 4, qinf.repeat(ncell))?;
    let p_qold = ctx.decl_dat("p_qold", cells, 4, vec![0.0; 4 * ncell])?;
    let p_adt = ctx.decl_dat("p_adt", cells, 1, vec![0.0; ncell])?;
    let p_res = ctx.decl_dat("p_res", cells, 4, vec![0.0; 4 * ncell])?;
    let p_bound = ctx.decl_dat(
        "p_bound",
        bedges,
        1,
        grid.bound.iter().map(|&b| b as f64).collect(),
    )?;
    let rms = ctx.decl_global("rms", vec![0.0])?;

    let mut history = Vec::new();
    for iter in 1..=cfg.iterations {
        ctx.par_loop_fixed(
            "save_soln",
            cells,
            (
                p_q.read().fixed_read::<4>(),
                p_qold.write().fixed_write::<4>(),
            ),
            |(q, qold)| *qold = *q,
        )?;
        for _ in 0..2 {
            ctx.par_loop_fixed(
                "adt_calc",
                cells,
                (
                    p_x.read_via(pcell, 0).fixed_read::<2>(),
                    p_x.read_via(pcell, 1).fixed_read::<2>(),
                    p_x.read_via(pcell, 2).fixed_read::<2>(),
                    p_x.read_via(pcell, 3).fixed_read::<2>(),
                    p_q.read().fixed_read::<4>(),
                    p_adt.write().fixed_write::<1>(),
                ),
                |(x1, x2, x3, x4, q, adt)| adt[0] = adt_calc([x1, x2, x3, x4], q),
            )?;
            ctx.par_loop_fixed(
                "res_calc",
                edges,
                (
                    p_x.read_via(pedge, 0).fixed_read::<2>(),
                    p_x.read_via(pedge, 1).fixed_read::<2>(),
                    p_q.read_via(pecell, 0).fixed_read::<4>(),
                    p_q.read_via(pecell, 1).fixed_read::<4>(),
                    p_adt.read_via(pecell, 0).fixed_read::<1>(),
                    p_adt.read_via(pecell, 1).fixed_read::<1>(),
                    p_res.inc_via(pecell, 0).fixed_write::<4>(),
                    p_res.inc_via(pecell, 1).fixed_write::<4>(),
                ),
                |(x1, x2, q1, q2, adt1, adt2, res1, res2)| {
                    res_calc(x1, x2, q1, q2, adt1[0], adt2[0], res1, res2)
                },
            )?;
            ctx.par_loop_fixed(
                "bres_calc",
                bedges,
                (
                    p_x.read_via(pbedge, 0).fixed_read::<2>(),
                    p_x.read_via(pbedge, 1).fixed_read::<2>(),
                    p_q.read_via(pbecell, 0).fixed_read::<4>(),
                    p_adt.read_via(pbecell, 0).fixed_read::<1>(),
                    p_res.inc_via(pbecell, 0).fixed_write::<4>(),
                    p_bound.read().fixed_read::<1>(),
                ),
                |(x1, x2, q1, adt1, res1, bound)| {
                    bres_calc(x1, x2, q1, adt1[0], bound[0], res1, &qinf)
                },
            )?;
            ctx.set_global(rms, &[0.0])?;
            ctx.par_loop_fixed(
                "update",
                cells,
                (
                    p_qold.read().fixed_read::<4>(),
                    p_q.write().fixed_write::<4>(),
                    p_res.rw().fixed_write::<4>(),
                    p_adt.read().fixed_read::<1>(),
                    rms.arg(Access::Inc).fixed_write::<1>(),
                ),
                |(qold, q, res, adt, rms)| {
                    let adti = 1.0 / adt[0];
                    for n in 0..4 {
                        let del = adti * res[n];
                        q[n] = qold[n] - del;
                        res[n] = 0.0;
                        rms[0] += del * del;
                    }
                },
            )?;
        }
        if cfg.report_every > 0 && iter % cfg.report_every == 0 {
            let r = ctx.global_values(rms)?[0];
            history.push((iter, (r / ctx.set_size(cells)? as f64).sqrt()));
        }
    }
    Ok(AirfoilOutcome {
        rms: history,
        q: ctx.dat_values(p_q)?,
    })
}
