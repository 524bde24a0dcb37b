//! Error type of the `collectives` crate.

use std::time::Duration;

/// Everything that input data, peers or the environment can make go wrong in `collectives`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CollectiveError {
    /// A parameter or input was invalid; the message says which and why.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A peer rank died (thread panicked, process killed, connection lost) while collective
    /// `op` number `seq` of its communicator still needed it.
    #[error("peer rank {rank} was lost during {op} #{seq}")]
    PeerLost {
        /// World rank of the lost peer.
        rank: usize,
        /// Name of the collective, e.g. `all-reduce`.
        op: &'static str,
        /// Sequence number of the collective on its communicator.
        seq: u64,
    },

    /// Ranks disagree on a collective's type, element count, dtype, reduce op, root or algorithm.
    #[error("collective mismatch in {op} #{seq} with rank {rank}: {detail}")]
    Mismatch {
        /// World rank of the peer that disagrees (or that reported the disagreement).
        rank: usize,
        /// Name of the collective as submitted on this rank.
        op: &'static str,
        /// Sequence number of the collective on its communicator.
        seq: u64,
        /// Which field differs, with both values.
        detail: String,
    },

    /// In `Ordered` mode the head collective made no progress within the deadlock timeout:
    /// the ranks issued collectives in incompatible orders (the NCCL/MPI deadlock).
    #[error(
        "deadlock: {op} #{seq} on communicator {comm:#x} waited {waited:?} for world ranks {waiting_on:?}"
    )]
    Deadlock {
        /// Name of the blocked collective.
        op: &'static str,
        /// Its sequence number on its communicator.
        seq: u64,
        /// Identifier of its communicator.
        comm: u64,
        /// World ranks whose messages it was waiting for.
        waiting_on: Vec<usize>,
        /// How long it waited without progress.
        waited: Duration,
    },

    /// A collective made no progress within the configured operation timeout.
    #[error("timeout: {op} #{seq} on communicator {comm:#x} waited {waited:?} for world ranks {waiting_on:?}")]
    Timeout {
        /// Name of the blocked collective.
        op: &'static str,
        /// Its sequence number on its communicator.
        seq: u64,
        /// Identifier of its communicator.
        comm: u64,
        /// World ranks whose messages it was waiting for.
        waiting_on: Vec<usize>,
        /// How long it waited without progress.
        waited: Duration,
    },

    /// The operation was aborted on this rank (by `abort()`, by shutdown, or after an earlier
    /// deadlock in ordered mode).
    #[error("aborted: {0}")]
    Aborted(String),

    /// A peer failed this collective for a reason other than a lost rank and told us.
    #[error("rank {rank} failed {op} #{seq}: {reason}")]
    Remote {
        /// World rank that reported the failure.
        rank: usize,
        /// Name of the collective.
        op: &'static str,
        /// Its sequence number.
        seq: u64,
        /// The peer's error message.
        reason: String,
    },

    /// A rank's closure panicked in [`run_local`](crate::run_local).
    #[error("rank {rank} panicked: {message}")]
    RankPanicked {
        /// The rank that panicked.
        rank: usize,
        /// The panic payload, if it was a string.
        message: String,
    },

    /// Joining a TCP job failed (connection refused, rendezvous timeout, bad handshake).
    #[error("rendezvous failed: {0}")]
    Rendezvous(String),

    /// An I/O error on a transport, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl CollectiveError {
    /// An [`Io`](Self::Io) error: `source` while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = CollectiveError> = std::result::Result<T, E>;
