//! Which rank owns each element of every set: the primary set is partitioned, every other set
//! follows it through the maps (owner-compute).

use super::context::{DatDecl, MapDecl, SetDecl};
use super::error::{Result, UnstructuredError};
use super::partition::{partition_graph, partition_rcb, CsrGraph, Partitioner};
use super::renumber::{primary_graph, primary_set};
use super::scalar::Storage;

#[cfg(feature = "metis")]
fn metis(g: &CsrGraph, nparts: usize) -> Result<Vec<u32>> {
    super::partition::partition_metis(g, nparts)
}

#[cfg(not(feature = "metis"))]
fn metis(_: &CsrGraph, _: usize) -> Result<Vec<u32>> {
    Err(UnstructuredError::Partition {
        detail: "METIS asked for, but parallel-plan was built without its `metis` feature".into(),
    })
}

/// The owner of every element of every set, for `nparts` ranks.
///
/// The primary set is partitioned by `partitioner`; a set with a map to an assigned set takes
/// the owner of each element's first target (maps to the primary set preferred); a set that
/// an assigned set maps to takes, per element, the lowest owner among the elements that map to
/// it; anything left is cut in contiguous blocks.
///
/// # Errors
/// [`UnstructuredError::Partition`] when METIS fails or is not built in;
/// [`UnstructuredError::InvalidDeclaration`] for `Rcb` when the primary set has no coordinate
/// dat (named `coordinates` if given).
pub(crate) fn owners(
    sets: &[SetDecl],
    maps: &[MapDecl],
    dats: &[DatDecl],
    partitioner: Partitioner,
    coordinates: Option<&str>,
    nparts: usize,
) -> Result<(Vec<Vec<u32>>, Option<usize>, usize)> {
    let mut owner: Vec<Option<Vec<u32>>> = vec![None; sets.len()];
    let block = |size: usize| -> Vec<u32> {
        (0..size)
            .map(|e| (e * nparts / size.max(1)) as u32)
            .collect()
    };
    let primary = primary_set(sets, maps);
    let mut cut = 0;
    if let Some(p) = primary {
        let part = match partitioner {
            Partitioner::Metis => {
                let g = primary_graph(p, sets, maps);
                let part = metis(&g, nparts)?;
                cut = g.edge_cut(&part);
                part
            }
            Partitioner::Graph => {
                let g = primary_graph(p, sets, maps);
                let part = partition_graph(&g, nparts);
                cut = g.edge_cut(&part);
                part
            }
            Partitioner::Rcb => {
                let coords = dats
                    .iter()
                    .find_map(|d| match &d.data {
                        Storage::F64(v) if d.set == p && (d.dim == 2 || d.dim == 3) && coordinates.is_none_or(|c| c == d.name) => Some((v, d.dim)),
                        _ => None,
                    })
                    .ok_or_else(|| UnstructuredError::InvalidDeclaration {
                        name: sets[p].name.clone(),
                        detail: match coordinates {
                            Some(c) => format!("recursive coordinate bisection: no 2-D or 3-D f64 dat `{c}` on the primary set"),
                            None => "recursive coordinate bisection needs a 2-D or 3-D f64 dat of coordinates on the primary set".into(),
                        },
                    })?;
                let part = partition_rcb(coords.0, coords.1, nparts);
                cut = primary_graph(p, sets, maps).edge_cut(&part);
                part
            }
        };
        owner[p] = Some(part);
    }
    loop {
        let mut progressed = false;
        for s in 0..sets.len() {
            if owner[s].is_some() {
                continue;
            }
            // A map from s to an assigned set, preferring the primary.
            let forward = maps
                .iter()
                .filter(|m| m.from == s && owner[m.to].is_some())
                .min_by_key(|m| (Some(m.to) != primary) as u8);
            if let Some(m) = forward {
                let to = owner[m.to].as_ref().expect("assigned");
                owner[s] = Some(
                    (0..sets[s].size)
                        .map(|e| to[m.values[e * m.arity] as usize])
                        .collect(),
                );
                progressed = true;
                continue;
            }
            if let Some(m) = maps.iter().find(|m| m.to == s && owner[m.from].is_some()) {
                let from = owner[m.from].as_ref().expect("assigned");
                let mut o = vec![u32::MAX; sets[s].size];
                for (k, &t) in m.values.iter().enumerate() {
                    let t = t as usize;
                    o[t] = o[t].min(from[k / m.arity]);
                }
                let b = block(sets[s].size);
                o.iter_mut().zip(b).for_each(|(x, b)| {
                    if *x == u32::MAX {
                        *x = b;
                    }
                });
                owner[s] = Some(o);
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    let owners = owner
        .into_iter()
        .enumerate()
        .map(|(s, o)| o.unwrap_or_else(|| block(sets[s].size)))
        .collect();
    Ok((owners, primary, cut))
}
