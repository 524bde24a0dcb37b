//! Beamer's direction-optimizing BFS.

use super::state::{bitmap_to_queue, bitmap_words, queue_to_bitmap, SearchState};
use super::{assert_root, BfsConfig, BfsResult, BfsStep, Direction};
use crate::csr::CsrGraph;

/// Direction-optimizing BFS (Beamer, Asanović, Patterson, SC 2012; the hybrid of PEbfs, Guo et
/// al., ICA3PP 2024; GAPBS `bfs.cc`): runs top-down while the frontier is light and switches to
/// bottom-up when the frontier's out-edges `m_f` exceed `m_u / alpha`, `m_u` being the edges
/// not yet checked; returns to top-down once the frontier stops growing and holds fewer than
/// `n / beta` vertices. One addition to Beamer's rule: bottom-up is entered only if `m_f` also
/// exceeds `n / gamma` (see [`BfsConfig::gamma`]). The default BFS of this crate.
///
/// Complexity: O(n + m) work in the top-down phases, O(n) per bottom-up level, typically far
/// fewer edge checks than top-down on low-diameter graphs. Runs in the caller's rayon pool.
///
/// # Panics
/// If `root` is not a vertex of `graph`, or `config.alpha`/`config.beta` is zero.
///
/// ```
/// use graph_kernels::{bfs::{bfs_direction_optimizing, BfsConfig}, generate::kronecker, validate_bfs};
/// let g = kronecker(10, 16, 1)?;
/// let r = bfs_direction_optimizing(&g, 0, &BfsConfig::default());
/// validate_bfs(&g, &r)?;
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
#[track_caller]
pub fn bfs_direction_optimizing(graph: &CsrGraph, root: u32, config: &BfsConfig) -> BfsResult {
    assert_root(graph, root);
    assert!(
        config.alpha > 0 && config.beta > 0,
        "alpha and beta must be positive"
    );
    let n = graph.num_vertices();
    let mut state = SearchState::new(graph, root);
    let mut edges_to_check = graph.num_arcs();
    let mut scout = graph.out_degree(root);
    let mut queue = vec![root];
    let mut next_queue = Vec::new();
    // Frontier bitmaps, allocated at the first switch to bottom-up and reused after.
    let mut bitmaps: Option<(Vec<u64>, Vec<u64>)> = None;
    let mut level = 0;
    while !queue.is_empty() {
        let heavy = scout > edges_to_check / u64::from(config.alpha);
        let worth_a_scan = config.gamma == 0 || scout > u64::from(n / config.gamma);
        if heavy && worth_a_scan {
            let (front, next) = bitmaps.get_or_insert_with(|| {
                let words = bitmap_words(n);
                (vec![0; words], vec![0; words])
            });
            queue_to_bitmap(&queue, front);
            let mut awake = queue.len() as u64;
            loop {
                state.steps.push(BfsStep {
                    depth: level,
                    direction: Direction::BottomUp,
                    frontier: awake,
                });
                let old_awake = awake;
                awake = state.bottom_up_step(front, next, level);
                std::mem::swap(front, next);
                level += 1;
                let growing = awake >= old_awake;
                let large = awake > u64::from(n / config.beta);
                if awake == 0 || !(growing || large) {
                    break;
                }
            }
            scout = bitmap_to_queue(front, state.graph(), &mut queue);
        } else {
            state.steps.push(BfsStep {
                depth: level,
                direction: Direction::TopDown,
                frontier: queue.len() as u64,
            });
            edges_to_check = edges_to_check.saturating_sub(scout);
            scout = state.top_down_step(&queue, &mut next_queue, level, config.serial_threshold);
            std::mem::swap(&mut queue, &mut next_queue);
            level += 1;
        }
    }
    state.finish()
}
