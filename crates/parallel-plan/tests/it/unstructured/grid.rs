use parallel_plan::unstructured::{Grid, UnstructuredError};

#[test]
fn generated_grid_round_trips_through_the_op2_format() {
    let g = Grid::generate(600, 7).unwrap();
    assert_eq!(g.ncell(), g.cell.len() / 4);
    let text = g.to_text();
    let first = text.lines().next().unwrap();
    assert_eq!(
        first,
        format!("{} {} {} {}", g.nnode(), g.ncell(), g.nedge(), g.nbedge())
    );
    let back = Grid::parse(&text, "mem").unwrap();
    assert_eq!(back, g);
    let dir = std::env::temp_dir().join(format!("pardis-grid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("new_grid.dat");
    g.write(&path).unwrap();
    assert_eq!(Grid::read(&path).unwrap(), g);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn generated_grid_is_a_closed_consistent_mesh() {
    let g = Grid::generate(400, 3).unwrap();
    // Every cell has 4 faces: each interior edge counts for 2 cells, each boundary edge for 1.
    let mut faces = vec![0; g.ncell()];
    g.ecell
        .iter()
        .chain(&g.becell)
        .for_each(|&c| faces[c as usize] += 1);
    assert!(faces.iter().all(|&f| f == 4), "cells without 4 faces");
    // Shuffled: cell 0 is not the first of the structured order every time.
    assert_ne!(
        Grid::generate(400, 3).unwrap().cell,
        Grid::generate(400, 4).unwrap().cell
    );
    // Sum of the outward normals (d.y, -d.x), d = x[n0] - x[n1], of every cell is zero.
    let mut sum = vec![[0.0f64; 2]; g.ncell()];
    let x = |n: u32| [g.x[2 * n as usize], g.x[2 * n as usize + 1]];
    for e in 0..g.nedge() {
        let (a, b) = (x(g.edge[2 * e]), x(g.edge[2 * e + 1]));
        let n = [a[1] - b[1], -(a[0] - b[0])];
        for k in 0..2 {
            sum[g.ecell[2 * e] as usize][k] += n[k];
            sum[g.ecell[2 * e + 1] as usize][k] -= n[k];
        }
    }
    for e in 0..g.nbedge() {
        let (a, b) = (x(g.bedge[2 * e]), x(g.bedge[2 * e + 1]));
        let n = [a[1] - b[1], -(a[0] - b[0])];
        for k in 0..2 {
            sum[g.becell[e] as usize][k] += n[k];
        }
    }
    let worst = sum
        .iter()
        .map(|s| s[0].abs().max(s[1].abs()))
        .fold(0.0, f64::max);
    assert!(worst < 1e-12, "open cell: {worst}");
}

#[test]
fn malformed_files_name_the_line() {
    let good = "2 0 1 0\n0 0\n1 1\n0 1 0 0\n";
    // An edge whose cell index is out of range (no cells).
    match Grid::parse(good, "g.dat") {
        Err(UnstructuredError::MalformedFile {
            line: 4, detail, ..
        }) => assert!(detail.contains("out of range"), "{detail}"),
        other => panic!("{other:?}"),
    }
    match Grid::parse("2 0 0 0\n0 0\n1 x\n", "g.dat") {
        Err(UnstructuredError::MalformedFile { line: 3, path, .. }) => assert_eq!(path, "g.dat"),
        other => panic!("{other:?}"),
    }
    match Grid::parse("2 0 0 0\n0 0\n", "g.dat") {
        Err(UnstructuredError::MalformedFile {
            line: 3, detail, ..
        }) => assert!(detail.contains("ends"), "{detail}"),
        other => panic!("{other:?}"),
    }
    match Grid::parse("1 1 0 0\n0 0\n0 0 0\n", "g.dat") {
        Err(UnstructuredError::MalformedFile {
            line: 3, detail, ..
        }) => assert!(detail.contains("expected 4"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Grid::parse("1 0 0 0\n0 0\n5 5\n", "g.dat"),
        Err(UnstructuredError::MalformedFile { line: 3, .. })
    ));
    assert!(matches!(
        Grid::read(std::path::Path::new("/nonexistent/grid.dat")),
        Err(UnstructuredError::Io { .. })
    ));
}

#[test]
fn locality_ordered_grid_is_the_same_mesh_with_near_neighbours() {
    use parallel_plan::unstructured::apps::{airfoil, AirfoilConfig};
    use parallel_plan::unstructured::{Backend, Context};
    let g = Grid::generate(2000, 5).unwrap();
    let o = g.locality_ordered().unwrap();
    assert_eq!(
        (o.nnode(), o.ncell(), o.nedge(), o.nbedge()),
        (g.nnode(), g.ncell(), g.nedge(), g.nbedge())
    );
    // The same geometry per cell (its node coordinates), only renumbered.
    let corners = |m: &Grid| {
        let mut v: Vec<Vec<u64>> = (0..m.ncell())
            .map(|c| {
                m.cell[4 * c..4 * c + 4]
                    .iter()
                    .flat_map(|&n| {
                        [
                            m.x[2 * n as usize].to_bits(),
                            m.x[2 * n as usize + 1].to_bits(),
                        ]
                    })
                    .collect()
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(corners(&o), corners(&g));
    // Neighbouring cells get near numbers: the mean index gap across edges drops far below a
    // shuffled numbering's (about a third of the cells).
    let gap = |m: &Grid| {
        m.ecell
            .chunks(2)
            .map(|p| (p[0] as f64 - p[1] as f64).abs())
            .sum::<f64>()
            / m.nedge() as f64
    };
    assert!(gap(&o) < 0.05 * gap(&g), "{} vs {}", gap(&o), gap(&g));
    // Airfoil's residuals do not depend on the numbering (up to rounding).
    let cfg = AirfoilConfig {
        iterations: 20,
        report_every: 10,
    };
    let a = airfoil(&mut Context::new(Backend::Sequential), &g, &cfg).unwrap();
    let b = airfoil(&mut Context::new(Backend::Sequential), &o, &cfg).unwrap();
    for ((_, x), (_, y)) in a.rms.iter().zip(&b.rms) {
        assert!((x - y).abs() <= 1e-12 * x.abs(), "{x} vs {y}");
    }
}

#[test]
fn an_inconsistent_hand_built_grid_is_a_typed_error_not_a_panic() {
    let g = Grid::generate(200, 3).unwrap();
    assert!(g.validate().is_ok());
    let broken: Vec<(Grid, &str)> = vec![
        (
            Grid {
                x: g.x[..g.x.len() - 1].to_vec(),
                ..g.clone()
            },
            "x",
        ),
        (
            Grid {
                cell: g.cell[..g.cell.len() - 2].to_vec(),
                ..g.clone()
            },
            "cell",
        ),
        (
            Grid {
                ecell: g.ecell[..g.ecell.len() - 2].to_vec(),
                ..g.clone()
            },
            "ecell",
        ),
        (
            Grid {
                bedge: g.bedge[..g.bedge.len() - 2].to_vec(),
                ..g.clone()
            },
            "bedge",
        ),
        (
            Grid {
                bound: vec![],
                ..g.clone()
            },
            "bound",
        ),
        // Fewer nodes than the cells name (the last node's coordinates dropped).
        (
            Grid {
                x: g.x[..g.x.len() - 2].to_vec(),
                ..g.clone()
            },
            "out of range",
        ),
    ];
    for (grid, field) in broken {
        match grid.locality_ordered() {
            Err(UnstructuredError::InvalidDeclaration { name, .. }) => {
                assert!(name.contains(&format!("`{field}`")), "{field}: {name}")
            }
            Err(UnstructuredError::MapOutOfRange { to, to_size, .. }) => {
                assert_eq!(
                    (field, to.as_str(), to_size),
                    ("out of range", "nodes", g.nnode() - 1)
                )
            }
            other => panic!("{field}: {other:?}"),
        }
    }
    let mut far = g.clone();
    far.becell[7] = g.ncell() as u32;
    match far.locality_ordered() {
        Err(UnstructuredError::MapOutOfRange {
            map,
            element: 7,
            slot: 0,
            to_size,
            ..
        }) => {
            assert_eq!((map.as_str(), to_size), ("becell", g.ncell()))
        }
        other => panic!("{other:?}"),
    }
}
