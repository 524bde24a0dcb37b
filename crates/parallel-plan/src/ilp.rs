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

mod evaluate;

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

impl IlpStats {
    /// Summarises several solves: the largest variable and constraint counts, `Optimal` when
    /// every solve was proven optimal (else the first other status), the largest gap and the
    /// total solve time.
    pub fn summary_of<'a>(stats: impl IntoIterator<Item = &'a IlpStats>) -> Self {
        let mut s = IlpStats {
            variables: 0,
            constraints: 0,
            status: "Optimal".into(),
            gap: 0.0,
            solve_time_s: 0.0,
        };
        for st in stats {
            s.variables = s.variables.max(st.variables);
            s.constraints = s.constraints.max(st.constraints);
            if st.status != "Optimal" && s.status == "Optimal" {
                s.status = st.status.clone();
            }
            s.gap = s.gap.max(st.gap);
            s.solve_time_s += st.solve_time_s;
        }
        s
    }
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
    /// Solves the ILP for `objective`.
    ///
    /// Errors: [`PlanError::Infeasible`] when no choice meets the bound (the message carries the
    /// smallest achievable value), [`PlanError::Solver`] when HiGHS fails or stops without a
    /// feasible solution.
    pub fn solve(&self, objective: IlpObjective, config: &SolverConfig) -> Result<IlpSolution> {
        self.solve_from(objective, config, None)
    }

    /// The column values of `choice`: one-hot `s`, and per edge a 1 at the pair of classes.
    fn columns_of(&self, choice: &[usize]) -> Vec<f64> {
        let mut cols = Vec::new();
        for (n, &c) in self.nodes.iter().zip(choice) {
            cols.extend((0..n.time.len()).map(|i| if i == c { 1.0 } else { 0.0 }));
        }
        for e in &self.edges {
            let (nu, nv) = (self.nodes[e.from].time.len(), self.nodes[e.to].time.len());
            let cols_to = StrategyEdge::classes(&e.to_class, nv);
            let rows_from = StrategyEdge::classes(&e.from_class, nu);
            let hot = StrategyEdge::class(&e.from_class, choice[e.from]) * cols_to
                + StrategyEdge::class(&e.to_class, choice[e.to]);
            cols.extend((0..rows_from * cols_to).map(|k| if k == hot { 1.0 } else { 0.0 }));
        }
        cols
    }

    /// [`StrategyGraph::solve`] warm-started from a feasible `start` choice (e.g. the min-time
    /// solution for a min-memory solve under a looser time bound): HiGHS begins with it as its
    /// incumbent, and if it stops at its time limit without a better one, `start` is returned.
    pub fn solve_from(
        &self,
        objective: IlpObjective,
        config: &SolverConfig,
        start: Option<&[usize]>,
    ) -> Result<IlpSolution> {
        self.validate()?;
        let warm = start.filter(|c| {
            c.len() == self.nodes.len() && c.iter().zip(&self.nodes).all(|(&i, n)| i < n.time.len())
        });
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
        if let Some(c) = warm {
            // A rejected start only loses the warm start.
            let _ = model.try_set_solution(Some(&self.columns_of(c)), None, None, None);
        }
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
                break;
            }
            choice.push(best);
        }
        if choice.len() < self.nodes.len() {
            choice = match warm {
                Some(c) => c.to_vec(),
                None => {
                    return Err(PlanError::Solver(format!(
                        "HiGHS returned no integral solution (status {status:?})"
                    )))
                }
            };
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
        let leanest = self.solve_from(
            IlpObjective::MinMemory { time_limit: limit },
            config,
            Some(&fastest.choice),
        )?;
        Ok((fastest, leanest))
    }
}
