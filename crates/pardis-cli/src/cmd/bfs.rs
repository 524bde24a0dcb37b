//! `pardis bfs` (issue #6): Graph500-style BFS runs on a graph file or a generated graph.

use crate::output;
use pardis::graph::bfs::{BfsAlgorithm, BfsConfig, Direction};
use pardis::graph::generate::GeneratorSpec;
use pardis::graph::io::{load_graph, LoadOptions};
use pardis::graph::teps::{
    run_teps, run_teps_graph500, InputTuples, RootRun, TepsConfig, TepsReport,
};
use pardis::graph::{relabel_by_degree, CsrGraph};
use pardis_datasets::{DataRoots, Manifest};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Arguments of `pardis bfs`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["graph", "gen"])))]
pub(crate) struct Args {
    /// Graph file: SNAP edge list (.txt/.txt.gz), DIMACS/PACE (.gr/.graph), Matrix Market
    /// (.mtx); or the name of a graph data set (`road-NY`, `com-DBLP`, see `pardis datasets`).
    #[arg(long)]
    graph: Option<PathBuf>,
    /// Generated graph: kron:SCALE[:EDGE_FACTOR] (Graph500), er:N:M, grid:ROWS:COLS.
    #[arg(long)]
    gen: Option<String>,
    /// BFS variant: auto (direction-optimizing), top-down, bottom-up, serial.
    #[arg(long, default_value = "auto")]
    algo: String,
    /// Number of random roots of degree >= 1 (Graph500 uses 64).
    #[arg(long, default_value_t = 64)]
    roots: usize,
    /// Check every result against the five Graph500 rules (not timed).
    #[arg(long)]
    validate: bool,
    /// Worker threads, at most 1024 (0 or omitted: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the generator and of the root sample.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Beamer's alpha (top-down -> bottom-up threshold).
    #[arg(long, default_value_t = pardis::graph::bfs::DEFAULT_ALPHA)]
    alpha: u32,
    /// Beamer's beta (bottom-up -> top-down threshold).
    #[arg(long, default_value_t = pardis::graph::bfs::DEFAULT_BETA)]
    beta: u32,
    /// Bottom-up only when the frontier's edges exceed n / gamma (0: pure Beamer rule).
    #[arg(long, default_value_t = pardis::graph::bfs::DEFAULT_GAMMA)]
    gamma: u32,
    /// Keep edge directions of the input file (default: symmetrize).
    #[arg(long)]
    directed: bool,
    /// Relabel vertices by decreasing degree before searching (roots stay input ids).
    #[arg(long)]
    relabel: bool,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `path` as given if it exists, else a data set of the manifest by name (`road-NY`), found in
/// $PARDIS_DATA, datasets/cache/ or ../shared/datasets/.
fn resolve(path: &Path) -> anyhow::Result<PathBuf> {
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    let name = path.to_string_lossy();
    let manifest = Manifest::builtin();
    match manifest.get(&name) {
        Ok(dataset) if dataset.kind == "graph" => Ok(DataRoots::from_env().require(dataset)?.path),
        _ => anyhow::bail!(
            "{name}: no such file, and not a graph data set name (try `pardis datasets list --kind graph`)"
        ),
    }
}

/// The graph, and for a generated one the generator's edge tuples counted per vertex (for
/// TEPS by the Graph500 specification; a file's graph has none).
type Loaded = (String, CsrGraph, Option<InputTuples>);

fn load(args: &Args) -> anyhow::Result<Loaded> {
    if let Some(spec) = &args.gen {
        let generator: GeneratorSpec = spec.parse()?;
        let (graph, tuples) = generator.build_with_input_tuples(args.seed)?;
        return Ok((spec.clone(), graph, Some(tuples)));
    }
    let path = resolve(
        args.graph
            .as_deref()
            .expect("clap requires --graph or --gen"),
    )?;
    let options = LoadOptions {
        directed: args.directed,
        ..LoadOptions::default()
    };
    let graph = load_graph(&path, options)?;
    Ok((path.display().to_string(), graph, None))
}

fn switches_text(run: &RootRun) -> String {
    let text: Vec<String> = run
        .switches
        .iter()
        .map(|(depth, dir)| match dir {
            Direction::BottomUp => format!("BU@{depth}"),
            Direction::TopDown => format!("TD@{depth}"),
        })
        .collect();
    if text.is_empty() {
        "-".into()
    } else {
        text.join(" ")
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let algorithm: BfsAlgorithm = args.algo.parse()?;
    anyhow::ensure!(args.roots > 0, "--roots must be at least 1");
    anyhow::ensure!(
        args.alpha > 0 && args.beta > 0,
        "--alpha and --beta must be positive"
    );
    let pool = super::thread_pool(args.threads)?;
    let threads = pool.current_num_threads();

    let start = Instant::now();
    let (name, graph, tuples) = pool.install(|| load(&args))?;
    let load_seconds = start.elapsed().as_secs_f64();
    let (graph, tuples, permutation) = if args.relabel {
        let (g, p) = pool.install(|| relabel_by_degree(&graph));
        let t = tuples
            .map(|t| pool.install(|| t.relabelled(&p)))
            .transpose()?;
        (g, t, Some(p))
    } else {
        (graph, tuples, None)
    };
    let config = TepsConfig {
        roots: args.roots,
        seed: args.seed,
        validate: args.validate,
        bfs: BfsConfig {
            alpha: args.alpha,
            beta: args.beta,
            gamma: args.gamma,
            ..BfsConfig::default()
        },
    };
    let bar = output::progress(args.roots as u64, &format!("bfs {}", algorithm.name()));
    let mut report = pool.install(|| match &tuples {
        Some(t) => run_teps_graph500(&graph, t, algorithm, &config, |_| bar.inc(1)),
        None => run_teps(&graph, algorithm, &config, |_| bar.inc(1)),
    })?;
    bar.finish_and_clear();
    if let Some(p) = &permutation {
        for run in &mut report.runs {
            run.root = p.old_id(run.root);
        }
    }
    let outcome = Outcome {
        name,
        graph,
        report,
        threads,
        load_seconds,
    };
    if args.json {
        outcome.print_json(&args)
    } else {
        outcome.print_tables(&args);
        Ok(())
    }
}

/// Everything a run produced, for printing.
struct Outcome {
    name: String,
    graph: CsrGraph,
    report: TepsReport,
    threads: usize,
    load_seconds: f64,
}

impl Outcome {
    fn print_tables(&self, args: &Args) {
        let (g, report) = (&self.graph, &self.report);
        let (name, threads, load_s) = (&self.name, self.threads, self.load_seconds);
        let mut stats = output::table([
            "graph",
            "vertices",
            "edges",
            "directed",
            "max degree",
            "load s",
            "threads",
        ]);
        stats.add_row([
            name.to_string(),
            g.num_vertices().to_string(),
            g.num_edges().to_string(),
            g.is_directed().to_string(),
            g.max_out_degree().to_string(),
            format!("{load_s:.2}"),
            threads.to_string(),
        ]);
        println!("{stats}");
        let mut runs = output::table([
            "root",
            "reached",
            "tuples",
            "edges dedup",
            "levels",
            "switches",
            "ms",
            "G500 MTEPS",
            "dedup MTEPS",
        ]);
        let or_dash = |x: Option<String>| x.unwrap_or_else(|| "-".into());
        for r in &report.runs {
            runs.add_row([
                r.root.to_string(),
                r.reached.to_string(),
                or_dash(r.input_tuples.map(|m| m.to_string())),
                r.edges.to_string(),
                r.levels.to_string(),
                switches_text(r),
                format!("{:.3}", r.seconds * 1e3),
                or_dash(r.graph500_teps.map(|t| format!("{:.1}", t / 1e6))),
                format!("{:.1}", r.teps / 1e6),
            ]);
        }
        println!("{runs}");
        let median = bench_timing::median(report.runs.iter().map(|r| r.seconds).collect());
        println!(
            "{}: {} roots{}, median {:.3} ms",
            report.algorithm.name(),
            report.runs.len(),
            if args.validate {
                " (all validated: 5 Graph500 rules)"
            } else {
                ""
            },
            median * 1e3,
        );
        match report.graph500_harmonic_mean_teps {
            Some(t) => println!(
                "harmonic mean {:.1} MTEPS, Graph500 specification (input tuples in the \
                 component, duplicates and self loops counted)",
                t / 1e6
            ),
            None => println!(
                "harmonic mean -, Graph500 specification (a graph file has no generator tuple list)"
            ),
        }
        println!(
            "harmonic mean {:.1} MTEPS, deduplicated (the loop-free edges the graph stores)",
            report.harmonic_mean_teps / 1e6
        );
    }

    fn print_json(&self, args: &Args) -> anyhow::Result<()> {
        let (g, report) = (&self.graph, &self.report);
        let (name, threads, load_s) = (&self.name, self.threads, self.load_seconds);
        let runs: Vec<serde_json::Value> = report
        .runs
        .iter()
        .map(|r| {
            serde_json::json!({
                "root": r.root, "seconds": r.seconds, "edges": r.edges, "teps": r.teps,
                "input_tuples": r.input_tuples, "graph500_teps": r.graph500_teps,
                "reached": r.reached, "levels": r.levels,
                "switches": r.switches.iter().map(|(d, dir)| serde_json::json!({
                    "depth": d,
                    "direction": if *dir == Direction::BottomUp { "bottom-up" } else { "top-down" },
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
        let value = serde_json::json!({
            "graph": { "name": name, "vertices": g.num_vertices(), "edges": g.num_edges(),
                       "directed": g.is_directed(), "max_degree": g.max_out_degree(),
                       "load_seconds": load_s },
            "algorithm": report.algorithm.name(),
            "threads": threads,
            "alpha": args.alpha,
            "beta": args.beta,
            "gamma": args.gamma,
            "validated": args.validate,
            "harmonic_mean_teps": report.harmonic_mean_teps,
            "graph500_harmonic_mean_teps": report.graph500_harmonic_mean_teps,
            "teps_definitions": {
                "harmonic_mean_teps": "deduplicated, loop-free edges of the component",
                "graph500_harmonic_mean_teps":
                    "input edge tuples within the component (Graph500 specification); null for files",
            },
            "runs": runs,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
        Ok(())
    }
}
