//! Bounded spinning that notices an oversubscribed machine.
//!
//! Between idle rounds a waiting thread yields the core, so that a peer rank on the same core
//! can run and a reply is seen within microseconds. That is cheap while the threads that want
//! the cores are mostly this job's own ranks. When other processes keep the cores busy, Linux's
//! EEVDF scheduler answers `sched_yield` by moving the caller's deadline back a time slice, so
//! the core goes to another thread for a whole slice: on the 2-core Xeon VM one `yield_now`
//! returned after 16–19 ms on average with 4 busy loops in the same scheduling group and after
//! 75 ms with 16 (0.3–0.7 µs without them). A waiter that spins by yielding then sees each
//! message a time slice late, and a collective of many steps crawls: the 1 MiB all-reduce test
//! (90 all-reduces on 1–8 ranks) went past its 60 s watchdog.
//!
//! The gate times every yield. One that took longer than [`SLOW_YIELD`] means the machine is
//! oversubscribed by other work: the waiter stops spinning and parks at once (a parked waiter
//! is woken by the message itself), and so do all waiters of this rank for the next [`HOLD`];
//! after that one yield probes again. So a probe costs at most one slow yield per second.
//!
//! The threshold is measured, not derived: with busy loops in other scheduling groups (other
//! users' sessions, the usual case on a shared machine) yields of 1–5 ms are common — this
//! group's share of the core ran out — and parking on them made 1 KiB all-reduces on 4–8 ranks
//! up to 2× slower; from 10 ms no loss was measurable, while 4 busy loops in the group still
//! close the gate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A yield that takes longer than this gave the core to other work for more than a few time
/// slices.
pub(super) const SLOW_YIELD: Duration = Duration::from_millis(10);
/// How long waiters park without yielding after a slow yield.
pub(super) const HOLD: Duration = Duration::from_secs(1);

/// Per-rank memory of a recent slow yield.
#[derive(Debug)]
pub(super) struct YieldGate {
    epoch: Instant,
    /// Nanoseconds since `epoch` before which waiters do not yield.
    closed_until: AtomicU64,
    /// Slow yields seen (each closed the gate).
    slow_yields: AtomicU64,
}

impl Default for YieldGate {
    fn default() -> Self {
        Self {
            epoch: Instant::now(),
            closed_until: AtomicU64::new(0),
            slow_yields: AtomicU64::new(0),
        }
    }
}

impl YieldGate {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether waiters should park at once instead of yielding (a slow yield was seen within
    /// the last [`HOLD`]).
    pub(super) fn closed(&self) -> bool {
        self.now_ns() < self.closed_until.load(Ordering::Relaxed)
    }

    /// Yields the core unless the gate is closed. Returns `true` if the caller may go on
    /// spinning (it yielded and the yield was quick); `false`: park instead.
    pub(super) fn try_yield(&self) -> bool {
        if self.closed() {
            return false;
        }
        let start = Instant::now();
        std::thread::yield_now();
        self.record(start.elapsed())
    }

    /// Records a yield that took `took`; returns whether it was quick.
    fn record(&self, took: Duration) -> bool {
        if took < SLOW_YIELD {
            return true;
        }
        let hold = u64::try_from(HOLD.as_nanos()).unwrap_or(u64::MAX);
        let until = self.now_ns().saturating_add(hold);
        self.closed_until.fetch_max(until, Ordering::Relaxed);
        self.slow_yields.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Slow yields seen so far.
    pub(super) fn slow_yields(&self) -> u64 {
        self.slow_yields.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_yields_keep_the_gate_open() {
        let g = YieldGate::default();
        assert!(g.record(Duration::from_micros(5)));
        assert!(g.record(SLOW_YIELD - Duration::from_nanos(1)));
        assert!(!g.closed());
        assert_eq!(g.slow_yields(), 0);
    }

    #[test]
    fn a_slow_yield_closes_the_gate_for_the_hold() {
        let g = YieldGate::default();
        let before = g.now_ns();
        assert!(!g.record(SLOW_YIELD));
        assert!(g.closed());
        assert_eq!(g.slow_yields(), 1);
        // Closed: no yield, park at once.
        assert!(!g.try_yield());
        assert_eq!(g.slow_yields(), 1);
        let until = g.closed_until.load(Ordering::Relaxed);
        let hold = HOLD.as_nanos() as u64;
        assert!(until >= before + hold && until <= g.now_ns() + hold);
    }

    #[test]
    fn the_gate_reopens_after_the_hold() {
        let g = YieldGate::default();
        g.record(SLOW_YIELD);
        // Pretend the hold has passed.
        g.closed_until
            .store(g.now_ns().saturating_sub(1), Ordering::Relaxed);
        assert!(!g.closed());
    }
}
