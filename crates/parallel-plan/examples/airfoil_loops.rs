//! Where an Airfoil iteration's time goes, per loop (`LoopStats::nanos`), sequentially and on
//! the threaded backend with 1 and 2 threads, on the generated (shuffled) numbering and on the
//! same mesh in locality order (`Grid::locality_ordered`); one-off setup (renumbering,
//! colourings) apart, with the colours each coloured loop runs.
//!
//! `cargo run --release -p parallel-plan --example airfoil_loops -- [cells] [iterations] [seq|thr|ordered] [mesh-out]`
//! (`ordered`: only the sequential run on the locality-ordered mesh, e.g. under `perf record`
//! or cachegrind; `mesh-out`: first writes the mesh it runs, locality-ordered with `ordered`,
//! in OP2's `new_grid.dat` format, for an external reference such as a driver of
//! `benches/c/airfoil.c` under cachegrind)

use parallel_plan::unstructured::apps::{airfoil, AirfoilConfig};
use parallel_plan::unstructured::{Backend, Context, Grid, RunStats};

fn show(label: &str, secs: f64, iters: usize, st: &RunStats) {
    let setup = st.setup_nanos as f64 * 1e-9;
    print!(
        "{label:>10}: {:8.2} ms/iter |",
        1e3 * (secs - setup) / iters as f64
    );
    for (name, l) in &st.loops {
        print!(" {name} {:.2}", l.nanos as f64 * 1e-6 / iters as f64);
        if l.colours > 0 {
            print!(" ({} colours)", l.colours / l.calls.max(1));
        }
    }
    println!(" | setup {setup:.3} s");
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let cells: usize = args.next().map_or(Ok(200_000), |a| a.parse())?;
    let iters: usize = args.next().map_or(Ok(10), |a| a.parse())?;
    let which = args.next().unwrap_or_default();
    let shuffled = Grid::generate(cells, 1)?;
    let ordered = shuffled.locality_ordered()?;
    if let Some(out) = args.next() {
        let g = if which == "ordered" {
            &ordered
        } else {
            &shuffled
        };
        g.write(std::path::Path::new(&out))?;
    }
    let cfg = AirfoilConfig {
        iterations: iters,
        report_every: 0,
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{} cells, {iters} iterations, load average {load}",
        shuffled.ncell()
    );
    for (name, g) in [("shuffled", &shuffled), ("ordered", &ordered)] {
        // `ordered`: the sequential run on the locality-ordered mesh only (for profiles).
        if which == "ordered" && name == "shuffled" {
            continue;
        }
        println!("{name} numbering (ms per iteration, per loop):");
        if which != "thr" {
            let mut ctx = Context::new(Backend::Sequential);
            let t = std::time::Instant::now();
            airfoil(&mut ctx, g, &cfg)?;
            show("seq", t.elapsed().as_secs_f64(), iters, ctx.stats());
        }
        if which == "seq" || which == "ordered" {
            continue;
        }
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()?;
            pool.install(
                || -> Result<(), parallel_plan::unstructured::UnstructuredError> {
                    let mut ctx = Context::new(Backend::Threads);
                    let t = std::time::Instant::now();
                    airfoil(&mut ctx, g, &cfg)?;
                    let label = format!("threads/{threads}");
                    show(&label, t.elapsed().as_secs_f64(), iters, ctx.stats());
                    Ok(())
                },
            )?;
        }
    }
    Ok(())
}
