//! Shared search state of the parallel variants: atomic parent/depth arrays, frontier bitmaps,
//! and the top-down and bottom-up level steps the variants compose.

use super::{BfsResult, BfsStep, UNREACHED};
use crate::csr::CsrGraph;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Frontier vertices per rayon task in a top-down step.
const TOP_DOWN_GRAIN: usize = 256;
/// Bitmap words (64 vertices each) per rayon task in a bottom-up step.
const BOTTOM_UP_GRAIN: usize = 64;

/// Parent and depth of every vertex, claimable concurrently.
pub(super) struct SearchState<'g> {
    graph: &'g CsrGraph,
    root: u32,
    parent: Vec<AtomicU32>,
    depth: Vec<AtomicU32>,
    pub(super) steps: Vec<BfsStep>,
}

impl<'g> SearchState<'g> {
    pub(super) fn new(graph: &'g CsrGraph, root: u32) -> Self {
        let n = graph.num_vertices() as usize;
        let fresh = || {
            (0..n)
                .into_par_iter()
                .with_min_len(4096)
                .map(|_| AtomicU32::new(UNREACHED))
                .collect::<Vec<_>>()
        };
        let (parent, depth) = rayon::join(fresh, fresh);
        parent[root as usize].store(root, Relaxed);
        depth[root as usize].store(0, Relaxed);
        SearchState {
            graph,
            root,
            parent,
            depth,
            steps: Vec::new(),
        }
    }

    pub(super) fn graph(&self) -> &'g CsrGraph {
        self.graph
    }

    /// Expands `frontier` (vertices at depth `level`) along out-edges; returns the next
    /// frontier and the sum of its out-degrees (Beamer's `m_f` for the next step).
    /// Small frontiers (below `serial_threshold`) are expanded on the calling thread.
    pub(super) fn top_down_step(
        &self,
        frontier: &[u32],
        level: u32,
        serial_threshold: usize,
    ) -> (Vec<u32>, u64) {
        // `exclusive`: only this thread writes, so a plain load/store claims (no locked CAS).
        let expand = |exclusive: bool, (mut next, mut scout): (Vec<u32>, u64), chunk: &[u32]| {
            for &u in chunk {
                for &v in self.graph.out_neighbors(u) {
                    let d = &self.depth[v as usize];
                    if d.load(Relaxed) != UNREACHED {
                        continue;
                    }
                    let claimed = if exclusive {
                        d.store(level + 1, Relaxed);
                        true
                    } else {
                        d.compare_exchange(UNREACHED, level + 1, Relaxed, Relaxed)
                            .is_ok()
                    };
                    if claimed {
                        self.parent[v as usize].store(u, Relaxed);
                        scout += self.graph.out_degree(v);
                        next.push(v);
                    }
                }
            }
            (next, scout)
        };
        if frontier.len() < serial_threshold {
            return expand(true, (Vec::new(), 0), frontier);
        }
        // Each task fills its own buffer (no shared queue), buffers are concatenated once.
        concat(
            frontier
                .par_chunks(TOP_DOWN_GRAIN)
                .fold(
                    || (Vec::new(), 0u64),
                    |acc, chunk| expand(false, acc, chunk),
                )
                .collect(),
        )
    }

    /// One bottom-up step: every unvisited vertex looks for an in-neighbour in `front`
    /// (depth `level`) and takes the first one found as parent. Sets those vertices in `next`
    /// (cleared first) and returns how many were found. Each task owns a run of `next`'s
    /// words, so vertices and bits have a single writer.
    pub(super) fn bottom_up_step(&self, front: &[u64], next: &mut [u64], level: u32) -> u64 {
        let n = self.graph.num_vertices() as usize;
        next.par_chunks_mut(BOTTOM_UP_GRAIN)
            .enumerate()
            .map(|(chunk, words)| {
                let mut found = 0u64;
                for (k, word) in words.iter_mut().enumerate() {
                    let base = (chunk * BOTTOM_UP_GRAIN + k) * 64;
                    let mut bits = 0u64;
                    for v in base..(base + 64).min(n) {
                        if self.depth[v].load(Relaxed) != UNREACHED {
                            continue;
                        }
                        for &u in self.graph.in_neighbors(v as u32) {
                            if front[u as usize / 64] >> (u % 64) & 1 == 1 {
                                self.parent[v].store(u, Relaxed);
                                self.depth[v].store(level + 1, Relaxed);
                                bits |= 1 << (v - base);
                                found += 1;
                                break;
                            }
                        }
                    }
                    *word = bits;
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

/// Words of a bitmap over `n` vertices.
pub(super) fn bitmap_words(n: u32) -> usize {
    (n as usize).div_ceil(64)
}

/// The bitmap of the vertices in `queue`.
pub(super) fn queue_to_bitmap(queue: &[u32], n: u32) -> Vec<u64> {
    let words: Vec<AtomicU64> = (0..bitmap_words(n)).map(|_| AtomicU64::new(0)).collect();
    queue.par_iter().with_min_len(1024).for_each(|&v| {
        words[v as usize / 64].fetch_or(1 << (v % 64), Relaxed);
    });
    words.into_iter().map(AtomicU64::into_inner).collect()
}

/// The vertices set in `bitmap`, ascending, and the sum of their out-degrees.
pub(super) fn bitmap_to_queue(bitmap: &[u64], graph: &CsrGraph) -> (Vec<u32>, u64) {
    let parts: Vec<(Vec<u32>, u64)> = bitmap
        .par_iter()
        .enumerate()
        .with_min_len(BOTTOM_UP_GRAIN)
        .fold(
            || (Vec::new(), 0u64),
            |(mut q, mut scout), (w, &word)| {
                let mut bits = word;
                while bits != 0 {
                    let v = (w * 64) as u32 + bits.trailing_zeros();
                    q.push(v);
                    scout += graph.out_degree(v);
                    bits &= bits - 1;
                }
                (q, scout)
            },
        )
        .collect();
    concat(parts)
}

/// Concatenates per-task `(vertices, out-degree sum)` buffers.
fn concat(parts: Vec<(Vec<u32>, u64)>) -> (Vec<u32>, u64) {
    let mut all = Vec::with_capacity(parts.iter().map(|(q, _)| q.len()).sum());
    let mut scout = 0;
    for (q, s) in parts {
        all.extend_from_slice(&q);
        scout += s;
    }
    (all, scout)
}
