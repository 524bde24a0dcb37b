//! One rank's view of the mesh: for every set, the elements it holds in local numbering
//! (owned first, then the exec halo, then the non-exec halo), and the maps renumbered.
//!
//! Definitions (OP2's, as MARO generates them):
//! - the **exec halo** of set `S` on rank `r`: elements of `S` owned elsewhere that some map
//!   sends to an element `r` owns. Loops that write through maps execute them on `r` too, so
//!   that increments to `r`'s elements are complete without communication;
//! - the **non-exec halo** of set `T`: elements of `T` owned elsewhere, not in its exec halo,
//!   that a map sends an owned or exec-halo element to. They are only read.

use super::context::MapDecl;

/// One set on one rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetLayout {
    /// Global number of each local element: owned, exec halo, non-exec halo, each ascending.
    pub(crate) global: Vec<u32>,
    /// Owned elements (`0..owned`).
    pub(crate) owned: usize,
    /// Owned plus exec halo (`0..exec`).
    pub(crate) exec: usize,
}

const NONE: u8 = 0;
const OWNED: u8 = 1;
const EXEC: u8 = 2;
const NONEXEC: u8 = 3;

/// The layout of every set on `rank`, from the global owners (one list per set) and maps.
///
/// Complexity: O(total set sizes + total map entries).
pub(crate) fn layout(maps: &[MapDecl], owners: &[Vec<u32>], rank: u32) -> Vec<SetLayout> {
    let mut state: Vec<Vec<u8>> = owners
        .iter()
        .map(|o| {
            o.iter()
                .map(|&p| if p == rank { OWNED } else { NONE })
                .collect()
        })
        .collect();
    for m in maps {
        let to_owner = &owners[m.to];
        for (st, row) in state[m.from].iter_mut().zip(m.values.chunks(m.arity)) {
            if *st == NONE && row.iter().any(|&t| to_owner[t as usize] == rank) {
                *st = EXEC;
            }
        }
    }
    for m in maps {
        let active: Vec<bool> = state[m.from]
            .iter()
            .map(|&s| matches!(s, OWNED | EXEC))
            .collect();
        for (row, _) in m.values.chunks(m.arity).zip(active).filter(|(_, a)| *a) {
            for &t in row {
                if state[m.to][t as usize] == NONE {
                    state[m.to][t as usize] = NONEXEC;
                }
            }
        }
    }
    state
        .iter()
        .map(|st| {
            let pick = |k: u8| {
                st.iter()
                    .enumerate()
                    .filter(move |&(_, &s)| s == k)
                    .map(|(e, _)| e as u32)
            };
            let mut global: Vec<u32> = pick(OWNED).collect();
            let owned = global.len();
            global.extend(pick(EXEC));
            let exec = global.len();
            global.extend(pick(NONEXEC));
            SetLayout {
                global,
                owned,
                exec,
            }
        })
        .collect()
}

/// Global → local numbering of one set (`u32::MAX` where not held).
pub(crate) fn global_to_local(size: usize, l: &SetLayout) -> Vec<u32> {
    let mut g2l = vec![u32::MAX; size];
    for (i, &g) in l.global.iter().enumerate() {
        g2l[g as usize] = i as u32;
    }
    g2l
}

/// Map `m`'s rows for the local elements `0..exec` of its source set, in local numbering of
/// its target set.
pub(crate) fn localise_map(m: &MapDecl, from: &SetLayout, to_g2l: &[u32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(from.exec * m.arity);
    for &g in &from.global[..from.exec] {
        for &t in &m.values[g as usize * m.arity..(g as usize + 1) * m.arity] {
            let l = to_g2l[t as usize];
            debug_assert!(l != u32::MAX, "map target outside the halo");
            out.push(l);
        }
    }
    out
}

#[cfg(test)]
mod tests;
