//! One scheduling round of the engine: DFCCL preemption with stickiness, or strict order.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{complete, fail, Active, Shared};
use crate::program::{Failure, Poll};
use crate::CollectiveError;

/// Polls one collective and keeps its blocked-time counters, with `now` the time the round
/// started (one clock read per round: on a VM a clock read costs about as much as polling an
/// idle collective, and a waiter runs rounds back to back).
fn poll(shared: &Shared, a: &mut Active, now: Instant) -> Result<Poll, Failure> {
    a.stats.polls += 1;
    let r = a.op.poll(&*shared.transport, shared.config.poll_budget);
    match r {
        Ok(Poll::Blocked) => {
            a.blocked_since.get_or_insert(now);
        }
        Ok(_) => {
            if let Some(s) = a.blocked_since.take() {
                a.stats.blocked += now.saturating_duration_since(s);
            }
            a.last_progress = now;
            a.blocked_tries = 0;
        }
        Err(_) => {}
    }
    r
}

/// Finishes the collective at `i` if `r` says so; returns whether anything happened.
fn settle(
    shared: &Shared,
    queue: &mut VecDeque<Active>,
    i: usize,
    r: Result<Poll, Failure>,
    now: Instant,
) -> bool {
    match r {
        Ok(Poll::Blocked) => false,
        Ok(Poll::Progressed) => true,
        Ok(Poll::Done) => {
            let a = queue.remove(i).expect("index in queue");
            complete(shared, a, now);
            true
        }
        Err(f) => {
            let a = queue.remove(i).expect("index in queue");
            fail(shared, a, f);
            true
        }
    }
}

/// One preemptive round; `now`: when it started.
pub(super) fn round_preemptive(
    shared: &Shared,
    queue: &mut VecDeque<Active>,
    now: Instant,
) -> bool {
    let cfg = &shared.config;
    let mut progressed = false;
    // The head gets several tries.
    for _ in 0..cfg.head_tries.max(1) {
        let Some(head) = queue.front_mut() else { break };
        let r = poll(shared, head, now);
        if matches!(r, Ok(Poll::Blocked)) {
            head.blocked_tries += 1;
            if head.blocked_tries > head.threshold {
                // Preempt: the state stays in the program; stickiness raises the threshold.
                head.stats.context_switches += 1;
                head.threshold = head
                    .threshold
                    .saturating_mul(cfg.threshold_growth)
                    .min(cfg.max_threshold);
                head.blocked_tries = 0;
                shared
                    .counters
                    .context_switches
                    .fetch_add(1, Ordering::Relaxed);
                queue.rotate_left(1);
                break;
            }
            if queue.len() == 1 {
                // Nothing to switch to: end the round (the driver yields) rather than spin on
                // the mailbox lock the sender needs.
                break;
            }
            std::hint::spin_loop();
            continue;
        }
        let done = !matches!(r, Ok(Poll::Progressed));
        progressed |= settle(shared, queue, 0, r, now);
        if done {
            break;
        }
    }
    // Every other collective gets one try.
    let mut i = 1;
    while i < queue.len() {
        let r = poll(shared, &mut queue[i], now);
        let gone = matches!(r, Ok(Poll::Done) | Err(_));
        progressed |= settle(shared, queue, i, r, now);
        if !gone {
            i += 1;
        }
    }
    expire(shared, queue, cfg.op_timeout, false, now);
    progressed
}

/// One round in order; `now`: when it started.
pub(super) fn round_ordered(shared: &Shared, queue: &mut VecDeque<Active>, now: Instant) -> bool {
    let mut progressed = false;
    for _ in 0..shared.config.head_tries.max(1) {
        let Some(head) = queue.front_mut() else { break };
        let r = poll(shared, head, now);
        let stop = !matches!(r, Ok(Poll::Progressed));
        progressed |= settle(shared, queue, 0, r, now);
        if stop {
            break;
        }
    }
    if expire(shared, queue, shared.config.deadlock_timeout, true, now) {
        // Everything behind a deadlocked head would wait forever too.
        let reason = "an earlier collective on this rank deadlocked (ordered mode)".to_string();
        for a in queue.drain(..) {
            fail(shared, a, CollectiveError::Aborted(reason.clone()).into());
        }
    }
    progressed
}

/// Fails collectives blocked longer than `limit` at `now` (only the head in ordered mode);
/// returns whether any failed.
fn expire(
    shared: &Shared,
    queue: &mut VecDeque<Active>,
    limit: Duration,
    ordered: bool,
    now: Instant,
) -> bool {
    let mut any = false;
    let mut i = 0;
    while i < queue.len() && (!ordered || i == 0) {
        let a = &queue[i];
        let waited = now.saturating_duration_since(a.last_progress);
        if a.blocked_since.is_some() && waited > limit {
            let m = a.op.meta();
            let (op, seq, comm, waiting_on) = (m.name(), m.seq, m.key.comm, a.op.waiting_on());
            let error = if ordered {
                CollectiveError::Deadlock {
                    op,
                    seq,
                    comm,
                    waiting_on,
                    waited,
                }
            } else {
                CollectiveError::Timeout {
                    op,
                    seq,
                    comm,
                    waiting_on,
                    waited,
                }
            };
            let a = queue.remove(i).expect("index in queue");
            fail(shared, a, error.into());
            any = true;
        } else {
            i += 1;
        }
    }
    any
}
