//! R-MAT: determinism across thread counts, the Graph500 skew, parameter checks.

use sparse_formats::rmat::{RmatConfig, GRAPH500_A, GRAPH500_EDGE_FACTOR};
use sparse_formats::FormatError;

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn same_edges_on_any_thread_count_and_seed_matters() {
    let config = RmatConfig {
        seed: 42,
        ..RmatConfig::graph500(12)
    };
    let a = pool(1).install(|| config.edges().unwrap());
    let b = pool(3).install(|| config.edges().unwrap());
    assert_eq!(a, b);
    assert_eq!(a.len(), (GRAPH500_EDGE_FACTOR as usize) << 12);
    assert_ne!(a, RmatConfig { seed: 43, ..config }.edges().unwrap());
}

#[test]
fn degrees_are_skewed_and_ids_permuted() {
    let edges = RmatConfig::graph500(12).edges().unwrap();
    let mut degree = vec![0u32; 1 << 12];
    for &(u, _) in &edges {
        degree[u as usize] += 1;
    }
    let (hub, &max) = degree.iter().enumerate().max_by_key(|(_, d)| **d).unwrap();
    assert!(max > 10 * 16, "max out-degree {max}");
    assert_ne!(hub, 0, "without the permutation vertex 0 would be the hub");
}

#[test]
fn bad_parameters_are_typed_errors() {
    let bad = RmatConfig {
        a: GRAPH500_A,
        b: 0.5,
        ..RmatConfig::graph500(4)
    };
    assert!(matches!(bad.edges(), Err(FormatError::InvalidInput(_))));
    assert!(matches!(
        RmatConfig::graph500(32).edges(),
        Err(FormatError::TooLarge(_))
    ));
    let huge = RmatConfig {
        edge_factor: u32::MAX,
        ..RmatConfig::graph500(31)
    };
    assert_eq!(huge.num_edges(), u64::from(u32::MAX) << 31);
    assert!(matches!(huge.validate(), Err(FormatError::TooLarge(_))));
}
