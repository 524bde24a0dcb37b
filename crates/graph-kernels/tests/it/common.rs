//! Shared helpers: locating the public data sets and random-graph strategies.

use graph_kernels::{CsrGraph, GraphBuilder};
use proptest::prelude::*;
use std::path::PathBuf;

/// The shared graph file `name` (under `graphs/`), looked up by `pardis-datasets` in
/// `$PARDIS_DATA`, then `<workspace>/datasets/cache/`, then `<workspace>/../shared/datasets/`;
/// `None` (with a message) when absent.
pub(crate) fn graph_file(name: &str) -> Option<PathBuf> {
    let found = pardis_datasets::DataRoots::from_env()
        .locate_path(&format!("graphs/{name}"))
        .map(|located| located.path);
    if found.is_none() {
        eprintln!("skipping: data file graphs/{name} not found (set PARDIS_DATA)");
    }
    found
}

/// A random graph description: vertex count, edges (self loops and duplicates included),
/// directedness.
pub(crate) fn arb_graph(max_n: u32, max_edges: usize) -> impl Strategy<Value = CsrGraph> {
    (1..=max_n, any::<bool>())
        .prop_flat_map(move |(n, directed)| {
            (
                Just(n),
                Just(directed),
                prop::collection::vec((0..n, 0..n), 0..=max_edges),
            )
        })
        .prop_map(|(n, directed, edges)| {
            GraphBuilder::new(u64::from(n))
                .directed(directed)
                .edges(edges)
                .build()
                .expect("ids in range")
        })
}
