//! A feasible incumbent before the solve, by local search: its value bounds the optimum, which
//! lets `prune` remove more strategies, and HiGHS starts from it.
//!
//! Moves change one node's strategy; a move is taken when it improves the objective (ties
//! broken by the other quantity) and keeps the choice within the objective's bound. Starts:
//! the Lagrangian sweep of `sweep`; for min-time, the strategy of each node cheapest with its cheapest inputs (the argument of
//! [`StrategyGraph::time_lower_bound`]) and the leanest strategy of each node; for min-memory,
//! the leanest strategies repaired greedily towards the time limit (the move adding the least
//! memory per second saved, as for a knapsack), and the caller's start (the min-time solution
//! in the planner).

use super::{IlpObjective, StrategyEdge, StrategyGraph};

/// Most sweeps over the nodes (each sweep only takes improving moves).
const MAX_SWEEPS: usize = 16;

/// Time and memory of a choice, with the per-node edge lists to update them move by move.
struct Local<'a> {
    graph: &'a StrategyGraph,
    /// Per node, its incident edges.
    incident: Vec<Vec<usize>>,
    /// Per edge, the columns (consumer classes) of its cost matrix.
    cols: Vec<usize>,
    choice: Vec<usize>,
}

impl Local<'_> {
    /// Time of node `v`'s terms (itself and its incident edges) with `v` at strategy `j`.
    fn node_time(&self, v: usize, j: usize) -> f64 {
        let g = self.graph;
        let n = &g.nodes[v];
        let mut t = n.copies as f64 * n.time[j];
        for &k in &self.incident[v] {
            let e = &g.edges[k];
            let (i, l) = if e.from == v {
                (j, self.choice[e.to])
            } else {
                (self.choice[e.from], j)
            };
            let cell = StrategyEdge::class(&e.from_class, i) * self.cols[k]
                + StrategyEdge::class(&e.to_class, l);
            t += e.copies as f64 * e.cost[cell];
        }
        t
    }

    /// Improving single-node moves until none is left; `objective` decides improvement and
    /// feasibility.
    fn descend(&mut self, objective: IlpObjective) {
        let g = self.graph;
        let mut time = g.time_of(&self.choice);
        let mut memory = g.memory_of(&self.choice) as f64;
        for _ in 0..MAX_SWEEPS {
            let mut improved = false;
            for v in 0..g.nodes.len() {
                let n = &g.nodes[v];
                let cur = self.choice[v];
                let (t0, m0) = (
                    self.node_time(v, cur),
                    n.copies as f64 * n.memory[cur] as f64,
                );
                // (strategy, Δtime, Δmemory, gain, tie-break gain) of the best move.
                let mut best: Option<(usize, f64, f64, f64, f64)> = None;
                for j in (0..n.time.len()).filter(|&j| j != cur) {
                    let dt = self.node_time(v, j) - t0;
                    let dm = n.copies as f64 * n.memory[j] as f64 - m0;
                    let (gain, tie, feasible) = match objective {
                        IlpObjective::MinTime { memory_budget } => {
                            (-dt, -dm, memory_budget.is_none_or(|b| memory + dm <= b))
                        }
                        IlpObjective::MinMemory { time_limit } => {
                            (-dm, -dt, time + dt <= time_limit)
                        }
                    };
                    let scale = match objective {
                        IlpObjective::MinTime { .. } => time.abs(),
                        IlpObjective::MinMemory { .. } => memory.abs(),
                    };
                    let better = gain > 1e-12 * scale || (gain == 0.0 && tie > 0.0);
                    if feasible && better && best.as_ref().is_none_or(|b| (gain, tie) > (b.3, b.4))
                    {
                        best = Some((j, dt, dm, gain, tie));
                    }
                }
                if let Some((j, dt, dm, _, _)) = best {
                    self.choice[v] = j;
                    time += dt;
                    memory += dm;
                    improved = true;
                }
            }
            if !improved {
                break;
            }
            // Re-sum to keep round-off from accumulating.
            time = g.time_of(&self.choice);
            memory = g.memory_of(&self.choice) as f64;
        }
    }
}

