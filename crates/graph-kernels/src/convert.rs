//! Conversions between [`CsrGraph`] and petgraph's `Graph` and `csr::Csr`.

use crate::csr::{CsrGraph, GraphBuilder};
use crate::error::Result;
use petgraph::csr::Csr;
use petgraph::graph::{Graph, IndexType, NodeIndex};
use petgraph::visit::EdgeRef;
use petgraph::{Directed, EdgeType, Undirected};

/// Builds a [`CsrGraph`] from a petgraph [`Graph`] (weights dropped). An undirected `Graph`
/// gives an undirected `CsrGraph`; a directed one a directed `CsrGraph`. Self loops and
/// parallel edges are removed.
///
/// # Errors
/// [`GraphError::TooLarge`](crate::GraphError::TooLarge) if the graph has `u32::MAX` or more
/// nodes.
pub fn from_petgraph<N, E, Ty: EdgeType, Ix: IndexType>(
    graph: &Graph<N, E, Ty, Ix>,
) -> Result<CsrGraph> {
    let edges: Vec<(u32, u32)> = graph
        .edge_references()
        .map(|e| (e.source().index() as u32, e.target().index() as u32))
        .collect();
    GraphBuilder::new(graph.node_count() as u64)
        .directed(Ty::is_directed())
        .edge_vec(edges)
        .build()
}

/// A petgraph [`Graph`] with the same vertices and edges (each undirected edge once).
pub fn to_petgraph_undirected(graph: &CsrGraph) -> Graph<(), (), Undirected, u32> {
    let mut g = Graph::with_capacity(graph.num_vertices() as usize, graph.num_edges() as usize);
    for _ in 0..graph.num_vertices() {
        g.add_node(());
    }
    for (u, v) in graph.arcs().filter(|&(u, v)| graph.is_directed() || u <= v) {
        g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), ());
    }
    g
}

/// A directed petgraph [`Graph`] with one edge per arc of `graph` (both directions for an
/// undirected `graph`).
pub fn to_petgraph_directed(graph: &CsrGraph) -> Graph<(), (), Directed, u32> {
    let mut g = Graph::with_capacity(graph.num_vertices() as usize, graph.num_arcs() as usize);
    for _ in 0..graph.num_vertices() {
        g.add_node(());
    }
    for (u, v) in graph.arcs() {
        g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), ());
    }
    g
}

/// Builds a [`CsrGraph`] from a petgraph [`Csr`] (weights dropped).
///
/// # Errors
/// [`GraphError::TooLarge`](crate::GraphError::TooLarge) if it has `u32::MAX` or more nodes.
pub fn from_petgraph_csr<N, E, Ty: EdgeType, Ix: IndexType>(
    csr: &Csr<N, E, Ty, Ix>,
) -> Result<CsrGraph> {
    let n = csr.node_count();
    let edges: Vec<(u32, u32)> = (0..n)
        .flat_map(|u| {
            csr.neighbors_slice(Ix::new(u))
                .iter()
                .map(move |v| (u as u32, v.index() as u32))
        })
        .collect();
    GraphBuilder::new(n as u64)
        .directed(Ty::is_directed())
        .edge_vec(edges)
        .build()
}

/// A petgraph [`Csr`] holding every arc of `graph` (both directions of undirected edges, as
/// `Csr<_, _, Undirected>` requires), with all vertices including trailing isolated ones.
pub fn to_petgraph_csr(graph: &CsrGraph) -> Csr<(), (), Directed, u32> {
    let arcs: Vec<(u32, u32)> = graph.arcs().collect();
    let mut csr: Csr<(), (), Directed, u32> =
        Csr::from_sorted_edges(&arcs).expect("CsrGraph arcs are sorted and unique");
    while csr.node_count() < graph.num_vertices() as usize {
        csr.add_node(());
    }
    csr
}
