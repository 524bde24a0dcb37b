//! Graph500 BFS validation (the five rules of the Graph500 specification, section "Validation").

use crate::bfs::{BfsResult, UNREACHED};
use crate::csr::CsrGraph;
use crate::error::{GraphError, Result};
use rayon::prelude::*;

fn fail(rule: u8, message: String) -> GraphError {
    GraphError::InvalidBfs { rule, message }
}

/// Checks a BFS result against `graph` with the five Graph500 rules:
///
/// 1. the parent array is a tree rooted at `root`: every reached vertex's parent chain ends at
///    the root without a cycle;
/// 2. every tree edge joins vertices whose depths differ by exactly one (and the root has
///    depth 0);
/// 3. every graph edge `u → v` between reached vertices has `depth[v] <= depth[u] + 1`
///    (for undirected graphs: depths differ by at most one);
/// 4. the tree spans the root's component: an edge from a reached vertex never leads to an
///    unreached one;
/// 5. every vertex and its parent are joined by an edge of the graph.
///
/// A result with wrong array lengths or a bad root entry fails with rule 0. Works for results
/// of any variant, and for results mapped back through a
/// [`Permutation`](crate::Permutation).
///
/// Complexity: O(n + m) work, rules 2–5 in parallel in the caller's rayon pool.
///
/// # Errors
/// [`GraphError::InvalidBfs`] naming the first rule broken and the vertex or edge breaking it.
pub fn validate_bfs(graph: &CsrGraph, result: &BfsResult) -> Result<()> {
    let n = graph.num_vertices() as usize;
    let (parent, depth, root) = (&result.parent, &result.depth, result.root);
    if parent.len() != n || depth.len() != n {
        return Err(fail(
            0,
            format!(
                "arrays have {} parents and {} depths for {n} vertices",
                parent.len(),
                depth.len()
            ),
        ));
    }
    if root as usize >= n || parent[root as usize] != root || depth[root as usize] != 0 {
        return Err(fail(
            0,
            format!("root {root} must be its own parent at depth 0"),
        ));
    }
    check_tree(parent, root)?;
    if let Some(v) = (0..n).into_par_iter().find_any(|&v| {
        let p = parent[v];
        (p == UNREACHED) != (depth[v] == UNREACHED)
            || (p != UNREACHED
                && v != root as usize
                && depth[v] != depth[p as usize].wrapping_add(1))
    }) {
        return Err(fail(
            2,
            format!(
                "vertex {v} at depth {} has parent {} at depth {}",
                depth[v] as i64,
                parent[v] as i64,
                depth.get(parent[v] as usize).map_or(-1, |&d| d as i64)
            ),
        ));
    }
    let bad_edge = |rule: u8| {
        (0..n as u32).into_par_iter().find_map_any(|u| {
            let du = depth[u as usize];
            graph.out_neighbors(u).iter().find_map(|&v| {
                let dv = depth[v as usize];
                let broken = match rule {
                    3 => du != UNREACHED && dv != UNREACHED && dv > du + 1,
                    _ => du != UNREACHED && dv == UNREACHED,
                };
                broken.then_some((u, v))
            })
        })
    };
    if let Some((u, v)) = bad_edge(3) {
        return Err(fail(
            3,
            format!(
                "edge {u} -> {v} joins depths {} and {}",
                depth[u as usize], depth[v as usize]
            ),
        ));
    }
    if let Some((u, v)) = bad_edge(4) {
        return Err(fail(
            4,
            format!("edge {u} -> {v} leaves the tree: {u} is reached, {v} is not"),
        ));
    }
    if let Some(v) = (0..n as u32).into_par_iter().find_any(|&v| {
        let p = parent[v as usize];
        p != UNREACHED && v != root && graph.in_neighbors(v).binary_search(&p).is_err()
    }) {
        return Err(fail(
            5,
            format!(
                "vertex {v} has parent {} but no edge {} -> {v}",
                parent[v as usize], parent[v as usize]
            ),
        ));
    }
    Ok(())
}

/// Rule 1: following parents from any reached vertex reaches the root without a cycle.
fn check_tree(parent: &[u32], root: u32) -> Result<()> {
    const UNKNOWN: u8 = 0;
    const ON_PATH: u8 = 1;
    const OK: u8 = 2;
    let mut state = vec![UNKNOWN; parent.len()];
    state[root as usize] = OK;
    let mut path = Vec::new();
    for start in 0..parent.len() {
        if parent[start] == UNREACHED || state[start] == OK {
            continue;
        }
        let mut v = start;
        while state[v] == UNKNOWN {
            state[v] = ON_PATH;
            path.push(v);
            let p = parent[v];
            if p == UNREACHED || p as usize >= parent.len() {
                return Err(fail(
                    1,
                    format!(
                        "vertex {v} has parent {} which is not a reached vertex",
                        p as i64
                    ),
                ));
            }
            v = p as usize;
        }
        if state[v] == ON_PATH {
            return Err(fail(
                1,
                format!("parent chain from vertex {start} has a cycle through {v}"),
            ));
        }
        for &w in &path {
            state[w] = OK;
        }
        path.clear();
    }
    Ok(())
}
