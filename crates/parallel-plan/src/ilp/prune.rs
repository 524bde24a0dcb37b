//! Bound-based fixing of strategies before the solve: a strategy that cannot be part of any
//! choice meeting a time or memory limit is removed, which shrinks the ILP without changing its
//! optimum (the classic variable fixing by bounds of MIP presolve, done here with the graph's
//! structure, which HiGHS does not see through the edge linearisation). The limits are the
//! objective's bound and, for the objective itself, the value of a known feasible choice (the
//! incumbent of `heuristic`): no optimum is worse than it.
//!
//! - Time limit: with every edge charged to its consumer, a choice taking strategy
//!   `j` at node `v` costs at least `own(v, j) + Σ_{u ≠ v} min_k own(u, k)`, where `own(v, j)` is
//!   `v`'s time under `j` plus, per incoming edge, the cheapest resharding from a strategy still
//!   kept at the producer (the [`StrategyGraph::time_lower_bound`] argument with one node
//!   pinned). Strategies whose bound exceeds the limit go; removing them can only raise the
//!   other nodes' bounds, so this repeats until nothing changes.
//! - Memory limit: memory is separable, so `j` at `v` needs at least
//!   `copies·memory(v, j) + Σ_{u ≠ v} min memory(u)`.
//! - Both limits: the same argument on `memory + μ·time` against `memory limit + μ·time limit`
//!   for a range of Lagrangian weights `μ ≥ 0` (reduced-cost fixing of the relaxation that
//!   drops the coupling between the two; much stronger than either bound alone when both
//!   bind).

use super::{StrategyEdge, StrategyGraph, StrategyNode, BOUND_TOLERANCE};

/// Most rounds of fixing (each round only removes strategies; it converges in a few).
const MAX_ROUNDS: usize = 8;

impl StrategyGraph {
    /// Per node, the strategies (indices, increasing) that can be part of a choice with time at
    /// most `time_limit` and memory at most `memory_limit` (each if given); `None` when nothing
    /// can be removed. A node with no strategy left means no choice meets the limits.
    pub(super) fn kept_strategies(
        &self,
        time_limit: Option<f64>,
        memory_limit: Option<f64>,
    ) -> Option<Vec<Vec<usize>>> {
        let mut keep = self.all_strategies();
        // Each strategy's own memory (the linear memory terms included; the other terms only
        // add to it, so the bounds stay valid).
        let extra = self.linear_term_memory();
        let memory: Vec<Vec<f64>> = self
            .nodes
            .iter()
            .zip(&extra)
            .map(|(n, x)| {
                n.memory
                    .iter()
                    .zip(x)
                    .map(|(&m, &e)| n.copies as f64 * m as f64 + e)
                    .collect()
            })
            .collect();
        // Removing strategies raises the other nodes' bounds: repeat until nothing changes.
        for _ in 0..MAX_ROUNDS {
            let mut changed = false;
            if let Some(budget) = memory_limit {
                changed |= fix_by_bound(&memory, budget, &mut keep);
            }
            if let Some(limit) = time_limit {
                let own = self.time_with_cheapest_inputs(&keep);
                changed |= fix_by_bound(&own, limit, &mut keep);
                if let Some(budget) = memory_limit {
                    changed |= fix_by_combined_bounds(&memory, &own, budget, limit, &mut keep);
                }
            }
            if !changed {
                break;
            }
        }
        if keep.iter().all(|k| k.iter().all(|&b| b)) {
            return None;
        }
        Some(
            keep.iter()
                .map(|k| (0..k.len()).filter(|&j| k[j]).collect())
                .collect(),
        )
    }

    /// Every strategy of every node marked kept.
    pub(super) fn all_strategies(&self) -> Vec<Vec<bool>> {
        self.nodes
            .iter()
            .map(|n| vec![true; n.time.len()])
            .collect()
    }

    /// Per node and strategy: its time plus, per incoming edge, the cheapest resharding from a
    /// kept producer strategy (copies counted). Removed strategies get infinity.
    pub(super) fn time_with_cheapest_inputs(&self, keep: &[Vec<bool>]) -> Vec<Vec<f64>> {
        let mut own: Vec<Vec<f64>> = self
            .nodes
            .iter()
            .zip(keep)
            .map(|(n, k)| {
                n.time
                    .iter()
                    .zip(k)
                    .map(|(t, &on)| {
                        if on {
                            n.copies as f64 * t
                        } else {
                            f64::INFINITY
                        }
                    })
                    .collect()
            })
            .collect();
        for e in &self.edges {
            let (nu, nv) = (self.nodes[e.from].time.len(), self.nodes[e.to].time.len());
            let (rows, cols) = (
                StrategyEdge::classes(&e.from_class, nu),
                StrategyEdge::classes(&e.to_class, nv),
            );
            // Producer classes with a kept strategy; per consumer class, the cheapest of them.
            let mut present = vec![false; rows];
            for i in (0..nu).filter(|&i| keep[e.from][i]) {
                present[StrategyEdge::class(&e.from_class, i)] = true;
            }
            let cheapest: Vec<f64> = (0..cols)
                .map(|b| {
                    (0..rows)
                        .filter(|&a| present[a])
                        .map(|a| e.cost[a * cols + b])
                        .fold(f64::INFINITY, f64::min)
                })
                .collect();
            for (j, total) in own[e.to].iter_mut().enumerate() {
                *total += e.copies as f64 * cheapest[StrategyEdge::class(&e.to_class, j)];
            }
        }
        own
    }

