//! The [`MemoryTerm`]s of a [`StrategyGraph`]: their value for a choice, their bounds, and
//! their columns and rows in the HiGHS model (see [`MemoryTerm`] for the linearisation).

use highs::{Col, RowProblem};

use super::{MemoryTerm, StrategyGraph};

/// The value of a per-node table for node `v` under strategy `j` (0 for an empty table).
fn at(table: &[Vec<u64>], v: usize, j: usize) -> u64 {
    table.get(v).map_or(0, |row| row[j])
}

impl MemoryTerm {
    /// Sum and largest value of the term's parts for `choice`.
    fn parts(&self, choice: &[usize]) -> (u64, u64) {
        let sum = choice
            .iter()
            .enumerate()
            .map(|(v, &j)| at(&self.sum, v, j))
            .sum();
        let largest = choice
            .iter()
            .enumerate()
            .map(|(v, &j)| at(&self.largest, v, j))
            .max()
            .unwrap_or(0);
        (sum, largest)
    }

    /// The term's bytes for `choice`.
    pub fn value(&self, choice: &[usize]) -> u64 {
        let (sum, largest) = self.parts(choice);
        let v = sum.max(largest);
        self.cap.map_or(v, |c| v.min(c))
    }

    /// The largest value the term's parts can take (`M` of the linearisation).
    fn part_bound(&self) -> u64 {
        let max_row = |row: &Vec<u64>| row.iter().copied().max().unwrap_or(0);
        let sum: u64 = self.sum.iter().map(max_row).sum();
        let largest = self.largest.iter().map(max_row).max().unwrap_or(0);
        sum.max(largest)
    }

    /// The largest value the term can take.
    pub(super) fn upper_bound(&self) -> u64 {
        let m = self.part_bound();
        self.cap.map_or(m, |c| m.min(c))
    }

    /// Whether the cap can bind (the linearisation needs the binary `z`).
    fn cap_binds(&self) -> bool {
        self.cap.is_some_and(|c| c < self.part_bound())
    }

    /// Nodes with a nonzero largest-value entry (one row each).
    fn largest_rows(&self) -> usize {
        self.largest
            .iter()
            .filter(|row| row.iter().any(|&x| x > 0))
            .count()
    }

    /// Whether the term needs its own columns: it can be nonzero and is not [`linear`]
    /// (a linear term's values go straight onto the strategy columns).
    ///
    /// [`linear`]: MemoryTerm::linear
    fn active(&self) -> bool {
        self.part_bound() > 0 && !self.linear()
    }

    /// A plain sum whose cap cannot bind: the term is linear in the strategy choice, so it
    /// needs no variable of its own (fewer rows, and no rows HiGHS's presolve must strengthen).
    pub(super) fn linear(&self) -> bool {
        self.largest.iter().flatten().all(|&x| x == 0) && !self.cap_binds()
    }

    /// Columns and rows the term adds to the ILP.
    pub(super) fn size(&self) -> (usize, usize) {
        if !self.active() {
            return (0, 0);
        }
        let z = usize::from(self.cap_binds());
        let sum_row = usize::from(self.sum.iter().flatten().any(|&x| x > 0));
        (1 + z, sum_row + self.largest_rows() + z)
    }

    /// The term restricted to the `kept` strategies of each node.
    pub(super) fn restricted(&self, kept: &[Vec<usize>]) -> MemoryTerm {
        let pick = |table: &[Vec<u64>]| -> Vec<Vec<u64>> {
            table
                .iter()
                .zip(kept)
                .map(|(row, k)| k.iter().map(|&j| row[j]).collect())
                .collect()
        };
        MemoryTerm {
            name: self.name.clone(),
            sum: pick(&self.sum),
            largest: pick(&self.largest),
            cap: self.cap,
        }
    }

