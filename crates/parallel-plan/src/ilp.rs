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

use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};

mod evaluate;
mod heuristic;
mod highs_model;
mod prune;
mod sweep;
mod terms;

/// Primal and integer feasibility tolerance given to HiGHS (its defaults are 1e-7 and 1e-6);
/// coefficients are scaled so that the largest total is about 1.
const FEASIBILITY_TOLERANCE: f64 = 1e-10;
/// Relative tolerance added to a time or memory bound so that the optimum of the first
/// lexicographic stage stays feasible despite floating-point round-off.
const BOUND_TOLERANCE: f64 = 1e-9;
/// Default HiGHS time limit per ILP, seconds: a safety net, not the usual stopping rule. Every
/// ILP of the GPT-3 and Llama-2 searches on 8–1024 A100s reaches the [`DEFAULT_MIP_REL_GAP`]
/// well inside it on a quiet 2-core machine (the hardest, 13B-class models on one node,
/// take up to ~3 s), so plans do not depend on the machine's speed unless it is several times
/// slower or loaded. A solve that does stop here keeps its best plan and reports status
/// `ReachedTimeLimit` and its gap.
pub const DEFAULT_TIME_LIMIT_S: f64 = 10.0;
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

/// A memory term that is not a sum over nodes (a buffer held once, a transient peak):
/// `min(cap, max(Σ_v sum[v][s_v], max_v largest[v][s_v]))` bytes for the choice `s`. Linearised
/// exactly with one continuous variable `t` (`t ≥` the sum, `t ≥` each node's largest value
/// under its chosen strategy) and, when the cap can bind, one binary `z`:
/// `t ≥ cap·z` and `t + M·z ≥` each part, with `M` the largest value a part can take.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryTerm {
    /// What the term holds.
    pub name: String,
    /// Per node, per strategy: the contribution to the term's sum, bytes (empty: none).
    #[serde(default)]
    pub sum: Vec<Vec<u64>>,
    /// Per node, per strategy: the candidate for the term's largest value, bytes (empty: none).
    #[serde(default)]
    pub largest: Vec<Vec<u64>>,
    /// Upper bound of the term, bytes.
    #[serde(default)]
    pub cap: Option<u64>,
}

/// Operators, strategies and costs: the input of the ILP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyGraph {
    /// Nodes.
    pub nodes: Vec<StrategyNode>,
    /// Edges.
    pub edges: Vec<StrategyEdge>,
    /// Memory terms that are not sums over nodes (counted once, not per copy).
    #[serde(default)]
    pub memory_terms: Vec<MemoryTerm>,
    /// Memory every choice holds, bytes (e.g. framework overhead).
    #[serde(default)]
    pub memory_offset: u64,
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

/// How an ILP solve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SolveStatus {
    /// Proven optimal (within the MIP gap tolerance).
    Optimal,
    /// Stopped by the time limit with a feasible solution (see the gap).
    ReachedTimeLimit,
}

impl std::fmt::Display for SolveStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SolveStatus::Optimal => "Optimal",
            SolveStatus::ReachedTimeLimit => "ReachedTimeLimit",
        })
    }
}

/// Size and outcome of one ILP solve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IlpStats {
    /// Number of variables of the formulation.
    pub variables: usize,
    /// Number of constraints of the formulation.
    pub constraints: usize,
    /// Variables of the ILP given to HiGHS, after bound-based fixing removed strategies that no
    /// optimum can use (see [`StrategyGraph::solve_from`]).
    #[serde(default)]
    pub solved_variables: usize,
    /// Constraints of the ILP given to HiGHS.
    #[serde(default)]
    pub solved_constraints: usize,
    /// How the solve ended.
    pub status: SolveStatus,
    /// Relative MIP gap of the returned solution (0 when proven optimal).
    pub gap: f64,
    /// Wall-clock solve time, seconds (incumbent search, strategy fixing and model building
    /// included).
    pub solve_time_s: f64,
}

