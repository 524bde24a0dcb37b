//! OP2's Airfoil grid format (`new_grid.dat`), read and written exactly as OP2 reads it, and a
//! generator of Airfoil-style meshes of any size.
//!
//! The format, whitespace-separated with 0-based indices:
//!
//! ```text
//! nnode ncell nedge nbedge
//! x y                      (nnode lines)
//! n0 n1 n2 n3              (ncell lines: cell → 4 nodes, counter-clockwise)
//! n0 n1 c0 c1              (nedge lines: edge → 2 nodes, edge → 2 cells)
//! n0 n1 c0 bound           (nbedge lines: boundary edge → 2 nodes, → 1 cell, 1 = wall)
//! ```
//!
//! Edge orientation, as OP2's `res_calc` assumes: with `d = x[n0] - x[n1]`, the normal
//! `(d.y, -d.x)` points out of `c0` (into `c1`; out of the domain for a boundary edge).

use std::f64::consts::PI;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::context::{MapDecl, SetDecl};
use super::error::{Result, UnstructuredError};
use super::renumber::{invert, locality_order};

/// An Airfoil mesh: nodes with coordinates, quadrilateral cells, interior edges and boundary
/// edges, with the maps between them (OP2's `new_grid.dat` contents). The default is the
/// empty grid: what a rank without the mesh file passes when the mesh is scattered from
/// another (`DistConfig::scatter_from`, feature `distributed`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Grid {
    /// Node coordinates, `2 × nnode`.
    pub x: Vec<f64>,
    /// Cell → 4 nodes.
    pub cell: Vec<u32>,
    /// Edge → 2 nodes.
    pub edge: Vec<u32>,
    /// Edge → 2 cells.
    pub ecell: Vec<u32>,
    /// Boundary edge → 2 nodes.
    pub bedge: Vec<u32>,
    /// Boundary edge → 1 cell.
    pub becell: Vec<u32>,
    /// Boundary kind per boundary edge: 1 wall, 0 far field.
    pub bound: Vec<i64>,
}

impl Grid {
    /// Number of nodes.
    pub fn nnode(&self) -> usize {
        self.x.len() / 2
    }
    /// Number of cells.
    pub fn ncell(&self) -> usize {
        self.cell.len() / 4
    }
    /// Number of interior edges.
    pub fn nedge(&self) -> usize {
        self.edge.len() / 2
    }
    /// Number of boundary edges.
    pub fn nbedge(&self) -> usize {
        self.becell.len()
    }

