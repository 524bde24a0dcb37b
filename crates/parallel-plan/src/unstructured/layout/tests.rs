use proptest::prelude::*;

use super::*;

/// A random mesh: set sizes, maps `(from, to, arity, values)`, owners per set.
fn mesh(nparts: u32) -> impl Strategy<Value = (Vec<usize>, Vec<MapDecl>, Vec<Vec<u32>>)> {
    prop::collection::vec(1usize..25, 2..5)
        .prop_flat_map(move |sizes| {
            let ns = sizes.len();
            let maps = prop::collection::vec((0..ns, 0..ns, 1usize..4), 1..5);
            (Just(sizes), maps)
        })
        .prop_flat_map(move |(sizes, shapes)| {
            let maps: Vec<_> = shapes
                .iter()
                .map(|&(f, t, a)| {
                    prop::collection::vec(0..sizes[t] as u32, sizes[f] * a).prop_map(move |v| {
                        MapDecl {
                            name: "m".into(),
                            from: f,
                            to: t,
                            arity: a,
                            values: v,
                        }
                    })
                })
                .collect();
            let owners: Vec<_> = sizes
                .iter()
                .map(|&n| prop::collection::vec(0..nparts, n))
                .collect();
            (Just(sizes), maps, owners)
        })
}

proptest! {
    /// The layout holds exactly the elements the definitions name, owned first, then exec
    /// halo, then non-exec halo, each ascending; localised maps point at the same elements.
    #[test]
    fn halos_match_brute_force_definitions((sizes, maps, owners) in mesh(3)) {
        for rank in 0..3u32 {
            let l = layout(&maps, &owners, rank);
            for s in 0..sizes.len() {
                let owned: Vec<u32> = (0..sizes[s] as u32).filter(|&e| owners[s][e as usize] == rank).collect();
                // exec: owned elsewhere, some map from s reaches an element owned by rank
                let exec: Vec<u32> = (0..sizes[s] as u32)
                    .filter(|&e| owners[s][e as usize] != rank)
                    .filter(|&e| maps.iter().any(|m| m.from == s && (0..m.arity).any(|k| owners[m.to][m.values[e as usize * m.arity + k] as usize] == rank)))
                    .collect();
                let held = |t: usize, e: u32| -> bool {
                    owners[t][e as usize] == rank
                        || maps.iter().any(|m| m.from == t && (0..m.arity).any(|k| owners[m.to][m.values[e as usize * m.arity + k] as usize] == rank))
                };
                let nonexec: Vec<u32> = (0..sizes[s] as u32)
                    .filter(|&e| !held(s, e))
                    .filter(|&e| maps.iter().any(|m| m.to == s && (0..sizes[m.from] as u32).any(|f| held(m.from, f) && (0..m.arity).any(|k| m.values[f as usize * m.arity + k] == e))))
                    .collect();
                let expect: Vec<u32> = owned.iter().chain(&exec).chain(&nonexec).copied().collect();
                prop_assert_eq!(&l[s].global, &expect, "rank {} set {}", rank, s);
                prop_assert_eq!(l[s].owned, owned.len());
                prop_assert_eq!(l[s].exec, owned.len() + exec.len());
            }
            for m in &maps {
                let g2l = global_to_local(sizes[m.to], &l[m.to]);
                let local = localise_map(m, &l[m.from], &g2l);
                for (i, &g) in l[m.from].global[..l[m.from].exec].iter().enumerate() {
                    for k in 0..m.arity {
                        let t = local[i * m.arity + k];
                        prop_assert_eq!(l[m.to].global[t as usize], m.values[g as usize * m.arity + k]);
                    }
                }
            }
        }
    }
}
