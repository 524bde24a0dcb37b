//! Greedy colouring of a loop's elements so that no two elements of one colour write the same
//! target element (OP2's element colouring, 64 colours per round of bit masks).

/// One indirectly written target space: element `e` writes `map[e * arity + slot]` of a space of
/// `size` elements; arguments that write the same set share a space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Writes<'a> {
    pub(crate) map: &'a [u32],
    pub(crate) arity: usize,
    pub(crate) slot: usize,
    pub(crate) space: usize,
}

/// Elements grouped by colour, each colour's elements in increasing order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Colouring {
    pub(crate) colours: Vec<Vec<u32>>,
}

/// Colours elements `0..n` so that, within a colour, the elements' targets in every space are
/// distinct. `space_sizes[s]` is the size of space `s`.
///
/// Complexity: O(n × writes) per round of 64 colours (meshes need one round).
pub(crate) fn colour(n: usize, writes: &[Writes<'_>], space_sizes: &[usize]) -> Colouring {
    let mut colour_of = vec![u32::MAX; n];
    let mut pending: Vec<usize> = (0..n).collect();
    let mut base = 0u32;
    while !pending.is_empty() {
        let mut masks: Vec<Vec<u64>> = space_sizes.iter().map(|&s| vec![0u64; s]).collect();
        let mut next = Vec::new();
        for &e in &pending {
            let used = writes.iter().fold(0u64, |m, w| {
                m | masks[w.space][w.map[e * w.arity + w.slot] as usize]
            });
            if used == u64::MAX {
                next.push(e);
                continue;
            }
            let c = (!used).trailing_zeros();
            for w in writes {
                masks[w.space][w.map[e * w.arity + w.slot] as usize] |= 1 << c;
            }
            colour_of[e] = base + c;
        }
        pending = next;
        base += 64;
    }
    let ncol = colour_of.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut colours = vec![Vec::new(); ncol];
    for (e, &c) in colour_of.iter().enumerate() {
        colours[c as usize].push(e as u32);
    }
    colours.retain(|c| !c.is_empty());
    Colouring { colours }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_separate_shared_targets() {
        // A path 0-1-2-3-4 as edges; edges sharing a node must differ.
        let map: Vec<u32> = vec![0, 1, 1, 2, 2, 3, 3, 4];
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
        let c = colour(4, &w, &[5]);
        assert_eq!(c.colours, vec![vec![0, 2], vec![1, 3]]);
    }

    #[test]
    fn more_than_64_colours_take_another_round() {
        // 100 elements all writing target 0: 100 colours.
        let map = vec![0u32; 100];
        let w = [Writes {
            map: &map,
            arity: 1,
            slot: 0,
            space: 0,
        }];
        let c = colour(100, &w, &[1]);
        assert_eq!(c.colours.len(), 100);
        assert!(c.colours.iter().all(|c| c.len() == 1));
    }
}
