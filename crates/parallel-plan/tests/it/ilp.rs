//! The ILP against exhaustive search on small random graphs.

use parallel_plan::ilp::{
    IlpObjective, MemoryTerm, SolverConfig, StrategyEdge, StrategyGraph, StrategyNode,
};
use parallel_plan::PlanError;

/// xorshift64: a tiny deterministic generator (proptest is not a dev-dependency here because its
/// regex features would force a second HiGHS build).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A per-node, per-strategy table of random bytes (mostly zero), or none.
fn random_table(rng: &mut Rng, nodes: &[StrategyNode]) -> Vec<Vec<u64>> {
    if rng.below(3) == 0 {
        return Vec::new();
    }
    nodes
        .iter()
        .map(|n| {
            (0..n.time.len())
                .map(|_| {
                    if rng.below(2) == 0 {
                        0
                    } else {
                        rng.below(1500) << 20
                    }
                })
                .collect()
        })
        .collect()
}

/// A random graph: 2–6 nodes × 1–4 strategies, a random tree plus chain edges, random copies,
/// 0–3 memory terms (sums, largest values, caps that may bind) and an offset.
fn random_graph(rng: &mut Rng) -> StrategyGraph {
    let n = 2 + rng.below(5) as usize;
    let nodes: Vec<StrategyNode> = (0..n)
        .map(|i| {
            let k = 1 + rng.below(4) as usize;
            StrategyNode {
                name: format!("op{i}"),
                copies: 1 + rng.below(3) as u32,
                time: (0..k).map(|_| rng.below(1000) as f64 * 1e-4).collect(),
                memory: (0..k).map(|_| rng.below(1000) << 20).collect(),
            }
        })
        .collect();
    let mut edges: Vec<StrategyEdge> = Vec::new();
    for v in 1..n {
        let u = rng.below(v as u64) as usize;
        for (from, to) in [(u, v), (v - 1, v)] {
            if edges.iter().any(|e| e.from == from && e.to == to) {
                continue;
            }
            let len = nodes[from].time.len() * nodes[to].time.len();
            let cost = (0..len).map(|_| rng.below(500) as f64 * 1e-4).collect();
            edges.push(StrategyEdge {
                from,
                to,
                copies: 1 + rng.below(2) as u32,
                from_class: vec![],
                to_class: vec![],
                cost,
            });
        }
    }
    let memory_terms = (0..rng.below(4))
        .map(|k| MemoryTerm {
            name: format!("term{k}"),
            sum: random_table(rng, &nodes),
            largest: random_table(rng, &nodes),
            cap: (rng.below(2) == 0).then(|| rng.below(2000) << 20),
        })
        .collect();
    StrategyGraph {
        nodes,
        edges,
        memory_terms,
        memory_offset: rng.below(100) << 20,
    }
}

const CASES: u64 = 60;

#[test]
fn ilp_min_time_equals_brute_force() {
    let config = SolverConfig::default();
    for seed in 1..=CASES {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let g = random_graph(&mut rng);
        let unconstrained = g
            .brute_force(IlpObjective::MinTime {
                memory_budget: None,
            })
            .unwrap();
        let ilp = g
            .solve(
                IlpObjective::MinTime {
                    memory_budget: None,
                },
                &config,
            )
            .unwrap();
        assert!(
            (ilp.time - unconstrained.1).abs() <= 1e-9 * (1.0 + unconstrained.1),
            "seed {seed}"
        );
        // A budget between the smallest memory and the unconstrained optimum's memory.
        let lo = g
            .brute_force(IlpObjective::MinMemory {
                time_limit: f64::INFINITY,
            })
            .unwrap()
            .1;
        let hi = g.memory_of(&unconstrained.0) as f64;
        let budget = lo + (rng.below(1001) as f64 / 1000.0) * (hi - lo).max(0.0);
        let objective = IlpObjective::MinTime {
            memory_budget: Some(budget),
        };
        let brute = g.brute_force(objective).unwrap();
        let ilp = g.solve(objective, &config).unwrap();
        assert!(ilp.memory as f64 <= budget, "seed {seed}");
        assert!(
            (ilp.time - brute.1).abs() <= 1e-9 * (1.0 + brute.1),
            "seed {seed}: ilp {} brute {}",
            ilp.time,
            brute.1
        );
    }
}