    /// The values of the term's columns (`t`, then `z` if any) for `choice`.
    fn columns_of(&self, choice: &[usize]) -> Vec<f64> {
        if !self.active() {
            return Vec::new();
        }
        let (sum, largest) = self.parts(choice);
        let v = sum.max(largest);
        let mut cols = vec![self.value(choice) as f64];
        if self.cap_binds() {
            cols.push(if self.cap.is_some_and(|c| v > c) {
                1.0
            } else {
                0.0
            });
        }
        cols
    }

    /// Adds the term's columns and rows to `pb` (`t` in units of `unit` bytes, with objective
    /// coefficient `obj`); returns `t`, or `None` for an inactive term.
    fn add_to(&self, pb: &mut RowProblem, s: &[Vec<Col>], unit: f64, obj: f64) -> Option<Col> {
        if !self.active() {
            return None;
        }
        let t = pb.add_column(obj, 0.0..);
        let m = self.part_bound() as f64 / unit;
        let z = self.cap_binds().then(|| {
            let z = pb.add_integer_column(0.0, 0..=1);
            let cap = self.cap.unwrap_or(0) as f64 / unit;
            pb.add_row(0.0.., [(t, 1.0), (z, -cap)]);
            z
        });
        // t (+ M·z) − Σ value·s ≥ 0 for the sum and for each node's largest value.
        let mut row_of = |table: &[Vec<u64>], nodes: &[usize]| {
            let mut row: Vec<(Col, f64)> = vec![(t, 1.0)];
            if let Some(z) = z {
                row.push((z, m));
            }
            for &v in nodes {
                for (j, &x) in table[v].iter().enumerate() {
                    if x > 0 {
                        row.push((s[v][j], -(x as f64) / unit));
                    }
                }
            }
            pb.add_row(0.0.., row);
        };
        if self.sum.iter().flatten().any(|&x| x > 0) {
            let all: Vec<usize> = (0..self.sum.len()).collect();
            row_of(&self.sum, &all);
        }
        for v in 0..self.largest.len() {
            if self.largest[v].iter().any(|&x| x > 0) {
                row_of(&self.largest, &[v]);
            }
        }
        Some(t)
    }
}

impl StrategyGraph {
    /// Memory of `choice` outside the nodes: the memory terms and the offset, bytes.
    pub(super) fn term_memory(&self, choice: &[usize]) -> u64 {
        self.memory_offset
            + self
                .memory_terms
                .iter()
                .map(|t| t.value(choice))
                .sum::<u64>()
    }

    /// Columns and rows the memory terms add to the ILP.
    pub(super) fn terms_size(&self) -> (usize, usize) {
        self.memory_terms
            .iter()
            .map(MemoryTerm::size)
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }

    /// Values of the memory terms' columns for `choice`, in the order they are added.
    pub(super) fn term_columns_of(&self, choice: &[usize]) -> Vec<f64> {
        self.memory_terms
            .iter()
            .flat_map(|t| t.columns_of(choice))
            .collect()
    }

    /// Per node and strategy, the bytes the linear memory terms add (see
    /// [`MemoryTerm::linear`]); zeros without such terms.
    pub(super) fn linear_term_memory(&self) -> Vec<Vec<f64>> {
        let mut extra: Vec<Vec<f64>> = self.nodes.iter().map(|n| vec![0.0; n.time.len()]).collect();
        for t in self.memory_terms.iter().filter(|t| t.linear()) {
            for (row, values) in extra.iter_mut().zip(&t.sum) {
                for (x, &v) in row.iter_mut().zip(values) {
                    *x += v as f64;
                }
            }
        }
        extra
    }

    /// Adds every non-linear memory term to `pb`; returns their `t` columns.
    pub(super) fn add_terms(
        &self,
        pb: &mut RowProblem,
        s: &[Vec<Col>],
        unit: f64,
        obj: f64,
    ) -> Vec<Col> {
        self.memory_terms
            .iter()
            .filter_map(|t| t.add_to(pb, s, unit, obj))
            .collect()
    }
}
