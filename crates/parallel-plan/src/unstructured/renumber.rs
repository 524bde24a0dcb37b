//! Locality renumbering of a whole mesh (OP2's renumbering), done by the threaded and
//! distributed backends at the first loop (before partitioning): the primary set in
//! breadth-first order of its connectivity, every other set after it through the maps.
//! Consecutive elements are then near each other in the mesh, so contiguous blocks of a
//! loop's elements touch compact pieces of every dat, and the caches serve what a shuffled
//! numbering sends to memory.

use super::context::{Context, MapDecl, SetDecl};
use super::partition::CsrGraph;
use super::scalar::{Scalar, Storage};

/// The set to partition or to order first: the one the most maps point to (ties: the larger,
/// then the first declared). Returns `None` when there are no sets.
pub(crate) fn primary_set(sets: &[SetDecl], maps: &[MapDecl]) -> Option<usize> {
    (0..sets.len()).max_by(|&a, &b| {
        let into = |s: usize| maps.iter().filter(|m| m.to == s).count();
        into(a)
            .cmp(&into(b))
            .then(sets[a].size.cmp(&sets[b].size))
            .then(b.cmp(&a))
    })
}

/// The connectivity graph of the primary set: two elements are adjacent when one element of
/// another set maps to both.
pub(crate) fn primary_graph(primary: usize, sets: &[SetDecl], maps: &[MapDecl]) -> CsrGraph {
    let rows: Vec<(&[u32], usize)> = maps
        .iter()
        .filter(|m| m.to == primary)
        .map(|m| (&m.values[..], m.arity))
        .collect();
    CsrGraph::from_rows(sets[primary].size, &rows)
}

/// For every set, its elements in locality order (`order[s][new] = old`).
///
/// The primary set follows [`CsrGraph::bfs_order`]; a set with a map to an ordered set is
/// sorted by the lowest new number in each element's row (maps to the primary set preferred);
/// a set that an ordered set maps to, by the lowest new number of the elements that map to
/// it (elements nothing maps to last); ties and sets no map reaches keep their order.
///
/// Complexity: O(n log n + map entries + primary graph edges).
pub(crate) fn locality_order(sets: &[SetDecl], maps: &[MapDecl]) -> Vec<Vec<u32>> {
    let mut new_of: Vec<Option<Vec<u32>>> = vec![None; sets.len()];
    let primary = primary_set(sets, maps);
    if let Some(p) = primary {
        new_of[p] = Some(invert(&primary_graph(p, sets, maps).bfs_order()));
    }
    loop {
        let mut progressed = false;
        for s in 0..sets.len() {
            if new_of[s].is_some() {
                continue;
            }
            let forward = maps
                .iter()
                .filter(|m| m.from == s && new_of[m.to].is_some())
                .min_by_key(|m| (Some(m.to) != primary) as u8);
            let key: Vec<u32> = if let Some(m) = forward {
                let to = new_of[m.to].as_ref().expect("ordered");
                m.values
                    .chunks(m.arity)
                    .map(|row| {
                        row.iter()
                            .map(|&t| to[t as usize])
                            .min()
                            .expect("arity ≥ 1")
                    })
                    .collect()
            } else if let Some(m) = maps.iter().find(|m| m.to == s && new_of[m.from].is_some()) {
                let from = new_of[m.from].as_ref().expect("ordered");
                let mut key = vec![u32::MAX; sets[s].size];
                for (k, &t) in m.values.iter().enumerate() {
                    key[t as usize] = key[t as usize].min(from[k / m.arity]);
                }
                key
            } else {
                continue;
            };
            let mut order: Vec<u32> = (0..sets[s].size as u32).collect();
            order.sort_by_key(|&e| key[e as usize]);
            new_of[s] = Some(invert(&order));
            progressed = true;
        }
        if !progressed {
            break;
        }
    }
    new_of
        .into_iter()
        .enumerate()
        .map(|(s, n)| n.map_or_else(|| (0..sets[s].size as u32).collect(), |n| invert(&n)))
        .collect()
}

/// The inverse of a permutation of `0..p.len()`.
pub(crate) fn invert(p: &[u32]) -> Vec<u32> {
    let mut inv = vec![0u32; p.len()];
    for (i, &v) in p.iter().enumerate() {
        inv[v as usize] = i as u32;
    }
    inv
}

/// Rows `rows[0]`, `rows[1]`, … of `v` (rows of `dim` values), concatenated.
pub(crate) fn pick_rows<T: Copy>(v: &[T], rows: &[u32], dim: usize) -> Vec<T> {
    rows.iter()
        .flat_map(|&r| &v[r as usize * dim..(r as usize + 1) * dim])
        .copied()
        .collect()
}

/// The inverse of [`pick_rows`] for a permutation `rows`: row `k` of `v` goes to row
/// `rows[k]` of the result.
pub(crate) fn unpick_rows<T: Copy + Default>(v: &[T], rows: &[u32], dim: usize) -> Vec<T> {
    let mut out = vec![T::default(); v.len()];
    for (new, &old) in rows.iter().enumerate() {
        let old = old as usize;
        out[old * dim..(old + 1) * dim].copy_from_slice(&v[new * dim..(new + 1) * dim]);
    }
    out
}

/// [`pick_rows`] of a dat's storage.
pub(crate) fn pick_storage(v: &Storage, rows: &[u32], dim: usize) -> Storage {
    match v {
        Storage::F64(v) => Storage::F64(pick_rows(v, rows, dim)),
        Storage::I64(v) => Storage::I64(pick_rows(v, rows, dim)),
    }
}

