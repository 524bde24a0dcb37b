//! OP2's block colouring for the threaded backend: a loop's elements are cut into blocks of
//! [`BLOCK`] consecutive elements, and the blocks coloured so that no two blocks of one colour
//! write the same target element. Blocks of one colour run in parallel, each block's elements
//! in order on one thread, so indirect increments never race. The threaded backend first
//! renumbers the mesh for locality (`renumber`), so a block of consecutive elements is a
//! compact piece of the mesh: it touches few targets, its neighbours are the nearby blocks
//! (a handful of colours suffice), and each thread streams its own part of every dat
//! (element colouring, by contrast, scatters every colour over the whole mesh).

/// Elements per block.
pub(crate) const BLOCK: usize = 512;

/// One indirectly written target space: element `e` writes `map[e * arity + slot]` of a space of
/// `size` elements; arguments that write the same set share a space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writes<'a> {
    pub(crate) map: &'a [u32],
    pub(crate) arity: usize,
    pub(crate) slot: usize,
    pub(crate) space: usize,
}

/// Blocks by colour: colour `c` holds blocks `colours[c]..colours[c + 1]`, block `b` the
/// elements `blocks[b].0..blocks[b].1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Colouring {
    pub(crate) blocks: Vec<(usize, usize)>,
    pub(crate) colours: Vec<usize>,
}

impl Colouring {
    /// Number of colours.
    pub(crate) fn len(&self) -> usize {
        self.colours.len().saturating_sub(1)
    }

    /// The blocks of colour `c`, each as its range of elements.
    pub(crate) fn blocks_of(&self, c: usize) -> &[(usize, usize)] {
        &self.blocks[self.colours[c]..self.colours[c + 1]]
    }
}

/// Cuts elements `0..n` into blocks of `block` consecutive elements and colours the blocks
/// (greedily, in order) so that, within a colour, no two blocks write one element of any
/// space. `space_sizes[s]` is the size of space `s`.
///
/// Complexity: O(n × writes) per round of 64 colours (meshes need one round).
pub(crate) fn colour(
    n: usize,
    writes: &[Writes<'_>],
    space_sizes: &[usize],
    block: usize,
) -> Colouring {
    let block = block.max(1);
    let nblocks = n.div_ceil(block);
    let range = |b: usize| b * block..((b + 1) * block).min(n);
    let mut colour_of = vec![u32::MAX; nblocks];
    let mut pending: Vec<usize> = (0..nblocks).collect();
    let mut base = 0u32;
    while !pending.is_empty() {
        let mut masks: Vec<Vec<u64>> = space_sizes.iter().map(|&s| vec![0u64; s]).collect();
        let mut next = Vec::new();
        for &b in &pending {
            let used = range(b).fold(0u64, |m, e| {
                writes.iter().fold(m, |m, w| {
                    m | masks[w.space][w.map[e * w.arity + w.slot] as usize]
                })
            });
            if used == u64::MAX {
                next.push(b);
                continue;
            }
            let c = (!used).trailing_zeros();
            for e in range(b) {
                for w in writes {
                    masks[w.space][w.map[e * w.arity + w.slot] as usize] |= 1 << c;
                }
            }
            colour_of[b] = base + c;
        }
        pending = next;
        base += 64;
    }
    let ncol = colour_of.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut per_colour: Vec<Vec<usize>> = vec![Vec::new(); ncol];
    for (b, &c) in colour_of.iter().enumerate() {
        per_colour[c as usize].push(b);
    }
    per_colour.retain(|c| !c.is_empty());
    let mut out = Colouring {
        blocks: Vec::with_capacity(nblocks),
        colours: vec![0],
    };
    for bs in per_colour {
        out.blocks
            .extend(bs.into_iter().map(|b| (range(b).start, range(b).end)));
        out.colours.push(out.blocks.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether every element appears once and no two blocks of one colour share a target.
    fn valid(c: &Colouring, n: usize, writes: &[Writes<'_>], sizes: &[usize]) -> bool {
        let mut seen = vec![false; n];
        for &(a, b) in &c.blocks {
            for s in &mut seen[a..b] {
                if std::mem::replace(s, true) {
                    return false;
                }
            }
        }
        if !seen.iter().all(|&s| s) {
            return false;
        }
        (0..c.len()).all(|col| {
            let mut owner: Vec<Vec<usize>> = sizes.iter().map(|&s| vec![usize::MAX; s]).collect();
            c.blocks_of(col).iter().enumerate().all(|(b, &(lo, hi))| {
                (lo..hi).all(|e| {
                    writes.iter().all(|w| {
                        let t = w.map[e * w.arity + w.slot] as usize;
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
    fn path_edges_in_blocks_take_two_colours() {
        // A path of 2001 nodes as 2000 edges writing both ends: blocks of 512 consecutive
        // edges; neighbouring blocks share one node, so two colours alternate.
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
        let c = colour(n, &w, &[n + 1], BLOCK);
        assert_eq!(c.len(), 2);
        assert_eq!(c.blocks.len(), n.div_ceil(BLOCK));
        assert_eq!(c.blocks_of(0), &[(0, 512), (1024, 1536)]);
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
        let c = colour(100, &w, &[1, 100], 1);
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
            let c = colour(n, &w, &[m], block);
            proptest::prop_assert!(valid(&c, n, &w, &[m]));
        }
    }
}