    /// Reads a grid file.
    ///
    /// # Errors
    /// [`UnstructuredError::Io`], or [`UnstructuredError::MalformedFile`] naming the line.
    pub fn read(path: &Path) -> Result<Grid> {
        let text = std::fs::read_to_string(path).map_err(|source| UnstructuredError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Grid::parse(&text, &path.display().to_string())
    }

    /// Parses the text of a grid file; `path` only names it in errors.
    pub fn parse(text: &str, path: &str) -> Result<Grid> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let bad = |line: usize, detail: String| UnstructuredError::MalformedFile {
            path: path.to_string(),
            line: line + 1,
            detail,
        };
        let mut next = |what: &str, count: usize| -> Result<(usize, Vec<&str>)> {
            let (no, l) = lines
                .next()
                .ok_or_else(|| UnstructuredError::MalformedFile {
                    path: path.to_string(),
                    line: text.lines().count() + 1,
                    detail: format!("file ends before {what}"),
                })?;
            let tokens: Vec<&str> = l.split_whitespace().collect();
            if tokens.len() != count {
                return Err(bad(
                    no,
                    format!("{what}: expected {count} numbers, found {}", tokens.len()),
                ));
            }
            Ok((no, tokens))
        };
        let int = |no: usize, t: &str, what: &str| -> Result<usize> {
            t.parse::<usize>()
                .map_err(|_| bad(no, format!("{what}: `{t}` is not a non-negative integer")))
        };
        let (no, h) = next("the header `nnode ncell nedge nbedge`", 4)?;
        let n: Vec<usize> = h
            .iter()
            .map(|t| int(no, t, "header"))
            .collect::<Result<_>>()?;
        let (nnode, ncell, nedge, nbedge) = (n[0], n[1], n[2], n[3]);
        if n.iter().any(|&v| v > u32::MAX as usize) {
            return Err(bad(no, "header: a count exceeds u32".into()));
        }
        // One line per node, cell, edge and boundary edge: a header that declares more lines
        // than the text holds is a truncated file, found before anything is allocated for it.
        let declared = n.iter().sum::<usize>();
        let held = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count()
            .saturating_sub(1);
        if declared > held {
            return Err(bad(
                text.lines().count(),
                format!("file ends early: the header declares {declared} lines of data, it holds {held}"),
            ));
        }
        let mut g = Grid {
            x: Vec::with_capacity(2 * nnode),
            cell: Vec::with_capacity(4 * ncell),
            edge: Vec::with_capacity(2 * nedge),
            ecell: Vec::with_capacity(2 * nedge),
            bedge: Vec::with_capacity(2 * nbedge),
            becell: Vec::with_capacity(nbedge),
            bound: Vec::with_capacity(nbedge),
        };
        let index = |no: usize, t: &str, what: &str, limit: usize, set: &str| -> Result<u32> {
            let v = int(no, t, what)?;
            if v >= limit {
                return Err(bad(
                    no,
                    format!("{what}: index {v} out of range ({set} has {limit})"),
                ));
            }
            Ok(v as u32)
        };
        for _ in 0..nnode {
            let (no, t) = next("a node line `x y`", 2)?;
            for v in t {
                g.x.push(
                    v.parse::<f64>()
                        .map_err(|_| bad(no, format!("node coordinate `{v}` is not a number")))?,
                );
            }
        }
        for _ in 0..ncell {
            let (no, t) = next("a cell line `n0 n1 n2 n3`", 4)?;
            for v in t {
                g.cell.push(index(no, v, "cell node", nnode, "nnode")?);
            }
        }
        for _ in 0..nedge {
            let (no, t) = next("an edge line `n0 n1 c0 c1`", 4)?;
            g.edge.push(index(no, t[0], "edge node", nnode, "nnode")?);
            g.edge.push(index(no, t[1], "edge node", nnode, "nnode")?);
            g.ecell.push(index(no, t[2], "edge cell", ncell, "ncell")?);
            g.ecell.push(index(no, t[3], "edge cell", ncell, "ncell")?);
        }
        for _ in 0..nbedge {
            let (no, t) = next("a boundary edge line `n0 n1 c0 bound`", 4)?;
            g.bedge
                .push(index(no, t[0], "boundary edge node", nnode, "nnode")?);
            g.bedge
                .push(index(no, t[1], "boundary edge node", nnode, "nnode")?);
            g.becell
                .push(index(no, t[2], "boundary edge cell", ncell, "ncell")?);
            g.bound.push(
                t[3].parse::<i64>()
                    .map_err(|_| bad(no, format!("boundary flag `{}` is not an integer", t[3])))?,
            );
        }
        if let Some((no, _)) = lines.next() {
            return Err(bad(
                no,
                "unexpected data after the last boundary edge".into(),
            ));
        }
        Ok(g)
    }

