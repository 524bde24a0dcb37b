//! Shared search state of the parallel variants: parent/depth arrays, the visited bitmap,
//! frontier bitmaps, and the top-down and bottom-up level steps the variants compose.
//!
//! Every "seen yet?" test reads the visited bitmap (one bit per vertex: 128 KiB for 2^20
//! vertices, cache-resident) instead of the 4-byte depth entries; parent and depth are only
//! written, once per vertex, by the single task that claimed it.

use super::{BfsResult, BfsStep, UNREACHED};
use crate::csr::CsrGraph;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Frontier vertices per rayon task in a top-down step.
const TOP_DOWN_GRAIN: usize = 256;
/// Bitmap words (64 vertices each) per rayon task in a bottom-up step.
const BOTTOM_UP_GRAIN: usize = 64;
/// Array entries per rayon task when initialising or converting whole arrays.
const INIT_GRAIN: usize = 1 << 14;

/// Parent, depth and visited mark of every vertex, claimable concurrently.
pub(super) struct SearchState<'g> {
    graph: &'g CsrGraph,
    root: u32,
    parent: Vec<AtomicU32>,
    depth: Vec<AtomicU32>,
    /// Bit `v % 64` of word `v / 64` is set once `v` has a parent. The padding bits past the
    /// last vertex are set, so bottom-up steps never look at them.
    visited: Vec<AtomicU64>,
    pub(super) steps: Vec<BfsStep>,
}

impl<'g> SearchState<'g> {
    pub(super) fn new(graph: &'g CsrGraph, root: u32) -> Self {
        let n = graph.num_vertices();
        let unreached = || {
            (0..n as usize)
                .into_par_iter()
                .with_min_len(INIT_GRAIN)
                .map(|_| AtomicU32::new(UNREACHED))
                .collect::<Vec<_>>()
        };
        let (parent, depth) = rayon::join(unreached, unreached);
        let visited: Vec<AtomicU64> = (0..bitmap_words(n)).map(|_| AtomicU64::new(0)).collect();
        if !n.is_multiple_of(64) {
            visited[visited.len() - 1].store(!0 << (n % 64), Relaxed);
        }
        parent[root as usize].store(root, Relaxed);
        depth[root as usize].store(0, Relaxed);
        visited[root as usize / 64].fetch_or(1 << (root % 64), Relaxed);
        SearchState {
            graph,
            root,
            parent,
            depth,
            visited,
            steps: Vec::new(),
        }
    }

