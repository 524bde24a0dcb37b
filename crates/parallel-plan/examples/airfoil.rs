//! OP2's Airfoil on a generated mesh, run sequentially, threaded and on two ranks (threads of
//! this process over `collectives`' local transport), with the distribution plan.
//!
//! `cargo run --release -p parallel-plan --features distributed --example airfoil -- [cells] [iterations] [seq]`
//! (`seq`: the sequential run only, e.g. for a profiler).

use parallel_plan::unstructured::apps::{airfoil, AirfoilConfig};
use parallel_plan::unstructured::{Backend, Context, DistConfig, Grid};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let cells: usize = args.next().map_or(Ok(20_000), |a| a.parse())?;
    let iterations: usize = args.next().map_or(Ok(200), |a| a.parse())?;
    let grid = Grid::generate(cells, 1)?;
    let cfg = AirfoilConfig {
        iterations,
        report_every: 100.min(iterations),
    };
    println!(
        "mesh: {} nodes, {} cells, {} edges, {} boundary edges",
        grid.nnode(),
        grid.ncell(),
        grid.nedge(),
        grid.nbedge()
    );

    let t = std::time::Instant::now();
    let seq = airfoil(&mut Context::new(Backend::Sequential), &grid, &cfg)?;
    println!("sequential: {:.3} s", t.elapsed().as_secs_f64());
    for (iter, rms) in &seq.rms {
        println!("  {iter:5} {rms:10.5e}");
    }
    if args.next().as_deref() == Some("seq") {
        return Ok(());
    }

    let t = std::time::Instant::now();
    let thr = airfoil(&mut Context::new(Backend::Threads), &grid, &cfg)?;
    println!(
        "threads ({}): {:.3} s, max relative difference to sequential {:.2e}",
        rayon::current_num_threads(),
        t.elapsed().as_secs_f64(),
        rel_diff(&thr.q, &seq.q)
    );

    let t = std::time::Instant::now();
    let ranks = collectives::run_local(2, |comm| {
        let mut ctx = Context::new(Backend::distributed(comm, DistConfig::default()));
        let out = airfoil(&mut ctx, &grid, &cfg);
        (out, ctx.plan_report().cloned(), ctx.stats().total())
    })?;
    println!(
        "distributed (2 local ranks): {:.3} s",
        t.elapsed().as_secs_f64()
    );
    for (rank, (out, report, total)) in ranks.into_iter().enumerate() {
        let out = out?;
        let worst = rel_diff(&out.q, &seq.q);
        println!(
            "  rank {rank}: max relative difference to sequential {worst:.2e}; halo bytes sent {}",
            total.halo_bytes
        );
        if rank == 0 {
            if let Some(r) = report {
                println!(
                    "  plan: {} partitioner, primary set {:?}, edge cut {}, setup {:.3} s",
                    r.partitioner, r.primary, r.edge_cut, r.setup_seconds
                );
                for s in r.sets {
                    println!(
                        "    {:7} owned {:?} exec halo {:?} non-exec halo {:?}",
                        s.name, s.owned, s.exec_halo, s.nonexec_halo
                    );
                }
            }
        }
    }
    Ok(())
}

/// `max |a - b| / max |b|` (the ∞-norm relative difference).
fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
        / scale
}
