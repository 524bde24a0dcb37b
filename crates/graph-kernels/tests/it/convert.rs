//! petgraph conversions and agreement with petgraph's own BFS.

use graph_kernels::bfs::bfs_serial;
use graph_kernels::convert::{
    from_petgraph, from_petgraph_csr, to_petgraph_csr, to_petgraph_directed, to_petgraph_undirected,
};
use graph_kernels::{generate, GraphBuilder};
use petgraph::visit::Bfs;

#[test]
fn round_trips_through_graph_and_csr() {
    let g = generate::erdos_renyi(300, 900, 2).unwrap();
    let pg = to_petgraph_undirected(&g);
    assert_eq!(
        (pg.node_count(), pg.edge_count() as u64),
        (300, g.num_edges())
    );
    assert_eq!(from_petgraph(&pg).unwrap(), g);
    let csr = to_petgraph_csr(&g);
    assert_eq!(csr.node_count(), 300);
    let back = from_petgraph_csr(&csr).unwrap();
    // A directed petgraph Csr holding both directions reads back as a directed graph.
    assert!(back.is_directed());
    assert!((0..300).all(|v| back.out_neighbors(v) == g.out_neighbors(v)));

    let d = GraphBuilder::new(4)
        .directed(true)
        .edges([(0, 1), (1, 2), (3, 0)])
        .build()
        .unwrap();
    let pd = to_petgraph_directed(&d);
    assert_eq!(from_petgraph(&pd).unwrap(), d);
}

#[test]
fn reached_set_matches_petgraph_bfs() {
    let g = generate::erdos_renyi(2000, 2200, 4).unwrap(); // sparse: several components
    let pg = to_petgraph_undirected(&g);
    let mut bfs = Bfs::new(&pg, petgraph::graph::NodeIndex::new(17));
    let mut reached = vec![false; 2000];
    while let Some(v) = bfs.next(&pg) {
        reached[v.index()] = true;
    }
    let ours = bfs_serial(&g, 17);
    assert!((0..2000u32).all(|v| reached[v as usize] == ours.depth_of(v).is_some()));
    assert!(ours.num_reached() < 2000);
}
