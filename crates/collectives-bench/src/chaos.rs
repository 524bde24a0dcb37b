//! The chaos-order workload of the DFCCL paper: every rank submits the same collectives on
//! several sub-communicators, each rank in its own random order. Under NCCL/MPI semantics
//! ([`Mode::Ordered`](collectives::Mode::Ordered)) this deadlocks; the preemptive engine completes it.
//! Sub-communicator `c` runs [`chaos_op`]`(c, n)`: all-reduces, broadcasts and reduces in turn,
//! so the rooted collectives (with their agreement rounds) are preempted and resumed too.

use std::time::{Duration, Instant};

use collectives::{
    run_local_with, CollectiveError, Communicator, Config, EngineStats, OpStats, ReduceOp, Result,
};

/// Parameters of a chaos run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Ranks (threads). Default: 8.
    pub ranks: usize,
    /// Sub-communicators, one collective each ([`chaos_op`]). Default: 8.
    pub collectives: usize,
    /// Elements (f64) per collective. Default: 1024.
    pub elements: usize,
    /// Seed of the per-rank permutations. Default: 0.
    pub seed: u64,
    /// Engine settings (mode, timeouts).
    pub engine: Config,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        Self {
            ranks: 8,
            collectives: 8,
            elements: 1024,
            seed: 0,
            engine: Config::default(),
        }
    }
}

/// What one rank saw.
#[derive(Debug)]
pub struct ChaosRank {
    /// Rank in the world.
    pub rank: usize,
    /// Order in which it submitted the sub-communicators' collectives.
    pub order: Vec<usize>,
    /// Collectives that completed with the correct result.
    pub correct: usize,
    /// The first error, if any collective failed.
    pub first_error: Option<CollectiveError>,
    /// Counters of each collective, in submission order (default when it failed early).
    pub ops: Vec<OpStats>,
    /// Engine counters at the end.
    pub engine: EngineStats,
    /// Time from the first submission to the last completion.
    pub elapsed: Duration,
}

/// A permutation of `0..n` for `(seed, rank)` (Fisher–Yates over SplitMix64).
pub fn permutation(seed: u64, rank: usize, n: usize) -> Vec<usize> {
    let mut state = seed ^ (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    p
}

/// Most sub-communicators (collectives per rank) of a chaos run: 1024.
pub const MAX_CHAOS_COLLECTIVES: usize = 1024;
/// Most bytes of all-reduce buffers a chaos run may hold at once (ranks × collectives ×
/// elements × 8): 1 GiB. Each all-reduce needs its buffer plus messages of about the same size.
pub const MAX_CHAOS_BYTES: u64 = 1 << 30;

impl ChaosConfig {
    /// Checks the parameters before anything runs: 1 to [`MAX_LOCAL_RANKS`](collectives::MAX_LOCAL_RANKS)
    /// ranks, 1 to [`MAX_CHAOS_COLLECTIVES`] collectives, at most [`MAX_CHAOS_BYTES`] of
    /// buffers, and non-zero engine timeouts (a zero deadlock timeout would report every wait
    /// in ordered mode as a deadlock).
    pub fn validate(&self) -> Result<()> {
        collectives::__private::check_local_ranks(self.ranks)?;
        let bad = |m: String| Err(CollectiveError::InvalidInput(m));
        if self.collectives == 0 || self.collectives > MAX_CHAOS_COLLECTIVES {
            return bad(format!(
                "{} collectives: need 1 to {MAX_CHAOS_COLLECTIVES}",
                self.collectives
            ));
        }
        let bytes = (self.ranks as u128) * (self.collectives as u128) * (self.elements as u128) * 8;
        if bytes > u128::from(MAX_CHAOS_BYTES) {
            return bad(format!(
                "{} ranks × {} collectives × {} elements would hold {:.1} GiB of all-reduce \
                 buffers (8 bytes an element), above the limit of {} GiB",
                self.ranks,
                self.collectives,
                self.elements,
                bytes as f64 / (1u64 << 30) as f64,
                MAX_CHAOS_BYTES >> 30
            ));
        }
        if self.engine.deadlock_timeout.is_zero() || self.engine.op_timeout.is_zero() {
            return bad("the deadlock and operation timeouts must be positive".into());
        }
        Ok(())
    }
}

/// The collective of sub-communicator `c` in a chaos run on `n` ranks (roots are ranks of the
/// sub-communicator, the same on every rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChaosOp {
    /// All-reduce (sum).
    AllReduce,
    /// Broadcast from `root`.
    Broadcast {
        /// Root rank in the sub-communicator.
        root: usize,
    },
    /// Reduce (sum) to `root`.
    Reduce {
        /// Root rank in the sub-communicator.
        root: usize,
    },
}

