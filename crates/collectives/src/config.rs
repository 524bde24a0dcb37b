//! Configuration of a rank's progress engine and of algorithm selection.

use std::time::Duration;

/// Scheduling policy of the progress engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// DFCCL: blocked collectives are preempted so that others can run; deadlock-free even
    /// when ranks submit collectives in different orders.
    #[default]
    Preemptive,
    /// NCCL/MPI semantics: strictly in submission order. Deadlocks when orders disagree; the
    /// engine then reports [`Deadlock`](crate::CollectiveError::Deadlock) after
    /// [`Config::deadlock_timeout`].
    Ordered,
}

/// All-reduce algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllReduceAlgorithm {
    /// On the local transport, shared memory where [`Config::uses_shared_memory`] says so;
    /// otherwise recursive doubling below [`Config::recursive_doubling_bytes`],
    /// halving-doubling below [`Config::small_message_bytes`] (on 4, 8, 16, … ranks below
    /// [`Config::halving_doubling_bytes`] where that is larger), ring above.
    #[default]
    Auto,
    /// Ring reduce-scatter + all-gather: `2(n-1)` steps, bandwidth-optimal.
    Ring,
    /// Recursive halving-doubling (Rabenseifner): `2 log n` steps of shrinking halves.
    HalvingDoubling,
    /// Recursive doubling: `log n` steps, each exchanging the whole vector (the fewest
    /// messages; the latency-optimal choice for the smallest messages).
    RecursiveDoubling,
    /// Zero-copy shared memory (local transport only; elsewhere it runs [`Ring`](Self::Ring)):
    /// every rank reduces its `1/n` chunk straight from all ranks' buffers and writes the
    /// result into all of them — one read and one write per byte, no messages.
    SharedMemory,
}

/// Broadcast algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BroadcastAlgorithm {
    /// Binomial tree below [`Config::pipeline_threshold_bytes`], pipelined chain at or above.
    #[default]
    Auto,
    /// Binomial tree: `log2 n` full-message steps, latency-optimal.
    Binomial,
    /// Chain in rank order from the root, the message cut into pieces of
    /// [`Config::pipeline_chunk_bytes`] that move one hop per step: bandwidth-optimal.
    Pipelined,
}

