//! OP2's block colouring for the threaded backend: a loop's elements are grouped into blocks
//! of nearby elements, and the blocks coloured so that no two blocks of one colour write the
//! same target element. Blocks of one colour run in parallel, each block's elements in order
//! on one thread, so indirect increments never race and each thread works on a compact
//! piece of the mesh (element colouring, by contrast, scatters every colour over the whole
//! mesh and streams it once per colour).
//!
//! Blocks follow a breadth-first order of the first written target set (its connectivity
//! through every map into it): consecutive runs of [`BLOCK_TARGETS`] targets in that order
//! form a band-like piece of the mesh, and an element joins the block of its first written
//! target. On a mesh, a band touches only the neighbouring bands, so a handful of colours
//! suffice whatever the element numbering.

use std::collections::VecDeque;

/// Targets per block of the breadth-first order.
pub(crate) const BLOCK_TARGETS: usize = 512;

/// One indirectly written target space: element `e` writes `map[e * arity + slot]` of a space of
/// `size` elements; arguments that write the same set share a space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writes<'a> {
    pub(crate) map: &'a [u32],
    pub(crate) arity: usize,
    pub(crate) slot: usize,
    pub(crate) space: usize,
}

/// Blocks of elements by colour: colour `c` holds blocks `colours[c]..colours[c + 1]`, block
/// `b` the elements `elems[blocks[b]..blocks[b + 1]]`, ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Colouring {
    pub(crate) elems: Vec<u32>,
    pub(crate) blocks: Vec<usize>,
    pub(crate) colours: Vec<usize>,
}

impl Colouring {
    /// Number of colours.
    pub(crate) fn len(&self) -> usize {
        self.colours.len().saturating_sub(1)
    }

    /// The blocks of colour `c`, each as its elements.
    pub(crate) fn blocks_of(&self, c: usize) -> impl Iterator<Item = &[u32]> + '_ {
        (self.colours[c]..self.colours[c + 1])
            .map(move |b| &self.elems[self.blocks[b]..self.blocks[b + 1]])
    }
}

/// Block number of every vertex of a graph on `n` vertices given as rows of `arity` vertices
/// (two vertices adjacent when a row holds both): vertices in breadth-first order (each
/// component from its lowest vertex), cut into runs of `block` vertices.
///
/// Complexity: O(n + Σ rows × arity²).
pub(crate) fn bfs_blocks(n: usize, rows: &[(&[u32], usize)], block: usize) -> Vec<u32> {
    // Adjacency in compressed form (with repeats: harmless for a BFS).
    let mut deg = vec![0usize; n + 1];
    for &(values, arity) in rows {
        for row in values.chunks(arity) {
            for &a in row {
                deg[a as usize + 1] += arity - 1;
            }
        }
    }
    for v in 0..n {
        deg[v + 1] += deg[v];
    }
    let mut fill = deg.clone();
    let mut adj = vec![0u32; deg[n]];
    for &(values, arity) in rows {
        for row in values.chunks(arity) {
            for (i, &a) in row.iter().enumerate() {
                for (j, &b) in row.iter().enumerate() {
                    if i != j {
                        adj[fill[a as usize]] = b;
                        fill[a as usize] += 1;
                    }
                }
            }
        }
    }
    let mut block_of = vec![u32::MAX; n];
    let mut pos = 0usize;
    let mut q = VecDeque::new();
    for s in 0..n {
        if block_of[s] != u32::MAX {
            continue;
        }
        block_of[s] = (pos / block) as u32;
        pos += 1;
        q.push_back(s as u32);
        while let Some(v) = q.pop_front() {
            for &u in &adj[deg[v as usize]..deg[v as usize + 1]] {
                if block_of[u as usize] == u32::MAX {
                    block_of[u as usize] = (pos / block) as u32;
                    pos += 1;
                    q.push_back(u);
                }
            }
        }
    }
    block_of
}

