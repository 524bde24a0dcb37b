//! Compressed sparse row graphs with `u32` vertex ids and `u64` edge offsets.

use crate::error::{GraphError, Result};
use crate::teps::InputTuples;
use rayon::prelude::*;

/// Adjacency in CSR form: `targets[offsets[v]..offsets[v + 1]]` are the neighbours of `v`,
/// sorted ascending and free of duplicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjacency {
    offsets: Vec<u64>,
    targets: Vec<u32>,
}

impl Adjacency {
    /// Builds adjacency lists for `num_vertices` vertices from `(source, target)` pairs:
    /// counting sort by source, then each list sorted and deduplicated in parallel.
    pub(crate) fn from_pairs(num_vertices: u32, edges: &[(u32, u32)]) -> Self {
        let n = num_vertices as usize;
        let mut counts = vec![0u64; n + 1];
        for &(u, _) in edges {
            counts[u as usize + 1] += 1;
        }
        for i in 0..n {
            counts[i + 1] += counts[i];
        }
        let mut cursor = counts.clone();
        let mut targets = vec![0u32; edges.len()];
        for &(u, v) in edges {
            let slot = &mut cursor[u as usize];
            targets[*slot as usize] = v;
            *slot += 1;
        }
        let raw = Adjacency {
            offsets: counts,
            targets,
        };
        raw.sorted_dedup()
    }

    /// Wraps arrays that already satisfy the invariants (offsets from 0 to `targets.len()`,
    /// every list sorted and duplicate-free).
    pub(crate) fn from_sorted_parts(offsets: Vec<u64>, targets: Vec<u32>) -> Self {
        debug_assert_eq!(offsets.last().copied(), Some(targets.len() as u64));
        Adjacency { offsets, targets }
    }

    /// Sorts every list and removes duplicate targets, compacting the arrays.
    fn sorted_dedup(mut self) -> Self {
        let n = self.offsets.len() - 1;
        let lists = split_lists(&self.offsets, &mut self.targets);
        let kept: Vec<u64> = lists
            .into_par_iter()
            .map(|list| {
                list.sort_unstable();
                let mut w = 0;
                for r in 0..list.len() {
                    if r == 0 || list[r] != list[w - 1] {
                        list[w] = list[r];
                        w += 1;
                    }
                }
                w as u64
            })
            .collect();
        let mut offsets = vec![0u64; n + 1];
        let mut write = 0usize;
        for v in 0..n {
            let start = self.offsets[v] as usize;
            let len = kept[v] as usize;
            self.targets.copy_within(start..start + len, write);
            write += len;
            offsets[v + 1] = write as u64;
        }
        self.targets.truncate(write);
        self.targets.shrink_to_fit();
        Adjacency {
            offsets,
            targets: self.targets,
        }
    }

    /// Neighbours of `v`.
    #[inline]
    pub fn neighbors(&self, v: u32) -> &[u32] {
        let (s, e) = (
            self.offsets[v as usize] as usize,
            self.offsets[v as usize + 1] as usize,
        );
        &self.targets[s..e]
    }

    /// Number of neighbours of `v`.
    #[inline]
    pub fn degree(&self, v: u32) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// The offsets array (`num_vertices + 1` entries).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The concatenated neighbour lists.
    pub fn targets(&self) -> &[u32] {
        &self.targets
    }
}

/// The mutable list of every vertex: `targets` cut at `offsets` (which start at 0), so the
/// lists can be filled or sorted in parallel.
pub(crate) fn split_lists<'t>(offsets: &[u64], targets: &'t mut [u32]) -> Vec<&'t mut [u32]> {
    let mut lists = Vec::with_capacity(offsets.len().saturating_sub(1));
    let mut rest = targets;
    for bounds in offsets.windows(2) {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut((bounds[1] - bounds[0]) as usize);
        lists.push(head);
        rest = tail;
    }
    lists
}

