//! Schedules checked by a sequential simulator with unbounded FIFO channels.

use super::*;
use std::collections::VecDeque;

/// Runs every rank's schedule on `bufs` (sum reduction); panics on deadlock.
fn simulate(steps: Vec<Vec<Step>>, mut bufs: Vec<Vec<i64>>) -> Vec<Vec<i64>> {
    let n = steps.len();
    let mut chans: Vec<Vec<VecDeque<Vec<i64>>>> = vec![vec![VecDeque::new(); n]; n];
    let mut pc = vec![0; n];
    let mut sent = vec![false; n];
    loop {
        let mut moved = false;
        for r in 0..n {
            while pc[r] < steps[r].len() {
                let st = &steps[r][pc[r]];
                if !sent[r] {
                    if let Some((to, rg)) = &st.send {
                        chans[r][*to].push_back(bufs[r][rg.clone()].to_vec());
                    }
                    sent[r] = true;
                    moved = true;
                }
                if let Some((from, rg, a)) = &st.recv {
                    let Some(m) = chans[*from][r].pop_front() else {
                        break;
                    };
                    assert_eq!(m.len(), rg.len(), "rank {r} step {} length", pc[r]);
                    for (d, s) in bufs[r][rg.clone()].iter_mut().zip(m) {
                        *d = if *a == Action::Reduce { *d + s } else { s };
                    }
                }
                pc[r] += 1;
                sent[r] = false;
                moved = true;
            }
        }
        if (0..n).all(|r| pc[r] == steps[r].len()) {
            assert!(
                chans.iter().flatten().all(VecDeque::is_empty),
                "unconsumed messages"
            );
            return bufs;
        }
        assert!(moved, "schedule deadlocked at {pc:?}");
    }
}

fn inputs(n: usize, count: usize) -> Vec<Vec<i64>> {
    (0..n)
        .map(|r| (0..count).map(|i| (r * 1000 + i) as i64).collect())
        .collect()
}

fn sums(n: usize, count: usize) -> Vec<i64> {
    let ins = inputs(n, count);
    (0..count).map(|i| ins.iter().map(|v| v[i]).sum()).collect()
}

/// Cutting leaves a schedule without long regions as it was, and cuts a swap of 10 elements
/// into pieces of at most 4 as 3 + 3 + 4 ([`part`]), all three sent before the first is
/// awaited.
#[test]
fn pieces_of_a_swap() {
    let steps = halving_doubling_all_reduce(2, 0, 8);
    assert_eq!(cut_into_pieces(steps.clone(), 4), steps);
    let cut = cut_into_pieces(vec![Step::swap(1, 0..10, 10..20, Action::Reduce)], 4);
    let want = vec![
        Step::send(1, 0..3),
        Step::exchange(1, 3..6, 1, 10..13, Action::Reduce),
        Step::exchange(1, 6..10, 1, 13..16, Action::Reduce),
        Step::recv(1, 16..20, Action::Reduce),
    ];
    assert_eq!(cut, want);
}

#[test]
fn all_reduce_schedules_are_correct() {
    for n in 1..=9 {
        for count in [0, 1, 2, 7, 13, 64] {
            let want = sums(n, count);
            for algo in [
                ring_all_reduce as fn(usize, usize, usize) -> Vec<Step>,
                halving_doubling_all_reduce,
                recursive_doubling_all_reduce,
            ] {
                let out = simulate(
                    (0..n).map(|r| algo(n, r, count)).collect(),
                    inputs(n, count),
                );
                assert!(out.iter().all(|o| *o == want), "n={n} count={count}");
            }
        }
    }
}

