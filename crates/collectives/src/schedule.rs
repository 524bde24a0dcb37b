//! Communication schedules: each collective algorithm compiled, for one rank, into a list of
//! steps over a working buffer. A step sends one region to one peer and/or receives one region
//! from one peer (copying or reducing it in). Peers are ranks of the communicator.
//!
//! Algorithms (Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
//! Operations in MPICH", IJHPCA 2005): ring reduce-scatter / all-gather / all-reduce,
//! recursive halving-doubling all-reduce (Rabenseifner) for small messages, binomial-tree
//! broadcast and reduce, pairwise all-to-all, dissemination barrier.

use std::ops::Range;

/// What a receive does with the incoming region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Overwrite the region.
    Copy,
    /// Reduce into the region with the collective's operator.
    Reduce,
}

/// One step: the send (if any) is issued first, then the receive (if any) is awaited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) send: Option<(usize, Range<usize>)>,
    pub(crate) recv: Option<(usize, Range<usize>, Action)>,
}

impl Step {
    pub(crate) fn exchange(
        send_to: usize,
        send: Range<usize>,
        recv_from: usize,
        recv: Range<usize>,
        a: Action,
    ) -> Self {
        Step {
            send: Some((send_to, send)),
            recv: Some((recv_from, recv, a)),
        }
    }
    pub(crate) fn send(to: usize, r: Range<usize>) -> Self {
        Step {
            send: Some((to, r)),
            recv: None,
        }
    }
    pub(crate) fn recv(from: usize, r: Range<usize>, a: Action) -> Self {
        Step {
            send: None,
            recv: Some((from, r, a)),
        }
    }
}

/// Part `i` of `count` elements split into `parts` nearly equal contiguous parts.
pub(crate) fn part(count: usize, parts: usize, i: usize) -> Range<usize> {
    (i * count / parts)..((i + 1) * count / parts)
}

/// Ring reduce-scatter over `n` chunks (`chunk(i)`): afterwards rank `me` holds the reduced chunk `me`.
pub(crate) fn ring_reduce_scatter(
    n: usize,
    me: usize,
    chunk: impl Fn(usize) -> Range<usize>,
) -> Vec<Step> {
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    (0..n.saturating_sub(1))
        .map(|s| {
            let send = (me + 2 * n - s - 1) % n;
            let recv = (me + 2 * n - s - 2) % n;
            Step::exchange(next, chunk(send), prev, chunk(recv), Action::Reduce)
        })
        .collect()
}

/// Ring all-gather over `n` chunks: rank `me` starts with chunk `me`, ends with all.
pub(crate) fn ring_all_gather(
    n: usize,
    me: usize,
    chunk: impl Fn(usize) -> Range<usize>,
) -> Vec<Step> {
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    (0..n.saturating_sub(1))
        .map(|s| {
            let send = (me + n - s) % n;
            let recv = (me + 2 * n - s - 1) % n;
            Step::exchange(next, chunk(send), prev, chunk(recv), Action::Copy)
        })
        .collect()
}

/// Ring all-reduce of `count` elements: reduce-scatter then all-gather (bandwidth-optimal).
pub(crate) fn ring_all_reduce(n: usize, me: usize, count: usize) -> Vec<Step> {
    let chunk = |i| part(count, n, i);
    let mut steps = ring_reduce_scatter(n, me, chunk);
    steps.extend(ring_all_gather(n, me, chunk));
    steps
}

/// Recursive halving-doubling all-reduce (Rabenseifner) of `count` elements, any `n`:
/// the first `2 * (n - p)` ranks (p = largest power of two <= n) fold pairwise, the `p`
/// survivors reduce-scatter by recursive halving and all-gather by recursive doubling, and the
/// folded ranks get the result back. `2 log p (+2)` steps: latency-optimal for small messages.
pub(crate) fn halving_doubling_all_reduce(n: usize, me: usize, count: usize) -> Vec<Step> {
    let p = if n == 0 {
        0
    } else {
        1usize << (usize::BITS - 1 - n.leading_zeros())
    };
    let rem = n - p;
    let all = 0..count;
    let mut steps = Vec::new();
    let new_rank = if me < 2 * rem {
        if me % 2 == 0 {
            steps.push(Step::send(me + 1, all.clone()));
            steps.push(Step::recv(me + 1, all, Action::Copy));
            return steps;
        }
        steps.push(Step::recv(me - 1, all.clone(), Action::Reduce));
        me / 2
    } else {
        me - rem
    };
    let real = |nr: usize| if nr < rem { 2 * nr + 1 } else { nr + rem };
    let blocks = |lo: usize, hi: usize| part(count, p, lo).start..part(count, p, hi - 1).end;
    let (mut lo, mut hi) = (0, p);
    let mut history = Vec::new();
    let mut d = p / 2;
    while d >= 1 {
        let partner = real(new_rank ^ d);
        let mid = (lo + hi) / 2;
        let (keep, give) = if new_rank & d == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        steps.push(Step::exchange(
            partner,
            blocks(give.0, give.1),
            partner,
            blocks(keep.0, keep.1),
            Action::Reduce,
        ));
        history.push((partner, keep, give));
        (lo, hi) = keep;
        d /= 2;
    }
    for (partner, keep, give) in history.into_iter().rev() {
        steps.push(Step::exchange(
            partner,
            blocks(keep.0, keep.1),
            partner,
            blocks(give.0, give.1),
            Action::Copy,
        ));
    }
    if me < 2 * rem {
        steps.push(Step::send(me - 1, 0..count));
    }
    steps
}

/// Binomial-tree broadcast of `count` elements from `root`.
pub(crate) fn binomial_broadcast(n: usize, me: usize, root: usize, count: usize) -> Vec<Step> {
    let vr = (me + n - root) % n;
    let abs = |v: usize| (v + root) % n;
    let mut steps = Vec::new();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            steps.push(Step::recv(abs(vr - mask), 0..count, Action::Copy));
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            steps.push(Step::send(abs(vr + mask), 0..count));
        }
        mask >>= 1;
    }
    steps
}

/// Binomial-tree reduce of `count` elements to `root`.
pub(crate) fn binomial_reduce(n: usize, me: usize, root: usize, count: usize) -> Vec<Step> {
    let vr = (me + n - root) % n;
    let abs = |v: usize| (v + root) % n;
    let mut steps = Vec::new();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            steps.push(Step::send(abs(vr - mask), 0..count));
            break;
        }
        if vr + mask < n {
            steps.push(Step::recv(abs(vr + mask), 0..count, Action::Reduce));
        }
        mask <<= 1;
    }
    steps
}

/// Pairwise all-to-all: the working buffer is `input ++ output`, each `n * block` long.
pub(crate) fn pairwise_all_to_all(n: usize, me: usize, block: usize) -> Vec<Step> {
    let out = n * block;
    (1..n)
        .map(|s| {
            let to = (me + s) % n;
            let from = (me + n - s) % n;
            Step::exchange(
                to,
                to * block..(to + 1) * block,
                from,
                out + from * block..out + (from + 1) * block,
                Action::Copy,
            )
        })
        .collect()
}

/// Dissemination barrier: `ceil(log2 n)` rounds of empty messages.
pub(crate) fn dissemination_barrier(n: usize, me: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        steps.push(Step::exchange(
            (me + d) % n,
            0..0,
            (me + n - d) % n,
            0..0,
            Action::Copy,
        ));
        d <<= 1;
    }
    steps
}

#[cfg(test)]
mod tests;