    /// The grid as the text of a `new_grid.dat` file.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(40 * (self.nnode() + self.ncell() + self.nedge()));
        let _ = writeln!(
            s,
            "{} {} {} {}",
            self.nnode(),
            self.ncell(),
            self.nedge(),
            self.nbedge()
        );
        for p in self.x.chunks(2) {
            let _ = writeln!(s, "{:e} {:e}", p[0], p[1]);
        }
        for c in self.cell.chunks(4) {
            let _ = writeln!(s, "{} {} {} {}", c[0], c[1], c[2], c[3]);
        }
        for (e, c) in self.edge.chunks(2).zip(self.ecell.chunks(2)) {
            let _ = writeln!(s, "{} {} {} {}", e[0], e[1], c[0], c[1]);
        }
        for ((e, c), b) in self.bedge.chunks(2).zip(&self.becell).zip(&self.bound) {
            let _ = writeln!(s, "{} {} {} {}", e[0], e[1], c, b);
        }
        s
    }

    /// Writes the grid file.
    pub fn write(&self, path: &Path) -> Result<()> {
        std::fs::write(path, self.to_text()).map_err(|source| UnstructuredError::Io {
            path: path.display().to_string(),
            source,
        })
    }

    /// An Airfoil-style O-mesh of about `cells` quadrilaterals (at least 32): structured quads
    /// around an ellipse of chord 1 and thickness 12 %, stretched geometrically to a far-field
    /// circle of radius 20, with nodes, cells, edges and boundary edges each numbered in an order
    /// shuffled by `seed` (so that locality is not free), as OP2's grids are unstructured.
    ///
    /// `ni × nj` cells with `nj = round(sqrt(cells / 4))` layers and `ni = round(cells / nj)`
    /// around the body.
    pub fn generate(cells: usize, seed: u64) -> Result<Grid> {
        if cells < 32 {
            return Err(UnstructuredError::InvalidDeclaration {
                name: "generated grid".into(),
                detail: format!("{cells} cells; at least 32"),
            });
        }
        let nj = ((cells as f64 / 4.0).sqrt().round() as usize).max(2);
        let ni = ((cells as f64 / nj as f64).round() as usize).max(8);
        let node = |i: usize, j: usize| (j * ni + i % ni) as u32;
        let cell = |i: usize, j: usize| (j * ni + (i + ni) % ni) as u32;
        let (radius, growth) = (20.0f64, 1.0 + 6.0 / nj as f64);
        let mut x = Vec::with_capacity(2 * ni * (nj + 1));
        for j in 0..=nj {
            let s = (growth.powi(j as i32) - 1.0) / (growth.powi(nj as i32) - 1.0);
            for i in 0..ni {
                let t = 2.0 * PI * i as f64 / ni as f64;
                let (bx, by) = (0.5 * t.cos(), 0.06 * t.sin());
                x.push((1.0 - s) * bx + s * radius * t.cos());
                x.push((1.0 - s) * by + s * radius * t.sin());
            }
        }
        let mut g = Grid {
            x,
            cell: vec![],
            edge: vec![],
            ecell: vec![],
            bedge: vec![],
            becell: vec![],
            bound: vec![],
        };
        for j in 0..nj {
            for i in 0..ni {
                g.cell.extend([
                    node(i, j),
                    node(i, j + 1),
                    node(i + 1, j + 1),
                    node(i + 1, j),
                ]);
            }
        }
        for j in 0..nj {
            for i in 0..ni {
                // Ray i between cells (i, j) and (i - 1, j).
                g.edge.extend([node(i, j + 1), node(i, j)]);
                g.ecell.extend([cell(i, j), cell(i + ni - 1, j)]);
                if j > 0 {
                    // Ring j between cells (i, j) and (i, j - 1).
                    g.edge.extend([node(i, j), node(i + 1, j)]);
                    g.ecell.extend([cell(i, j), cell(i, j - 1)]);
                }
            }
        }
        for i in 0..ni {
            g.bedge.extend([node(i, 0), node(i + 1, 0)]);
            g.becell.push(cell(i, 0));
            g.bound.push(1);
        }
        for i in 0..ni {
            g.bedge.extend([node(i + 1, nj), node(i, nj)]);
            g.becell.push(cell(i, nj - 1));
            g.bound.push(0);
        }
        g.shuffle(seed);
        Ok(g)
    }

    /// Renumbers every set by a random permutation drawn from `seed`.
    fn shuffle(&mut self, seed: u64) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut perm = |n: usize| {
            let mut p: Vec<u32> = (0..n as u32).collect();
            p.shuffle(&mut rng);
            p
        };
        let (pn, pc, pe, pb) = (
            perm(self.nnode()),
            perm(self.ncell()),
            perm(self.nedge()),
            perm(self.nbedge()),
        );
        self.permute(&pn, &pc, &pe, &pb);
    }

    /// Checks that the fields fit together, as [`Grid::parse`] guarantees for a file and a
    /// hand-built grid may not: whole rows (2 coordinates per node, 4 nodes per cell, 2 nodes
    /// and 2 cells per edge, 2 nodes, 1 cell and 1 flag per boundary edge) and every index
    /// inside its set.
    ///
    /// # Errors
    /// [`UnstructuredError::InvalidDeclaration`] naming the field whose length does not fit,
    /// [`UnstructuredError::MapOutOfRange`] naming the first index outside its set.
    pub fn validate(&self) -> Result<()> {
        let lengths = [
            ("x", self.x.len(), 2, self.x.len() / 2, "2 per node"),
            (
                "cell",
                self.cell.len(),
                4,
                self.cell.len() / 4,
                "4 per cell",
            ),
            (
                "edge",
                self.edge.len(),
                2,
                self.edge.len() / 2,
                "2 per edge",
            ),
            ("ecell", self.ecell.len(), 2, self.nedge(), "2 per edge"),
            (
                "bedge",
                self.bedge.len(),
                2,
                self.nbedge(),
                "2 per boundary edge",
            ),
            (
                "bound",
                self.bound.len(),
                1,
                self.nbedge(),
                "1 per boundary edge",
            ),
        ];
        for (name, len, per, rows, what) in lengths {
            if len != per * rows {
                return Err(UnstructuredError::InvalidDeclaration {
                    name: format!("grid field `{name}`"),
                    detail: format!(
                        "{len} values, expected {what} ({rows} rows as the other fields say)"
                    ),
                });
            }
        }
        let maps: [(&str, &[u32], usize, &str, usize); 5] = [
            ("cell", &self.cell, 4, "nodes", self.nnode()),
            ("edge", &self.edge, 2, "nodes", self.nnode()),
            ("ecell", &self.ecell, 2, "cells", self.ncell()),
            ("bedge", &self.bedge, 2, "nodes", self.nnode()),
            ("becell", &self.becell, 1, "cells", self.ncell()),
        ];
        for (name, values, arity, to, size) in maps {
            super::error::check_map_range(name, values, arity, to, size)?;
        }
        Ok(())
    }

    /// The same mesh in the locality order that the threaded and distributed backends give
    /// Airfoil's declarations (`renumber`: nodes breadth-first, cells, edges and boundary
    /// edges after them), e.g. to time the sequential backend or the C loops without the
    /// cache misses of a shuffled numbering.
    ///
    /// # Errors
    /// As [`Grid::validate`], for a hand-built grid whose fields do not fit together.
    pub fn locality_ordered(&self) -> Result<Grid> {
        self.validate()?;
        let set = |name: &str, size: usize| SetDecl {
            name: name.into(),
            size,
            owned: size,
            exec: size,
            local: size,
        };
        let sets = [
            set("nodes", self.nnode()),
            set("cells", self.ncell()),
            set("edges", self.nedge()),
            set("bedges", self.nbedge()),
        ];
        let map = |from: usize, to: usize, arity: usize, values: &[u32]| MapDecl {
            name: String::new(),
            from,
            to,
            arity,
            values: values.to_vec(),
        };
        let maps = [
            map(1, 0, 4, &self.cell),
            map(2, 0, 2, &self.edge),
            map(2, 1, 2, &self.ecell),
            map(3, 0, 2, &self.bedge),
            map(3, 1, 1, &self.becell),
        ];
        let p: Vec<Vec<u32>> = locality_order(&sets, &maps)
            .iter()
            .map(|o| invert(o))
            .collect();
        let mut g = self.clone();
        g.permute(&p[0], &p[1], &p[2], &p[3]);
        Ok(g)
    }

    /// Renumbers every set: old element `k` becomes `p[k]` of its set's permutation.
    fn permute(&mut self, pn: &[u32], pc: &[u32], pe: &[u32], pb: &[u32]) {
        let mut x = vec![0.0; self.x.len()];
        for (k, &n) in pn.iter().enumerate() {
            x[2 * n as usize..2 * n as usize + 2].copy_from_slice(&self.x[2 * k..2 * k + 2]);
        }
        self.x = x;
        let renum =
            |v: &[u32], p: &[u32]| -> Vec<u32> { v.iter().map(|&i| p[i as usize]).collect() };
        let place = |v: &[u32], arity: usize, p: &[u32]| -> Vec<u32> {
            let mut out = vec![0; v.len()];
            for (k, &n) in p.iter().enumerate() {
                let n = n as usize;
                out[n * arity..(n + 1) * arity].copy_from_slice(&v[k * arity..(k + 1) * arity]);
            }
            out
        };
        self.cell = place(&renum(&self.cell, pn), 4, pc);
        self.edge = place(&renum(&self.edge, pn), 2, pe);
        self.ecell = place(&renum(&self.ecell, pc), 2, pe);
        self.bedge = place(&renum(&self.bedge, pn), 2, pb);
        self.becell = place(&renum(&self.becell, pc), 1, pb);
        let mut bound = vec![0; self.bound.len()];
        for (k, &n) in pb.iter().enumerate() {
            bound[n as usize] = self.bound[k];
        }
        self.bound = bound;
    }
}
