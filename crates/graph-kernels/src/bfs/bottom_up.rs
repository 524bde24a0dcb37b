//! Parallel bottom-up BFS.

use super::state::{bitmap_words, queue_to_bitmap, SearchState};
use super::{assert_root, BfsResult, BfsStep, Direction};
use crate::csr::CsrGraph;

/// Parallel bottom-up BFS (Beamer et al., SC 2012): at every level each unvisited vertex scans
/// its in-neighbours and stops at the first one in the frontier bitmap. Every level scans all
/// vertices, so this variant suits low-diameter graphs; on road networks prefer
/// [`bfs_direction_optimizing`](super::bfs_direction_optimizing).
///
/// Complexity: O(n · levels + m) work. Runs in the caller's rayon pool.
///
/// # Panics
/// If `root` is not a vertex of `graph`.
#[track_caller]
pub fn bfs_bottom_up(graph: &CsrGraph, root: u32) -> BfsResult {
    assert_root(graph, root);
    let n = graph.num_vertices();
    let mut state = SearchState::new(graph, root);
    let mut front = vec![0u64; bitmap_words(n)];
    let mut next = vec![0u64; bitmap_words(n)];
    queue_to_bitmap(&[root], &mut front);
    let mut awake = 1;
    let mut level = 0;
    while awake > 0 {
        state.steps.push(BfsStep {
            depth: level,
            direction: Direction::BottomUp,
            frontier: awake,
        });
        awake = state.bottom_up_step(&front, &mut next, level);
        std::mem::swap(&mut front, &mut next);
        level += 1;
    }
    state.finish()
}