impl IlpStats {
    /// Summarises several solves: the largest variable and constraint counts (of the formulation
    /// and of the solved ILP), `Optimal` when
    /// every solve was proven optimal (else the first other status), the largest gap and the
    /// total solve time.
    pub fn summary_of<'a>(stats: impl IntoIterator<Item = &'a IlpStats>) -> Self {
        let mut s = IlpStats {
            variables: 0,
            constraints: 0,
            solved_variables: 0,
            solved_constraints: 0,
            status: SolveStatus::Optimal,
            gap: 0.0,
            solve_time_s: 0.0,
        };
        for st in stats {
            s.variables = s.variables.max(st.variables);
            s.constraints = s.constraints.max(st.constraints);
            s.solved_variables = s.solved_variables.max(st.solved_variables);
            s.solved_constraints = s.solved_constraints.max(st.solved_constraints);
            if s.status == SolveStatus::Optimal {
                s.status = st.status;
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
    /// Total memory of the choice (copies counted, memory terms and offset included), bytes.
    pub memory: u64,
    /// Solver statistics.
    pub stats: IlpStats,
}

impl StrategyGraph {
    /// Solves the ILP for `objective`.
    ///
    /// Errors: [`PlanError::Infeasible`] when no choice meets a memory budget (the message
    /// carries the smallest achievable memory), [`PlanError::TimeBoundUnmet`] when none meets a
    /// min-memory solve's time bound, [`PlanError::Solver`] when HiGHS fails or stops without a
    /// feasible solution.
    pub fn solve(&self, objective: IlpObjective, config: &SolverConfig) -> Result<IlpSolution> {
        self.solve_from(objective, config, None)
    }

    /// [`StrategyGraph::solve`] warm-started from a feasible `start` choice (e.g. the min-time
    /// solution for a min-memory solve under a looser time bound): HiGHS begins with it as its
    /// incumbent, and if it stops at its time limit without a better one, `start` is returned.
    ///
    /// Before the solve, local search finds a feasible incumbent (see `heuristic`; HiGHS starts
    /// from it, or from `start` when none is found), and strategies that no choice meeting the
    /// objective's bound and at least as good as the incumbent can use are removed (exact, see
    /// `prune`); the reported ILP size is that of the ILP solved.
    pub fn solve_from(
        &self,
        objective: IlpObjective,
        config: &SolverConfig,
        start: Option<&[usize]>,
    ) -> Result<IlpSolution> {
        self.validate()?;
        let clock = Instant::now();
        let warm = start.filter(|c| {
            c.len() == self.nodes.len() && c.iter().zip(&self.nodes).all(|(&i, n)| i < n.time.len())
        });
        let incumbent = self.heuristic_choice(objective, warm);
        let warm = incumbent.as_deref().or(warm);
        // The objective's bound, and the incumbent's value for the objective itself.
        let (time_limit, memory_limit) = match objective {
            IlpObjective::MinTime { memory_budget } => {
                (incumbent.as_deref().map(|c| self.time_of(c)), memory_budget)
            }
            IlpObjective::MinMemory { time_limit } => (
                Some(time_limit),
                incumbent.as_deref().map(|c| self.memory_of(c) as f64),
            ),
        };
        let mut sol = match self.kept_strategies(time_limit, memory_limit) {
            None => self.solve_model(objective, config, warm)?,
            Some(kept) => self.solve_restricted(objective, config, warm, &kept)?,
        };
        sol.stats.solve_time_s = clock.elapsed().as_secs_f64();
        Ok(sol)
    }

    /// Solves the ILP restricted to the `kept` strategies of each node and maps the solution
    /// back; the reported size is the formulation's, with the restricted one as solved size.
    fn solve_restricted(
        &self,
        objective: IlpObjective,
        config: &SolverConfig,
        warm: Option<&[usize]>,
        kept: &[Vec<usize>],
    ) -> Result<IlpSolution> {
        if kept.iter().any(Vec::is_empty) {
            return Err(self.infeasible(objective));
        }
        let sub = self.restricted(kept);
        // The start in the restricted numbering (dropped if it uses a removed strategy).
        let sub_warm: Option<Vec<usize>> = warm.and_then(|c| {
            c.iter()
                .zip(kept)
                .map(|(&i, k)| k.binary_search(&i).ok())
                .collect()
        });
        let mut sol = sub.solve_model(objective, config, sub_warm.as_deref())?;
        for (c, k) in sol.choice.iter_mut().zip(kept) {
            *c = k[*c];
        }
        sol.time = self.time_of(&sol.choice);
        sol.memory = self.memory_of(&sol.choice);
        (sol.stats.variables, sol.stats.constraints) = self.formulation_size(objective);
        Ok(sol)
    }

    /// The error when no choice meets the bound of `objective`.
    fn infeasible(&self, objective: IlpObjective) -> PlanError {
        match objective {
            IlpObjective::MinTime { memory_budget } => PlanError::Infeasible {
                budget: memory_budget.unwrap_or(0.0) as u64,
                min_achievable: self.min_memory(),
            },
            IlpObjective::MinMemory { time_limit } => PlanError::TimeBoundUnmet {
                time_limit_s: time_limit,
            },
        }
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
