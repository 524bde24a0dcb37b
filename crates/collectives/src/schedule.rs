//! Communication schedules: each collective algorithm compiled, for one rank, into a list of
//! steps over a working buffer. A step sends one region to one peer and/or receives one region
//! from one peer (copying or reducing it in). Peers are ranks of the communicator.
//!
//! Algorithms (Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication
//! Operations in MPICH", IJHPCA 2005): ring reduce-scatter / all-gather / all-reduce,
//! recursive halving-doubling all-reduce (Rabenseifner) and recursive doubling for small messages, binomial-tree
//! broadcast and reduce, pipelined chain broadcast for large messages, pairwise all-to-all, dissemination barrier.

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
    /// Sends `send` to `peer` and receives `recv` from the same peer.
    pub(crate) fn swap(peer: usize, send: Range<usize>, recv: Range<usize>, a: Action) -> Self {
        Self::exchange(peer, send, peer, recv, a)
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
pub fn part(count: usize, parts: usize, i: usize) -> Range<usize> {
    (i * count / parts)..((i + 1) * count / parts)
}

/// The two passes of ring algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingPass {
    /// Ring reduce-scatter: afterwards rank `me` holds the reduced chunk `me`.
    ReduceScatter,
    /// Ring all-gather: rank `me` starts with chunk `me` and ends with all chunks.
    AllGather,
}

/// One pass around the ring over `n` chunks (`chunk(i)`) in `n - 1` steps: in step `s` rank
/// `me` sends chunk `me - s - lag` to the next rank and receives chunk `me - s - lag - 1` from
/// the previous one (indices mod `n`; `lag` is 1 for reduce-scatter, 0 for all-gather).
pub(crate) fn ring(
    n: usize,
    me: usize,
    chunk: impl Fn(usize) -> Range<usize>,
    pass: RingPass,
) -> Vec<Step> {
    let (lag, action) = match pass {
        RingPass::ReduceScatter => (1, Action::Reduce),
        RingPass::AllGather => (0, Action::Copy),
    };
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    (0..n.saturating_sub(1))
        .map(|s| {
            let send = (me + 2 * n - s - lag) % n;
            let recv = (me + 2 * n - s - lag - 1) % n;
            Step::exchange(next, chunk(send), prev, chunk(recv), action)
        })
        .collect()
}

/// Recursive-halving reduce-scatter over `n` chunks (`chunk(i)`), `n` a power of two: at
/// distances `n/2, n/4, …, 1` member `me` swaps with member `me ^ d` (rank `rank(me ^ d)`),
/// sending the half of its current chunks that holds the partner's own chunk and reducing in
/// the half that holds its own. The bytes of the ring's reduce-scatter in `log2 n` steps
/// instead of `n − 1`; afterwards member `me` holds the reduced chunk `me`.
pub(crate) fn recursive_halving_reduce_scatter(
    n: usize,
    me: usize,
    chunk: impl Fn(usize) -> Range<usize>,
    rank: impl Fn(usize) -> usize,
) -> Vec<Step> {
    debug_assert!(n.is_power_of_two() && me < n);
    let span = |lo: usize, hi: usize| chunk(lo).start..chunk(hi - 1).end;
    let (mut lo, mut hi) = (0, n);
    let mut steps = Vec::new();
    let mut d = n / 2;
    while d >= 1 {
        let mid = (lo + hi) / 2;
        let (keep, give) = if me & d == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        steps.push(Step::swap(
            rank(me ^ d),
            span(give.0, give.1),
            span(keep.0, keep.1),
            Action::Reduce,
        ));
        (lo, hi) = keep;
        d /= 2;
    }
    steps
}

/// Recursive-doubling all-gather over `n` chunks (`chunk(i)`), `n` a power of two: at
/// distances `1, 2, …, n/2` member `me` swaps its chunks so far with member `me ^ d`'s (rank
/// `rank(me ^ d)`). The bytes of the ring's all-gather in `log2 n` steps instead of `n − 1`.
pub(crate) fn recursive_doubling_all_gather(
    n: usize,
    me: usize,
    chunk: impl Fn(usize) -> Range<usize>,
    rank: impl Fn(usize) -> usize,
) -> Vec<Step> {
    debug_assert!(n.is_power_of_two() && me < n);
    let span = |lo: usize, hi: usize| chunk(lo).start..chunk(hi - 1).end;
    let mut steps = Vec::new();
    let mut d = 1;
    while d < n {
        let lo = me & !(d - 1);
        let peer_lo = (me ^ d) & !(d - 1);
        steps.push(Step::swap(
            rank(me ^ d),
            span(lo, lo + d),
            span(peer_lo, peer_lo + d),
            Action::Copy,
        ));
        d *= 2;
    }
    steps
}

