//! Times every BFS variant of this crate and petgraph's `Bfs` on the same graph and roots,
//! printing one tab-separated line per implementation (used by `scripts/compare-bfs`).
//!
//! ```text
//! cargo run --release -p graph-kernels --example compare_bfs -- GRAPH [--roots 8] [--threads 2]
//!     [--seed 1] [--dump PREFIX] [--skip-bottom-up]
//! ```
//! GRAPH is a file (SNAP/DIMACS/Matrix Market, optionally .gz) or `kron:SCALE`, `er:N:M`,
//! `grid:R:C`. `--dump PREFIX` writes `PREFIX.edges` (u32 little-endian pairs, each undirected
//! edge once), `PREFIX.roots` (one root per line) and `PREFIX.n` so a peer can search the
//! identical graph from the identical roots.
//! Output lines: `impl<TAB>median_seconds<TAB>harmonic_mean_teps<TAB>roots<TAB>graph500_teps`:
//! the third field counts the deduplicated, loop-free edges of each traversed component, the
//! fifth the input edge tuples within it (duplicates and self loops included, as the Graph500
//! specification counts; `-` for files, which have no generator tuple list). The row
//! `pardis-auto-relabel` is the direction-optimizing BFS on the graph relabelled by decreasing
//! degree ([`relabel_by_degree`], Graph500 kernel-1 preprocessing: not in the BFS times).

use graph_kernels::bfs::{BfsAlgorithm, BfsConfig};
use graph_kernels::generate::GeneratorSpec;
use graph_kernels::io::{load_graph, LoadOptions};
use graph_kernels::teps::InputTuples;
use graph_kernels::{convert, relabel_by_degree, teps, CsrGraph};
use std::io::Write;
use std::time::Instant;

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The graph, with the generator's tuples per vertex for a generated one.
type Loaded = (CsrGraph, Option<InputTuples>);

fn load(spec: &str, seed: u64) -> Result<Loaded, graph_kernels::GraphError> {
    match spec.parse::<GeneratorSpec>() {
        Ok(generator) => generator
            .build_with_input_tuples(seed)
            .map(|(g, t)| (g, Some(t))),
        Err(_) => load_graph(spec, LoadOptions::default()).map(|g| (g, None)),
    }
}

/// Median seconds and harmonic-mean TEPS of per-root `(seconds, edges)` measurements, with
/// the harmonic mean over the Graph500 tuple counts `tuples_of` (per root, in order) beside.
fn summarize(name: &str, runs: &[(f64, u64)], tuples_of: Option<&[u64]>) {
    let median = bench_timing::median(runs.iter().map(|r| r.0).collect());
    let hm = |count: &mut dyn Iterator<Item = u64>| {
        runs.len() as f64
            / runs
                .iter()
                .zip(count)
                .map(|(&(s, _), e)| s / e as f64)
                .sum::<f64>()
    };
    let dedup = hm(&mut runs.iter().map(|r| r.1));
    let g500 = tuples_of.map_or("-".to_string(), |t| {
        format!("{:.0}", hm(&mut t.iter().copied()))
    });
    println!("{name}\t{median:.6}\t{dedup:.0}\t{}\t{g500}", runs.len());
}

fn dump(graph: &CsrGraph, roots: &[u32], prefix: &str) -> std::io::Result<()> {
    let mut edges = std::io::BufWriter::new(std::fs::File::create(format!("{prefix}.edges"))?);
    for (u, v) in graph.arcs().filter(|&(u, v)| u < v) {
        edges.write_all(&u.to_le_bytes())?;
        edges.write_all(&v.to_le_bytes())?;
    }
    edges.flush()?;
    let list: Vec<String> = roots.iter().map(u32::to_string).collect();
    std::fs::write(format!("{prefix}.roots"), list.join("\n") + "\n")?;
    std::fs::write(format!("{prefix}.n"), graph.num_vertices().to_string())
}

/// Direction-optimizing BFS on the degree-sorted relabelling of `graph` (relabelling time
/// reported on stderr, not in the BFS times, as Graph500 counts it in graph construction).
fn relabelled_auto(
    pool: &rayon::ThreadPool,
    graph: &CsrGraph,
    roots: &[u32],
    edges_of: &[u64],
    tuples_of: Option<&[u64]>,
    config: &BfsConfig,
) {
    let start = Instant::now();
    let (relabelled, permutation) = pool.install(|| relabel_by_degree(graph));
    eprintln!(
        "# relabelled by degree in {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let mut runs = Vec::new();
    for (&root, &edges) in roots.iter().zip(edges_of) {
        let t = Instant::now();
        let result = pool.install(|| {
            let algo = BfsAlgorithm::DirectionOptimizing;
            algo.run(&relabelled, permutation.new_id(root), config)
        });
        runs.push((t.elapsed().as_secs_f64(), edges));
        std::hint::black_box(result);
    }
    summarize("pardis-auto-relabel", &runs, tuples_of);
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = args
        .first()
        .ok_or("usage: compare_bfs GRAPH [--roots N] [--threads T]")?;
    let (roots_wanted, threads, seed) = (
        arg(&args, "--roots", 8usize),
        arg(&args, "--threads", 2usize),
        arg(&args, "--seed", 1u64),
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let start = Instant::now();
    let (graph, tuples) = pool.install(|| load(spec, seed))?;
    eprintln!(
        "# {spec}: {} vertices, {} edges, loaded in {:.2} s, {threads} threads",
        graph.num_vertices(),
        graph.num_edges(),
        start.elapsed().as_secs_f64()
    );
    let roots = teps::sample_roots(&graph, roots_wanted, seed);
    if let Some(i) = args.iter().position(|a| a == "--dump") {
        dump(
            &graph,
            &roots,
            args.get(i + 1).ok_or("--dump needs a prefix")?,
        )?;
    }
    let config = BfsConfig::default();
    let mut edges_of = Vec::with_capacity(roots.len());
    let mut tuples_of = Vec::with_capacity(roots.len());
    for algo in BfsAlgorithm::ALL {
        if algo == BfsAlgorithm::BottomUp && args.iter().any(|a| a == "--skip-bottom-up") {
            continue;
        }
        let mut runs = Vec::new();
        for &root in &roots {
            let t = Instant::now();
            let result = pool.install(|| algo.run(&graph, root, &config));
            let secs = t.elapsed().as_secs_f64();
            let edges = teps::traversed_edges(&graph, &result);
            if algo == BfsAlgorithm::Serial {
                edges_of.push(edges);
                if let Some(t) = &tuples {
                    tuples_of.push(pool.install(|| t.in_component(&result))?);
                }
            }
            runs.push((secs, edges));
        }
        let t = tuples.as_ref().map(|_| &tuples_of[..]);
        summarize(&format!("pardis-{}", algo.name()), &runs, t);
    }
    let tuples_of = tuples.as_ref().map(|_| &tuples_of[..]);
    relabelled_auto(&pool, &graph, &roots, &edges_of, tuples_of, &config);
    let pg = convert::to_petgraph_undirected(&graph);
    let mut runs = Vec::new();
    for (&root, &edges) in roots.iter().zip(&edges_of) {
        let t = Instant::now();
        let mut bfs =
            petgraph::visit::Bfs::new(&pg, petgraph::graph::NodeIndex::new(root as usize));
        let mut reached = 0u64;
        while bfs.next(&pg).is_some() {
            reached += 1;
        }
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(reached);
        runs.push((secs, edges));
    }
    summarize("petgraph-Bfs", &runs, tuples_of);
    Ok(())
}
