//! Evaluating choices of a [`StrategyGraph`] without the solver: validation, time and memory
//! of a choice, bounds, and the exhaustive reference the tests compare the ILP against.

use super::{IlpObjective, StrategyEdge, StrategyGraph};
use crate::error::{PlanError, Result};

impl StrategyGraph {
    /// Checks that every node has ≥ 1 strategy with matching cost vectors, copies ≥ 1, and that
    /// edges reference existing nodes with matrices of the right size and finite costs.
    pub fn validate(&self) -> Result<()> {
        for n in &self.nodes {
            if n.time.is_empty() || n.time.len() != n.memory.len() || n.copies == 0 {
                return Err(PlanError::InvalidGraph(format!(
                    "node `{}` needs ≥ 1 strategy, equal-length time/memory and copies ≥ 1",
                    n.name
                )));
            }
            if n.time.iter().any(|t| !t.is_finite() || *t < 0.0) {
                return Err(PlanError::InvalidGraph(format!(
                    "node `{}` has a bad time",
                    n.name
                )));
            }
        }
        for t in &self.memory_terms {
            let fits = |table: &[Vec<u64>]| {
                table.is_empty()
                    || (table.len() == self.nodes.len()
                        && table
                            .iter()
                            .zip(&self.nodes)
                            .all(|(r, n)| r.len() == n.time.len()))
            };
            if !fits(&t.sum) || !fits(&t.largest) {
                return Err(PlanError::InvalidGraph(format!(
                    "memory term `{}` needs one value per node and strategy",
                    t.name
                )));
            }
        }
        for (k, e) in self.edges.iter().enumerate() {
            let (Some(u), Some(v)) = (self.nodes.get(e.from), self.nodes.get(e.to)) else {
                return Err(PlanError::InvalidGraph(format!(
                    "edge {k} names a missing node"
                )));
            };
            let maps_ok = (e.from_class.is_empty() || e.from_class.len() == u.time.len())
                && (e.to_class.is_empty() || e.to_class.len() == v.time.len());
            let (cu, cv) = (
                StrategyEdge::classes(&e.from_class, u.time.len()),
                StrategyEdge::classes(&e.to_class, v.time.len()),
            );
            if e.from == e.to || e.copies == 0 || !maps_ok || e.cost.len() != cu * cv {
                return Err(PlanError::InvalidGraph(format!(
                    "edge {k} ({} → {}) needs distinct ends, copies ≥ 1, class maps per strategy and a {cu}×{cv} matrix",
                    u.name, v.name
                )));
            }
            if e.cost.iter().any(|t| !t.is_finite() || *t < 0.0) {
                return Err(PlanError::InvalidGraph(format!("edge {k} has a bad cost")));
            }
        }
        Ok(())
    }

    /// Variables and constraints of the ILP of `self` for `objective`: one binary per strategy
    /// and one product per pair of edge classes; one row per node, per edge one plus one per
    /// class on each side, and the bound row of the objective, if any; plus the memory terms'
    /// columns and rows.
    pub fn formulation_size(&self, objective: IlpObjective) -> (usize, usize) {
        let strategies: usize = self.nodes.iter().map(|n| n.time.len()).sum();
        let products: usize = self.edges.iter().map(|e| e.cost.len()).sum();
        let edge_rows: usize = self
            .edges
            .iter()
            .map(|e| {
                let (nu, nv) = (self.nodes[e.from].time.len(), self.nodes[e.to].time.len());
                1 + StrategyEdge::classes(&e.from_class, nu)
                    + StrategyEdge::classes(&e.to_class, nv)
            })
            .sum();
        let bound = usize::from(!matches!(
            objective,
            IlpObjective::MinTime {
                memory_budget: None
            }
        ));
        let (term_cols, term_rows) = self.terms_size();
        (
            strategies + products + term_cols,
            self.nodes.len() + edge_rows + bound + term_rows,
        )
    }

    /// Total time of a choice, seconds (copies counted).
    pub fn time_of(&self, choice: &[usize]) -> f64 {
        let nodes: f64 = self
            .nodes
            .iter()
            .zip(choice)
            .map(|(n, &c)| n.copies as f64 * n.time[c])
            .sum();
        let edges: f64 = self
            .edges
            .iter()
            .map(|e| {
                e.copies as f64
                    * e.cost_of(choice[e.from], choice[e.to], self.nodes[e.to].time.len())
            })
            .sum();
        nodes + edges
    }

    /// Total memory of a choice, bytes (copies counted; memory terms and offset included).
    pub fn memory_of(&self, choice: &[usize]) -> u64 {
        self.nodes
            .iter()
            .zip(choice)
            .map(|(n, &c)| n.copies as u64 * n.memory[c])
            .sum::<u64>()
            + self.term_memory(choice)
    }

    /// A lower bound on the time of any choice, seconds: each node's edges are charged to their
    /// consumer, and every node takes the strategy minimising its own time plus, per incoming
    /// edge, the cheapest resharding into that strategy. The outer search skips candidates whose
    /// bound already exceeds what it needs.
    pub fn time_lower_bound(&self) -> f64 {
        self.time_with_cheapest_inputs(&self.all_strategies())
            .iter()
            .map(|v| v.iter().copied().fold(f64::INFINITY, f64::min))
            .sum()
    }

    /// A lower bound on the memory of any choice, bytes: each node at its leanest strategy
    /// (with what the linear memory terms add to it), plus the offset; exact when every memory
    /// term is linear, where memory is separable per node.
    pub fn min_memory(&self) -> u64 {
        let extra = self.linear_term_memory();
        self.nodes
            .iter()
            .zip(&extra)
            .map(|(n, x)| {
                n.memory
                    .iter()
                    .zip(x)
                    .map(|(&m, &e)| n.copies as u64 * m + e as u64)
                    .min()
                    .unwrap_or(0)
            })
            .sum::<u64>()
            + self.memory_offset
    }

    /// Exhaustive reference: the best choice for `objective` by enumerating every combination
    /// (exponential; for tests on graphs of a few nodes). `None` when no choice is feasible.
    pub fn brute_force(&self, objective: IlpObjective) -> Option<(Vec<usize>, f64)> {
        let mut choice = vec![0usize; self.nodes.len()];
        let mut best: Option<(Vec<usize>, f64)> = None;
        loop {
            let (time, mem) = (self.time_of(&choice), self.memory_of(&choice) as f64);
            let value = match objective {
                IlpObjective::MinTime { memory_budget } => {
                    memory_budget.is_none_or(|b| mem <= b).then_some(time)
                }
                IlpObjective::MinMemory { time_limit } => (time <= time_limit).then_some(mem),
            };
            if let Some(v) = value {
                if best.as_ref().is_none_or(|(_, b)| v < *b) {
                    best = Some((choice.clone(), v));
                }
            }
            // Odometer increment.
            let mut k = 0;
            loop {
                if k == choice.len() {
                    return best;
                }
                choice[k] += 1;
                if choice[k] < self.nodes[k].time.len() {
                    break;
                }
                choice[k] = 0;
                k += 1;
            }
        }
    }
}
