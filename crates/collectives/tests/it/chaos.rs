//! The chaos-order workload (all-reduces, broadcasts and reduces on 8 sub-communicators), a
//! 3-communicator cycle and host synchronisation between collectives: complete in preemptive
//! mode, reported as deadlock in ordered mode.

use std::time::Duration;

use collectives::{run_local_with, CollectiveError, Communicator, Config, Mode, ReduceOp};
use collectives_bench::chaos::{run_chaos, ChaosConfig};

use crate::with_timeout;

fn ordered() -> Config {
    Config {
        deadlock_timeout: Duration::from_millis(300),
        ..Config::with_mode(Mode::Ordered)
    }
}

/// Runs the chaos workload (8 ranks × 8 collectives of 256 f64: 3 all-reduces, 3 broadcasts,
/// 2 reduces, `chaos_op`) for `seed` on `engine` and checks every rank: no error, all 8
/// results correct, and the ranks' orders differ.
fn chaos_run(seed: u64, engine: &Config) -> Vec<collectives_bench::chaos::ChaosRank> {
    let cfg = ChaosConfig {
        seed,
        elements: 256,
        engine: engine.clone(),
        ..ChaosConfig::default()
    };
    let ranks = run_chaos(&cfg).unwrap();
    for r in &ranks {
        assert!(
            r.first_error.is_none(),
            "seed {seed} rank {}: {:?}",
            r.rank,
            r.first_error
        );
        assert_eq!(r.correct, 8, "seed {seed} rank {}", r.rank);
    }
    assert!(
        ranks.windows(2).any(|w| w[0].order != w[1].order),
        "orders differ"
    );
    ranks
}

#[test]
fn chaos_order_completes_preemptive_over_many_seeds() {
    with_timeout(Duration::from_secs(60), || {
        // The default engine, 24 orders: every run completes correctly.
        for seed in 0..24 {
            chaos_run(seed, &Config::default());
        }
        // The all-reduces by the power-of-two rule's halving-doubling (no shared memory, no
        // small-message algorithms), as over TCP and MPI.
        let recursive = Config {
            halving_doubling_bytes: Some(usize::MAX),
            shared_memory_bytes: Some(usize::MAX),
            small_message_bytes: 0,
            ..Config::default()
        };
        for seed in 0..8 {
            chaos_run(seed, &recursive);
        }
    });
}

/// Preemption itself, exercised reliably rather than by chance. The engine preempts a head
/// blocked for more than `initial_threshold` polls in a row (16 by default), and a waiting
/// rank polls only while it has reason to: since waiting threads drive the engine and park
/// when idle (woken by deliveries; under load without yielding, `engine/yield_gate.rs`), a head
/// sees 4 polls per round and rounds mostly when a message arrives, so 17 blocked polls in a row
/// became rare (default settings: preemption in 27 of 100 runs at load 34, none in 24 runs in 3
/// of 9 suite runs at load ~16; the test used to need up to 480 seeds). With a threshold of 2
/// the head is preempted in the round in which it first blocks 3 times (every one of 150 runs
/// preempted, 70 preemptions a run, before broadcasts and reduces joined the workload). Checked:
/// every result, at least one preemption, and at least one of a broadcast or reduce.
#[test]
fn chaos_order_preempts_blocked_collectives() {
    with_timeout(Duration::from_secs(60), || {
        let engine = Config {
            initial_threshold: 2,
            ..Config::default()
        };
        let (mut switches, mut rooted) = (0, 0);
        for seed in 0..8 {
            for r in chaos_run(seed, &engine) {
                switches += r.engine.context_switches;
                rooted += r
                    .ops
                    .iter()
                    .filter(|o| o.op == "broadcast" || o.op == "reduce")
                    .map(|o| o.context_switches)
                    .sum::<u64>();
            }
        }
        assert!(
            switches > 0,
            "the engine never preempted a blocked collective in 8 runs"
        );
        // The rooted collectives (agreement rounds woven in) are preempted and resumed too.
        assert!(
            rooted > 0,
            "no broadcast or reduce was preempted in 8 runs ({switches} preemptions)"
        );
    });
}

