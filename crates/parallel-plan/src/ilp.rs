//! The strategy-selection integer linear program (Alpa's formulation, Zheng et al., OSDI 2022,
//! §4.2), solved with HiGHS.
//!
//! A [`StrategyGraph`] has one node per operator, each with a list of candidate strategies
//! carrying a time and a memory cost, and one edge per producer → consumer tensor with a
//! resharding-time matrix. Variables: a one-hot binary vector `s_v` per node and, per edge, a
//! product vector `e_uv` linearised exactly: `Σ e_uv = 1`, `Σ_j e_uv[i][j] ≤ s_u[i]`,
//! `Σ_i e_uv[i][j] ≤ s_v[j]`. With one-hot `s` these force `e_uv = s_u ⊗ s_v`, so `e` can be
//! continuous. Identical layers are *tied*: a node or edge stands for `copies` identical ones
//! that share variables, so the ILP does not grow with depth (see `graph`).

use std::time::Instant;

use highs::{Col, HighsModelStatus, RowProblem, Sense};
use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};

/// Primal and integer feasibility tolerance given to HiGHS (its defaults are 1e-7 and 1e-6);
/// coefficients are scaled so that the largest total is about 1.
const FEASIBILITY_TOLERANCE: f64 = 1e-10;
/// Relative tolerance added to a time or memory bound so that the optimum of the first
/// lexicographic stage stays feasible despite floating-point round-off.
const BOUND_TOLERANCE: f64 = 1e-9;
/// Default HiGHS time limit per ILP, seconds.
pub const DEFAULT_TIME_LIMIT_S: f64 = 2.0;
/// Default relative MIP gap at which HiGHS stops.
pub const DEFAULT_MIP_REL_GAP: f64 = 1e-4;

/// One operator of a [`StrategyGraph`] and its candidate strategies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyNode {
    /// Operator name.
    pub name: String,
    /// How many identical operators this node stands for (tied layers), ≥ 1.
    pub copies: u32,
    /// Time of each strategy for one copy, seconds.
    pub time: Vec<f64>,
    /// Memory of each strategy for one copy, bytes per device.
    pub memory: Vec<u64>,
}

/// A producer → consumer edge with its resharding cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StrategyEdge {
    /// Producer node index.
    pub from: usize,
    /// Consumer node index.
    pub to: usize,
    /// How many identical edges this one stands for (tied layers), ≥ 1.
    pub copies: u32,
    /// Layout class of each producer strategy (strategies of one class cost the same on this
    /// edge); empty: every strategy is its own class.
    #[serde(default)]
    pub from_class: Vec<usize>,
    /// Layout class of each consumer strategy; empty: every strategy is its own class.
    #[serde(default)]
    pub to_class: Vec<usize>,
    /// Resharding time, row-major `classes(from) × classes(to)`, seconds, for one copy.
    pub cost: Vec<f64>,
}

impl StrategyEdge {
    fn classes(map: &[usize], strategies: usize) -> usize {
        if map.is_empty() {
            strategies
        } else {
            map.iter().max().map_or(0, |m| m + 1)
        }
    }

    fn class(map: &[usize], strategy: usize) -> usize {
        if map.is_empty() {
            strategy
        } else {
            map[strategy]
        }
    }

    /// Cost of one copy for producer strategy `i` and consumer strategy `j`.
    pub fn cost_of(&self, i: usize, j: usize, to_strategies: usize) -> f64 {
        let cols = Self::classes(&self.to_class, to_strategies);
        self.cost[Self::class(&self.from_class, i) * cols + Self::class(&self.to_class, j)]
    }
}

/// Operators, strategies and costs: the input of the ILP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyGraph {
    /// Nodes.
    pub nodes: Vec<StrategyNode>,
    /// Edges.
    pub edges: Vec<StrategyEdge>,
}

/// What the ILP optimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IlpObjective {
    /// Minimise time subject to memory ≤ budget (bytes), if any.
    MinTime {
        /// Per-device memory budget, bytes.
        memory_budget: Option<f64>,
    },
    /// Minimise memory subject to time ≤ limit (seconds).
    MinMemory {
        /// Time bound, seconds.
        time_limit: f64,
    },
}

/// HiGHS settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolverConfig {
    /// Wall-clock limit per ILP, seconds. Default [`DEFAULT_TIME_LIMIT_S`].
    pub time_limit_s: f64,
    /// Relative MIP gap at which to stop. Default [`DEFAULT_MIP_REL_GAP`].
    pub mip_rel_gap: f64,
}

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            time_limit_s: DEFAULT_TIME_LIMIT_S,
            mip_rel_gap: DEFAULT_MIP_REL_GAP,
        }
    }
}