/// Default [`Config::recursive_doubling_bytes`]: 16 KiB (measurements: benches/README.md,
/// collectives, "Measurements behind code defaults").
pub const DEFAULT_RECURSIVE_DOUBLING_BYTES: usize = 16 << 10;
/// Default [`Config::small_message_bytes`]: 64 KiB.
pub const DEFAULT_SMALL_MESSAGE_BYTES: usize = 64 << 10;
/// [`Config::halving_doubling_bytes`] of the TCP transport when the config leaves it `None`:
/// 4 MiB. Measured on loopback (2-core AMD EPYC Zen 4 VM, ranks as threads, 21 alternated
/// rounds; benches/README.md, collectives, "Halving-doubling on power-of-two worlds over
/// TCP"): halving-doubling / ring busbw 0.96–1.22 on 4 ranks (1.04 or more at five of six
/// sizes) and 1.11–1.73 on 8 from 128 KiB to 2 MiB, 1.00 and 1.08 at 4 MiB. On 3 ranks (its
/// extra fold step) it was slower (0.76 at 1 MiB); on the local transport's 4 threads even
/// (0.88–1.10), so those keep the ring.
/// (MPI has its own, `mpi::DEFAULT_MPI_HALVING_DOUBLING_BYTES`.)
pub const DEFAULT_TCP_HALVING_DOUBLING_BYTES: usize = 4 << 20;
/// Where `Auto` switches from the ring to the shared-memory all-reduce on the local transport
/// when [`Config::shared_memory_bytes`] is `None`, for world sizes up to 4: 4 MiB. Measured
/// (`examples/shm_switch.rs`, 2-core EPYC, 1 MiB L2 per core): on 2–4 ranks the ring, whose
/// 1 MiB pieces stay in cache, is faster from 64 KiB to 4 MiB with one all-reduce in flight,
/// shared memory from 8 MiB; with several all-reduces in flight the ring's working set leaves
/// the cache from 4 MiB (both engine modes lose 40–70 % of their busbw there), so shared memory
/// takes over at 4 MiB.
pub const DEFAULT_SHARED_MEMORY_BYTES: usize = 4 << 20;
/// As [`DEFAULT_SHARED_MEMORY_BYTES`], for world sizes above 4: 64 KiB, as before the
/// per-world-size switch. On 5, 6 and 8 ranks the measurement is mixed (shared memory faster at
/// 64–128 KiB and from 2–4 MiB, the ring mostly at 256 KiB–1 MiB), not enough to move it.
pub const DEFAULT_SHARED_MEMORY_BYTES_WIDE: usize = 64 << 10;
/// Smallest world size on which `Auto` takes the shared-memory all-reduce for small messages
/// (below [`Config::small_message_bytes`]) on the local transport, instead of halving-doubling:
/// 4: from there one publish-and-reduce round beat halving-doubling's `log2 n` exchange steps at
/// 1–16 KiB, below it halving-doubling was faster (measurements: benches/README.md,
/// collectives, "Measurements behind code defaults").
pub const SHARED_MEMORY_SMALL_MIN_RANKS: usize = 4;
/// Default [`Config::ring_piece_bytes`]: 1 MiB.
pub const DEFAULT_RING_PIECE_BYTES: usize = 1 << 20;
/// Default [`Config::pipeline_threshold_bytes`]: 1 MiB.
pub const DEFAULT_PIPELINE_THRESHOLD_BYTES: usize = 1 << 20;
/// Default [`Config::pipeline_chunk_bytes`]: 256 KiB.
pub const DEFAULT_PIPELINE_CHUNK_BYTES: usize = 256 << 10;
/// Default [`Config::busy_poll`]: 20 µs (measurements: benches/README.md, collectives,
/// "Measurements behind code defaults").
pub const DEFAULT_BUSY_POLL: Duration = Duration::from_micros(20);
/// Largest accepted [`Config::busy_poll`]: 1 ms (50× the default). A waiter busy-polls this
/// long without yielding after each progress, so a longer one would hold a core through
/// whole scheduler time slices on an oversubscribed machine and never let the other ranks'
/// threads run ([`Config::validate`]).
pub const MAX_BUSY_POLL: Duration = Duration::from_millis(1);
/// Shortest accepted [`Config::park_interval`]: 10 µs. A zero interval makes the engine thread
/// return from every park at once and spin ([`Config::validate`]).
pub const MIN_PARK_INTERVAL: Duration = Duration::from_micros(10);
/// Default [`Config::op_timeout`]: 60 s.
pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`Config::deadlock_timeout`]: 2 s.
pub const DEFAULT_DEADLOCK_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings of one rank's engine. All ranks of a job should use the same settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Scheduling policy. Default: [`Mode::Preemptive`].
    pub mode: Mode,
    /// All-reduce algorithm. Default: [`AllReduceAlgorithm::Auto`].
    pub all_reduce: AllReduceAlgorithm,
    /// Message size (bytes) below which `Auto` uses halving-doubling. Default: 64 KiB.
    pub small_message_bytes: usize,
    /// Message size (bytes) below which `Auto` uses recursive doubling (where the transport
    /// has no shared-memory algorithm for it), among the messages below `small_message_bytes`.
    /// Default: [`DEFAULT_RECURSIVE_DOUBLING_BYTES`].
    pub recursive_doubling_bytes: usize,
    /// Message size (bytes) below which, on a world of 4, 8, 16, … ranks, `Auto` all-reduces
    /// use halving-doubling instead of the ring from [`Config::small_message_bytes`] up, and
    /// reduce-scatters and all-gathers (by the size of the whole vector: the reduce-scatter's
    /// input, the all-gather's output) use recursive halving and recursive doubling instead
    /// of the ring: the ring's bytes in `log2 n` dependent steps per pass instead of `n − 1`.
    /// Default `None`: the transport's own ([`DEFAULT_TCP_HALVING_DOUBLING_BYTES`] over TCP,
    /// `mpi::DEFAULT_MPI_HALVING_DOUBLING_BYTES` over MPI; 0 on the local transport, the ring).
    pub halving_doubling_bytes: Option<usize>,
    /// Message size (bytes) from which `Auto` uses the zero-copy shared-memory all-reduce on
    /// the local transport. Default `None`: tuned by world size
    /// ([`Config::shared_memory_threshold`]).
    pub shared_memory_bytes: Option<usize>,
    /// Ring all-reduce steps whose chunk is larger are cut into pieces of at most this many
    /// bytes and pipelined (the next piece is sent before the previous one is reduced).
    /// Default: 1 MiB.
    pub ring_piece_bytes: usize,
    /// Recursive-doubling and halving-doubling steps of messages below
    /// [`Config::small_piece_limit_bytes`] whose region is larger are cut into pieces of at
    /// most this many bytes, all of a step's pieces sent before the first is awaited: a
    /// transport whose messages change protocol above some size (MPI's eager limit) keeps
    /// every piece below it. Default: `usize::MAX` (never cut).
    pub small_piece_bytes: usize,
    /// Message size (bytes) from which [`Config::small_piece_bytes`] no longer applies.
    /// Default: 0 (never cut).
    pub small_piece_limit_bytes: usize,
    /// Whether a transport that can (TCP) reads incoming data straight into the collective's
    /// buffer, reducing it in there, instead of staging it in a message buffer (one pass over
    /// memory less per received byte). Default: true.
    pub direct_receive: bool,
    /// Broadcast algorithm. Default: [`BroadcastAlgorithm::Auto`].
    pub broadcast: BroadcastAlgorithm,
    /// Message size (bytes) from which `Auto` broadcasts through the pipelined chain.
    /// Default: 1 MiB.
    pub pipeline_threshold_bytes: usize,
    /// Piece size (bytes) of the pipelined broadcast. Default: 256 KiB.
    pub pipeline_chunk_bytes: usize,
    /// Steps a collective may run per poll. Default: 8.
    pub poll_budget: usize,
    /// Polls the head collective gets per round. Default: 4.
    pub head_tries: u32,
    /// Blocked polls before the head is first preempted. Default: 16.
    pub initial_threshold: u32,
    /// Factor by which a preempted collective's threshold grows (stickiness). Default: 2.
    pub threshold_growth: u32,
    /// Cap on the threshold. Default: 4096.
    pub max_threshold: u32,
    /// Idle rounds (each followed by a yield) before the engine parks. A yield that takes
    /// longer than 10 ms (other work holds the cores) ends the spinning at once, and the
    /// rank's waiters park without yielding for the next second. Default: 32.
    pub spin_rounds: u32,
    /// Whether a thread waiting for one of this rank's operations (every blocking call,
    /// `Handle::wait`) runs the engine's rounds itself meanwhile — yielding between idle rounds
    /// as `spin_rounds` says, then parking until a message or submission for this rank wakes
    /// it — instead of sleeping until the engine thread wakes it: two thread hand-offs less
    /// per operation. Default: true.
    pub caller_drives: bool,
    /// How long a waiting caller (with `caller_drives`) keeps running idle rounds without
    /// yielding after its collective last progressed, before it yields and parks as
    /// `spin_rounds` says: the answer to a small message usually arrives sooner than a yield
    /// or a wake-up comes back (MPI libraries busy-poll the same way). Bounded, so an
    /// oversubscribed machine loses at most this much CPU per wait. Only on transports whose
    /// progress takes messages itself (MPI): on TCP a reader thread receives, and a waiter
    /// busy-polling on few cores keeps it off the CPU. At most [`MAX_BUSY_POLL`] (checked by
    /// [`Config::validate`]). Default: [`DEFAULT_BUSY_POLL`].
    pub busy_poll: Duration,
    /// Longest park; messages and submissions wake the engine earlier. At least
    /// [`MIN_PARK_INTERVAL`] (checked by [`Config::validate`]). Default: 5 ms.
    pub park_interval: Duration,
    /// A collective blocked this long fails with `Timeout` (finite, so that a silently dead
    /// peer never hangs a rank). Default: 60 s.
    pub op_timeout: Duration,
    /// In ordered mode, a head blocked this long is reported as `Deadlock`. Default: 2 s.
    pub deadlock_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            mode: Mode::Preemptive,
            all_reduce: AllReduceAlgorithm::Auto,
            small_message_bytes: DEFAULT_SMALL_MESSAGE_BYTES,
            recursive_doubling_bytes: DEFAULT_RECURSIVE_DOUBLING_BYTES,
            halving_doubling_bytes: None,
            shared_memory_bytes: None,
            ring_piece_bytes: DEFAULT_RING_PIECE_BYTES,
            small_piece_bytes: usize::MAX,
            small_piece_limit_bytes: 0,
            direct_receive: true,
            broadcast: BroadcastAlgorithm::Auto,
            pipeline_threshold_bytes: DEFAULT_PIPELINE_THRESHOLD_BYTES,
            pipeline_chunk_bytes: DEFAULT_PIPELINE_CHUNK_BYTES,
            poll_budget: 8,
            head_tries: 4,
            initial_threshold: 16,
            threshold_growth: 2,
            max_threshold: 4096,
            spin_rounds: 32,
            caller_drives: true,
            busy_poll: DEFAULT_BUSY_POLL,
            park_interval: Duration::from_millis(5),
            op_timeout: DEFAULT_OP_TIMEOUT,
            deadlock_timeout: DEFAULT_DEADLOCK_TIMEOUT,
        }
    }
}