impl Context {
    /// Renumbers every set in [`locality_order`]: maps and dats move to the new numbering,
    /// and the order is kept to report elements and dat values in the declared numbering.
    pub(crate) fn renumber(&mut self) {
        let order = locality_order(&self.sets, &self.maps);
        let new_of: Vec<Vec<u32>> = order.iter().map(|o| invert(o)).collect();
        for m in &mut self.maps {
            let to = &new_of[m.to];
            m.values = pick_rows(&m.values, &order[m.from], m.arity)
                .into_iter()
                .map(|t| to[t as usize])
                .collect();
        }
        for d in &mut self.dats {
            d.data = pick_storage(&d.data, &order[d.set], d.dim);
        }
        self.order = Some(order);
    }

    /// Undoes [`renumber`](Self::renumber): maps and dats back in the declared numbering, no
    /// order kept (nothing to do if the mesh was not renumbered).
    #[cfg_attr(not(feature = "distributed"), allow(dead_code))]
    pub(crate) fn undo_renumber(&mut self) {
        let Some(order) = self.order.take() else {
            return;
        };
        for m in &mut self.maps {
            let (from, to) = (&order[m.from], &order[m.to]);
            let mut values = vec![0u32; m.values.len()];
            for (new, row) in m.values.chunks(m.arity).enumerate() {
                let old = from[new] as usize;
                for (v, &t) in values[old * m.arity..(old + 1) * m.arity]
                    .iter_mut()
                    .zip(row)
                {
                    *v = to[t as usize];
                }
            }
            m.values = values;
        }
        for d in &mut self.dats {
            d.data = match &d.data {
                Storage::F64(v) => Storage::F64(unpick_rows(v, &order[d.set], d.dim)),
                Storage::I64(v) => Storage::I64(unpick_rows(v, &order[d.set], d.dim)),
            };
        }
    }

    /// A dat's values back in the declared numbering (after [`renumber`](Self::renumber)).
    pub(crate) fn unrenumber<T: Scalar>(&self, set: usize, dim: usize, local: &[T]) -> Vec<T> {
        match &self.order {
            Some(order) => unpick_rows(local, &order[set], dim),
            None => local.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, size: usize) -> SetDecl {
        SetDecl {
            name: name.into(),
            size,
            owned: size,
            exec: size,
            local: size,
        }
    }

    #[test]
    fn a_shuffled_path_comes_back_in_path_order() {
        // Nodes of a path in a scrambled numbering; edges listed in another scrambled order.
        let n = 101usize;
        let label = |i: usize| ((i * 37) % n) as u32;
        let edge_at = |k: usize| (k * 29) % (n - 1);
        let values: Vec<u32> = (0..n - 1)
            .flat_map(|k| [label(edge_at(k)), label(edge_at(k) + 1)])
            .collect();
        let sets = [set("nodes", n), set("edges", n - 1)];
        let maps = [MapDecl {
            name: "e2n".into(),
            from: 1,
            to: 0,
            arity: 2,
            values,
        }];
        let order = locality_order(&sets, &maps);
        // Nodes: from one end of the path to the other.
        let pos: Vec<usize> = order[0]
            .iter()
            .map(|&old| (0..n).position(|i| label(i) == old).unwrap())
            .collect();
        assert!(pos == (0..n).collect::<Vec<_>>() || pos == (0..n).rev().collect::<Vec<_>>());
        // Edges: sorted by their lower new node, so consecutive along the path too.
        let new_node = invert(&order[0]);
        let lows: Vec<u32> = order[1]
            .iter()
            .map(|&e| {
                let r = &maps[0].values[2 * e as usize..2 * e as usize + 2];
                new_node[r[0] as usize].min(new_node[r[1] as usize])
            })
            .collect();
        assert_eq!(lows, (0..n as u32 - 1).collect::<Vec<_>>());
    }

    proptest::proptest! {
        #[test]
        fn undoing_the_renumbering_restores_the_declarations(
            n in 1usize..60,
            rows in proptest::collection::vec(0u32..1000, 2..120),
        ) {
            use crate::unstructured::{Backend, Context};
            let m = rows.len() / 2;
            let mut ctx = Context::new(Backend::Threads);
            let a = ctx.decl_set("a", n).unwrap();
            let b = ctx.decl_set("b", m).unwrap();
            let values: Vec<u32> = rows[..2 * m].iter().map(|&v| v % n as u32).collect();
            ctx.decl_map("m", b, a, 2, values).unwrap();
            ctx.decl_dat("da", a, 2, (0..2 * n).map(|v| v as f64).collect()).unwrap();
            ctx.decl_dat("db", b, 1, (0..m as i64).collect()).unwrap();
            let (maps, dats) = (ctx.maps.clone(), ctx.dats.clone());
            ctx.renumber();
            ctx.undo_renumber();
            proptest::prop_assert!(ctx.order.is_none());
            for (x, y) in ctx.maps.iter().zip(&maps) {
                proptest::prop_assert_eq!(&x.values, &y.values);
            }
            for (x, y) in ctx.dats.iter().zip(&dats) {
                proptest::prop_assert_eq!(&x.data, &y.data);
            }
        }

        #[test]
        fn every_set_gets_a_permutation(
            n in 1usize..60,
            rows in proptest::collection::vec(0u32..1000, 0..120),
        ) {
            let values: Vec<u32> = rows.iter().map(|&v| v % n as u32).collect();
            let m = values.len() / 2;
            let sets = [set("a", n), set("b", m), set("c", 7)];
            let maps = [MapDecl { name: "m".into(), from: 1, to: 0, arity: 2, values: values[..2 * m].to_vec() }];
            for (s, o) in locality_order(&sets, &maps).iter().enumerate() {
                let mut sorted = o.clone();
                sorted.sort_unstable();
                proptest::prop_assert_eq!(sorted, (0..sets[s].size as u32).collect::<Vec<_>>());
            }
        }
    }
}
