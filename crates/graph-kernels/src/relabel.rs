//! Degree-sorted relabelling: vertices renumbered by decreasing degree, so that the hubs that
//! bottom-up BFS finds first sit together in memory (an optional optimisation, as in GAPBS).

use crate::bfs::{BfsResult, UNREACHED};
use crate::csr::{split_lists, Adjacency, CsrGraph};
use rayon::prelude::*;

/// A vertex permutation with both directions kept, to map results back to the input ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    new_of_old: Vec<u32>,
    old_of_new: Vec<u32>,
}

impl Permutation {
    /// Builds the permutation from `old_of_new` (the old id of each new id).
    ///
    /// # Panics
    /// If `old_of_new` is not a permutation of `0..len`.
    #[track_caller]
    pub fn from_old_of_new(old_of_new: Vec<u32>) -> Self {
        let mut new_of_old = vec![u32::MAX; old_of_new.len()];
        for (new, &old) in old_of_new.iter().enumerate() {
            assert!(
                (old as usize) < old_of_new.len() && new_of_old[old as usize] == u32::MAX,
                "not a permutation: old id {old} repeated or out of range"
            );
            new_of_old[old as usize] = new as u32;
        }
        Permutation {
            new_of_old,
            old_of_new,
        }
    }

    /// Number of vertices permuted.
    pub fn len(&self) -> usize {
        self.old_of_new.len()
    }

    /// Whether the permutation is of no vertex.
    pub fn is_empty(&self) -> bool {
        self.old_of_new.is_empty()
    }

    /// New id of input vertex `old`.
    pub fn new_id(&self, old: u32) -> u32 {
        self.new_of_old[old as usize]
    }

    /// Input id of relabelled vertex `new`.
    pub fn old_id(&self, new: u32) -> u32 {
        self.old_of_new[new as usize]
    }

    /// Maps a BFS result computed on the relabelled graph back to input ids.
    pub fn restore_bfs(&self, result: &BfsResult) -> BfsResult {
        let n = self.new_of_old.len();
        let (parent, depth): (Vec<u32>, Vec<u32>) = (0..n)
            .into_par_iter()
            .map(|old| {
                let new = self.new_of_old[old] as usize;
                let p = result.parent[new];
                let p = if p == UNREACHED {
                    UNREACHED
                } else {
                    self.old_of_new[p as usize]
                };
                (p, result.depth[new])
            })
            .unzip();
        BfsResult {
            root: self.old_of_new[result.root as usize],
            parent,
            depth,
            steps: result.steps.clone(),
        }
    }
}

/// Renumbers vertices by decreasing out-degree (ties by old id) and returns the relabelled
/// graph with the permutation that maps back.
///
/// Complexity: O(n log n + m log d) work, parallel: each new list is the renamed old list,
/// written straight into its final place and sorted there.
pub fn relabel_by_degree(graph: &CsrGraph) -> (CsrGraph, Permutation) {
    let n = graph.num_vertices();
    let mut old_of_new: Vec<u32> = (0..n).collect();
    old_of_new.par_sort_by_key(|&v| (std::cmp::Reverse(graph.out_degree(v)), v));
    let perm = Permutation::from_old_of_new(old_of_new);
    let mut offsets = Vec::with_capacity(n as usize + 1);
    offsets.push(0u64);
    let mut total = 0;
    for new in 0..n {
        total += graph.out_degree(perm.old_id(new));
        offsets.push(total);
    }
    let mut targets = vec![0u32; total as usize];
    split_lists(&offsets, &mut targets)
        .into_par_iter()
        .with_min_len(256)
        .enumerate()
        .for_each(|(new, list)| {
            let old = perm.old_id(new as u32);
            for (slot, &t) in list.iter_mut().zip(graph.out_neighbors(old)) {
                *slot = perm.new_id(t);
            }
            list.sort_unstable();
        });
    let out = Adjacency::from_sorted_parts(offsets, targets);
    (CsrGraph::from_adjacency(n, graph.is_directed(), out), perm)
}
