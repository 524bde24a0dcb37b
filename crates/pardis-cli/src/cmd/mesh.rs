//! `pardis mesh` (issue #26): unstructured-mesh applications (OP2's Airfoil, Jacobi) run
//! sequentially, threaded or distributed with the distribution generated automatically (MARO).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use pardis::collectives::{run_local_with, tcp, tcp::run_tcp_local, Communicator, Config};
use pardis::plan::unstructured::apps::{airfoil, jacobi, AirfoilConfig, JacobiConfig};
use pardis::plan::unstructured::{
    Backend, Context, DistConfig, Grid, Partitioner, PlanReport, RunStats,
};
use serde_json::json;

use crate::output;

/// Arguments of `pardis mesh`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Run an application on a mesh file or a generated mesh and print the plan and residuals.
    Run(RunArgs),
    /// Write a generated Airfoil-style mesh in OP2's `new_grid.dat` format.
    Gen(GenArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum App {
    Airfoil,
    Jacobi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendArg {
    Seq,
    Threads,
    Dist,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum TransportArg {
    /// Ranks are threads of this process (shared memory).
    Local,
    /// Ranks are processes (this command started `--ranks` times) over loopback TCP.
    Tcp,
    /// Ranks are threads of this process talking over loopback TCP.
    TcpThreads,
    /// One rank per process of an `mpirun` job (build with the `mpi` feature).
    Mpi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum PartitionerArg {
    /// METIS k-way (vendored METIS 5.1).
    Metis,
    /// Built-in recursive graph bisection.
    Graph,
    /// Recursive coordinate bisection (geometric).
    Rcb,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Application.
    #[arg(long, value_enum, default_value = "airfoil")]
    app: App,
    /// Mesh file in OP2's `new_grid.dat` format.
    #[arg(long, conflicts_with = "gen")]
    mesh: Option<PathBuf>,
    /// Generated mesh, `cells:N` (default `cells:20000`).
    #[arg(long)]
    gen: Option<String>,
    /// Seed of the generated mesh's numbering.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the loops run.
    #[arg(long, value_enum, default_value = "seq")]
    backend: BackendArg,
    /// Ranks of a distributed run.
    #[arg(long, default_value_t = 2)]
    ranks: usize,
    /// Transport between the ranks (`tcp`: one process per rank, started by this command;
    /// `mpi`: run this command under `mpirun`, `--ranks` is ignored).
    #[arg(long, value_enum, default_value = "local")]
    transport: TransportArg,
    /// Partitioner of a distributed run.
    #[arg(long, value_enum, default_value = "metis")]
    partitioner: PartitionerArg,
    /// Only rank 0 reads (or generates) the mesh; it partitions it and sends every other rank
    /// its part (MARO's scatter). With ranks as processes, the others never open the file.
    #[arg(long)]
    scatter: bool,
    /// Threads of the threaded backend (default: rayon's).
    #[arg(long)]
    threads: Option<usize>,
    /// Iterations.
    #[arg(long, default_value_t = 1000)]
    iters: usize,
    /// Also run sequentially and report the largest relative difference.
    #[arg(long)]
    check: bool,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct GenArgs {
    /// Cells (about; the mesh is `ni × nj` quadrilaterals).
    #[arg(long)]
    cells: usize,
    /// Output file.
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing --out file.
    #[arg(long)]
    force: bool,
    /// Seed of the shuffled numbering.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    match args.cmd {
        Sub::Gen(a) => {
            crate::output::refuse_existing(&a.out, a.force)?;
            let g = Grid::generate(a.cells, a.seed)?;
            g.write(&a.out)?;
            println!(
                "wrote {}: {} nodes, {} cells, {} edges, {} boundary edges",
                a.out.display(),
                g.nnode(),
                g.ncell(),
                g.nedge(),
                g.nbedge()
            );
            Ok(())
        }
        Sub::Run(a) => run_app(a),
    }
}

/// What one run of an application produced (on rank 0 for distributed runs).
struct Outcome {
    /// The solution in global numbering.
    values: Vec<f64>,
    /// `(iteration, residual)`.
    history: Vec<(usize, f64)>,
    stats: RunStats,
    report: Option<PlanReport>,
    /// Halo bytes sent by all ranks together (distributed runs).
    all_halo_bytes: Option<u64>,
}

fn app_in(
    ctx: &mut Context,
    app: App,
    grid: &Grid,
    iters: usize,
) -> pardis::plan::unstructured::Result<Outcome> {
    let (values, history) = match app {
        App::Airfoil => {
            let o = airfoil(
                ctx,
                grid,
                &AirfoilConfig {
                    iterations: iters,
                    report_every: 100,
                },
            )?;
            (o.q, o.rms)
        }
        App::Jacobi => {
            let o = jacobi(
                ctx,
                grid,
                &JacobiConfig {
                    iterations: iters,
                    report_every: 100,
                },
            )?;
            (o.u, o.history.iter().map(|h| (h.0, h.1)).collect())
        }
    };
    Ok(Outcome {
        values,
        history,
        stats: ctx.stats().clone(),
        report: ctx.plan_report().cloned(),
        all_halo_bytes: None,
    })
}

fn run_app(a: RunArgs) -> anyhow::Result<()> {
    // The MPI job of `--transport mpi`, finalised when this function returns.
    let mut mpi_job: Option<Box<dyn std::any::Any>> = None;
    let load_grid = || -> anyhow::Result<Grid> {
        Ok(match (&a.mesh, &a.gen) {
            (Some(p), _) => Grid::read(p)?,
            (None, g) => {
                let spec = g.as_deref().unwrap_or("cells:20000");
                let cells: usize = spec
                    .strip_prefix("cells:")
                    .and_then(|n| n.parse().ok())
                    .with_context(|| format!("--gen `{spec}`: expected `cells:N`"))?;
                Grid::generate(cells, a.seed)?
            }
        })
    };
    if a.scatter && a.backend != BackendArg::Dist {
        bail!("--scatter distributes the mesh from rank 0: it needs --backend dist");
    }
    // Scattered over processes, the mesh is read by rank 0 alone, once it knows its rank.
    let process_scatter = a.scatter && matches!(a.transport, TransportArg::Tcp | TransportArg::Mpi);
    let t = Instant::now();
    let mut grid = if process_scatter {
        Grid::default()
    } else {
        load_grid()?
    };
    let mut load = t.elapsed();
    let partitioner = match a.partitioner {
        PartitionerArg::Metis => Partitioner::Metis,
        PartitionerArg::Graph => Partitioner::Graph,
        PartitionerArg::Rcb => Partitioner::Rcb,
    };
    let seq = |grid: &Grid| app_in(&mut Context::new(Backend::Sequential), a.app, grid, a.iters);
    let t = Instant::now();
    let out = match a.backend {
        BackendArg::Seq => seq(&grid)?,
        BackendArg::Threads => {
            let mut b = rayon::ThreadPoolBuilder::new();
            if let Some(n) = a.threads {
                b = b.num_threads(n);
            }
            b.build()?
                .install(|| app_in(&mut Context::new(Backend::Threads), a.app, &grid, a.iters))?
        }
        BackendArg::Dist => {
            if a.ranks == 0 {
                bail!("--ranks must be at least 1");
            }
            let cfg = Config {
                op_timeout: Duration::from_secs(600),
                ..Config::default()
            };
            let body = |comm: Communicator, grid: &Grid| {
                app_in(
                    &mut Context::new(Backend::distributed(
                        comm,
                        DistConfig {
                            partitioner,
                            scatter_from: a.scatter.then_some(0),
                            ..DistConfig::default()
                        },
                    )),
                    a.app,
                    grid,
                    a.iters,
                )
            };
            // Ranks that are threads share the mesh; scattered, only rank 0 passes it.
            let empty = Grid::default();
            let threads_body = |comm: Communicator| {
                let g = if a.scatter && comm.rank() != 0 {
                    &empty
                } else {
                    &grid
                };
                body(comm, g)
            };
            let outs = match a.transport {
                TransportArg::Local => run_local_with(&cfg, a.ranks, threads_body),
                TransportArg::TcpThreads => run_tcp_local(&cfg, a.ranks, threads_body),
                TransportArg::Tcp | TransportArg::Mpi => {
                    let Some(comm) = process_rank(&a, &cfg, &mut mpi_job)? else {
                        return Ok(());
                    };
                    let rank = comm.rank();
                    if process_scatter {
                        // Rank 0 reads the mesh and tells the others whether it could, so
                        // that all stop at once instead of waiting for their parts.
                        let t = Instant::now();
                        let loaded = (rank == 0).then(&load_grid);
                        load = t.elapsed();
                        let failure = loaded.as_ref().and_then(|g| g.as_ref().err());
                        let failure = failure.map(output::error_line).unwrap_or_default();
                        let said = from_rank_0(&comm, failure)?;
                        match loaded {
                            Some(g) => grid = g?,
                            None if !said.is_empty() => {
                                bail!("rank 0 could not load the mesh: {said}")
                            }
                            None => {}
                        }
                    }
                    let o = body(comm, &grid)?;
                    if rank != 0 {
                        return Ok(());
                    }
                    vec![Ok(Ok(o))]
                }
            };
            let one_process = matches!(a.transport, TransportArg::Local | TransportArg::TcpThreads);
            let mut first = None;
            let mut halo_bytes = 0;
            for o in outs {
                let o = o??;
                halo_bytes += o.stats.total().halo_bytes;
                first.get_or_insert(o);
            }
            let mut o = first.expect("at least one rank");
            // Ranks in other processes keep their counts (rank 0's are in the loop table).
            o.all_halo_bytes = one_process.then_some(halo_bytes);
            o
        }
    };
    let secs = t.elapsed().as_secs_f64();
    let check = if a.check {
        Some(max_rel_diff(&seq(&grid)?.values, &out.values))
    } else {
        None
    };

    if a.json {
        let j = json!({
            "app": format!("{:?}", a.app).to_lowercase(),
            "backend": format!("{:?}", a.backend).to_lowercase(),
            "ranks": if a.backend == BackendArg::Dist { a.ranks } else { 1 },
            "scatter_from": a.scatter.then_some(0),
            "mesh": { "nodes": grid.nnode(), "cells": grid.ncell(), "edges": grid.nedge(), "bedges": grid.nbedge() },
            "load_seconds": load.as_secs_f64(),
            "seconds": secs,
            "seconds_per_iteration": secs / a.iters.max(1) as f64,
            "history": out.history,
            "plan": out.report,
            "loops": out.stats.loops,
            "halo_bytes_all_ranks": out.all_halo_bytes,
            "check_max_rel_diff": check,
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!(
        "{:?} on {} nodes, {} cells, {} edges, {} boundary edges ({:.2} s to load)",
        a.app,
        grid.nnode(),
        grid.ncell(),
        grid.nedge(),
        grid.nbedge(),
        load.as_secs_f64()
    );
    if let Some(r) = &out.report {
        println!(
            "plan: {} ranks, {} partitioner on `{}`, edge cut {}, partition {:.3} s, setup {:.3} s",
            r.ranks,
            r.partitioner,
            r.primary.as_deref().unwrap_or("-"),
            r.edge_cut,
            r.partition_seconds,
            r.setup_seconds
        );
        let mut t = output::table(["set", "rank", "owned", "exec halo", "non-exec halo"]);
        for s in &r.sets {
            for k in 0..r.ranks {
                t.add_row([
                    s.name.clone(),
                    k.to_string(),
                    s.owned[k].to_string(),
                    s.exec_halo[k].to_string(),
                    s.nonexec_halo[k].to_string(),
                ]);
            }
        }
        println!("{t}");
    }
    let mut t = output::table([
        "loop",
        "calls",
        "elements",
        "exchanges",
        "skipped (clean)",
        "halo bytes sent",
    ]);
    for (name, l) in &out.stats.loops {
        t.add_row([
            name.clone(),
            l.calls.to_string(),
            l.elements.to_string(),
            l.exchanges.to_string(),
            l.skipped_exchanges.to_string(),
            output::bytes(l.halo_bytes),
        ]);
    }
    println!("loops (rank 0):\n{t}");
    if let Some(all) = out.all_halo_bytes {
        println!(
            "halo bytes sent by all ranks: {} ({} per iteration)",
            output::bytes(all),
            output::bytes(all / a.iters.max(1) as u64)
        );
    }
    for (iter, r) in &out.history {
        println!("{iter:6}  {r:10.5e}");
    }
    println!(
        "{:.3} s, {:.3} ms per iteration",
        secs,
        1e3 * secs / a.iters.max(1) as f64
    );
    if let Some(d) = check {
        println!(
            "check: largest relative difference to sequential {d:.3e} ({})",
            if d <= 1e-12 { "ok" } else { "DIFFERS" }
        );
        if d > 1e-12 {
            bail!("result differs from the sequential run by {d:.3e} (relative)");
        }
    }
    Ok(())
}

/// Environment of a rank that `pardis mesh run --transport tcp` started.
const CHILD_RANK: &str = "PARDIS_MESH_CHILD_RANK";

/// This process's rank of a multi-process run, or `None` when this process only launched the
/// ranks (`--transport tcp`: it starts `--ranks` copies of this command over loopback TCP,
/// rank 0 printing, and waits for them).
fn process_rank(
    a: &RunArgs,
    cfg: &Config,
    guard: &mut Option<Box<dyn std::any::Any>>,
) -> anyhow::Result<Option<Communicator>> {
    match a.transport {
        TransportArg::Mpi => mpi_world(cfg, guard).map(Some),
        _ => {
            if let Ok(rank) = std::env::var(CHILD_RANK) {
                let rank: usize = rank.parse().context(CHILD_RANK)?;
                let addr = std::env::var(tcp::ENV_MASTER_ADDR).context(tcp::ENV_MASTER_ADDR)?;
                let mut t = tcp::TcpConfig::new(rank, a.ranks, addr);
                t.engine = cfg.clone();
                return Ok(Some(tcp::join(&t)?));
            }
            // A free loopback port for rank 0 (released just before the ranks start).
            let port = std::net::TcpListener::bind("127.0.0.1:0")?
                .local_addr()?
                .port();
            let exe = std::env::current_exe()?;
            let mut children = Vec::with_capacity(a.ranks);
            for rank in 0..a.ranks {
                let mut c = std::process::Command::new(&exe);
                c.args(std::env::args_os().skip(1))
                    .env(CHILD_RANK, rank.to_string())
                    .env(tcp::ENV_MASTER_ADDR, format!("127.0.0.1:{port}"));
                if rank != 0 {
                    c.stdout(std::process::Stdio::null());
                }
                children.push(c.spawn().context("starting a rank")?);
            }
            let mut failed = Vec::new();
            for (rank, mut c) in children.into_iter().enumerate() {
                if !c.wait()?.success() {
                    failed.push(rank);
                }
            }
            if !failed.is_empty() {
                bail!("ranks {failed:?} of the TCP run failed");
            }
            Ok(None)
        }
    }
}

/// The world of the `mpirun` job this process is a rank of; `guard` keeps the job (MPI is
/// finalised when it is dropped).
#[cfg(feature = "mpi")]
fn mpi_world(
    cfg: &Config,
    guard: &mut Option<Box<dyn std::any::Any>>,
) -> anyhow::Result<Communicator> {
    use pardis::collectives::mpi::{MpiConfig, MpiJob};
    let job = MpiJob::init(&MpiConfig {
        engine: cfg.clone(),
        ..MpiConfig::default()
    })?;
    let world = job.world().clone();
    *guard = Some(Box::new(job));
    Ok(world)
}

#[cfg(not(feature = "mpi"))]
fn mpi_world(_: &Config, _: &mut Option<Box<dyn std::any::Any>>) -> anyhow::Result<Communicator> {
    bail!("--transport mpi needs a pardis built with the `mpi` feature (cargo build -p pardis-cli --features mpi), run under mpirun")
}

/// Rank 0's `text` (at most 4 KiB of it), broadcast to every rank.
fn from_rank_0(comm: &Communicator, mut text: String) -> anyhow::Result<String> {
    if comm.rank() == 0 && text.len() > 4096 {
        let mut end = 4096;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    let len = comm.broadcast(vec![text.len() as i64], 0)?[0].clamp(0, 4096) as usize;
    if len == 0 {
        return Ok(String::new());
    }
    let mut bytes = text.into_bytes();
    bytes.resize(len, 0);
    let bytes = comm.broadcast(bytes, 0)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `max |a - b| / max |b|`: the ∞-norm relative difference (component-wise ratios are
/// meaningless for components that are zero up to rounding).
fn max_rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
        / scale
}