/// A graph in CSR form. Undirected graphs store every edge in both directions and share one
/// adjacency for in- and out-edges; directed graphs keep a separate in-edge (transpose)
/// adjacency, which bottom-up BFS needs.
///
/// Vertex ids are `u32` (so at most `u32::MAX - 1` vertices: `u32::MAX` marks "none"), edge
/// offsets are `u64`. Lists are sorted and hold no duplicates and no self loops when built
/// through [`GraphBuilder`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsrGraph {
    num_vertices: u32,
    directed: bool,
    out_edges: Adjacency,
    /// `None` for undirected graphs (in-edges are the out-edges).
    in_edges: Option<Adjacency>,
}

impl CsrGraph {
    /// Number of vertices.
    pub fn num_vertices(&self) -> u32 {
        self.num_vertices
    }

    /// Number of stored directed arcs (twice the undirected edge count for undirected graphs).
    pub fn num_arcs(&self) -> u64 {
        self.out_edges.targets.len() as u64
    }

    /// Number of edges: arcs for directed graphs, undirected edges for undirected ones.
    pub fn num_edges(&self) -> u64 {
        if self.directed {
            self.num_arcs()
        } else {
            self.num_arcs() / 2
        }
    }

    /// Whether the graph is directed.
    pub fn is_directed(&self) -> bool {
        self.directed
    }

    /// Out-neighbours of `v` (all neighbours when undirected).
    #[inline]
    pub fn out_neighbors(&self, v: u32) -> &[u32] {
        self.out_edges.neighbors(v)
    }

    /// In-neighbours of `v` (all neighbours when undirected).
    #[inline]
    pub fn in_neighbors(&self, v: u32) -> &[u32] {
        self.in_adjacency().neighbors(v)
    }

    /// Out-degree of `v`.
    #[inline]
    pub fn out_degree(&self, v: u32) -> u64 {
        self.out_edges.degree(v)
    }

    /// In-degree of `v`.
    #[inline]
    pub fn in_degree(&self, v: u32) -> u64 {
        self.in_adjacency().degree(v)
    }

    /// The out-edge adjacency.
    pub fn out_adjacency(&self) -> &Adjacency {
        &self.out_edges
    }

    /// The in-edge adjacency (the out-edge one for undirected graphs).
    pub fn in_adjacency(&self) -> &Adjacency {
        self.in_edges.as_ref().unwrap_or(&self.out_edges)
    }

    /// All arcs `(u, v)` in CSR order.
    pub fn arcs(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.num_vertices).flat_map(move |u| self.out_neighbors(u).iter().map(move |&v| (u, v)))
    }

    /// Largest out-degree (0 for an empty graph).
    pub fn max_out_degree(&self) -> u64 {
        (0..self.num_vertices)
            .into_par_iter()
            .map(|v| self.out_degree(v))
            .max()
            .unwrap_or(0)
    }

    pub(crate) fn from_adjacency(num_vertices: u32, directed: bool, out_edges: Adjacency) -> Self {
        let in_edges = directed.then(|| {
            let reversed: Vec<(u32, u32)> = (0..num_vertices)
                .flat_map(|u| out_edges.neighbors(u).iter().map(move |&v| (v, u)))
                .collect();
            Adjacency::from_pairs(num_vertices, &reversed)
        });
        CsrGraph {
            num_vertices,
            directed,
            out_edges,
            in_edges,
        }
    }
}

/// Builds a [`CsrGraph`] from an edge list.
///
/// Defaults: undirected (every edge is symmetrized), self loops dropped, duplicate edges
/// merged — the form Graph500 and GAPBS search.
///
/// ```
/// use graph_kernels::GraphBuilder;
/// let g = GraphBuilder::new(3).edges([(0, 1), (1, 0), (1, 1), (1, 2)]).build()?;
/// assert_eq!(g.num_edges(), 2); // duplicate (1,0) merged, self loop (1,1) dropped
/// assert_eq!(g.out_neighbors(1), &[0, 2]);
/// # Ok::<(), graph_kernels::GraphError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GraphBuilder {
    num_vertices: u64,
    directed: bool,
    keep_self_loops: bool,
    edges: Vec<(u32, u32)>,
}

impl GraphBuilder {
    /// A builder for a graph on `num_vertices` vertices (ids `0..num_vertices`).
    pub fn new(num_vertices: u64) -> Self {
        GraphBuilder {
            num_vertices,
            directed: false,
            keep_self_loops: false,
            edges: Vec::new(),
        }
    }

