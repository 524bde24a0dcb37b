//! The class-incremental benchmark (issue 29): fine-tuning, joint, ER, iCaRL-style, DER++ and
//! replay of unlabelled data with temporal consistency on split digits or Fashion-MNIST, mean ±
//! std over class orders, a Markdown table on stdout and a PNG of the accuracy after each task.
//!
//! ```text
//! cargo run --release -p ml-studies --example cil_benchmark -- \
//!     [digits|fashion-mnist] [ORDERS] [OUT.png|-] [LABELLED_FRACTION] [METHOD,METHOD,...|all] [M] [RHO]
//! ```
//!
//! The PNG is written only when a path other than `-` is given; `LABELLED_FRACTION` is the
//! temporal method's share of the memory for labelled exemplars (default 0.5), `M` the memory
//! size (default 500), `RHO` the labelled fraction of each class (default 0.1).
//!
//! The example runs the MLP with the library's temporal defaults only. `pardis ml cil` runs the
//! same benchmark code (`run_cil_benchmark`) and is the full front end: `--arch cnn`,
//! `--replay-only`, `--steps`, `--tasks`, `--jobs`, `--json`.

use ml_models::incremental::Method;
use ml_studies::cil::{
    cil_markdown, cil_summary, plot_cil, run_cil_benchmark, CilBenchConfig, CilData,
};
use pardis_datasets::DataRoots;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let data = CilData::parse(args.first().map_or("digits", String::as_str))?;
    let mut cfg = CilBenchConfig::for_data(data);
    if let Some(n) = args.get(1) {
        cfg.orders = n.parse()?;
    }
    if let Some(m) = args.get(5) {
        cfg.run.memory = m.parse()?;
    }
    if let Some(r) = args.get(6) {
        cfg.label_ratio = r.parse()?;
    }
    if let Some(names) = args.get(4).filter(|n| *n != "all") {
        cfg.methods = names
            .split(',')
            .map(Method::by_name)
            .collect::<Result<_, _>>()?;
    }
    if let Some(f) = args.get(3) {
        let f: f64 = f.parse()?;
        for m in &mut cfg.methods {
            if let Method::Temporal(c) = m {
                c.labeled_fraction = f;
            }
        }
    }
    let (train, test) = data.load(&DataRoots::from_env())?;
    eprintln!("{}", cfg.describe(&train, &test));
    let rows = run_cil_benchmark(&cfg, &train, &test, &mut |r| {
        eprintln!("{}", r.progress_line());
    })?;
    let summary = cil_summary(&rows);
    println!("{}", cil_markdown(&summary));
    if let Some(out) = args.get(2).filter(|o| *o != "-") {
        let out = std::path::Path::new(out);
        plot_cil(
            &summary,
            &format!("{} class-incremental, ρ = {}", data.name(), cfg.label_ratio),
            out,
        )?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
