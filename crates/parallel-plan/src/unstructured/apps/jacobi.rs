//! Steady heat conduction on the nodes of a mesh by Jacobi iteration: every interior node
//! takes the mean of its neighbours along the mesh edges; nodes on the wall are held at 1, on
//! the far field at 0.

use crate::unstructured::{Access, Context, Grid, Result};

/// Settings of a Jacobi run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JacobiConfig {
    /// Sweeps.
    pub iterations: usize,
    /// Record the residual every this many sweeps.
    pub report_every: usize,
}

impl Default for JacobiConfig {
    fn default() -> Self {
        Self {
            iterations: 1000,
            report_every: 100,
        }
    }
}

/// What a Jacobi run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct JacobiOutcome {
    /// `(sweep, rms change, max change)` every `report_every` sweeps.
    pub history: Vec<(usize, f64, f64)>,
    /// The temperature per node, in the grid's node numbering.
    pub u: Vec<f64>,
}

/// Runs the Jacobi iteration on the edges and boundary edges of `grid` from `u = 0`.
///
/// # Errors
/// Those of the declarations and loops (on distributed runs, communication errors).
pub fn jacobi(ctx: &mut Context, grid: &Grid, cfg: &JacobiConfig) -> Result<JacobiOutcome> {
    let nnode = grid.nnode();
    let nodes = ctx.decl_set("nodes", nnode)?;
    let edges = ctx.decl_set("edges", grid.nedge())?;
    let bedges = ctx.decl_set("bedges", grid.nbedge())?;
    let pedge = ctx.decl_map("pedge", edges, nodes, 2, grid.edge.clone())?;
    let pbedge = ctx.decl_map("pbedge", bedges, nodes, 2, grid.bedge.clone())?;
    let bound = ctx.decl_dat(
        "bound",
        bedges,
        1,
        grid.bound.iter().map(|&b| b as f64).collect(),
    )?;
    let u = ctx.decl_dat("u", nodes, 1, vec![0.0; nnode])?;
    let sum = ctx.decl_dat("sum", nodes, 1, vec![0.0; nnode])?;
    // [degree, boundary edges touching, wall edges touching]
    let info = ctx.decl_dat("info", nodes, 3, vec![0.0; 3 * nnode])?;
    let sq = ctx.decl_global("sq", vec![0.0])?;
    let max = ctx.decl_global("max", vec![0.0])?;

    ctx.par_loop(
        "degree",
        edges,
        &[info.inc_via(pedge, 0), info.inc_via(pedge, 1)],
        |_, w| {
            w[0][0] += 1.0;
            w[1][0] += 1.0;
        },
    )?;
    ctx.par_loop(
        "boundary",
        bedges,
        &[
            bound.read(),
            info.inc_via(pbedge, 0),
            info.inc_via(pbedge, 1),
        ],
        |r, w| {
            for n in w.iter_mut() {
                n[1] += 1.0;
                n[2] += r[0][0];
            }
        },
    )?;
    let mut history = Vec::new();
    for sweep in 1..=cfg.iterations {
        ctx.par_loop(
            "neighbours",
            edges,
            &[
                u.read_via(pedge, 0),
                u.read_via(pedge, 1),
                sum.inc_via(pedge, 0),
                sum.inc_via(pedge, 1),
            ],
            |r, w| {
                w[0][0] += r[1][0];
                w[1][0] += r[0][0];
            },
        )?;
        ctx.set_global(sq, &[0.0])?;
        ctx.set_global(max, &[0.0])?;
        ctx.par_loop(
            "update",
            nodes,
            &[
                info.read(),
                u.rw(),
                sum.rw(),
                sq.arg(Access::Inc),
                max.arg(Access::Max),
            ],
            |r, w| {
                let i = r[0];
                let new = if i[1] > 0.0 {
                    if i[2] > 0.0 {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    w[1][0] / i[0]
                };
                let d = new - w[0][0];
                w[0][0] = new;
                w[1][0] = 0.0;
                w[2][0] += d * d;
                w[3][0] = w[3][0].max(d.abs());
            },
        )?;
        if cfg.report_every > 0 && sweep % cfg.report_every == 0 {
            let s = ctx.global_values(sq)?[0];
            history.push((sweep, (s / nnode as f64).sqrt(), ctx.global_values(max)?[0]));
        }
    }
    Ok(JacobiOutcome {
        history,
        u: ctx.dat_values(u)?,
    })
}