impl Config {
    /// Checks the settings whose bounds are not in their types: [`Config::busy_poll`] at most
    /// [`MAX_BUSY_POLL`]. Every launcher (`run_local_with`, `tcp::join`, `tcp::run_tcp_local`,
    /// `mpi::MpiJob::init`, [`Launch`](crate::Launch)) calls it before anything starts and
    /// returns its error.
    pub fn validate(&self) -> crate::Result<()> {
        if self.busy_poll > MAX_BUSY_POLL {
            return Err(crate::CollectiveError::InvalidInput(format!(
                "Config::busy_poll is {:?}, more than the largest accepted {MAX_BUSY_POLL:?} \
                 (a waiter would hold a core that long without yielding)",
                self.busy_poll
            )));
        }
        if self.park_interval < MIN_PARK_INTERVAL {
            return Err(crate::CollectiveError::InvalidInput(format!(
                "Config::park_interval is {:?}, less than the shortest accepted \
                 {MIN_PARK_INTERVAL:?} (the engine thread would spin)",
                self.park_interval
            )));
        }
        Ok(())
    }

    /// Default settings with `mode`.
    pub fn with_mode(mode: Mode) -> Self {
        Self {
            mode,
            ..Self::default()
        }
    }

    /// Message size (bytes) from which `Auto` uses the shared-memory all-reduce on
    /// `world_size` local ranks: [`Config::shared_memory_bytes`] if set, else
    /// [`DEFAULT_SHARED_MEMORY_BYTES`] up to 4 ranks and [`DEFAULT_SHARED_MEMORY_BYTES_WIDE`]
    /// above.
    pub fn shared_memory_threshold(&self, world_size: usize) -> usize {
        self.shared_memory_bytes.unwrap_or(if world_size <= 4 {
            DEFAULT_SHARED_MEMORY_BYTES
        } else {
            DEFAULT_SHARED_MEMORY_BYTES_WIDE
        })
    }