/// Collective of sub-communicator `c` on `n` ranks: all-reduce, broadcast and reduce in turn
/// (`c mod 3`), roots spread over the ranks (`(3c + 1) mod n`).
pub fn chaos_op(c: usize, n: usize) -> ChaosOp {
    let root = (3 * c + 1) % n.max(1);
    match c % 3 {
        0 => ChaosOp::AllReduce,
        1 => ChaosOp::Broadcast { root },
        _ => ChaosOp::Reduce { root },
    }
}

/// Runs the chaos workload on `cfg.ranks` local ranks. Sub-communicator `c` spans all ranks
/// with a rotated rank order (world rank `r` is rank `(r + c) mod n` in it) and runs
/// [`chaos_op`]`(c, n)`; rank `r` contributes `r + c` to each element.
/// Invalid parameters ([`ChaosConfig::validate`]) are an error before anything runs.
pub fn run_chaos(cfg: &ChaosConfig) -> Result<Vec<ChaosRank>> {
    cfg.validate()?;
    let outcomes = run_local_with(&cfg.engine, cfg.ranks, |world| chaos_rank(cfg, &world));
    outcomes.into_iter().map(|o| o.and_then(|r| r)).collect()
}

/// Runs one rank's part of the chaos workload on `world`, whatever its transport (threads, TCP
/// processes, MPI); `cfg.ranks` and `cfg.engine` are ignored (the communicator has them).
pub fn chaos_rank(cfg: &ChaosConfig, world: &Communicator) -> Result<ChaosRank> {
    let (n, me) = (world.world_size(), world.rank());
    let comms = (0..cfg.collectives)
        .map(|c| world.split(0, ((me + c) % n) as i64))
        .collect::<Result<Vec<_>>>()?;
    let order = permutation(cfg.seed, me, cfg.collectives);
    let start = Instant::now();
    let handles = order
        .iter()
        .map(|&c| {
            let data = vec![(me + c) as f64; cfg.elements];
            match chaos_op(c, n) {
                ChaosOp::AllReduce => comms[c].iall_reduce(data, ReduceOp::Sum),
                ChaosOp::Broadcast { root } => comms[c].ibroadcast(data, root),
                ChaosOp::Reduce { root } => comms[c].ireduce(data, ReduceOp::Sum, root),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let (mut correct, mut first_error, mut ops) = (0, None, Vec::new());
    for (h, &c) in handles.into_iter().zip(&order) {
        let (r, stats) = h.wait_with_stats();
        ops.push(stats);
        let sum = (n * (n - 1) / 2 + n * c) as f64;
        // (value, length) every element of this rank's result must have.
        let want = match chaos_op(c, n) {
            ChaosOp::AllReduce => (sum, cfg.elements),
            ChaosOp::Broadcast { root } => {
                // World rank `w` is rank `(w + c) mod n` of sub-communicator `c`.
                let w = (root + n - c % n) % n;
                ((w + c) as f64, cfg.elements)
            }
            ChaosOp::Reduce { root } if comms[c].rank() == root => (sum, cfg.elements),
            ChaosOp::Reduce { .. } => (0.0, 0),
        };
        match r {
            Ok(v) if v.len() == want.1 && v.iter().all(|&x| x == want.0) => correct += 1,
            Ok(_) => {
                first_error.get_or_insert(CollectiveError::InvalidInput(format!(
                    "wrong {:?} result on sub-communicator {c}",
                    chaos_op(c, n)
                )));
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Ok(ChaosRank {
        rank: me,
        order,
        correct,
        first_error,
        ops,
        engine: world.engine_stats(),
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chaos_ops_cover_every_kind_and_spread_roots() {
        let ops: Vec<ChaosOp> = (0..8).map(|c| chaos_op(c, 8)).collect();
        assert!(ops.contains(&ChaosOp::AllReduce));
        assert!(ops.iter().any(|o| matches!(o, ChaosOp::Broadcast { .. })));
        assert!(ops.iter().any(|o| matches!(o, ChaosOp::Reduce { .. })));
        for n in 1..10 {
            for c in 0..20 {
                match chaos_op(c, n) {
                    ChaosOp::Broadcast { root } | ChaosOp::Reduce { root } => assert!(root < n),
                    ChaosOp::AllReduce => {}
                }
            }
        }
    }
}
