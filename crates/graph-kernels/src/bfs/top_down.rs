//! Parallel top-down BFS.

use super::state::SearchState;
use super::{assert_root, BfsConfig, BfsResult, BfsStep, Direction};
use crate::csr::CsrGraph;

/// Level-synchronous parallel top-down BFS: each level's frontier is split across rayon
/// tasks with thread-local output buffers; vertices are claimed with an atomic `fetch_or` on
/// a visited bitmap, so each gets exactly one parent. Levels smaller than
/// `config.serial_threshold` run serially.
///
/// Complexity: O(n + m) work, O(diameter) fork-join phases. Runs in the caller's rayon pool.
///
/// # Panics
/// If `root` is not a vertex of `graph`.
///
/// ```
/// use graph_kernels::{bfs::{bfs_serial, bfs_top_down, BfsConfig}, generate::grid_2d};
/// let g = grid_2d(20, 30);
/// assert_eq!(bfs_top_down(&g, 7, &BfsConfig::default()).depth, bfs_serial(&g, 7).depth);
/// ```
#[track_caller]
pub fn bfs_top_down(graph: &CsrGraph, root: u32, config: &BfsConfig) -> BfsResult {
    assert_root(graph, root);
    let mut state = SearchState::new(graph, root);
    let mut frontier = vec![root];
    let mut next = Vec::new();
    let mut level = 0;
    while !frontier.is_empty() {
        state.steps.push(BfsStep {
            depth: level,
            direction: Direction::TopDown,
            frontier: frontier.len() as u64,
        });
        state.top_down_step(&frontier, &mut next, level, config.serial_threshold);
        std::mem::swap(&mut frontier, &mut next);
        level += 1;
    }
    state.finish()
}
