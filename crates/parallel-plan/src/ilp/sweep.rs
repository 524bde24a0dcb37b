//! Coherent starting choices for the local search of `heuristic`: a dynamic program over the
//! nodes in index order that keeps, for every strategy of the current node, the best partial
//! choice ending in it (Viterbi with path memory: an edge to an earlier node is charged with
//! that node's strategy on the partial choice). Exact on chains, a heuristic otherwise. With a
//! Lagrangian weight on the bounded quantity and a bisection on the weight, it gives choices
//! that meet the objective's bound.

use std::collections::HashMap;

use super::{IlpObjective, StrategyEdge, StrategyGraph};

/// Bisection steps on the Lagrangian weight (a factor 10⁸ range, resolved to about 1.5 %).
const BISECTION_STEPS: usize = 12;
/// Smallest and largest Lagrangian weight, relative to the normalised objective.
const WEIGHT_RANGE: (f64, f64) = (1e-4, 1e4);

impl StrategyGraph {
    /// The choice minimising `wt · time + wm · memory` by the sweep of the module docs.
    pub(super) fn sweep(&self, wt: f64, wm: f64) -> Vec<usize> {
        let n = self.nodes.len();
        if n == 0 {
            return Vec::new();
        }
        // Per node, the edges to earlier nodes: (edge, earlier node, whether it is the producer).
        let mut back: Vec<Vec<(usize, usize, bool)>> = vec![Vec::new(); n];
        for (k, e) in self.edges.iter().enumerate() {
            if e.from < e.to {
                back[e.to].push((k, e.from, true));
            } else {
                back[e.from].push((k, e.to, false));
            }
        }
        let weight = |v: usize, j: usize| {
            let node = &self.nodes[v];
            node.copies as f64 * (wt * node.time[j] + wm * node.memory[j] as f64)
        };
        // Columns (consumer classes) of each edge's cost matrix.
        let cols: Vec<usize> = self
            .edges
            .iter()
            .map(|e| StrategyEdge::classes(&e.to_class, self.nodes[e.to].time.len()))
            .collect();
        // The layout class, on edge `k`, of strategy `j` of its producer or consumer.
        let class_on = |k: usize, producer: bool, j: usize| {
            let e = &self.edges[k];
            StrategyEdge::class(if producer { &e.from_class } else { &e.to_class }, j)
        };
        let mut paths: Vec<Vec<usize>> = (0..self.nodes[0].time.len()).map(|j| vec![j]).collect();
        let mut costs: Vec<f64> = (0..paths.len()).map(|j| weight(0, j)).collect();
        for (v, back) in back.iter().enumerate().skip(1) {
            // Partial choices that give the earlier ends of `v`'s back edges the same layout
            // classes cost `v` the same: keep the cheapest of each group.
            let mut groups: HashMap<Vec<usize>, usize> = HashMap::new();
            for (i, path) in paths.iter().enumerate() {
                let key: Vec<usize> = back
                    .iter()
                    .map(|&(k, u, u_is_from)| class_on(k, u_is_from, path[u]))
                    .collect();
                let slot = groups.entry(key).or_insert(i);
                if costs[i] < costs[*slot] {
                    *slot = i;
                }
            }
            let mut groups: Vec<(Vec<usize>, usize)> = groups.into_iter().collect();
            groups.sort_unstable_by_key(|g| g.1); // deterministic order
            let nv = self.nodes[v].time.len();
            let mut next_paths = Vec::with_capacity(nv);
            let mut next_costs = Vec::with_capacity(nv);
            for j in 0..nv {
                let mut best = (f64::INFINITY, 0);
                for (key, i) in &groups {
                    let mut c = costs[*i];
                    for (&(k, _, u_is_from), &a) in back.iter().zip(key) {
                        let e = &self.edges[k];
                        let b = class_on(k, !u_is_from, j);
                        let cell = if u_is_from {
                            a * cols[k] + b
                        } else {
                            b * cols[k] + a
                        };
                        c += wt * e.copies as f64 * e.cost[cell];
                    }
                    if c < best.0 {
                        best = (c, *i);
                    }
                }
                let mut path = paths[best.1].clone();
                path.push(j);
                next_paths.push(path);
                next_costs.push(best.0 + weight(v, j));
            }
            paths = next_paths;
            costs = next_costs;
        }
        let best = (0..costs.len())
            .min_by(|&a, &b| costs[a].total_cmp(&costs[b]))
            .unwrap_or(0);
        paths.swap_remove(best)
    }

    /// A sweep choice meeting the bound of `objective`: the objective's quantity plus the
    /// smallest Lagrangian weight on the bounded one (found by bisection) that meets the bound;
    /// `None` when even the largest weight does not.
    pub(super) fn lagrangian_sweep(&self, objective: IlpObjective) -> Option<Vec<usize>> {
        let time_scale = self.time_of(&self.sweep(1.0, 0.0)).max(f64::MIN_POSITIVE);
        let memory_scale = (self.min_memory() as f64).max(1.0);
        // The choice for weight `w` on the bounded quantity, and whether it meets the bound.
        let at = |w: f64| -> (Vec<usize>, bool) {
            let c = match objective {
                IlpObjective::MinTime { .. } => self.sweep(1.0 / time_scale, w / memory_scale),
                IlpObjective::MinMemory { .. } => self.sweep(w / time_scale, 1.0 / memory_scale),
            };
            let ok = self.meets_bound(&c, objective);
            (c, ok)
        };
        // Without weight on the bounded quantity.
        let (free, ok) = at(0.0);
        if ok {
            return Some(free);
        }
        let (mut lo, mut hi) = WEIGHT_RANGE;
        let (mut best, ok) = at(hi);
        if !ok {
            return None;
        }
        for _ in 0..BISECTION_STEPS {
            let mid = (lo * hi).sqrt();
            let (c, ok) = at(mid);
            if ok {
                hi = mid;
                best = c;
            } else {
                lo = mid;
            }
        }
        Some(best)
    }
}