    /// Whether `Auto` takes the shared-memory all-reduce for `bytes` bytes on `world_size`
    /// local ranks: from [`Config::shared_memory_bytes`] if set; else below
    /// [`Config::small_message_bytes`] on at least [`SHARED_MEMORY_SMALL_MIN_RANKS`] ranks, and
    /// from [`Config::shared_memory_threshold`] on.
    pub fn uses_shared_memory(&self, world_size: usize, bytes: usize) -> bool {
        match self.shared_memory_bytes {
            Some(from) => bytes >= from,
            None if bytes < self.small_message_bytes => world_size >= SHARED_MEMORY_SMALL_MIN_RANKS,
            None => bytes >= self.shared_memory_threshold(world_size),
        }
    }

    /// Whether a collective over a vector of `bytes` bytes on `world_size` ranks takes the
    /// recursive algorithms (halving-doubling all-reduce, recursive-halving reduce-scatter,
    /// recursive-doubling all-gather) instead of the ring: on 4, 8, 16, … ranks below
    /// [`Config::halving_doubling_bytes`], or the transport's
    /// `transport_halving_doubling_bytes` where that is `None`.
    pub(crate) fn recursive_on_power_of_two(
        &self,
        world_size: usize,
        bytes: usize,
        transport_halving_doubling_bytes: usize,
    ) -> bool {
        let limit = self
            .halving_doubling_bytes
            .unwrap_or(transport_halving_doubling_bytes);
        world_size >= 4 && world_size.is_power_of_two() && bytes < limit
    }