#[test]
fn chaos_order_is_reported_as_deadlock_in_ordered_mode() {
    with_timeout(Duration::from_secs(30), || {
        for seed in [1, 2] {
            let cfg = ChaosConfig {
                seed,
                elements: 64,
                engine: ordered(),
                ..ChaosConfig::default()
            };
            let ranks = run_chaos(&cfg).unwrap();
            let deadlocks: Vec<_> = ranks
                .iter()
                .filter_map(|r| match &r.first_error {
                    Some(CollectiveError::Deadlock { waiting_on, .. }) => Some(waiting_on.clone()),
                    _ => None,
                })
                .collect();
            assert!(!deadlocks.is_empty(), "seed {seed}: no deadlock reported");
            assert!(
                deadlocks.iter().all(|w| !w.is_empty()),
                "deadlock must name the awaited ranks"
            );
            assert!(
                ranks.iter().all(|r| r.correct < 8),
                "seed {seed}: a rank finished everything"
            );
        }
    });
}

/// Pairs (0,1), (1,2), (2,0); each rank starts with a different pair → a wait cycle.
fn three_cycle(world: Communicator) -> Result<Vec<i64>, CollectiveError> {
    let me = world.rank();
    let pairs = [(0, 1), (1, 2), (2, 0)];
    let comms: Vec<Communicator> = pairs
        .iter()
        .map(|&(a, b)| {
            world
                .split(u64::from(me == a || me == b), me as i64)
                .unwrap()
        })
        .collect();
    let mine: Vec<usize> = (0..3)
        .filter(|&p| pairs[p].0 == me || pairs[p].1 == me)
        .collect();
    let first = if me == 0 { 2 } else { mine[0] };
    let second = *mine.iter().find(|&&p| p != first).unwrap();
    let h1 = comms[first].iall_reduce(vec![me as i64 + 1; 16], ReduceOp::Sum)?;
    let h2 = comms[second].iall_reduce(vec![me as i64 + 1; 16], ReduceOp::Sum)?;
    Ok(vec![h1.wait()?[0], h2.wait()?[0]])
}

#[test]
fn three_communicator_cycle() {
    with_timeout(Duration::from_secs(20), || {
        let ok = run_local_with(&Config::default(), 3, three_cycle);
        for (r, o) in ok.into_iter().enumerate() {
            let mut v = o.unwrap().unwrap();
            v.sort_unstable();
            let want = match r {
                0 => [3, 4],
                1 => [3, 5],
                _ => [4, 5],
            };
            assert_eq!(v, want, "rank {r}");
        }
        let bad = run_local_with(&ordered(), 3, three_cycle);
        let deadlocks = bad
            .iter()
            .filter(|o| matches!(o, Ok(Err(CollectiveError::Deadlock { .. }))))
            .count();
        assert!(deadlocks > 0, "ordered mode must report the cycle: {bad:?}");
    });
}

#[test]
fn host_synchronisation_between_collectives() {
    with_timeout(Duration::from_secs(20), || {
        let out = run_local_with(&Config::default(), 2, |world| {
            let (a, b) = (world.dup().unwrap(), world.dup().unwrap());
            if world.rank() == 0 {
                // Waits for `a` on the host before even submitting `b`.
                let x = a.all_reduce(vec![1u8; 4], ReduceOp::Sum).unwrap();
                let y = b.all_reduce(vec![10u8; 4], ReduceOp::Sum).unwrap();
                (x, y)
            } else {
                let hb = b.iall_reduce(vec![20u8; 4], ReduceOp::Sum).unwrap();
                let ha = a.iall_reduce(vec![2u8; 4], ReduceOp::Sum).unwrap();
                (ha.wait().unwrap(), hb.wait().unwrap())
            }
        });
        for o in out {
            assert_eq!(o.unwrap(), (vec![3; 4], vec![30; 4]));
        }
    });
}