    pub(super) fn graph(&self) -> &'g CsrGraph {
        self.graph
    }

    /// Expands `frontier` (vertices at depth `level`) along out-edges into `next` (cleared
    /// first); returns the sum of the new vertices' out-degrees (Beamer's `m_f` for the next
    /// step). Frontiers below `serial_threshold` are expanded on the calling thread.
    pub(super) fn top_down_step(
        &self,
        frontier: &[u32],
        next: &mut Vec<u32>,
        level: u32,
        serial_threshold: usize,
    ) -> u64 {
        next.clear();
        if frontier.len() < serial_threshold {
            return self.expand(frontier, level, true, next);
        }
        // Each task fills its own buffer (no shared queue); buffers are appended once.
        let parts: Vec<(Vec<u32>, u64)> = frontier
            .par_chunks(TOP_DOWN_GRAIN)
            .fold(
                || (Vec::new(), 0u64),
                |(mut found, scout), chunk| {
                    let more = self.expand(chunk, level, false, &mut found);
                    (found, scout + more)
                },
            )
            .collect();
        next.reserve(parts.iter().map(|(q, _)| q.len()).sum());
        let mut scout = 0;
        for (q, s) in parts {
            next.extend_from_slice(&q);
            scout += s;
        }
        scout
    }

    /// Claims the unvisited out-neighbours of `chunk`, appending them to `found`; returns the
    /// sum of their out-degrees. `exclusive`: no other thread runs, so a plain load/store of
    /// the visited word claims a vertex (no locked instruction).
    fn expand(&self, chunk: &[u32], level: u32, exclusive: bool, found: &mut Vec<u32>) -> u64 {
        let adjacency = self.graph.out_adjacency();
        let mut scout = 0;
        for &u in chunk {
            for &v in adjacency.neighbors(u) {
                let (word, bit) = (&self.visited[v as usize / 64], 1u64 << (v % 64));
                let seen = word.load(Relaxed);
                if seen & bit != 0 {
                    continue;
                }
                if exclusive {
                    word.store(seen | bit, Relaxed);
                } else if word.fetch_or(bit, Relaxed) & bit != 0 {
                    continue;
                }
                self.parent[v as usize].store(u, Relaxed);
                self.depth[v as usize].store(level + 1, Relaxed);
                scout += adjacency.degree(v);
                found.push(v);
            }
        }
        scout
    }

    /// One bottom-up step: every unvisited vertex looks for an in-neighbour in `front`
    /// (depth `level`) and takes the first one found as parent. Sets those vertices in `next`
    /// (overwritten) and returns how many were found. Each task owns a run of words of `next`
    /// and of the visited bitmap, so every vertex and every word has a single writer.
    pub(super) fn bottom_up_step(&self, front: &[u64], next: &mut [u64], level: u32) -> u64 {
        let adjacency = self.graph.in_adjacency();
        next.par_chunks_mut(BOTTOM_UP_GRAIN)
            .zip(self.visited.par_chunks(BOTTOM_UP_GRAIN))
            .enumerate()
            .map(|(chunk, (next_words, visited_words))| {
                let mut found = 0u64;
                let first_word = chunk * BOTTOM_UP_GRAIN;
                for (k, (next_word, visited_word)) in
                    next_words.iter_mut().zip(visited_words).enumerate()
                {
                    let seen = visited_word.load(Relaxed);
                    let base = ((first_word + k) * 64) as u32;
                    let mut todo = !seen;
                    let mut bits = 0u64;
                    while todo != 0 {
                        let i = todo.trailing_zeros();
                        todo &= todo - 1;
                        let v = base + i;
                        // Beamer's early exit: the first in-neighbour in the frontier is the parent.
                        let list = adjacency.neighbors(v);
                        if let Some(&u) = list.iter().find(|&&u| bit(front, u)) {
                            self.parent[v as usize].store(u, Relaxed);
                            self.depth[v as usize].store(level + 1, Relaxed);
                            bits |= 1 << i;
                        }
                    }
                    if bits != 0 {
                        visited_word.store(seen | bits, Relaxed);
                        found += u64::from(bits.count_ones());
                    }
                    *next_word = bits;
                }
                found
            })
            .sum()
    }

    pub(super) fn finish(self) -> BfsResult {
        let unwrap = |v: Vec<AtomicU32>| v.into_iter().map(AtomicU32::into_inner).collect();
        BfsResult {
            root: self.root,
            parent: unwrap(self.parent),
            depth: unwrap(self.depth),
            steps: self.steps,
        }
    }
}

/// Whether vertex `v` is set in `bitmap`.
#[inline]
fn bit(bitmap: &[u64], v: u32) -> bool {
    bitmap[v as usize / 64] >> (v % 64) & 1 == 1
}

/// Words of a bitmap over `n` vertices.
pub(super) fn bitmap_words(n: u32) -> usize {
    (n as usize).div_ceil(64)
}

/// Overwrites `bitmap` with the set of vertices in `queue` (serial: a switching frontier is
/// small next to the `O(n)` bottom-up step that follows).
pub(super) fn queue_to_bitmap(queue: &[u32], bitmap: &mut [u64]) {
    bitmap
        .par_iter_mut()
        .with_min_len(INIT_GRAIN)
        .for_each(|w| *w = 0);
    for &v in queue {
        bitmap[v as usize / 64] |= 1 << (v % 64);
    }
}

/// Overwrites `queue` with the vertices set in `bitmap`, ascending; returns the sum of their
/// out-degrees.
pub(super) fn bitmap_to_queue(bitmap: &[u64], graph: &CsrGraph, queue: &mut Vec<u32>) -> u64 {
    let parts: Vec<(Vec<u32>, u64)> = bitmap
        .par_chunks(INIT_GRAIN / 64)
        .enumerate()
        .map(|(chunk, words)| {
            let (mut q, mut scout) = (Vec::new(), 0u64);
            for (k, &word) in words.iter().enumerate() {
                let base = ((chunk * (INIT_GRAIN / 64) + k) * 64) as u32;
                let mut bits = word;
                while bits != 0 {
                    let v = base + bits.trailing_zeros();
                    q.push(v);
                    scout += graph.out_degree(v);
                    bits &= bits - 1;
                }
            }
            (q, scout)
        })
        .collect();
    queue.clear();
    let mut scout = 0;
    for (q, s) in parts {
        queue.extend_from_slice(&q);
        scout += s;
    }
    scout
}
