//! Generators: determinism, sizes, structure.

use graph_kernels::generate::{
    erdos_renyi, grid_2d, kronecker, kronecker_with, random_permutation, KroneckerConfig,
};
use graph_kernels::GraphError;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn kronecker_is_deterministic_across_thread_counts() {
    let a = pool(1).install(|| kronecker(11, 16, 42).unwrap());
    let b = pool(3).install(|| kronecker(11, 16, 42).unwrap());
    assert_eq!(a, b);
    assert_ne!(a, kronecker(11, 16, 43).unwrap());
    assert_eq!(a.num_vertices(), 2048);
    assert!(!a.is_directed());
    // 16 * 2048 generated edges; Graph500 graphs lose a share to duplicates and self loops.
    let m = a.num_edges();
    assert!(m > 10_000 && m < 16 * 2048, "{m} edges");
    // Skewed degrees: the hub has far more than the mean degree (32).
    assert!(
        a.max_out_degree() > 200,
        "max degree {}",
        a.max_out_degree()
    );
    assert!((0..a.num_vertices()).all(|v| !a.out_neighbors(v).contains(&v)));
}

#[test]
fn kronecker_ids_are_permuted() {
    // Without permutation vertex 0 would be the hub (quadrant A is most likely).
    let g = kronecker(12, 16, 9).unwrap();
    let hub = (0..g.num_vertices())
        .max_by_key(|&v| g.out_degree(v))
        .unwrap();
    assert_ne!(hub, 0);
    let p = random_permutation(1000, 5);
    let mut sorted = p.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
}

#[test]
fn kronecker_rejects_bad_parameters() {
    let bad = KroneckerConfig {
        a: 0.9,
        b: 0.2,
        ..KroneckerConfig::graph500(4)
    };
    assert!(matches!(
        kronecker_with(&bad),
        Err(GraphError::InvalidInput(_))
    ));
    assert!(matches!(kronecker(40, 16, 1), Err(GraphError::TooLarge(_))));
}

#[test]
fn erdos_renyi_and_grid() {
    let g = erdos_renyi(1000, 5000, 7).unwrap();
    assert_eq!(g, erdos_renyi(1000, 5000, 7).unwrap());
    assert!(g.num_edges() > 4900 && g.num_edges() <= 5000);
    assert!(erdos_renyi(0, 1, 1).is_err());
    // `er:10:10^12`: refused before generating (100 vertex pairs), naming the memory.
    let e = erdos_renyi(10, 1_000_000_000_000, 1).unwrap_err();
    assert!(
        matches!(e, GraphError::TooLarge(_)) && e.to_string().contains("8.0 TB"),
        "{e}"
    );
    assert!(
        erdos_renyi(10, 1 << 20, 1).is_ok(),
        "small multigraph draws stay allowed"
    );
    let grid = grid_2d(3, 4);
    assert_eq!((grid.num_vertices(), grid.num_edges()), (12, 3 * 3 + 2 * 4));
    assert_eq!(grid.out_neighbors(5), &[1, 4, 6, 9]);
}