    /// The graph restricted to `kept` strategies per node (as returned by
    /// [`StrategyGraph::kept_strategies`], none empty); edges keep only the layout classes of
    /// kept strategies.
    pub(super) fn restricted(&self, kept: &[Vec<usize>]) -> StrategyGraph {
        let nodes = self
            .nodes
            .iter()
            .zip(kept)
            .map(|(n, k)| StrategyNode {
                name: n.name.clone(),
                copies: n.copies,
                time: k.iter().map(|&j| n.time[j]).collect(),
                memory: k.iter().map(|&j| n.memory[j]).collect(),
            })
            .collect();
        let edges = self
            .edges
            .iter()
            .map(|e| {
                let (nu, nv) = (self.nodes[e.from].time.len(), self.nodes[e.to].time.len());
                let (from_class, rows) = compact_classes(&e.from_class, &kept[e.from]);
                let (to_class, cols) = compact_classes(&e.to_class, &kept[e.to]);
                let old_cols = StrategyEdge::classes(&e.to_class, nv);
                debug_assert_eq!(
                    e.cost.len(),
                    StrategyEdge::classes(&e.from_class, nu) * old_cols
                );
                let cost = rows
                    .iter()
                    .flat_map(|&a| cols.iter().map(move |&b| e.cost[a * old_cols + b]))
                    .collect();
                StrategyEdge {
                    from_class,
                    to_class,
                    cost,
                    ..e.clone()
                }
            })
            .collect();
        StrategyGraph {
            nodes,
            edges,
            memory_terms: self
                .memory_terms
                .iter()
                .map(|t| t.restricted(kept))
                .collect(),
            memory_offset: self.memory_offset,
        }
    }
}

/// Removes the strategies whose bound `own[v][j] + Σ_{u ≠ v} min own[u]` exceeds `limit` (with
/// [`BOUND_TOLERANCE`], plus 1e-12 of the total for round-off); whether any was removed.
fn fix_by_bound(own: &[Vec<f64>], limit: f64, keep: &mut [Vec<bool>]) -> bool {
    let mins: Vec<f64> = own
        .iter()
        .zip(keep.iter())
        .map(|(o, k)| {
            o.iter()
                .zip(k)
                .filter(|(_, &on)| on)
                .map(|(&x, _)| x)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let total: f64 = mins.iter().sum();
    if !total.is_finite() {
        return false; // some node has nothing left: infeasible either way
    }
    let limit = limit * (1.0 + BOUND_TOLERANCE) + 1e-12 * total.abs();
    let mut changed = false;
    for ((o, k), &min) in own.iter().zip(keep.iter_mut()).zip(&mins) {
        let rest = total - min;
        for (x, on) in o.iter().zip(k.iter_mut()) {
            if *on && rest + x > limit {
                *on = false;
                changed = true;
            }
        }
    }
    changed
}

/// Lagrangian fixing with both limits: for any `μ ≥ 0`, a choice within both has
/// `memory + μ·time ≤ memory_limit + μ·time_limit`, and `memory(v, j) + μ·own(v, j)` plus the
/// other nodes' minima of the same sum bounds that from below; [`LAGRANGE_WEIGHTS`] weights
/// around `memory_limit / time_limit`. Whether any strategy was removed.
fn fix_by_combined_bounds(
    memory: &[Vec<f64>],
    time: &[Vec<f64>],
    memory_limit: f64,
    time_limit: f64,
    keep: &mut [Vec<bool>],
) -> bool {
    let unit = memory_limit / time_limit.max(f64::MIN_POSITIVE);
    let mut changed = false;
    for k in 0..LAGRANGE_WEIGHTS {
        let mu = unit * 10f64.powf((k as f64 - (LAGRANGE_WEIGHTS / 2) as f64) / 4.0);
        let combined: Vec<Vec<f64>> = memory
            .iter()
            .zip(time)
            .map(|(m, t)| m.iter().zip(t).map(|(a, b)| a + mu * b).collect())
            .collect();
        changed |= fix_by_bound(&combined, memory_limit + mu * time_limit, keep);
    }
    changed
}

/// Weights tried by [`fix_by_combined_bounds`]: `10^(±k/4)` times the ratio of the limits,
/// k = 0…10 (a factor 10^±2.5).
const LAGRANGE_WEIGHTS: usize = 21;

/// The layout classes of the `kept` strategies renumbered densely in order of first use:
/// the new per-strategy class map and, per new class, its old class.
fn compact_classes(map: &[usize], kept: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut old_of_new: Vec<usize> = Vec::new();
    let new_map = kept
        .iter()
        .map(|&j| {
            let old = StrategyEdge::class(map, j);
            match old_of_new.iter().position(|&c| c == old) {
                Some(p) => p,
                None => {
                    old_of_new.push(old);
                    old_of_new.len() - 1
                }
            }
        })
        .collect();
    (new_map, old_of_new)
}
