//! Every parallel BFS variant against the serial oracle on random graphs.

use crate::common::arb_graph;
use graph_kernels::bfs::{bfs_serial, BfsAlgorithm, BfsConfig, Direction};
use graph_kernels::{generate, relabel_by_degree, validate_bfs, CsrGraph, GraphBuilder};
use proptest::prelude::*;

/// Configurations forcing the parallel paths and frequent direction switches, plus the default.
fn configs() -> [BfsConfig; 3] {
    [
        BfsConfig::default(),
        BfsConfig {
            alpha: 1,
            beta: 1,
            gamma: 4,
            serial_threshold: 0,
        },
        BfsConfig {
            alpha: 1000,
            beta: 2,
            gamma: 0,
            serial_threshold: 1,
        },
    ]
}

fn check_all_variants(g: &CsrGraph, root: u32) -> Result<(), TestCaseError> {
    let oracle = bfs_serial(g, root);
    prop_assert!(validate_bfs(g, &oracle).is_ok());
    for algo in BfsAlgorithm::ALL {
        for config in configs() {
            let r = algo.run(g, root, &config);
            prop_assert_eq!(&r.depth, &oracle.depth, "{} {:?}", algo.name(), config);
            if let Err(e) = validate_bfs(g, &r) {
                return Err(TestCaseError::fail(format!(
                    "{} {config:?}: {e}",
                    algo.name()
                )));
            }
        }
    }
    Ok(())
}

fn pool() -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn variants_match_serial_on_random_graphs(g in arb_graph(80, 240), root_pick in any::<u32>()) {
        let root = root_pick % g.num_vertices();
        pool().install(|| check_all_variants(&g, root))?;
    }

    #[test]
    fn variants_match_serial_on_dense_random_graphs(g in arb_graph(300, 3000), root_pick in any::<u32>()) {
        let root = root_pick % g.num_vertices();
        pool().install(|| check_all_variants(&g, root))?;
    }

    #[test]
    fn relabelled_results_map_back(g in arb_graph(60, 200), root_pick in any::<u32>()) {
        let root = root_pick % g.num_vertices();
        let (h, perm) = relabel_by_degree(&g);
        let r = graph_kernels::bfs::bfs_direction_optimizing(&h, perm.new_id(root), &BfsConfig::default());
        let back = perm.restore_bfs(&r);
        prop_assert_eq!(back.root, root);
        prop_assert_eq!(&back.depth, &bfs_serial(&g, root).depth);
        prop_assert!(validate_bfs(&g, &back).is_ok());
        // Degrees are non-increasing in the new numbering.
        for v in 1..h.num_vertices() {
            prop_assert!(h.out_degree(v - 1) >= h.out_degree(v));
        }
    }
}

#[test]
fn single_vertex_and_isolated_root() {
    let g = GraphBuilder::new(1).build().unwrap();
    for algo in BfsAlgorithm::ALL {
        let r = algo.run(&g, 0, &BfsConfig::default());
        assert_eq!(
            (r.parent.as_slice(), r.depth.as_slice()),
            (&[0][..], &[0][..])
        );
    }
    let g = GraphBuilder::new(5)
        .edges([(1, 2), (2, 3), (4, 4)])
        .build()
        .unwrap();
    for algo in BfsAlgorithm::ALL {
        let r = algo.run(&g, 4, &BfsConfig::default());
        assert_eq!(r.num_reached(), 1, "{}", algo.name());
        validate_bfs(&g, &r).unwrap();
    }
}

#[test]
fn kronecker_switches_direction_and_matches_serial() {
    let g = generate::kronecker(12, 16, 3).unwrap();
    let root = graph_kernels::teps::sample_roots(&g, 1, 5)[0];
    let r = pool()
        .install(|| graph_kernels::bfs::bfs_direction_optimizing(&g, root, &BfsConfig::default()));
    validate_bfs(&g, &r).unwrap();
    assert_eq!(r.depth, bfs_serial(&g, root).depth);
    let switches = r.direction_switches();
    assert!(
        switches.iter().any(|&(_, d)| d == Direction::BottomUp),
        "a Kronecker search should go bottom-up: {:?}",
        r.steps
    );
}

#[test]
fn grid_starts_top_down_and_matches_serial() {
    let g = generate::grid_2d(40, 50);
    let r = graph_kernels::bfs::bfs_direction_optimizing(&g, 0, &BfsConfig::default());
    assert_eq!(r.depth, bfs_serial(&g, 0).depth);
    assert_eq!(r.num_levels(), 40 + 50 - 1);
    // Thin frontiers: top-down until the tail, where few unexplored edges remain.
    let half = r.steps.len() / 2;
    assert!(
        r.steps[..half]
            .iter()
            .all(|s| s.direction == Direction::TopDown),
        "{:?}",
        r.steps
    );
}

#[test]
fn teps_runner_uses_distinct_roots_with_edges() {
    let g = generate::kronecker(9, 16, 11).unwrap();
    let config = graph_kernels::teps::TepsConfig {
        validate: true,
        ..Default::default()
    };
    let mut seen = 0;
    let report =
        graph_kernels::teps::run_teps(&g, BfsAlgorithm::DirectionOptimizing, &config, |_| {
            seen += 1
        })
        .unwrap();
    assert_eq!((report.runs.len(), seen), (64, 64));
    let mut roots: Vec<u32> = report.runs.iter().map(|r| r.root).collect();
    roots.sort_unstable();
    roots.dedup();
    assert_eq!(roots.len(), 64);
    assert!(report
        .runs
        .iter()
        .all(|r| g.out_degree(r.root) > 0 && r.edges > 0));
    let max = report.runs.iter().map(|r| r.teps).fold(0.0, f64::max);
    let min = report.runs.iter().map(|r| r.teps).fold(f64::MAX, f64::min);
    assert!(report.harmonic_mean_teps >= min && report.harmonic_mean_teps <= max);
    let empty = GraphBuilder::new(3).build().unwrap();
    assert!(graph_kernels::teps::run_teps(&empty, BfsAlgorithm::Serial, &config, |_| ()).is_err());
}

#[test]
fn public_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<CsrGraph>();
    check::<graph_kernels::BfsResult>();
    check::<graph_kernels::Permutation>();
    check::<graph_kernels::GraphError>();
    check::<graph_kernels::teps::TepsReport>();
}