/// Ring all-reduce of `count` elements: reduce-scatter then all-gather (bandwidth-optimal).
pub(crate) fn ring_all_reduce(n: usize, me: usize, count: usize) -> Vec<Step> {
    let chunk = |i| part(count, n, i);
    let mut steps = ring(n, me, chunk, RingPass::ReduceScatter);
    steps.extend(ring(n, me, chunk, RingPass::AllGather));
    steps
}

/// Ring all-reduce with every ring step cut into `pieces` pieces and a look-ahead of one
/// piece: step `i` sends piece `i` and then receives piece `i - 1`, so a rank's next send is on
/// the wire while it reduces the previous piece (on TCP the reader thread receives while the
/// engine reduces). A piece sent at step `i` was received `pieces` steps earlier, so
/// `pieces >= 2` keeps every dependency satisfied; fewer pieces give the plain ring.
pub(crate) fn pipelined_ring_all_reduce(
    n: usize,
    me: usize,
    count: usize,
    pieces: usize,
) -> Vec<Step> {
    if pieces < 2 || n < 2 {
        return ring_all_reduce(n, me, count);
    }
    let sub = |r: &Range<usize>, j: usize| {
        let p = part(r.len(), pieces, j);
        r.start + p.start..r.start + p.end
    };
    let units: Vec<Step> = ring_all_reduce(n, me, count)
        .into_iter()
        .flat_map(|st| {
            let (to, send) = st.send.expect("ring steps send");
            let (from, recv, a) = st.recv.expect("ring steps receive");
            (0..pieces).map(move |j| Step::exchange(to, sub(&send, j), from, sub(&recv, j), a))
        })
        .collect();
    (0..=units.len())
        .map(|i| Step {
            send: units.get(i).and_then(|u| u.send.clone()),
            recv: i.checked_sub(1).and_then(|k| units[k].recv.clone()),
        })
        .collect()
}

/// `steps` with every region longer than `max_len` elements (at least 1) cut into pieces of
/// at most `max_len`, each region into `ceil(len / max_len)` nearly equal pieces (so the
/// sender and the receiver of a region agree on its pieces). A step whose send has `s` pieces
/// and whose receive has `r` becomes `max(s, r) + 1` steps: step `j` sends piece `j` (while
/// `j < s`) and receives piece `j - 1` (while `1 <= j <= r`), so all of a step's pieces are on
/// their way before its first is awaited. Valid for schedules whose receives change only the
/// region they receive (every schedule here): a piece of a region both sent and received
/// (recursive doubling) is sent before it is received into. Returns `steps` itself when no
/// region is longer than `max_len`.
pub(crate) fn cut_into_pieces(steps: Vec<Step>, max_len: usize) -> Vec<Step> {
    let max_len = max_len.max(1);
    let pieces = |r: &Range<usize>| r.len().div_ceil(max_len).max(1);
    let longest = |st: &Step| {
        let send = st.send.as_ref().map_or(0, |(_, r)| pieces(r));
        let recv = st.recv.as_ref().map_or(0, |(_, r, _)| pieces(r));
        (send, recv)
    };
    if steps.iter().all(|st| {
        let (s, r) = longest(st);
        s.max(r) < 2
    }) {
        return steps;
    }
    let sub = |r: &Range<usize>, j: usize| {
        let p = part(r.len(), pieces(r), j);
        r.start + p.start..r.start + p.end
    };
    let mut out = Vec::with_capacity(steps.len() * 3);
    for st in steps {
        let (s, r) = longest(&st);
        if s.max(r) < 2 {
            out.push(st);
            continue;
        }
        for j in 0..=s.max(r) {
            out.push(Step {
                send: st
                    .send
                    .as_ref()
                    .filter(|_| j < s)
                    .map(|(to, reg)| (*to, sub(reg, j))),
                recv: st
                    .recv
                    .as_ref()
                    .zip(j.checked_sub(1).filter(|&k| k < r))
                    .map(|((from, reg, a), k)| (*from, sub(reg, k), *a)),
            });
        }
    }
    out
}