/// Groups elements `0..n` into blocks (element `e` joins block `block_of[t]` of its first
/// write's target `t`) and colours the blocks so that, within a colour, no two blocks write one
/// element of any space. `space_sizes[s]` is the size of space `s`; `writes` is not empty.
///
/// Complexity: O(n × writes) per round of 64 colours (meshes need one round).
pub(crate) fn colour(
    n: usize,
    writes: &[Writes<'_>],
    space_sizes: &[usize],
    block_of: &[u32],
) -> Colouring {
    let first = writes[0];
    let block = |e: usize| block_of[first.map[e * first.arity + first.slot] as usize] as usize;
    let nblocks = (0..n).map(|e| block(e) + 1).max().unwrap_or(0);
    // Elements grouped by block (counting sort keeps them ascending within a block).
    let mut start = vec![0usize; nblocks + 1];
    (0..n).for_each(|e| start[block(e) + 1] += 1);
    for b in 0..nblocks {
        start[b + 1] += start[b];
    }
    let mut by_block = vec![0u32; n];
    let mut fill = start.clone();
    for e in 0..n {
        let b = block(e);
        by_block[fill[b]] = e as u32;
        fill[b] += 1;
    }
    let elems_of = |b: usize| &by_block[start[b]..start[b + 1]];

    let mut colour_of = vec![u32::MAX; nblocks];
    let mut pending: Vec<usize> = (0..nblocks).filter(|&b| start[b + 1] > start[b]).collect();
    let mut base = 0u32;
    while !pending.is_empty() {
        let mut masks: Vec<Vec<u64>> = space_sizes.iter().map(|&s| vec![0u64; s]).collect();
        let mut next = Vec::new();
        for &b in &pending {
            let used = elems_of(b).iter().fold(0u64, |m, &e| {
                writes.iter().fold(m, |m, w| {
                    m | masks[w.space][w.map[e as usize * w.arity + w.slot] as usize]
                })
            });
            if used == u64::MAX {
                next.push(b);
                continue;
            }
            let c = (!used).trailing_zeros();
            for &e in elems_of(b) {
                for w in writes {
                    masks[w.space][w.map[e as usize * w.arity + w.slot] as usize] |= 1 << c;
                }
            }
            colour_of[b] = base + c;
        }
        pending = next;
        base += 64;
    }
    let ncol = colour_of
        .iter()
        .filter(|&&c| c != u32::MAX)
        .map(|&c| c as usize + 1)
        .max()
        .unwrap_or(0);
    let mut per_colour: Vec<Vec<usize>> = vec![Vec::new(); ncol];
    for (b, &c) in colour_of.iter().enumerate() {
        if c != u32::MAX {
            per_colour[c as usize].push(b);
        }
    }
    per_colour.retain(|c| !c.is_empty());
    let mut out = Colouring {
        elems: Vec::with_capacity(n),
        blocks: vec![0],
        colours: vec![0],
    };
    for bs in per_colour {
        for b in bs {
            out.elems.extend_from_slice(elems_of(b));
            out.blocks.push(out.elems.len());
        }
        out.colours.push(out.blocks.len() - 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether every element appears once and no two blocks of one colour share a target.
    fn valid(c: &Colouring, n: usize, writes: &[Writes<'_>], sizes: &[usize]) -> bool {
        let mut seen = vec![false; n];
        for &e in &c.elems {
            if std::mem::replace(&mut seen[e as usize], true) {
                return false;
            }
        }
        if !seen.iter().all(|&s| s) {
            return false;
        }
        (0..c.len()).all(|col| {
            let mut owner: Vec<Vec<usize>> = sizes.iter().map(|&s| vec![usize::MAX; s]).collect();
            c.blocks_of(col).enumerate().all(|(b, elems)| {
                elems.windows(2).all(|p| p[0] < p[1])
                    && elems.iter().all(|&e| {
                        writes.iter().all(|w| {
                            let t = w.map[e as usize * w.arity + w.slot] as usize;
                            let o = &mut owner[w.space][t];
                            let ok = *o == usize::MAX || *o == b;
                            *o = b;
                            ok
                        })
                    })
            })
        })
    }

    #[test]
    fn path_edges_in_bands_take_two_colours() {
        // A path of 2001 nodes as 2000 edges writing both ends: blocks of 512 consecutive
        // nodes; neighbouring blocks share one node, so two colours alternate.
        let n = 2000usize;
        let map: Vec<u32> = (0..n as u32).flat_map(|e| [e, e + 1]).collect();
        let w = [
            Writes {
                map: &map,
                arity: 2,
                slot: 0,
                space: 0,
            },
            Writes {
                map: &map,
                arity: 2,
                slot: 1,
                space: 0,
            },
        ];
        let blocks = bfs_blocks(n + 1, &[(&map, 2)], BLOCK_TARGETS);
        let c = colour(n, &w, &[n + 1], &blocks);
        assert_eq!(c.len(), 2);
        assert_eq!(c.blocks.len() - 1, n.div_ceil(BLOCK_TARGETS));
        assert!(valid(&c, n, &w, &[n + 1]));
    }

    #[test]
    fn more_than_64_colours_take_another_round() {
        // 100 elements all writing target 0, each its own block: 100 colours.
        let map = vec![0u32; 100];
        let other: Vec<u32> = (0..100).collect();
        let w = [
            Writes {
                map: &other,
                arity: 1,
                slot: 0,
                space: 1,
            },
            Writes {
                map: &map,
                arity: 1,
                slot: 0,
                space: 0,
            },
        ];
        let block_of: Vec<u32> = (0..100).collect();
        let c = colour(100, &w, &[1, 100], &block_of);
        assert_eq!(c.len(), 100);
        assert!(valid(&c, 100, &w, &[1, 100]));
    }

    proptest::proptest! {
        #[test]
        fn random_maps_colour_validly(
            n in 1usize..300,
            m in 1usize..60,
            seed in proptest::collection::vec(0u32..1000, 600),
            block in 1usize..20,
        ) {
            let map: Vec<u32> = (0..2 * n).map(|i| seed[i % seed.len()].wrapping_mul(i as u32 + 7) % m as u32).collect();
            let w = [
                Writes { map: &map, arity: 2, slot: 0, space: 0 },
                Writes { map: &map, arity: 2, slot: 1, space: 0 },
            ];
            let blocks = bfs_blocks(m, &[(&map, 2)], block);
            let c = colour(n, &w, &[m], &blocks);
            proptest::prop_assert!(valid(&c, n, &w, &[m]));
        }
    }
}