/// Size and outcome of one ILP solve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IlpStats {
    /// Number of variables.
    pub variables: usize,
    /// Number of constraints.
    pub constraints: usize,
    /// HiGHS model status, e.g. `Optimal` or `ReachedTimeLimit`.
    pub status: String,
    /// Relative MIP gap of the returned solution (0 when proven optimal).
    pub gap: f64,
    /// Wall-clock solve time, seconds (model building included).
    pub solve_time_s: f64,
}

/// A solution: one strategy per node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IlpSolution {
    /// Chosen strategy index per node.
    pub choice: Vec<usize>,
    /// Total time of the choice (nodes and edges, copies counted), seconds.
    pub time: f64,
    /// Total memory of the choice (copies counted), bytes.
    pub memory: u64,
    /// Solver statistics.
    pub stats: IlpStats,
}

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

    /// Total memory of a choice, bytes (copies counted).
    pub fn memory_of(&self, choice: &[usize]) -> u64 {
        self.nodes
            .iter()
            .zip(choice)
            .map(|(n, &c)| n.copies as u64 * n.memory[c])
            .sum()
    }

    /// The smallest memory any choice reaches (memory is separable per node), bytes.
    pub fn min_memory(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| n.copies as u64 * n.memory.iter().copied().min().unwrap_or(0))
            .sum()
    }

    /// Solves the ILP for `objective`.
    ///
    /// Errors: [`PlanError::Infeasible`] when no choice meets the bound (the message carries the
    /// smallest achievable value), [`PlanError::Solver`] when HiGHS fails or stops without a
    /// feasible solution.
    pub fn solve(&self, objective: IlpObjective, config: &SolverConfig) -> Result<IlpSolution> {
        self.validate()?;
        let start = Instant::now();
        // Scale time and memory so that the largest possible totals are about 1.
        let max_time: f64 = self
            .nodes
            .iter()
            .map(|n| n.copies as f64 * n.time.iter().fold(0.0, |a: f64, &b| a.max(b)))
            .sum::<f64>()
            + self
                .edges
                .iter()
                .map(|e| e.copies as f64 * e.cost.iter().fold(0.0, |a: f64, &b| a.max(b)))
                .sum::<f64>();
        let max_memory: f64 = self
            .nodes
            .iter()
            .map(|n| n.copies as f64 * n.memory.iter().copied().max().unwrap_or(0) as f64)
            .sum();
        let ilp_time_unit = if max_time > 0.0 { max_time } else { 1.0 };
        let ilp_memory_unit = if max_memory > 0.0 { max_memory } else { 1.0 };
        let mut pb = RowProblem::default();
        let min_time = matches!(objective, IlpObjective::MinTime { .. });
        let s: Vec<Vec<Col>> = self
            .nodes
            .iter()
            .map(|n| {
                (0..n.time.len())
                    .map(|i| {
                        let c = if min_time {
                            n.copies as f64 * n.time[i] / ilp_time_unit
                        } else {
                            n.copies as f64 * n.memory[i] as f64 / ilp_memory_unit
                        };
                        pb.add_integer_column(c, 0..=1)
                    })
                    .collect()
            })
            .collect();
        let mut e_cols: Vec<Vec<Col>> = Vec::with_capacity(self.edges.len());
        for e in &self.edges {
            let obj = if min_time {
                e.copies as f64 / ilp_time_unit
            } else {
                0.0
            };
            e_cols.push(
                e.cost
                    .iter()
                    .map(|&c| pb.add_column(obj * c, 0..=1))
                    .collect(),
            );
        }
        for sv in &s {
            pb.add_row(1..=1, sv.iter().map(|&c| (c, 1.0)));
        }
        // Σe = 1; the row of class a sums to ≤ Σ_{i ∈ a} s_u[i]; the column of class b to
        // ≤ Σ_{j ∈ b} s_v[j]. With one-hot s this forces e = (class of s_u) ⊗ (class of s_v).
        for (e, ev) in self.edges.iter().zip(&e_cols) {
            let (su, sv) = (&s[e.from], &s[e.to]);
            let (nu, nv) = (
                StrategyEdge::classes(&e.from_class, su.len()),
                StrategyEdge::classes(&e.to_class, sv.len()),
            );
            pb.add_row(1..=1, ev.iter().map(|&c| (c, 1.0)));
            for a in 0..nu {
                let row = (0..nv).map(|b| (ev[a * nv + b], 1.0));
                let members = (0..su.len())
                    .filter(|&i| StrategyEdge::class(&e.from_class, i) == a)
                    .map(|i| (su[i], -1.0));
                pb.add_row(..=0, row.chain(members).collect::<Vec<_>>());
            }
            for b in 0..nv {
                let col = (0..nu).map(|a| (ev[a * nv + b], 1.0));
                let members = (0..sv.len())
                    .filter(|&j| StrategyEdge::class(&e.to_class, j) == b)
                    .map(|j| (sv[j], -1.0));
                pb.add_row(..=0, col.chain(members).collect::<Vec<_>>());
            }
        }
        match objective {
            IlpObjective::MinTime {
                memory_budget: Some(budget),
            } => {
                let min = self.min_memory();
                if (min as f64) > budget {
                    return Err(PlanError::Infeasible {
                        budget: budget as u64,
                        min_achievable: min,
                    });
                }
                let bound = budget / ilp_memory_unit;
                let terms = self.nodes.iter().zip(&s).flat_map(|(n, sv)| {
                    sv.iter()
                        .zip(&n.memory)
                        .map(|(&c, &m)| (c, n.copies as f64 * m as f64 / ilp_memory_unit))
                });
                pb.add_row(..=bound, terms.collect::<Vec<_>>());
            }
            IlpObjective::MinTime {
                memory_budget: None,
            } => {}
            IlpObjective::MinMemory { time_limit } => {
                let bound = time_limit / ilp_time_unit * (1.0 + BOUND_TOLERANCE);
                let mut terms: Vec<(Col, f64)> = Vec::new();
                for (n, sv) in self.nodes.iter().zip(&s) {
                    terms.extend(
                        sv.iter()
                            .zip(&n.time)
                            .map(|(&c, &t)| (c, n.copies as f64 * t / ilp_time_unit)),
                    );
                }
                for (e, ev) in self.edges.iter().zip(&e_cols) {
                    terms.extend(
                        ev.iter()
                            .zip(&e.cost)
                            .map(|(&c, &t)| (c, e.copies as f64 * t / ilp_time_unit)),
                    );
                }
                pb.add_row(..=bound, terms);
            }
        }
        let (variables, constraints) = (pb.num_cols(), pb.num_rows());
        let mut model = pb.optimise(Sense::Minimise);
        model.make_quiet();
        model.set_option("time_limit", config.time_limit_s);
        model.set_option("mip_rel_gap", config.mip_rel_gap);
        model.set_option("threads", 1);
        model.set_option("primal_feasibility_tolerance", FEASIBILITY_TOLERANCE);
        model.set_option("mip_feasibility_tolerance", FEASIBILITY_TOLERANCE);
        let solved = model
            .try_solve()
            .map_err(|e| PlanError::Solver(format!("HiGHS failed: {e:?}")))?;
        let status = solved.status();
        match status {
            HighsModelStatus::Optimal | HighsModelStatus::ReachedTimeLimit => {}
            HighsModelStatus::Infeasible => {
                return Err(match objective {
                    IlpObjective::MinTime { memory_budget } => PlanError::Infeasible {
                        budget: memory_budget.unwrap_or(0.0) as u64,
                        min_achievable: self.min_memory(),
                    },
                    IlpObjective::MinMemory { time_limit } => PlanError::Solver(format!(
                        "no strategy meets the time bound {time_limit:.6} s"
                    )),
                })
            }
            other => {
                return Err(PlanError::Solver(format!(
                    "HiGHS stopped with status {other:?}"
                )))
            }
        }
        let columns = solved.get_solution().columns().to_vec();
        // The `s` columns were added first, node by node.
        let mut offset = 0;
        let mut choice = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let values = &columns[offset..offset + n.time.len()];
            offset += n.time.len();
            let best = values
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i);
            if values[best] < 0.5 {
                return Err(PlanError::Solver(format!(
                    "HiGHS returned no integral solution (status {status:?})"
                )));
            }
            choice.push(best);
        }
        if let IlpObjective::MinTime {
            memory_budget: Some(budget),
        } = objective
        {
            if self.memory_of(&choice) as f64 > budget {
                return Err(PlanError::Solver(
                    "HiGHS returned a plan over the memory budget".into(),
                ));
            }
        }
        if choice.is_empty() {
            return Err(PlanError::Solver(format!(
                "HiGHS returned no integral solution (status {status:?})"
            )));
        }
        let gap = if status == HighsModelStatus::Optimal {
            solved.mip_gap().max(0.0)
        } else {
            solved.mip_gap()
        };
        Ok(IlpSolution {
            time: self.time_of(&choice),
            memory: self.memory_of(&choice),
            choice,
            stats: IlpStats {
                variables,
                constraints,
                status: format!("{status:?}"),
                gap: if gap.is_finite() { gap } else { f64::INFINITY },
                solve_time_s: start.elapsed().as_secs_f64(),
            },
        })
    }

    /// Lexicographic min-memory: minimise time, then minimise memory subject to
    /// `time ≤ (1 + slack) × minimum time`. Returns (the min-time solution, the final one).
    pub fn solve_min_memory(
        &self,
        slack: f64,
        config: &SolverConfig,
    ) -> Result<(IlpSolution, IlpSolution)> {
        let fastest = self.solve(
            IlpObjective::MinTime {
                memory_budget: None,
            },
            config,
        )?;
        let limit = fastest.time * (1.0 + slack);
        let leanest = self.solve(IlpObjective::MinMemory { time_limit: limit }, config)?;
        Ok((fastest, leanest))
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
