use super::*;

/// A `w × h` grid graph (4-neighbour).
fn grid(w: usize, h: usize) -> CsrGraph {
    let mut rows = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let v = (y * w + x) as u32;
            if x + 1 < w {
                rows.extend([v, v + 1]);
            }
            if y + 1 < h {
                rows.extend([v, v + w as u32]);
            }
        }
    }
    CsrGraph::from_rows(w * h, &[(&rows, 2)])
}

#[test]
fn grid_bisection_cuts_near_the_optimum() {
    // 64 × 32: the best bisection cuts 32 edges; a random one cuts about half of 4000.
    let g = grid(64, 32);
    let p = partition_graph(&g, 2);
    let sizes = [0, 1].map(|k| p.iter().filter(|&&x| x == k).count());
    assert!(
        sizes
            .iter()
            .all(|&s| s.abs_diff(1024) <= 1024 * 3 / 100 + 1),
        "{sizes:?}"
    );
    let cut = g.edge_cut(&p);
    assert!(cut <= 2 * 32, "cut {cut}");
}

#[test]
fn four_parts_balanced_and_every_vertex_assigned() {
    let g = grid(40, 40);
    let p = partition_graph(&g, 4);
    for k in 0..4 {
        let s = p.iter().filter(|&&x| x == k).count();
        assert!(s.abs_diff(400) <= 40, "part {k}: {s}");
    }
    // Four quadrant-like parts cut about 80 edges; allow 2×.
    assert!(g.edge_cut(&p) <= 160, "cut {}", g.edge_cut(&p));
}

#[test]
fn disconnected_graphs_are_partitioned_too() {
    // Two separate 10 × 10 grids plus isolated vertices.
    let a = grid(10, 10);
    let mut rows: Vec<u32> = Vec::new();
    for v in 0..100 {
        for &u in &a.adj[a.xadj[v]..a.xadj[v + 1]] {
            rows.extend([v as u32, u, v as u32 + 100, u + 100]);
        }
    }
    let g = CsrGraph::from_rows(210, &[(&rows, 2)]);
    let p = partition_graph(&g, 3);
    assert_eq!(p.len(), 210);
    for k in 0..3 {
        let s = p.iter().filter(|&&x| x == k).count();
        assert!(s.abs_diff(70) <= 7, "part {k}: {s}");
    }
}

#[test]
fn rcb_splits_along_the_widest_axis() {
    // Points on a 8 × 2 line of x: two parts split at x = 4.
    let mut c = Vec::new();
    for y in 0..2 {
        for x in 0..8 {
            c.extend([x as f64, y as f64]);
        }
    }
    let p = partition_rcb(&c, 2, 2);
    for (i, pt) in c.chunks(2).enumerate() {
        assert_eq!(p[i], if pt[0] < 4.0 { 0 } else { 1 });
    }
    let p3 = partition_rcb(&c, 2, 3);
    let sizes: Vec<usize> = (0..3)
        .map(|k| p3.iter().filter(|&&x| x == k).count())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 16);
    assert!(sizes.iter().all(|&s| (5..=6).contains(&s)), "{sizes:?}");
}

#[cfg(feature = "metis")]
#[test]
fn metis_partitions_a_grid_balanced_with_a_small_cut() {
    let g = grid(64, 32);
    for nparts in [2usize, 3, 4] {
        let p = partition_metis(&g, nparts).unwrap();
        assert_eq!(p.len(), 64 * 32);
        let ideal = 64 * 32 / nparts;
        for k in 0..nparts as u32 {
            let s = p.iter().filter(|&&x| x == k).count();
            assert!(
                s.abs_diff(ideal) <= ideal * 5 / 100,
                "{nparts} parts, part {k}: {s}"
            );
        }
        // A bisection of 64 × 32 cuts 32 edges; k parts about (k - 1) × 32; allow 2×.
        let cut = g.edge_cut(&p);
        assert!(cut <= 2 * 32 * (nparts - 1), "{nparts} parts: cut {cut}");
    }
    assert_eq!(partition_metis(&g, 1).unwrap(), vec![0; 64 * 32]);
}
