//! Criterion benchmarks of graph-kernels BFS: Graph500 Kronecker graphs (scale 16, 18, 20), the
//! shared road networks (long, thin searches) and SNAP social/collaboration graphs, reporting
//! traversed edges per second (criterion's "elements/s" = TEPS of the benchmarked root). The
//! `bfs_kronecker_relabelled` group runs the direction-optimizing BFS on the Kronecker graphs
//! relabelled by decreasing degree.
//!
//! `cargo bench -p pardis-benches --bench graph`; `PARDIS_BENCH_THREADS` sets the rayon thread
//! count (default: all cores); `PARDIS_DATA` points at the data sets.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pardis::graph::bfs::{BfsAlgorithm, BfsConfig};
use pardis::graph::io::{load_graph, LoadOptions};
use pardis::graph::{generate, relabel_by_degree, teps, CsrGraph};
use pardis_benches::bench_pool;
use pardis_datasets::Manifest;
use std::path::PathBuf;
use std::time::Duration;

/// The file of graph data set `name` (manifest name), or `None` with a message when absent.
fn data_file(name: &str) -> Option<PathBuf> {
    let manifest = Manifest::builtin();
    pardis_benches::data_file(&manifest.get(name).ok()?.path)
}

/// Benchmarks `algorithms` from one fixed root of degree >= 1, throughput = edges traversed.
fn bench_graph(
    c: &mut Criterion,
    group: &str,
    label: &str,
    g: &CsrGraph,
    algorithms: &[BfsAlgorithm],
) {
    let pool = bench_pool();
    let root = teps::sample_roots(g, 1, 1)[0];
    let config = BfsConfig::default();
    let edges = teps::traversed_edges(g, &BfsAlgorithm::Serial.run(g, root, &config));
    let mut grp = c.benchmark_group(group);
    grp.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(edges));
    for &algo in algorithms {
        grp.bench_function(BenchmarkId::new(algo.name(), label), |b| {
            b.iter(|| pool.install(|| algo.run(g, root, &config)))
        });
    }
    grp.finish();
}

fn kronecker(c: &mut Criterion) {
    for scale in [16, 18, 20] {
        let g = bench_pool()
            .install(|| generate::kronecker(scale, 16, 1))
            .expect("kronecker");
        let algos: &[BfsAlgorithm] = if scale <= 18 {
            &BfsAlgorithm::ALL
        } else {
            &[
                BfsAlgorithm::Serial,
                BfsAlgorithm::TopDown,
                BfsAlgorithm::DirectionOptimizing,
            ]
        };
        bench_graph(c, "bfs_kronecker", &format!("scale{scale}"), &g, algos);
        // Degree-sorted relabelling: built once per graph (Graph500 kernel 1), not timed.
        let (relabelled, _) = bench_pool().install(|| relabel_by_degree(&g));
        let auto = [BfsAlgorithm::DirectionOptimizing];
        let label = format!("scale{scale}");
        bench_graph(c, "bfs_kronecker_relabelled", &label, &relabelled, &auto);
    }
}

fn real_graphs(c: &mut Criterion) {
    let road = [
        BfsAlgorithm::Serial,
        BfsAlgorithm::TopDown,
        BfsAlgorithm::DirectionOptimizing,
    ];
    let files = [
        ("bfs_road", "road-NY", &road[..]),
        ("bfs_road", "road-BAY", &road[..]),
        ("bfs_road", "road-COL", &road[..]),
        ("bfs_road", "road-FLA", &road[..]),
        ("bfs_snap", "email-Enron", &BfsAlgorithm::ALL[..]),
        ("bfs_snap", "com-DBLP", &BfsAlgorithm::ALL[..]),
        ("bfs_snap", "ego-Twitter", &BfsAlgorithm::ALL[..]),
    ];
    for (group, name, algos) in files {
        let Some(path) = data_file(name) else {
            continue;
        };
        let g = load_graph(&path, LoadOptions::default()).expect("shared graph loads");
        bench_graph(c, group, name, &g, algos);
    }
}

criterion_group!(benches, kronecker, real_graphs);
criterion_main!(benches);
