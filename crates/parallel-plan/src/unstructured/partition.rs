//! Partitioners of the primary set: METIS's multilevel k-way partitioning (cargo feature
//! `metis`, the default when enabled), a built-in recursive graph bisection over the mesh
//! connectivity (the default without METIS) and geometric recursive coordinate bisection.
//!
//! The graph partitioner follows METIS's recursive-bisection structure (Karypis & Kumar, "A
//! fast and high quality multilevel scheme for partitioning irregular graphs", SISC 1998)
//! without the coarsening: each bisection grows one side breadth-first from a
//! pseudo-peripheral vertex (George & Liu's graph growing) until it holds its share of the
//! vertices, then improves the cut by boundary moves with positive gain that keep the balance
//! (a greedy Fiduccia–Mattheyses pass). On the structured-like meshes of finite-volume codes
//! the grown halves are compact, so the cut stays near the geometric optimum.

use std::collections::VecDeque;

#[cfg(feature = "metis")]
use super::error::{Result, UnstructuredError};

/// How the primary set is partitioned. The default is [`Partitioner::Metis`] when the crate
/// is built with the `metis` feature, [`Partitioner::Graph`] otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioner {
    /// METIS 5.1 multilevel k-way partitioning of the connectivity graph
    /// (`partition_metis`; needs the `metis` feature, vendored C sources).
    #[cfg_attr(feature = "metis", default)]
    Metis,
    /// Recursive graph bisection over the mesh connectivity ([`partition_graph`]), no C
    /// library.
    #[cfg_attr(not(feature = "metis"), default)]
    Graph,
    /// Recursive coordinate bisection ([`partition_rcb`]) over the first `f64` dat of
    /// dimension 2 or 3 declared on the primary set (its coordinates).
    Rcb,
}

impl Partitioner {
    /// Short name (`metis`, `graph`, `rcb`).
    pub fn name(self) -> &'static str {
        match self {
            Partitioner::Metis => "metis",
            Partitioner::Graph => "graph",
            Partitioner::Rcb => "rcb",
        }
    }
}

/// Undirected graph in compressed adjacency form: the neighbours of `v` are
/// `adj[xadj[v]..xadj[v + 1]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrGraph {
    /// Offsets, `n + 1` entries.
    pub xadj: Vec<usize>,
    /// Neighbours.
    pub adj: Vec<u32>,
}

impl CsrGraph {
    /// Number of vertices.
    pub fn len(&self) -> usize {
        self.xadj.len().saturating_sub(1)
    }

    /// Whether there are no vertices.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn neighbours(&self, v: usize) -> &[u32] {
        &self.adj[self.xadj[v]..self.xadj[v + 1]]
    }

    /// The graph on `n` vertices whose edges join every two distinct vertices listed in one
    /// row of `rows` (rows of `arity` entries; e.g. the nodes of each edge or cell).
    pub fn from_rows(n: usize, rows: &[(&[u32], usize)]) -> CsrGraph {
        let mut lists: Vec<Vec<u32>> = vec![Vec::new(); n];
        for &(values, arity) in rows {
            for row in values.chunks(arity) {
                for (i, &a) in row.iter().enumerate() {
                    for &b in &row[i + 1..] {
                        if a != b {
                            lists[a as usize].push(b);
                            lists[b as usize].push(a);
                        }
                    }
                }
            }
        }
        let mut xadj = Vec::with_capacity(n + 1);
        let mut adj = Vec::new();
        xadj.push(0);
        for mut l in lists {
            l.sort_unstable();
            l.dedup();
            adj.extend(l);
            xadj.push(adj.len());
        }
        CsrGraph { xadj, adj }
    }

    /// Edges whose ends lie in different parts.
    pub fn edge_cut(&self, part: &[u32]) -> usize {
        (0..self.len())
            .map(|v| {
                self.neighbours(v)
                    .iter()
                    .filter(|&&u| (u as usize) > v && part[u as usize] != part[v])
                    .count()
            })
            .sum()
    }
}