/// Recursive halving and doubling give the ring's reduce-scatter and all-gather on every
/// power-of-two world, including empty and one-element chunks.
#[test]
fn recursive_reduce_scatter_and_all_gather_match_the_ring() {
    for n in [1, 2, 4, 8, 16] {
        for block in [0, 1, 3] {
            let count = n * block;
            let chunk = |i: usize| i * block..(i + 1) * block;
            let want = sums(n, count);
            let halving = simulate(
                (0..n)
                    .map(|r| recursive_halving_reduce_scatter(n, r, chunk, |m| m))
                    .collect(),
                inputs(n, count),
            );
            let ring_rs = simulate(
                (0..n)
                    .map(|r| ring(n, r, chunk, RingPass::ReduceScatter))
                    .collect(),
                inputs(n, count),
            );
            for r in 0..n {
                assert_eq!(
                    halving[r][chunk(r)],
                    want[chunk(r)],
                    "n={n} block={block} r={r}"
                );
                assert_eq!(
                    ring_rs[r][chunk(r)],
                    want[chunk(r)],
                    "n={n} block={block} r={r}"
                );
            }
            // All-gather: rank r starts with only its own chunk (the others zero).
            let own: Vec<Vec<i64>> = (0..n)
                .map(|r| {
                    let mut v = vec![0; count];
                    v[chunk(r)].copy_from_slice(&inputs(n, count)[r][chunk(r)]);
                    v
                })
                .collect();
            let whole: Vec<i64> = (0..n)
                .flat_map(|r| inputs(n, count)[r][chunk(r)].to_vec())
                .collect();
            let doubling = simulate(
                (0..n)
                    .map(|r| recursive_doubling_all_gather(n, r, chunk, |m| m))
                    .collect(),
                own,
            );
            assert!(doubling.iter().all(|o| *o == whole), "n={n} block={block}");
        }
    }
}

#[test]
fn rooted_schedules_are_correct() {
    for n in 1..=9 {
        for root in 0..n {
            let count = 5;
            let out = simulate(
                (0..n).map(|r| binomial_reduce(n, r, root, count)).collect(),
                inputs(n, count),
            );
            assert_eq!(out[root], sums(n, count));
            let out = simulate(
                (0..n)
                    .map(|r| binomial_broadcast(n, r, root, count))
                    .collect(),
                inputs(n, count),
            );
            assert!(out.iter().all(|o| *o == inputs(n, count)[root]));
        }
    }
}

/// The rooted schedules with the agreement rounds woven in ([`agreed`]) still compute the
/// same results, and every pair of ranks keeps one frame order (the simulator pairs frames in
/// FIFO order and checks each length, so an empty agreement frame taken for data fails).
#[test]
fn agreed_rooted_schedules_are_correct() {
    for n in 1..=9 {
        for root in 0..n {
            for count in [0, 1, 5] {
                let want = &inputs(n, count)[root];
                let out = simulate(
                    (0..n)
                        .map(|r| agreed(n, r, binomial_reduce(n, r, root, count)))
                        .collect(),
                    inputs(n, count),
                );
                assert_eq!(out[root], sums(n, count), "reduce n={n} root={root}");
                let out = simulate(
                    (0..n)
                        .map(|r| agreed(n, r, binomial_broadcast(n, r, root, count)))
                        .collect(),
                    inputs(n, count),
                );
                assert!(out.iter().all(|o| o == want), "broadcast n={n} root={root}");
                let out = simulate(
                    (0..n)
                        .map(|r| agreed(n, r, pipelined_broadcast(n, r, root, count, 3)))
                        .collect(),
                    inputs(n, count),
                );
                assert!(out.iter().all(|o| o == want), "pipelined n={n} root={root}");
            }
            // The first round's send leads every schedule; all rounds are there.
            let rounds = dissemination_barrier(n, 0).len();
            for r in 0..n {
                let steps = agreed(n, r, binomial_reduce(n, r, root, 4));
                let empty = |st: &Step| st.recv.as_ref().is_some_and(|(_, q, _)| q.is_empty());
                assert_eq!(steps.iter().filter(|s| empty(s)).count(), rounds);
                if n > 1 {
                    assert_eq!(steps[0], Step::send((r + 1) % n, 0..0));
                }
            }
        }
    }
}

#[test]
fn pipelined_broadcast_is_correct_and_pipelines() {
    for n in 1..=9 {
        for root in 0..n {
            for (count, pieces) in [(0, 1), (1, 4), (7, 3), (64, 8), (13, 13)] {
                let steps: Vec<_> = (0..n)
                    .map(|r| pipelined_broadcast(n, r, root, count, pieces))
                    .collect();
                // Every rank moves each piece at most once in and once out, overlapped.
                assert!(steps.iter().all(|s| s.len() <= pieces + 1));
                let out = simulate(steps, inputs(n, count));
                let want = &inputs(n, count)[root];
                assert!(
                    out.iter().all(|o| o == want),
                    "n={n} root={root} count={count}"
                );
            }
        }
    }
}