/// Recursive halving-doubling all-reduce (Rabenseifner) of `count` elements, any `n`:
/// the first `2 * (n - p)` ranks (p = largest power of two <= n) fold pairwise, the `p`
/// survivors reduce-scatter by recursive halving and all-gather by recursive doubling, and the
/// folded ranks get the result back. `2 log p (+2)` steps: latency-optimal for small messages.
pub(crate) fn halving_doubling_all_reduce(n: usize, me: usize, count: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let Some(fold) = PowerOfTwoFold::enter(n, me, count, &mut steps) else {
        return steps;
    };
    let blocks = |i| part(count, fold.p, i);
    let rank = |member| fold.real(member);
    steps.extend(recursive_halving_reduce_scatter(
        fold.p,
        fold.new_rank,
        blocks,
        rank,
    ));
    steps.extend(recursive_doubling_all_gather(
        fold.p,
        fold.new_rank,
        blocks,
        rank,
    ));
    fold.leave(&mut steps);
    steps
}

/// Recursive doubling all-reduce of `count` elements, any `n`: the first `2 * (n - p)` ranks
/// (p = largest power of two <= n) fold pairwise as in
/// [`halving_doubling_all_reduce`], then the `p` survivors swap their *whole* vector with the
/// partner at distance 1, 2, 4, ... and reduce it in, and the folded ranks get the result back.
/// `log p (+2)` steps of `count` elements: half the steps of halving-doubling at twice the
/// bytes per step, the fastest when per-message costs dominate (small messages; on 2 ranks one
/// exchange instead of two).
pub(crate) fn recursive_doubling_all_reduce(n: usize, me: usize, count: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let Some(fold) = PowerOfTwoFold::enter(n, me, count, &mut steps) else {
        return steps;
    };
    let mut d = 1;
    while d < fold.p {
        steps.push(Step::swap(
            fold.real(fold.new_rank ^ d),
            0..count,
            0..count,
            Action::Reduce,
        ));
        d *= 2;
    }
    fold.leave(&mut steps);
    steps
}

/// The fold of the recursive all-reduces on any `n`: with `p` the largest power of two
/// `<= n` and `rem = n - p`, each even rank `< 2 rem` hands its vector to the odd rank after it
/// (which reduces it in) and waits for the result; the `p` survivors run the power-of-two
/// algorithm among themselves under new ranks `0..p`.
struct PowerOfTwoFold {
    p: usize,
    rem: usize,
    me: usize,
    count: usize,
    /// This rank's rank among the survivors.
    new_rank: usize,
}

impl PowerOfTwoFold {
    /// Appends this rank's fold steps to `steps`: `None` if it is folded out (its steps are
    /// then complete), else the survivors' geometry.
    fn enter(n: usize, me: usize, count: usize, steps: &mut Vec<Step>) -> Option<Self> {
        let p = if n == 0 {
            0
        } else {
            1usize << (usize::BITS - 1 - n.leading_zeros())
        };
        let rem = n - p;
        let new_rank = if me < 2 * rem {
            if me.is_multiple_of(2) {
                steps.push(Step::send(me + 1, 0..count));
                steps.push(Step::recv(me + 1, 0..count, Action::Copy));
                return None;
            }
            steps.push(Step::recv(me - 1, 0..count, Action::Reduce));
            me / 2
        } else {
            me - rem
        };
        Some(Self {
            p,
            rem,
            me,
            count,
            new_rank,
        })
    }

    /// The real rank of survivor `new_rank`.
    fn real(&self, new_rank: usize) -> usize {
        if new_rank < self.rem {
            2 * new_rank + 1
        } else {
            new_rank + self.rem
        }
    }

    /// Appends the hand-back of the result to the rank folded into this one, if any.
    fn leave(&self, steps: &mut Vec<Step>) {
        if self.me < 2 * self.rem {
            steps.push(Step::send(self.me - 1, 0..self.count));
        }
    }
}

/// Parent (if not the root) and children of `me` in the binomial tree over `n` ranks rooted
/// at `root`; children smallest subtree first.
fn binomial_tree(n: usize, me: usize, root: usize) -> (Option<usize>, Vec<usize>) {
    let vr = (me + n - root) % n;
    let abs = |v: usize| (v + root) % n;
    let mut children = Vec::new();
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            return (Some(abs(vr - mask)), children);
        }
        if vr + mask < n {
            children.push(abs(vr + mask));
        }
        mask <<= 1;
    }
    (None, children)
}

/// Binomial-tree broadcast of `count` elements from `root`: receive from the parent, then
/// send to the children, largest subtree first.
pub(crate) fn binomial_broadcast(n: usize, me: usize, root: usize, count: usize) -> Vec<Step> {
    let (parent, children) = binomial_tree(n, me, root);
    let recv = parent.map(|p| Step::recv(p, 0..count, Action::Copy));
    let sends = children.into_iter().rev().map(|c| Step::send(c, 0..count));
    recv.into_iter().chain(sends).collect()
}