    /// Keeps edge directions (default: `false`, edges are symmetrized).
    pub fn directed(mut self, directed: bool) -> Self {
        self.directed = directed;
        self
    }

    /// Keeps self loops (default: `false`, they are dropped; BFS ignores them anyway).
    pub fn keep_self_loops(mut self, keep: bool) -> Self {
        self.keep_self_loops = keep;
        self
    }

    /// Adds edges.
    pub fn edges(mut self, edges: impl IntoIterator<Item = (u32, u32)>) -> Self {
        self.edges.extend(edges);
        self
    }

    /// Adds edges from a vector, reusing its allocation when the builder has none yet.
    pub fn edge_vec(mut self, edges: Vec<(u32, u32)>) -> Self {
        if self.edges.is_empty() {
            self.edges = edges;
        } else {
            self.edges.extend(edges);
        }
        self
    }

    /// Builds the graph and counts the input edge tuples per vertex before self loops and
    /// duplicates are dropped ([`InputTuples`]), so that TEPS can be reported as the Graph500
    /// specification defines it ([`crate::teps::run_teps_graph500`]). The counts cost 8 bytes
    /// per vertex; the edge list itself is not kept.
    ///
    /// ```
    /// use graph_kernels::GraphBuilder;
    /// let (g, tuples) = GraphBuilder::new(3)
    ///     .edges([(0, 1), (1, 0), (1, 1), (1, 2)])
    ///     .build_with_input_tuples()?;
    /// assert_eq!(g.num_edges(), 2);
    /// assert_eq!(tuples.total(), 4); // the duplicate and the self loop are input tuples
    /// # Ok::<(), graph_kernels::GraphError>(())
    /// ```
    ///
    /// # Errors
    /// As [`GraphBuilder::build`].
    pub fn build_with_input_tuples(self) -> Result<(CsrGraph, InputTuples)> {
        // The size is checked before the counts are allocated.
        let n = self.checked_vertices()? as usize;
        let mut degrees = vec![0u64; n];
        let in_range = |v: u32| (v as usize) < n;
        for &(u, v) in &self.edges {
            // Out-of-range ids are reported by `build` below.
            if in_range(u) && in_range(v) {
                degrees[u as usize] += 1;
                if !self.directed {
                    degrees[v as usize] += 1;
                }
            }
        }
        let total = self.edges.len() as u64;
        let directed = self.directed;
        let graph = self.build()?;
        Ok((
            graph,
            InputTuples {
                degrees,
                directed,
                total,
            },
        ))
    }

    /// The vertex count as a `u32`, or [`GraphError::TooLarge`] when ids would not fit.
    fn checked_vertices(&self) -> Result<u32> {
        u32::try_from(self.num_vertices)
            .ok()
            .filter(|&n| n < u32::MAX)
            .ok_or_else(|| {
                GraphError::TooLarge(format!(
                    "{} vertices; at most {} fit u32 ids",
                    self.num_vertices,
                    u32::MAX - 1
                ))
            })
    }

    /// Builds the graph.
    ///
    /// # Errors
    /// [`GraphError::TooLarge`] if there are `u32::MAX` or more vertices,
    /// [`GraphError::InvalidInput`] if an edge names a vertex `>= num_vertices`.
    pub fn build(self) -> Result<CsrGraph> {
        let n = self.checked_vertices()?;
        if let Some(&(u, v)) = self.edges.par_iter().find_any(|&&(u, v)| u >= n || v >= n) {
            return Err(GraphError::InvalidInput(format!(
                "edge ({u}, {v}) names a vertex outside 0..{n}"
            )));
        }
        let mut edges = self.edges;
        if !self.keep_self_loops {
            edges.retain(|&(u, v)| u != v);
        }
        if !self.directed {
            let len = edges.len();
            edges.reserve(len);
            for i in 0..len {
                let (u, v) = edges[i];
                if u != v {
                    edges.push((v, u));
                }
            }
        }
        let out_edges = Adjacency::from_pairs(n, &edges);
        drop(edges);
        Ok(CsrGraph::from_adjacency(n, self.directed, out_edges))
    }
}
