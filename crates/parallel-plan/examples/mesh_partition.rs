//! Edge cut and time of the partitioners of distributed runs (METIS k-way, the built-in
//! recursive graph bisection, recursive coordinate bisection) on a generated Airfoil mesh's
//! node graph (the primary set of Airfoil: two nodes adjacent when a cell, edge or boundary
//! edge holds both), for 2, 4 and 8 parts; on the mesh as generated (shuffled numbering) and
//! in the locality order that distributed runs partition (they renumber before partitioning,
//! and METIS's and the graph bisection's cuts depend on the numbering).
//!
//! `cargo run --release -p parallel-plan --features metis --example mesh_partition -- [cells]`

use std::time::Instant;

use parallel_plan::unstructured::partition::{
    partition_graph, partition_metis, partition_rcb, CsrGraph,
};
use parallel_plan::unstructured::Grid;

/// A named partitioner run.
type Run<'a> = (&'static str, Box<dyn Fn() -> Vec<u32> + 'a>);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cells: usize = std::env::args().nth(1).map_or(Ok(720_000), |a| a.parse())?;
    let generated = Grid::generate(cells, 1)?;
    let ordered = generated.locality_ordered()?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average before: {}", load.trim());
    for (numbering, grid) in [("generated", &generated), ("locality", &ordered)] {
        partition_all(numbering, grid);
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average after: {}", load.trim());
    Ok(())
}

/// Every partitioner on `grid`'s node graph for 2, 4 and 8 parts.
fn partition_all(numbering: &str, grid: &Grid) {
    let g = CsrGraph::from_rows(
        grid.nnode(),
        &[(&grid.cell, 4), (&grid.edge, 2), (&grid.bedge, 2)],
    );
    println!(
        "{numbering} numbering: {} cells, {} nodes, {} graph edges",
        grid.ncell(),
        grid.nnode(),
        g.adj.len() / 2
    );
    println!(
        "{:>6} {:>8} {:>10} {:>8} {:>10}",
        "parts", "method", "edge cut", "seconds", "imbalance"
    );
    for nparts in [2usize, 4, 8] {
        let runs: Vec<Run<'_>> = vec![
            (
                "metis",
                Box::new(|| partition_metis(&g, nparts).expect("metis")),
            ),
            ("graph", Box::new(|| partition_graph(&g, nparts))),
            ("rcb", Box::new(|| partition_rcb(&grid.x, 2, nparts))),
        ];
        for (name, run) in runs {
            let t = Instant::now();
            let part = run();
            let secs = t.elapsed().as_secs_f64();
            let mut sizes = vec![0usize; nparts];
            part.iter().for_each(|&p| sizes[p as usize] += 1);
            let ideal = grid.nnode() as f64 / nparts as f64;
            let imbalance = *sizes.iter().max().unwrap_or(&0) as f64 / ideal;
            println!(
                "{nparts:>6} {name:>8} {:>10} {secs:>8.3} {imbalance:>10.3}",
                g.edge_cut(&part)
            );
        }
    }
}