/// Binomial-tree reduce of `count` elements to `root`: reduce the children's data in, then
/// send to the parent.
pub(crate) fn binomial_reduce(n: usize, me: usize, root: usize, count: usize) -> Vec<Step> {
    let (parent, children) = binomial_tree(n, me, root);
    let recvs = children
        .into_iter()
        .map(|c| Step::recv(c, 0..count, Action::Reduce));
    recvs
        .chain(parent.map(|p| Step::send(p, 0..count)))
        .collect()
}

/// Pipelined chain broadcast of `count` elements from `root` in `pieces` pieces: the ranks form
/// a chain in rank order starting at `root`, and every middle rank forwards piece `k` while it
/// receives piece `k + 1`. The last rank has the data after `n - 2 + pieces` piece transfers
/// instead of the binomial tree's `log2 n` full-message transfers, so for large messages the
/// time approaches one message transfer (the pipelined broadcast of NCCL's rings).
pub(crate) fn pipelined_broadcast(
    n: usize,
    me: usize,
    root: usize,
    count: usize,
    pieces: usize,
) -> Vec<Step> {
    let vr = (me + n - root) % n;
    let prev = (vr > 0).then(|| (me + n - 1) % n);
    let next = (vr + 1 < n).then(|| (me + 1) % n);
    let pieces = pieces.max(1);
    let piece = |k: usize| part(count, pieces, k);
    match (prev, next) {
        (None, None) => Vec::new(),
        (None, Some(to)) => (0..pieces).map(|k| Step::send(to, piece(k))).collect(),
        (Some(from), None) => (0..pieces)
            .map(|k| Step::recv(from, piece(k), Action::Copy))
            .collect(),
        (Some(from), Some(to)) => {
            let first = Step::recv(from, piece(0), Action::Copy);
            let forward =
                (1..pieces).map(|k| Step::exchange(to, piece(k - 1), from, piece(k), Action::Copy));
            let last = Step::send(to, piece(pieces - 1));
            std::iter::once(first)
                .chain(forward)
                .chain(std::iter::once(last))
                .collect()
        }
    }
}

/// `steps` of a rooted collective with the rounds of a [`dissemination_barrier`] woven in:
/// `ceil(log2 n)` rounds of empty messages whose headers carry the collective's fingerprint
/// (root included), checked by their receivers like every frame.
///
/// Why: a rooted schedule's communication pattern depends on the root, so ranks that disagree
/// on it may never exchange a frame (reduce on 3 ranks with roots 1, 0, 0: every rank only
/// sends) and would end `Ok` with a wrong result, or wait for each other until `Timeout`
/// (reduce on 2 ranks with roots 0, 1: both only receive). The barrier's pattern depends on
/// nothing the ranks could disagree on:
///
/// - Detection: every rank sends its first-round message (to `me + 1`) before anything else,
///   so where two neighbours disagree, the receiver checks that frame (when it takes it, or
///   while blocked, where every queued frame is checked) and fails with `Mismatch`, telling
///   its peers.
/// - No wrong `Ok`: a rank ends only after all rounds, each received before the next is sent,
///   so every rank's fingerprint reached it through a chain of checked messages.
///
/// Cost, kept small: the first round's send leads the schedule, and its receive (from
/// `me - 1`) comes just before the first data receive from that rank (which sent it first) —
/// as an extra step after that step's send, so data goes out as early as before — or after the
/// data steps; the other rounds follow the data steps. Frames between a pair of ranks keep one
/// order on both sides (a direct-receive requirement: [`crate::direct`]).
pub(crate) fn agreed(n: usize, me: usize, steps: Vec<Step>) -> Vec<Step> {
    if n < 2 {
        return steps;
    }
    // The barrier's first round: send to the next rank, receive from the previous one.
    let (to, prev) = ((me + 1) % n, (me + n - 1) % n);
    let rounds = dissemination_barrier(n, me).into_iter().skip(1);
    let mut out = Vec::with_capacity(steps.len() + 3);
    out.push(Step::send(to, 0..0));
    let mut pending = Some(Step::recv(prev, 0..0, Action::Copy));
    for step in steps {
        let from_prev = step.recv.as_ref().is_some_and(|(p, _, _)| *p == prev);
        match pending.take_if(|_| from_prev) {
            Some(agree) => {
                out.push(Step {
                    send: step.send,
                    recv: agree.recv,
                });
                out.push(Step {
                    send: None,
                    recv: step.recv,
                });
            }
            None => out.push(step),
        }
    }
    out.extend(pending);
    out.extend(rounds);
    out
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
