//! TEPS as the Graph500 specification counts it: input edge tuples within the traversed
//! component (duplicates and self loops included), checked against a brute-force count over
//! the generator's edge list.

use graph_kernels::bfs::{bfs_serial, BfsAlgorithm};
use graph_kernels::generate::{GeneratorSpec, KroneckerConfig};
use graph_kernels::teps::{run_teps_graph500, traversed_edges, InputTuples, TepsConfig};
use graph_kernels::{relabel_by_degree, BfsResult, GraphBuilder};
use proptest::prelude::*;

/// Tuples `(u, v)` of `edges` with an endpoint reached by `result` (the specification's count).
fn brute_force(edges: &[(u32, u32)], result: &BfsResult) -> u64 {
    edges
        .iter()
        .filter(|&&(u, v)| result.depth_of(u).is_some() || result.depth_of(v).is_some())
        .count() as u64
}

#[test]
fn kronecker_tuples_per_component_match_the_edge_list() {
    let config = KroneckerConfig {
        seed: 5,
        ..KroneckerConfig::graph500(10)
    };
    let edges = config.edges().unwrap();
    assert!(
        edges.iter().any(|&(u, v)| u == v),
        "the test needs self loops"
    );
    let (g, tuples) = GeneratorSpec::Kronecker {
        scale: 10,
        edge_factor: 16,
    }
    .build_with_input_tuples(5)
    .unwrap();
    assert_eq!(tuples.total(), edges.len() as u64);
    let report = run_teps_graph500(
        &g,
        &tuples,
        BfsAlgorithm::DirectionOptimizing,
        &TepsConfig {
            roots: 16,
            validate: true,
            ..Default::default()
        },
        |_| (),
    )
    .unwrap();
    for run in &report.runs {
        let result = bfs_serial(&g, run.root);
        let expected = brute_force(&edges, &result);
        assert_eq!(run.input_tuples, Some(expected), "root {}", run.root);
        // The deduplicated, loop-free count is strictly lower on a Kronecker graph.
        assert!(run.edges < expected);
        assert_eq!(run.edges, traversed_edges(&g, &result));
        let ratio = run.graph500_teps.unwrap() / run.teps;
        assert!((ratio - expected as f64 / run.edges as f64).abs() < 1e-9);
    }
    let hm = report.graph500_harmonic_mean_teps.unwrap();
    assert!(hm > report.harmonic_mean_teps);

    // Relabelled graph, relabelled counts: the same tuples per component.
    let (relabelled, perm) = relabel_by_degree(&g);
    let moved = tuples.relabelled(&perm).unwrap();
    for run in report.runs.iter().take(4) {
        let result = bfs_serial(&relabelled, perm.new_id(run.root));
        assert_eq!(
            moved.in_component(&result).unwrap(),
            run.input_tuples.unwrap()
        );
    }
}

#[test]
fn plain_runner_has_no_graph500_figures_and_mismatches_are_errors() {
    let (g, tuples) = GeneratorSpec::Grid { rows: 4, cols: 5 }
        .build_with_input_tuples(1)
        .unwrap();
    assert_eq!(tuples.total(), g.num_edges()); // a grid has neither duplicates nor loops
    let config = TepsConfig {
        roots: 2,
        ..Default::default()
    };
    let plain = graph_kernels::teps::run_teps(&g, BfsAlgorithm::Serial, &config, |_| ()).unwrap();
    assert!(plain.graph500_harmonic_mean_teps.is_none());
    assert!(plain.runs.iter().all(|r| r.input_tuples.is_none()));
    let (other, other_tuples) = GraphBuilder::new(3)
        .edges([(0, 1)])
        .build_with_input_tuples()
        .unwrap();
    assert!(run_teps_graph500(&g, &other_tuples, BfsAlgorithm::Serial, &config, |_| ()).is_err());
    assert!(tuples.in_component(&bfs_serial(&other, 0)).is_err());
    let (_, perm) = relabel_by_degree(&other);
    assert!(tuples.relabelled(&perm).is_err());
}

proptest! {
    #[test]
    fn tuple_counts_match_brute_force(
        n in 1u32..40,
        raw in prop::collection::vec((0u32..40, 0u32..40), 0..120),
        directed in any::<bool>(),
        root_pick in 0u32..40,
    ) {
        let edges: Vec<(u32, u32)> = raw.into_iter().map(|(u, v)| (u % n, v % n)).collect();
        let (g, tuples): (_, InputTuples) = GraphBuilder::new(u64::from(n))
            .directed(directed)
            .edges(edges.iter().copied())
            .build_with_input_tuples()
            .unwrap();
        prop_assert_eq!(tuples.total(), edges.len() as u64);
        let root = root_pick % n;
        let result = bfs_serial(&g, root);
        let expected = if directed {
            edges.iter().filter(|&&(u, _)| result.depth_of(u).is_some()).count() as u64
        } else {
            brute_force(&edges, &result)
        };
        prop_assert_eq!(tuples.in_component(&result).unwrap(), expected);
        let sum: u64 = (0..n).map(|v| tuples.degree(v)).sum();
        prop_assert_eq!(sum, if directed { 1 } else { 2 } * edges.len() as u64);
    }
}

/// A vertex count beyond u32 ids is refused before the per-vertex counts are allocated.
#[test]
fn input_tuples_refuse_oversized_graphs_before_allocating() {
    let e = GraphBuilder::new(u64::MAX)
        .edges([(0, 1)])
        .build_with_input_tuples()
        .unwrap_err();
    assert!(matches!(e, graph_kernels::GraphError::TooLarge(_)), "{e}");
}