/// Also checks that bound-based fixing (strategies no optimum can use removed before the solve)
/// is exercised: the optimum is exhaustive search's although the solved ILP is often smaller.
#[test]
fn ilp_min_memory_equals_brute_force() {
    let config = SolverConfig::default();
    let mut fixed = 0;
    for seed in 1..=CASES {
        let mut rng = Rng(seed.wrapping_mul(0xD1B5_4A32_D192_ED03));
        let g = random_graph(&mut rng);
        let slack = rng.below(50) as f64 / 100.0;
        let (fastest, leanest) = g.solve_min_memory(slack, &config).unwrap();
        let limit = fastest.time * (1.0 + slack) * (1.0 + 1e-9);
        let brute = g
            .brute_force(IlpObjective::MinMemory { time_limit: limit })
            .unwrap();
        assert!(leanest.time <= limit, "seed {seed}");
        assert_eq!(leanest.memory as f64, brute.1, "seed {seed}");
        let st = &leanest.stats;
        assert!(st.solved_variables <= st.variables && st.solved_constraints <= st.constraints);
        fixed += usize::from(st.solved_variables < st.variables);
    }
    assert!(fixed > 0, "no case removed a strategy");
}

#[test]
fn infeasible_budget_names_smallest_memory() {
    let g = StrategyGraph {
        nodes: vec![StrategyNode {
            name: "a".into(),
            copies: 2,
            time: vec![1.0, 2.0],
            memory: vec![100, 40],
        }],
        edges: vec![],
        ..Default::default()
    };
    let within = |budget: f64| {
        g.solve(
            IlpObjective::MinTime {
                memory_budget: Some(budget),
            },
            &SolverConfig::default(),
        )
    };
    let err = within(50.0).unwrap_err();
    assert!(
        err.to_string()
            .contains("smallest achievable per-device memory is 0.00 GiB (80 bytes)"),
        "{err}"
    );
    let ok = within(80.0).unwrap();
    assert_eq!(ok.choice, vec![1]);
    assert_eq!(ok.stats.status, parallel_plan::ilp::SolveStatus::Optimal);
    assert!(ok.stats.variables >= 2 && ok.stats.constraints >= 2);
    // Strategy 0 (200 bytes) cannot fit 80: removed before the solve.
    assert!(ok.stats.solved_variables < ok.stats.variables);
}

#[test]
fn malformed_graph_is_a_typed_error() {
    let g = StrategyGraph {
        nodes: vec![StrategyNode {
            name: "a".into(),
            copies: 1,
            time: vec![1.0],
            memory: vec![1],
        }],
        edges: vec![StrategyEdge {
            from: 0,
            to: 3,
            copies: 1,
            from_class: vec![],
            to_class: vec![],
            cost: vec![0.0],
        }],
        ..Default::default()
    };
    assert!(g
        .solve(
            IlpObjective::MinTime {
                memory_budget: None
            },
            &SolverConfig::default()
        )
        .is_err());
}

/// A memory term the node memories do not show decides the plan.
#[test]
fn memory_terms_decide_the_leanest_choice() {
    let g = StrategyGraph {
        nodes: vec![StrategyNode {
            name: "a".into(),
            copies: 2,
            time: vec![1.0, 1.0],
            memory: vec![100, 40],
        }],
        memory_terms: vec![MemoryTerm {
            name: "bucket".into(),
            sum: vec![vec![0, 1000]],
            largest: vec![],
            cap: Some(300),
        }],
        memory_offset: 7,
        ..Default::default()
    };
    let s = g
        .solve(
            IlpObjective::MinMemory { time_limit: 10.0 },
            &SolverConfig::default(),
        )
        .unwrap();
    // 2·100 + 0 + 7 beats 2·40 + min(300, 1000) + 7.
    assert_eq!((s.choice, s.memory), (vec![0], 207));
}

/// A min-memory solve under a time bound no choice meets is its own typed error, carrying the
/// bound (the planner skips such a candidate instead of giving up its other plans).
#[test]
fn unmet_time_bound_is_a_typed_error() {
    let g = StrategyGraph {
        nodes: vec![StrategyNode {
            name: "a".into(),
            copies: 1,
            time: vec![2.0, 3.0],
            memory: vec![10, 5],
        }],
        ..Default::default()
    };
    match g.solve(
        IlpObjective::MinMemory { time_limit: 1.0 },
        &SolverConfig::default(),
    ) {
        Err(PlanError::TimeBoundUnmet { time_limit_s }) => assert_eq!(time_limit_s, 1.0),
        other => panic!("expected TimeBoundUnmet, got {other:?}"),
    }
    let s = g
        .solve(
            IlpObjective::MinMemory { time_limit: 2.5 },
            &SolverConfig::default(),
        )
        .unwrap();
    assert_eq!((s.choice, s.memory), (vec![0], 10));
}
