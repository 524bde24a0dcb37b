//! The ILP of a [`StrategyGraph`] as a HiGHS model (Alpa's linearisation; see the parent
//! module), solved with the options of [`SolverConfig`].

use std::time::Instant;

use highs::{Col, HighsModelStatus, RowProblem, Sense};

use super::{
    IlpObjective, IlpSolution, IlpStats, SolveStatus, SolverConfig, StrategyEdge, StrategyGraph,
    BOUND_TOLERANCE, FEASIBILITY_TOLERANCE,
};
use crate::error::{PlanError, Result};

impl StrategyGraph {
    /// The column values of `choice`: one-hot `s`, and per edge a 1 at the pair of classes.
    pub(super) fn columns_of(&self, choice: &[usize]) -> Vec<f64> {
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
        cols.extend(self.term_columns_of(choice));
        cols
    }

    /// Builds and solves the ILP of `self` as it is (no strategy removed).
    pub(super) fn solve_model(
        &self,
        objective: IlpObjective,
        config: &SolverConfig,
        warm: Option<&[usize]>,
    ) -> Result<IlpSolution> {
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
            .sum::<f64>()
            + self.memory_offset as f64
            + self
                .memory_terms
                .iter()
                .map(|t| t.upper_bound() as f64)
                .sum::<f64>();
        let ilp_time_unit = if max_time > 0.0 { max_time } else { 1.0 };
        let ilp_memory_unit = if max_memory > 0.0 { max_memory } else { 1.0 };
        let mut pb = RowProblem::default();
        let min_time = matches!(objective, IlpObjective::MinTime { .. });
        // Memory of each strategy: its copies plus what the linear memory terms add.
        let extra = self.linear_term_memory();
        let strategy_memory = |v: usize, i: usize| {
            self.nodes[v].copies as f64 * self.nodes[v].memory[i] as f64 + extra[v][i]
        };
        let s: Vec<Vec<Col>> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(v, n)| {
                (0..n.time.len())
                    .map(|i| {
                        let c = if min_time {
                            n.copies as f64 * n.time[i] / ilp_time_unit
                        } else {
                            strategy_memory(v, i) / ilp_memory_unit
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
        // The memory terms' columns come after the edges' (see `columns_of`); their `t` are in
        // memory units already.
        let t_cols = self.add_terms(
            &mut pb,
            &s,
            ilp_memory_unit,
            if min_time { 0.0 } else { 1.0 },
        );
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
                let members = class_members(&e.from_class, su, a);
                pb.add_row(..=0, row.chain(members).collect::<Vec<_>>());
            }
            for b in 0..nv {
                let col = (0..nu).map(|a| (ev[a * nv + b], 1.0));
                let members = class_members(&e.to_class, sv, b);
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
                let bound = (budget - self.memory_offset as f64) / ilp_memory_unit;
                let terms = s.iter().enumerate().flat_map(|(v, sv)| {
                    sv.iter()
                        .enumerate()
                        .map(move |(i, &c)| (c, strategy_memory(v, i) / ilp_memory_unit))
                });
                let terms = terms.chain(t_cols.iter().map(|&t| (t, 1.0)));
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
        debug_assert_eq!((variables, constraints), self.formulation_size(objective));
        let mut model = pb.optimise(Sense::Minimise);
        model.make_quiet();
        model.set_option("time_limit", config.time_limit_s);
        model.set_option("mip_rel_gap", config.mip_rel_gap);
        model.set_option("threads", 1);
        model.set_option("primal_feasibility_tolerance", FEASIBILITY_TOLERANCE);
        model.set_option("mip_feasibility_tolerance", FEASIBILITY_TOLERANCE);
        // Feasibility jump looks for a first feasible solution; the local-search incumbent
        // (`heuristic`) is given as the start instead, and the jump cost ~20 % of solve time.
        model.set_option("mip_heuristic_run_feasibility_jump", false);
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
            HighsModelStatus::Infeasible => return Err(self.infeasible(objective)),
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
                solved_variables: variables,
                solved_constraints: constraints,
                status: if status == HighsModelStatus::Optimal {
                    SolveStatus::Optimal
                } else {
                    SolveStatus::ReachedTimeLimit
                },
                gap: if gap.is_finite() { gap } else { f64::INFINITY },
                solve_time_s: start.elapsed().as_secs_f64(),
            },
        })
    }
}

/// The strategy columns `s` of layout class `class` under the class map `map`, each with
/// coefficient −1 (the right-hand side of a row or column sum of an edge's products).
fn class_members<'a>(
    map: &'a [usize],
    s: &'a [Col],
    class: usize,
) -> impl Iterator<Item = (Col, f64)> + 'a {
    (0..s.len())
        .filter(move |&i| StrategyEdge::class(map, i) == class)
        .map(move |i| (s[i], -1.0))
}