/// Partitions the vertices of `g` into `nparts` parts of sizes differing by at most about 3 %
/// (exactly balanced before refinement), minimising the edge cut by recursive bisection.
///
/// Complexity: O((V + E) log nparts) per refinement pass.
pub fn partition_graph(g: &CsrGraph, nparts: usize) -> Vec<u32> {
    let n = g.len();
    let mut part = vec![0u32; n];
    if nparts <= 1 || n == 0 {
        return part;
    }
    let mut side = vec![u8::MAX; n];
    let verts: Vec<u32> = (0..n as u32).collect();
    bisect_rec(g, verts, 0, nparts, &mut part, &mut side);
    part
}

fn bisect_rec(
    g: &CsrGraph,
    verts: Vec<u32>,
    first: u32,
    nparts: usize,
    part: &mut [u32],
    side: &mut [u8],
) {
    if nparts == 1 {
        verts.iter().for_each(|&v| part[v as usize] = first);
        return;
    }
    let left_parts = nparts / 2;
    let target = verts.len() * left_parts / nparts;
    bisect(g, &verts, target, side);
    let (left, right): (Vec<u32>, Vec<u32>) = verts.iter().partition(|&&v| side[v as usize] == 0);
    verts.iter().for_each(|&v| side[v as usize] = u8::MAX);
    bisect_rec(g, left, first, left_parts, part, side);
    bisect_rec(
        g,
        right,
        first + left_parts as u32,
        nparts - left_parts,
        part,
        side,
    );
}

impl CsrGraph {
    /// Every vertex in breadth-first order, each component from a pseudo-peripheral vertex
    /// (the last vertex of a breadth-first search from its lowest vertex), so that
    /// consecutive vertices are near each other in the graph: the locality order of
    /// [`Backend::Threads`](super::Backend::Threads).
    ///
    /// Complexity: O(n + edges).
    pub(crate) fn bfs_order(&self) -> Vec<u32> {
        let n = self.len();
        let side = vec![0u8; n];
        let mut seen = vec![0u32; n];
        let mut placed = vec![false; n];
        let mut order = Vec::with_capacity(n);
        let mut stamp = 0;
        for v in 0..n {
            if placed[v] {
                continue;
            }
            stamp += 1;
            let far = *bfs(self, v as u32, &side, 0, &mut seen, stamp)
                .last()
                .expect("start");
            stamp += 1;
            let component = bfs(self, far, &side, 0, &mut seen, stamp);
            component.iter().for_each(|&u| placed[u as usize] = true);
            order.extend(component);
        }
        order
    }
}

/// Breadth-first order of the subgraph on the vertices with `side == mark`, from `start`
/// (only its component).
fn bfs(g: &CsrGraph, start: u32, side: &[u8], mark: u8, seen: &mut [u32], stamp: u32) -> Vec<u32> {
    let mut order = vec![start];
    seen[start as usize] = stamp;
    let mut q = VecDeque::from([start]);
    while let Some(v) = q.pop_front() {
        for &u in g.neighbours(v as usize) {
            if side[u as usize] == mark && seen[u as usize] != stamp {
                seen[u as usize] = stamp;
                order.push(u);
                q.push_back(u);
            }
        }
    }
    order
}

/// Marks `side[v] = 0` for `target` vertices of `verts` and 1 for the others.
fn bisect(g: &CsrGraph, verts: &[u32], target: usize, side: &mut [u8]) {
    const FREE: u8 = 2;
    verts.iter().for_each(|&v| side[v as usize] = FREE);
    let mut seen = vec![0u32; g.len()];
    let mut stamp = 0;
    let mut taken = 0;
    let mut cursor = 0;
    while taken < target {
        while side[verts[cursor] as usize] != FREE {
            cursor += 1;
        }
        // Pseudo-peripheral start of this component: the last vertex of a BFS.
        stamp += 1;
        let far = *bfs(g, verts[cursor], side, FREE, &mut seen, stamp)
            .last()
            .expect("start");
        stamp += 1;
        for v in bfs(g, far, side, FREE, &mut seen, stamp) {
            if taken == target {
                break;
            }
            side[v as usize] = 0;
            taken += 1;
        }
    }
    for &v in verts {
        if side[v as usize] == FREE {
            side[v as usize] = 1;
        }
    }
    refine(g, verts, target, side);
}

