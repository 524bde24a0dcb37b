//! validate_bfs catches each broken Graph500 rule.

use graph_kernels::bfs::{bfs_serial, UNREACHED};
use graph_kernels::{validate_bfs, CsrGraph, GraphBuilder, GraphError};

fn rule_of(e: GraphError) -> u8 {
    match e {
        GraphError::InvalidBfs { rule, .. } => rule,
        other => panic!("unexpected error {other}"),
    }
}

/// The undirected graph on `n` vertices with `edges`.
fn undirected(n: u64, edges: &[(u32, u32)]) -> CsrGraph {
    GraphBuilder::new(n)
        .edges(edges.iter().copied())
        .build()
        .unwrap()
}

#[test]
fn each_rule_is_detected() {
    // 0 - 1 - 2 - 3, plus 0 - 2 and an isolated 4.
    let g = undirected(5, &[(0, 1), (1, 2), (2, 3), (0, 2)]);
    let good = bfs_serial(&g, 0);
    validate_bfs(&g, &good).unwrap();

    let mut r = good.clone();
    r.parent.pop();
    assert_eq!(rule_of(validate_bfs(&g, &r).unwrap_err()), 0);

    let mut r = good.clone(); // cycle 1 <-> 2
    r.parent[1] = 2;
    r.parent[2] = 1;
    assert_eq!(rule_of(validate_bfs(&g, &r).unwrap_err()), 1);

    let mut r = good.clone(); // tree edge 2 -> 3 with a depth gap
    r.depth[3] = 5;
    assert_eq!(rule_of(validate_bfs(&g, &r).unwrap_err()), 2);

    let mut r = good.clone(); // 3 hung below 1 (not a graph edge) with consistent depths 0,1,2,3
    r.parent[2] = 1;
    r.depth[2] = 2;
    r.depth[3] = 3;
    assert_eq!(rule_of(validate_bfs(&g, &r).unwrap_err()), 3);

    let mut r = good.clone(); // 3 dropped from the tree
    r.parent[3] = UNREACHED;
    r.depth[3] = UNREACHED;
    assert_eq!(rule_of(validate_bfs(&g, &r).unwrap_err()), 4);

    // Diamond 0-1-3, 0-2-3: either depth-1 vertex is a valid parent of 3.
    let h = undirected(4, &[(0, 1), (0, 2), (1, 3), (2, 3)]);
    let mut r = bfs_serial(&h, 0);
    r.parent[3] = if r.parent[3] == 1 { 2 } else { 1 };
    validate_bfs(&h, &r).unwrap();
    r.parent[3] = 0; // depth 0 parent of a depth 2 vertex
    assert_eq!(rule_of(validate_bfs(&h, &r).unwrap_err()), 2);

    // 0-1-3 and 0-2-4: vertex 1 has the right depth to parent 4, but 1-4 is not an edge.
    let sq = undirected(5, &[(0, 1), (0, 2), (1, 3), (2, 4)]);
    let mut r = bfs_serial(&sq, 0);
    r.parent[4] = 1;
    assert_eq!(rule_of(validate_bfs(&sq, &r).unwrap_err()), 5);
}
