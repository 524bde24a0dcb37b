//! The serial reference BFS.

use super::{assert_root, BfsResult, BfsStep, Direction, UNREACHED};
use crate::csr::CsrGraph;

/// Serial queue-based BFS from `root` over out-edges: the reference the parallel variants are
/// checked against.
///
/// Complexity: O(n + m) time, O(n) extra space.
///
/// # Panics
/// If `root` is not a vertex of `graph`.
///
/// ```
/// use graph_kernels::{bfs::bfs_serial, generate::grid_2d};
/// let g = grid_2d(3, 3);
/// let r = bfs_serial(&g, 0);
/// assert_eq!(r.depth_of(8), Some(4));
/// ```
#[track_caller]
pub fn bfs_serial(graph: &CsrGraph, root: u32) -> BfsResult {
    assert_root(graph, root);
    let n = graph.num_vertices() as usize;
    let mut parent = vec![UNREACHED; n];
    let mut depth = vec![UNREACHED; n];
    let mut queue: Vec<u32> = Vec::with_capacity(n);
    let mut steps = Vec::new();
    parent[root as usize] = root;
    depth[root as usize] = 0;
    queue.push(root);
    let mut level_start = 0;
    let mut level = 0u32;
    while level_start < queue.len() {
        let level_end = queue.len();
        steps.push(BfsStep {
            depth: level,
            direction: Direction::TopDown,
            frontier: (level_end - level_start) as u64,
        });
        for i in level_start..level_end {
            let u = queue[i];
            for &v in graph.out_neighbors(u) {
                if depth[v as usize] == UNREACHED {
                    depth[v as usize] = level + 1;
                    parent[v as usize] = u;
                    queue.push(v);
                }
            }
        }
        level_start = level_end;
        level += 1;
    }
    BfsResult {
        root,
        parent,
        depth,
        steps,
    }
}
