//! Real graphs from the shared data sets (small ones; big ones are in the benches).

use crate::common::graph_file;
use graph_kernels::bfs::{bfs_serial, BfsAlgorithm, BfsConfig};
use graph_kernels::io::{load_graph, LoadOptions};
use graph_kernels::{relabel_by_degree, teps, validate_bfs, CsrGraph};

fn load(name: &str) -> Option<CsrGraph> {
    let path = graph_file(name)?;
    Some(load_graph(&path, LoadOptions::default()).expect("shared data set loads"))
}

/// Loads `name` and checks its size; `None` when the file is absent.
fn load_sized(name: &str, vertices: u32, edges: u64) -> Option<CsrGraph> {
    let g = load(name)?;
    assert_eq!(
        (g.num_vertices(), g.num_edges()),
        (vertices, edges),
        "{name}"
    );
    Some(g)
}

fn check_roots(g: &CsrGraph, algorithms: &[BfsAlgorithm], roots: usize) {
    for root in teps::sample_roots(g, roots, 3) {
        let oracle = bfs_serial(g, root);
        for &algo in algorithms {
            let r = algo.run(g, root, &BfsConfig::default());
            assert_eq!(r.depth, oracle.depth, "{} from {root}", algo.name());
            validate_bfs(g, &r).unwrap_or_else(|e| panic!("{} from {root}: {e}", algo.name()));
        }
    }
}

#[test]
fn facebook_all_variants() {
    let Some(g) = load_sized("facebook-combined.txt.gz", 4039, 88_234) else {
        return;
    };
    check_roots(&g, &BfsAlgorithm::ALL, 3);
}

#[test]
fn email_enron_all_variants_and_relabelled() {
    let Some(g) = load_sized("email-Enron.txt.gz", 36_692, 183_831) else {
        return;
    };
    check_roots(&g, &BfsAlgorithm::ALL, 2);
    let (h, perm) = relabel_by_degree(&g);
    let root = teps::sample_roots(&g, 1, 9)[0];
    let r = BfsAlgorithm::DirectionOptimizing.run(&h, perm.new_id(root), &BfsConfig::default());
    let back = perm.restore_bfs(&r);
    validate_bfs(&g, &back).unwrap();
    assert_eq!(back.depth, bfs_serial(&g, root).depth);
}

/// Graphs searched with the variants suited to them: (file, vertices, variants, roots).
/// Bottom-up alone scans all vertices per level, so it is left out on the long road searches.
#[test]
fn internet_collaboration_and_road_graphs() {
    let cases: [(&str, u32, &[BfsAlgorithm], usize); 3] = [
        ("as-caida20071105.txt.gz", 26_475, &BfsAlgorithm::ALL, 2),
        ("ca-CondMat-cc1.txt.gz", 21_363, &BfsAlgorithm::ALL, 2),
        (
            "road-NY.txt.gz",
            264_346,
            &[BfsAlgorithm::TopDown, BfsAlgorithm::DirectionOptimizing],
            1,
        ),
    ];
    for (file, vertices, algorithms, roots) in cases {
        let Some(g) = load(file) else { continue };
        assert_eq!(g.num_vertices(), vertices, "{file}");
        check_roots(&g, algorithms, roots);
    }
}