#[test]
fn gather_scatter_alltoall_barrier() {
    for n in 1..=9 {
        let block = 3;
        let chunk = |i: usize| i * block..(i + 1) * block;
        let full = inputs(n, n * block);
        let out = simulate(
            (0..n)
                .map(|r| ring(n, r, chunk, RingPass::ReduceScatter))
                .collect(),
            full.clone(),
        );
        let want = sums(n, n * block);
        for (r, o) in out.iter().enumerate() {
            assert_eq!(o[chunk(r)], want[chunk(r)]);
        }
        let out = simulate(
            (0..n)
                .map(|r| ring(n, r, chunk, RingPass::AllGather))
                .collect(),
            full.clone(),
        );
        for o in &out {
            for r in 0..n {
                assert_eq!(o[chunk(r)], full[r][chunk(r)]);
            }
        }
        let bufs = full
            .iter()
            .map(|v| [v.clone(), vec![0; n * block]].concat())
            .collect();
        let out = simulate(
            (0..n).map(|r| pairwise_all_to_all(n, r, block)).collect(),
            bufs,
        );
        for (r, o) in out.iter().enumerate() {
            for s in 0..n {
                if s != r {
                    assert_eq!(o[n * block + s * block..][..block], full[s][chunk(r)]);
                }
            }
        }
        simulate(
            (0..n).map(|r| dissemination_barrier(n, r)).collect(),
            vec![vec![]; n],
        );
    }
}

proptest::proptest! {
    /// The all-reduce schedules equal the serial sum on random world sizes, lengths and data.
    #[test]
    fn all_reduce_schedules_match_serial_sum(n in 1usize..12, count in 0usize..300, seed in 0i64..1000) {
        let bufs: Vec<Vec<i64>> = (0..n)
            .map(|r| (0..count).map(|i| (seed * 31 + (r * count + i) as i64 * 7919) % 1009 - 500).collect())
            .collect();
        let want: Vec<i64> = (0..count).map(|i| bufs.iter().map(|b| b[i]).sum()).collect();
        let pipelined2 = |n, r, c| pipelined_ring_all_reduce(n, r, c, 2);
        let pipelined5 = |n, r, c| pipelined_ring_all_reduce(n, r, c, 5);
        for algo in [ring_all_reduce as fn(usize, usize, usize) -> Vec<Step>, halving_doubling_all_reduce, recursive_doubling_all_reduce, pipelined2, pipelined5] {
            let out = simulate((0..n).map(|r| algo(n, r, count)).collect(), bufs.clone());
            proptest::prop_assert!(out.iter().all(|o| *o == want));
        }
    }

    /// Every all-reduce schedule cut into pieces of at most `max_len` elements still equals
    /// the serial sum, and no message is longer than `max_len` (the simulator also checks
    /// that every message has the length its receiver expects).
    #[test]
    fn pieces_keep_schedules_correct(n in 1usize..10, count in 0usize..200, max_len in 0usize..40, seed in 0i64..1000) {
        let bufs: Vec<Vec<i64>> = (0..n)
            .map(|r| (0..count).map(|i| (seed * 17 + (r * count + i) as i64 * 7907) % 997 - 400).collect())
            .collect();
        let want: Vec<i64> = (0..count).map(|i| bufs.iter().map(|b| b[i]).sum()).collect();
        let pipelined3 = |n, r, c| pipelined_ring_all_reduce(n, r, c, 3);
        for algo in [ring_all_reduce as fn(usize, usize, usize) -> Vec<Step>, halving_doubling_all_reduce, recursive_doubling_all_reduce, pipelined3] {
            let steps: Vec<Vec<Step>> = (0..n).map(|r| cut_into_pieces(algo(n, r, count), max_len)).collect();
            let longest = steps.iter().flatten().flat_map(|st| {
                st.send.iter().map(|(_, r)| r.len()).chain(st.recv.iter().map(|(_, r, _)| r.len()))
            }).max().unwrap_or(0);
            proptest::prop_assert!(longest <= max_len.max(1), "a piece of {longest} > {max_len}");
            let out = simulate(steps, bufs.clone());
            proptest::prop_assert!(out.iter().all(|o| *o == want));
        }
    }
}
