//! The zero-copy shared-memory all-reduce of the local transport: random inputs against the
//! serial reference, buffer reuse racing the handshake, preemption in random orders, ordered
//! deadlock reports, mismatches and lost peers.

use std::time::Duration;

use collectives::{
    run_local_with, AllReduceAlgorithm, CollectiveError, Config, Element, Mode, ReduceOp,
};
use collectives_bench::chaos::{run_chaos, ChaosConfig};
use proptest::prelude::*;

use crate::with_timeout;

fn shm(mode: Mode) -> Config {
    Config {
        all_reduce: AllReduceAlgorithm::SharedMemory,
        op_timeout: Duration::from_secs(10),
        deadlock_timeout: Duration::from_millis(500),
        ..Config::with_mode(mode)
    }
}

/// Left fold over the ranks, as `Element::combine` defines it.
fn serial<T: Element>(inputs: &[Vec<T>], op: ReduceOp) -> Vec<T> {
    let mut acc = inputs[0].clone();
    for x in &inputs[1..] {
        for (a, b) in acc.iter_mut().zip(x) {
            *a = T::combine(op, *a, *b);
        }
    }
    acc
}

fn check<T: Element>(inputs: Vec<Vec<T>>, op: ReduceOp) -> Result<(), TestCaseError> {
    let want = serial(&inputs, op);
    let n = inputs.len();
    let out = run_local_with(&shm(Mode::Preemptive), n, |comm| {
        comm.all_reduce(inputs[comm.rank()].clone(), op)
    });
    for (r, o) in out.into_iter().enumerate() {
        let got = o.unwrap().unwrap();
        // Every chunk is reduced in rank order by one rank: bit-identical to the fold.
        prop_assert!(
            got == want,
            "rank {r} of {n}, {op:?}, {} elements",
            want.len()
        );
    }
    Ok(())
}

fn op_strategy() -> impl Strategy<Value = ReduceOp> {
    prop::sample::select(ReduceOp::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random f64 (any value, so the reduction order matters) over 1–5 ranks and lengths
    /// that no world size divides, every op.
    #[test]
    fn shared_memory_f64_matches_serial_fold(
        n in 1usize..=5, len in 0usize..40_000, op in op_strategy(), seed in any::<u64>()
    ) {
        let inputs = (0..n)
            .map(|r| (0..len).map(|i| {
                let h = (seed ^ (r as u64) << 32 ^ i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                (h >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
            }).collect())
            .collect();
        check::<f64>(inputs, op)?;
    }

    /// Random i32 and u8 (wrapping) over 1–8 ranks.
    #[test]
    fn shared_memory_integers_match_serial_fold(
        n in 1usize..=8, len in 0usize..20_000, op in op_strategy(), seed in any::<i32>()
    ) {
        let ints: Vec<Vec<i32>> = (0..n)
            .map(|r| (0..len).map(|i| seed.wrapping_mul(r as i32 + 1) ^ (i as i32 * 7919)).collect())
            .collect();
        let bytes = ints.iter().map(|v| v.iter().map(|&x| x as u8).collect()).collect();
        check::<i32>(ints, op)?;
        check::<u8>(bytes, op)?;
    }
}

/// Ranks reuse their returned buffer at once for the next all-reduce while slower ranks may
/// still be in the previous one (some ranks sleep at random): the handshake must keep every
/// result exact.
#[test]
fn buffer_reuse_races_the_handshake() {
    with_timeout(Duration::from_secs(30), || {
        let (n, len, rounds) = (4, 50_003, 60);
        let out = run_local_with(&shm(Mode::Preemptive), n, |comm| {
            let me = comm.rank() as i64;
            let mut buf = vec![0i64; len];
            for round in 0..rounds as i64 {
                buf.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = me * 1000 + round + i as i64);
                if (round + me) % 3 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
                buf = comm.all_reduce(buf, ReduceOp::Sum).unwrap();
                for (i, x) in buf.iter().enumerate() {
                    let want = 6000 + 4 * (round + i as i64);
                    assert_eq!(*x, want, "rank {me} round {round} element {i}");
                }
            }
        });
        out.into_iter().for_each(|o| o.unwrap());
    });
}

/// The paper's random-order workload with every all-reduce in shared memory: completes
/// preemptively, and ordered mode reports the deadlock.
#[test]
fn chaos_order_over_shared_memory() {
    with_timeout(Duration::from_secs(40), || {
        for seed in 0..6 {
            let cfg = ChaosConfig {
                seed,
                elements: 4096,
                engine: shm(Mode::Preemptive),
                ..ChaosConfig::default()
            };
            for r in run_chaos(&cfg).unwrap() {
                assert!(r.first_error.is_none(), "seed {seed}: {:?}", r.first_error);
                assert_eq!(r.correct, 8, "seed {seed} rank {}", r.rank);
            }
        }
        let cfg = ChaosConfig {
            seed: 1,
            elements: 4096,
            engine: shm(Mode::Ordered),
            ..ChaosConfig::default()
        };
        let ranks = run_chaos(&cfg).unwrap();
        assert!(ranks.iter().any(|r| matches!(
            &r.first_error,
            Some(CollectiveError::Deadlock { waiting_on, .. }) if !waiting_on.is_empty()
        )));
    });
}

#[test]
fn shared_memory_mismatch_and_lost_peer() {
    with_timeout(Duration::from_secs(20), || {
        let cfg = shm(Mode::Preemptive);
        // Rank 1 disagrees on the element count, then on the dtype (another slot type): every
        // rank fails naming the difference (directly, or as the reason a peer reported).
        for (case, what) in [(0, "element count"), (1, "dtype")] {
            let out = run_local_with(&cfg, 3, |comm| match (case, comm.rank()) {
                (0, 1) => comm.all_reduce(vec![1i64; 12], ReduceOp::Sum).map(drop),
                (1, 1) => comm.all_reduce(vec![1f32; 10], ReduceOp::Sum).map(drop),
                _ => comm.all_reduce(vec![1i64; 10], ReduceOp::Sum).map(drop),
            });
            let errs: Vec<String> = out
                .into_iter()
                .map(|o| o.unwrap().unwrap_err().to_string())
                .collect();
            assert!(errs.iter().all(|e| e.contains(what)), "{what}: {errs:?}");
        }
        // A rank that dies before publishing: the others get PeerLost, not a hang.
        let out = run_local_with(&cfg, 3, |comm| {
            if comm.rank() == 2 {
                panic!("rank 2 dies on purpose");
            }
            comm.all_reduce(vec![1f32; 1 << 16], ReduceOp::Sum)
        });
        for (r, o) in out.into_iter().enumerate().take(2) {
            assert!(
                matches!(o, Ok(Err(CollectiveError::PeerLost { rank: 2, .. }))),
                "rank {r}: {o:?}"
            );
        }
    });
}