impl Local<'_> {
    /// Greedy repair towards `time ≤ time_limit`: repeatedly the single-node move that saves
    /// time at the least added memory per second saved, until the limit is met or no move
    /// saves time.
    fn repair_time(&mut self, time_limit: f64) {
        let g = self.graph;
        let mut time = g.time_of(&self.choice);
        let most_moves: usize = g.nodes.iter().map(|n| n.time.len()).sum();
        for _ in 0..most_moves {
            if time <= time_limit {
                return;
            }
            // (node, strategy, Δtime, memory added per second saved) of the best move.
            let mut best: Option<(usize, usize, f64, f64)> = None;
            for (v, n) in g.nodes.iter().enumerate() {
                let cur = self.choice[v];
                let t0 = self.node_time(v, cur);
                for j in (0..n.time.len()).filter(|&j| j != cur) {
                    let dt = self.node_time(v, j) - t0;
                    if dt >= 0.0 {
                        continue;
                    }
                    let dm = n.copies as f64 * (n.memory[j] as f64 - n.memory[cur] as f64);
                    let rate = dm.max(0.0) / -dt;
                    if best.as_ref().is_none_or(|b| (rate, dt) < (b.3, b.2)) {
                        best = Some((v, j, dt, rate));
                    }
                }
            }
            let Some((v, j, dt, _)) = best else {
                return;
            };
            self.choice[v] = j;
            time += dt;
        }
    }
}

impl StrategyGraph {
    /// Whether `choice` meets the bound of `objective`.
    pub(super) fn meets_bound(&self, choice: &[usize], objective: IlpObjective) -> bool {
        match objective {
            IlpObjective::MinTime { memory_budget } => {
                memory_budget.is_none_or(|b| self.memory_of(choice) as f64 <= b)
            }
            IlpObjective::MinMemory { time_limit } => self.time_of(choice) <= time_limit,
        }
    }

    /// The best feasible choice for `objective` local search finds from its starts (and from
    /// `start`, if given and feasible), or `None` when no start is feasible.
    pub(super) fn heuristic_choice(
        &self,
        objective: IlpObjective,
        start: Option<&[usize]>,
    ) -> Option<Vec<usize>> {
        let mut incident = vec![Vec::new(); self.nodes.len()];
        for (k, e) in self.edges.iter().enumerate() {
            incident[e.from].push(k);
            incident[e.to].push(k);
        }
        let cols: Vec<usize> = self
            .edges
            .iter()
            .map(|e| StrategyEdge::classes(&e.to_class, self.nodes[e.to].time.len()))
            .collect();
        let mut starts: Vec<Vec<usize>> = start.map(<[usize]>::to_vec).into_iter().collect();
        starts.extend(self.lagrangian_sweep(objective));
        let leanest: Vec<usize> = self
            .nodes
            .iter()
            .map(|n| argmin(n.memory.iter().map(|&m| m as f64)))
            .collect();
        match objective {
            IlpObjective::MinTime { .. } => {
                starts.push(self.cheapest_with_inputs());
                starts.push(leanest);
            }
            IlpObjective::MinMemory { time_limit } => {
                let mut local = Local {
                    graph: self,
                    incident: incident.clone(),
                    cols: cols.clone(),
                    choice: leanest,
                };
                local.repair_time(time_limit);
                starts.push(local.choice);
            }
        }
        let mut best: Option<Vec<usize>> = None;
        for s in starts {
            if !self.meets_bound(&s, objective) {
                continue;
            }
            let mut local = Local {
                graph: self,
                incident: incident.clone(),
                cols: cols.clone(),
                choice: s,
            };
            local.descend(objective);
            let c = local.choice;
            if !self.meets_bound(&c, objective) {
                continue; // round-off pushed it over the bound
            }
            let key = |c: &[usize]| match objective {
                IlpObjective::MinTime { .. } => (self.time_of(c), self.memory_of(c) as f64),
                IlpObjective::MinMemory { .. } => (self.memory_of(c) as f64, self.time_of(c)),
            };
            if best.as_ref().is_none_or(|b| key(&c) < key(b)) {
                best = Some(c);
            }
        }
        best
    }

    /// Per node, the strategy minimising its time plus its cheapest incoming reshardings.
    fn cheapest_with_inputs(&self) -> Vec<usize> {
        let own = self.time_with_cheapest_inputs(&self.all_strategies());
        own.iter().map(|o| argmin(o.iter().copied())).collect()
    }
}

/// Index of the smallest value (the first on ties; 0 for an empty iterator).
fn argmin(values: impl Iterator<Item = f64>) -> usize {
    values
        .enumerate()
        .fold(
            (0, f64::INFINITY),
            |(bi, bv), (i, v)| if v < bv { (i, v) } else { (bi, bv) },
        )
        .0
}