/// Greedy boundary refinement: moves vertices whose move lowers the cut, keeping side 0
/// within 3 % (at least one vertex) of `target`.
fn refine(g: &CsrGraph, verts: &[u32], target: usize, side: &mut [u8]) {
    let slack = (verts.len() * 3 / 100).max(1);
    let mut size0 = verts.iter().filter(|&&v| side[v as usize] == 0).count();
    for _ in 0..4 {
        let mut moved = 0;
        for &v in verts {
            let s = side[v as usize];
            let (mut same, mut other) = (0i64, 0i64);
            for &u in g.neighbours(v as usize) {
                match side[u as usize] {
                    x if x == s => same += 1,
                    x if x == 1 - s => other += 1,
                    _ => {}
                }
            }
            if other <= same {
                continue;
            }
            let new0 = if s == 0 { size0 - 1 } else { size0 + 1 };
            if new0.abs_diff(target) > slack {
                continue;
            }
            side[v as usize] = 1 - s;
            size0 = new0;
            moved += 1;
        }
        if moved == 0 {
            break;
        }
    }
}

/// Partitions the vertices of `g` into `nparts` parts with METIS's multilevel k-way scheme
/// (`METIS_PartGraphKway`, default options: 3 % imbalance, edge-cut objective, fixed seed, so
/// every rank computes the same partition).
///
/// METIS's random number generator is process-global, so calls are serialised by a lock:
/// ranks that are threads of one process then compute the same partition too.
///
/// # Errors
/// [`UnstructuredError::Partition`] when the graph does not fit METIS's 32-bit indices or
/// METIS reports an error.
#[cfg(feature = "metis")]
pub fn partition_metis(g: &CsrGraph, nparts: usize) -> Result<Vec<u32>> {
    let n = g.len();
    if nparts <= 1 || n == 0 {
        return Ok(vec![0; n]);
    }
    let err = |detail: String| UnstructuredError::Partition { detail };
    let idx = |x: usize| {
        metis::Idx::try_from(x).map_err(|_| err(format!("{x} exceeds METIS's 32-bit indices")))
    };
    let xadj = g.xadj.iter().map(|&x| idx(x)).collect::<Result<Vec<_>>>()?;
    let adj = g
        .adj
        .iter()
        .map(|&x| idx(x as usize))
        .collect::<Result<Vec<_>>>()?;
    let mut part = vec![0 as metis::Idx; n];
    static METIS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = METIS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    metis::Graph::new(1, idx(nparts)?, &xadj, &adj)
        .map_err(|e| err(e.to_string()))?
        .part_kway(&mut part)
        .map_err(|e| err(e.to_string()))?;
    Ok(part.into_iter().map(|p| p as u32).collect())
}

/// Partitions points (`dim` coordinates each) into `nparts` parts by recursive coordinate
/// bisection: each step cuts across the widest extent at the point that splits the count in
/// proportion to the parts on each side.
///
/// Complexity: O(n log nparts) expected.
pub fn partition_rcb(coords: &[f64], dim: usize, nparts: usize) -> Vec<u32> {
    let n = coords.len().checked_div(dim).unwrap_or(0);
    let mut part = vec![0u32; n];
    let mut idx: Vec<u32> = (0..n as u32).collect();
    rcb_rec(coords, dim, &mut idx, 0, nparts.max(1), &mut part);
    part
}

fn rcb_rec(c: &[f64], dim: usize, idx: &mut [u32], first: u32, nparts: usize, part: &mut [u32]) {
    if nparts == 1 || idx.len() <= 1 {
        idx.iter().for_each(|&v| part[v as usize] = first);
        return;
    }
    let axis = (0..dim)
        .max_by(|&a, &b| {
            let ext = |k: usize| {
                let (lo, hi) =
                    idx.iter()
                        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                            let x = c[v as usize * dim + k];
                            (lo.min(x), hi.max(x))
                        });
                hi - lo
            };
            ext(a).total_cmp(&ext(b))
        })
        .unwrap_or(0);
    let left_parts = nparts / 2;
    let k = idx.len() * left_parts / nparts;
    let key = |v: &u32| (c[*v as usize * dim + axis], *v);
    idx.select_nth_unstable_by(k, |a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.total_cmp(&kb.0).then(ka.1.cmp(&kb.1))
    });
    let (l, r) = idx.split_at_mut(k);
    rcb_rec(c, dim, l, first, left_parts, part);
    rcb_rec(
        c,
        dim,
        r,
        first + left_parts as u32,
        nparts - left_parts,
        part,
    );
}

#[cfg(test)]
mod tests;