    /// The algorithm `Auto` runs for an all-reduce of `bytes` bytes on `world_size` ranks:
    /// `shared_memory` whether the transport has the shared-memory all-reduce (local ranks),
    /// `transport_halving_doubling_bytes` the transport's [`Config::halving_doubling_bytes`]
    /// where this config leaves it `None`.
    pub(crate) fn auto_all_reduce(
        &self,
        world_size: usize,
        bytes: usize,
        shared_memory: bool,
        transport_halving_doubling_bytes: usize,
    ) -> AllReduceAlgorithm {
        let n = world_size;
        if shared_memory && self.uses_shared_memory(n, bytes) {
            AllReduceAlgorithm::SharedMemory
        } else if bytes < self.recursive_doubling_bytes.min(self.small_message_bytes) {
            // Recursive doubling only among the small messages (`small_message_bytes = 0`
            // still means the ring for every size).
            AllReduceAlgorithm::RecursiveDoubling
        } else if bytes < self.small_message_bytes
            || self.recursive_on_power_of_two(n, bytes, transport_halving_doubling_bytes)
        {
            AllReduceAlgorithm::HalvingDoubling
        } else {
            AllReduceAlgorithm::Ring
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_halving_doubling_on_power_of_two_worlds_where_the_transport_says() {
        use AllReduceAlgorithm::{HalvingDoubling as Hd, RecursiveDoubling as Rd, Ring};
        let c = Config::default();
        let tcp = DEFAULT_TCP_HALVING_DOUBLING_BYTES;
        // Small messages: the same on every world size and transport.
        for n in [2, 3, 4, 6, 8] {
            assert_eq!(c.auto_all_reduce(n, 1 << 10, false, tcp), Rd);
            assert_eq!(c.auto_all_reduce(n, 32 << 10, false, tcp), Hd);
            assert_eq!(c.auto_all_reduce(n, 32 << 10, false, 0), Hd);
        }
        // From `small_message_bytes`: halving-doubling up to the transport's bound on 4, 8, 16
        // ranks, the ring on 2, 3, 6 ranks, beyond the bound, and where the transport sets none.
        for (n, want) in [(2, Ring), (3, Ring), (4, Hd), (6, Ring), (8, Hd), (16, Hd)] {
            assert_eq!(c.auto_all_reduce(n, 64 << 10, false, tcp), want, "n = {n}");
            assert_eq!(c.auto_all_reduce(n, tcp - 4, false, tcp), want, "n = {n}");
            assert_eq!(c.auto_all_reduce(n, tcp, false, tcp), Ring, "n = {n}");
            assert_eq!(c.auto_all_reduce(n, 1 << 20, false, 0), Ring, "n = {n}");
        }
        // The config's own bound wins over the transport's, both ways.
        let none = Config {
            halving_doubling_bytes: Some(0),
            ..Config::default()
        };
        assert_eq!(none.auto_all_reduce(4, 1 << 20, false, tcp), Ring);
        let wide = Config {
            halving_doubling_bytes: Some(64 << 20),
            ..Config::default()
        };
        assert_eq!(wide.auto_all_reduce(4, 16 << 20, false, 0), Hd);
        // Shared memory first where the transport has it.
        assert_eq!(
            c.auto_all_reduce(4, 8 << 20, true, 0),
            AllReduceAlgorithm::SharedMemory
        );
        assert_eq!(c.auto_all_reduce(4, 1 << 20, true, 0), Ring);
    }

    #[test]
    fn busy_poll_is_bounded() {
        assert!(Config::default().validate().is_ok());
        let at_bound = Config {
            busy_poll: MAX_BUSY_POLL,
            ..Config::default()
        };
        assert!(at_bound.validate().is_ok());
        let zero = Config {
            busy_poll: Duration::ZERO,
            ..Config::default()
        };
        assert!(zero.validate().is_ok());
        for huge in [MAX_BUSY_POLL + Duration::from_nanos(1), Duration::MAX] {
            let c = Config {
                busy_poll: huge,
                ..Config::default()
            };
            match c.validate() {
                Err(crate::CollectiveError::InvalidInput(m)) => {
                    assert!(m.contains("busy_poll"), "{m}")
                }
                other => panic!("{huge:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn shared_memory_threshold_by_world_size_unless_set() {
        let c = Config::default();
        assert_eq!(c.shared_memory_threshold(2), DEFAULT_SHARED_MEMORY_BYTES);
        assert_eq!(c.shared_memory_threshold(4), DEFAULT_SHARED_MEMORY_BYTES);
        assert_eq!(
            c.shared_memory_threshold(8),
            DEFAULT_SHARED_MEMORY_BYTES_WIDE
        );
        let c = Config {
            shared_memory_bytes: Some(1),
            ..Config::default()
        };
        assert_eq!(c.shared_memory_threshold(8), 1);
    }

    #[test]
    fn shared_memory_for_small_messages_from_four_ranks() {
        let c = Config::default();
        assert!(!c.uses_shared_memory(2, 1024));
        assert!(!c.uses_shared_memory(3, 1024));
        assert!(c.uses_shared_memory(4, 1024));
        assert!(!c.uses_shared_memory(4, 1 << 20));
        assert!(c.uses_shared_memory(4, DEFAULT_SHARED_MEMORY_BYTES));
        assert!(c.uses_shared_memory(8, 1 << 20));
        let never = Config {
            shared_memory_bytes: Some(usize::MAX),
            ..Config::default()
        };
        assert!(!never.uses_shared_memory(8, 1024));
    }
}
