//! TCP transport: ranks in separate processes (or hosts), two connections per pair of ranks,
//! one per direction.
//!
//! **Rendezvous.** Rank 0 listens on the master address. Every other rank binds its own
//! listener, connects to rank 0 and sends its rank, the world size and its listener's address;
//! rank 0 answers with the table of all addresses. Rank `i` then connects to every rank
//! `0 < j < i` (the rendezvous connection is the one to rank 0), and every rank then connects to
//! every higher rank's listener once more, so each pair has exactly two connections: a rank
//! writes on the one it opened and reads from the one its peer opened. A socket that carries
//! data both ways serialises its writer and its reader on the socket's lock (on loopback, a
//! 2-rank ring all-reduce of 4 MiB over one socket per pair took 13–18 % more CPU).
//!
//! **Per-collective flow control.** One reader thread per incoming connection reads frames as soon as
//! they arrive and sorts them into per-collective mailboxes; it never stops reading because one
//! collective's data is unread, so a preempted collective cannot block the socket for the
//! others (a shared socket that blocks on unread data would bring the deadlock back). Memory is
//! bounded per collective by its schedule: a collective sends step `k + 1` to a peer only after
//! receiving step `k`, so at most one message per peer and collective is in flight.
//!
//! **Faults.** End of stream or an error on a connection marks that peer lost; collectives
//! waiting on it fail with [`PeerLost`](crate::CollectiveError::PeerLost) at once.
//!
//! **Configuration.** [`join`] takes an explicit [`TcpConfig`]; [`TcpConfig::from_lookup`] builds
//! one from any key-value source and is pure. [`from_env`] (also `collectives::from_env`) is
//! the one function of this crate that reads environment variables, and only when the
//! application calls it — the launch contract, like `MPI_Init` reading what `mpirun` set:
//!
//! | variable | meaning |
//! |---|---|
//! | `PARDIS_RANK` | this process's rank, `0..PARDIS_WORLD_SIZE` |
//! | `PARDIS_WORLD_SIZE` | number of ranks |
//! | `PARDIS_MASTER_ADDR` | `host:port` where rank 0 listens (e.g. `127.0.0.1:29500`) |
//!
//! Engine settings are not read from the environment: `from_env` uses [`Config::default`];
//! use `join(&TcpConfig { engine, ..TcpConfig::from_lookup(..)? })` for others.

use std::net::TcpListener;
use std::time::Duration;

use crate::{CollectiveError, Communicator, Config, Result};

mod connection;
mod rendezvous;

use rendezvous::join_with;

/// Environment variable with this process's rank.
pub const ENV_RANK: &str = "PARDIS_RANK";
/// Environment variable with the number of ranks.
pub const ENV_WORLD_SIZE: &str = "PARDIS_WORLD_SIZE";
/// Environment variable with rank 0's `host:port`.
pub const ENV_MASTER_ADDR: &str = "PARDIS_MASTER_ADDR";
/// Default [`TcpConfig::rendezvous_timeout`]: 30 s.
pub const DEFAULT_RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(30);

/// How to join a TCP job.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// `host:port` where rank 0 listens.
    pub master_addr: String,
    /// How long to keep trying to reach rank 0 and the other ranks. Default: 30 s.
    pub rendezvous_timeout: Duration,
    /// Engine settings.
    pub engine: Config,
}

impl TcpConfig {
    /// Settings for `rank` of `world_size` with rank 0 at `master_addr`, defaults otherwise.
    pub fn new(rank: usize, world_size: usize, master_addr: impl Into<String>) -> Self {
        Self {
            rank,
            world_size,
            master_addr: master_addr.into(),
            rendezvous_timeout: DEFAULT_RENDEZVOUS_TIMEOUT,
            engine: Config::default(),
        }
    }

    /// Reads [`ENV_RANK`], [`ENV_WORLD_SIZE`] and [`ENV_MASTER_ADDR`] through `lookup` (pure:
    /// pass `|k| std::env::var(k).ok()` to read the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| {
            lookup(k).ok_or_else(|| CollectiveError::Rendezvous(format!("{k} is not set")))
        };
        let num = |k: &str| -> Result<usize> {
            get(k)?
                .trim()
                .parse()
                .map_err(|_| CollectiveError::Rendezvous(format!("{k} is not a number")))
        };
        let cfg = Self::new(num(ENV_RANK)?, num(ENV_WORLD_SIZE)?, get(ENV_MASTER_ADDR)?);
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        self.engine.validate()?;
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(CollectiveError::Rendezvous(format!(
                "rank {} is out of range for world size {}",
                self.rank, self.world_size
            )));
        }
        Ok(())
    }
}

/// Joins the TCP job described by the environment variables [`ENV_RANK`],
/// [`ENV_WORLD_SIZE`] and [`ENV_MASTER_ADDR`], with the default engine [`Config`]. This is the
/// crate's only reader of the environment, and it reads only when called (see the
/// [module docs](self)); it blocks until all ranks have joined or
/// [`DEFAULT_RENDEZVOUS_TIMEOUT`] passed.
///
/// ```no_run
/// // Started as `PARDIS_RANK=r PARDIS_WORLD_SIZE=n PARDIS_MASTER_ADDR=host:29500 ./app`.
/// let comm = collectives::from_env()?;
/// let total = comm.all_reduce(vec![1i64], collectives::ReduceOp::Sum)?;
/// assert_eq!(total[0] as usize, comm.world_size());
/// # Ok::<(), collectives::CollectiveError>(())
/// ```
pub fn from_env() -> Result<Communicator> {
    join(&TcpConfig::from_lookup(|k| std::env::var(k).ok())?)
}

/// Joins a TCP job; returns the world communicator once all ranks are connected.
pub fn join(cfg: &TcpConfig) -> Result<Communicator> {
    cfg.validate()?;
    let listener =
        if cfg.rank == 0 {
            Some(TcpListener::bind(&cfg.master_addr).map_err(|e| {
                CollectiveError::io(format!("rank 0: binding {}", cfg.master_addr), e)
            })?)
        } else {
            None
        };
    join_with(cfg, listener)
}

/// File descriptors that `n` ranks in one process need over loopback TCP: both ends of the
/// `n(n-1)` connections (two per pair of ranks) and one listener per rank.
pub fn local_descriptors(n: usize) -> u64 {
    let n = n as u64;
    n.saturating_mul(n.saturating_sub(1))
        .saturating_mul(2)
        .saturating_add(n)
}

/// The soft limit on open files of this process (`Max open files` in `/proc/self/limits`),
/// where the system tells it.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Files this process has open (entries of `/proc/self/fd`), where the system tells it.
fn open_files() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// `Ok` if `n` ranks fit in this process over loopback TCP: 1 to
/// [`MAX_LOCAL_RANKS`](crate::MAX_LOCAL_RANKS), and their descriptors
/// ([`local_descriptors`]) within the open-file limit.
fn check_tcp_local(n: usize) -> Result<()> {
    crate::launch::check_local_ranks(n)?;
    let need = local_descriptors(n);
    if let Some(limit) = open_file_limit() {
        let open = open_files().unwrap_or(0);
        if need.saturating_add(open) > limit {
            return Err(CollectiveError::InvalidInput(format!(
                "too many open files: {n} ranks over loopback TCP in one process need {need} \
                 file descriptors ({open} already open), limit {limit} (raise it with `ulimit -n`)"
            )));
        }
    }
    Ok(())
}

/// Runs `f` on `n` ranks that are threads of this process but talk over loopback TCP (for
/// benchmarks and tests of the transport without spawning processes). If `n` is 0, above
/// [`MAX_LOCAL_RANKS`](crate::MAX_LOCAL_RANKS), or needs more file descriptors than the
/// process may open ([`local_descriptors`]), the result is a single
/// [`CollectiveError::InvalidInput`] and nothing runs.
pub fn run_tcp_local<R, F>(config: &Config, n: usize, f: F) -> Vec<Result<R>>
where
    R: Send,
    F: Fn(Communicator) -> R + Send + Sync,
{
    if let Err(e) = check_tcp_local(n).and_then(|()| config.validate()) {
        return vec![Err(e)];
    }
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            return (0..n)
                .map(|_| {
                    Err(CollectiveError::io(
                        "binding a loopback port",
                        std::io::Error::new(e.kind(), e.to_string()),
                    ))
                })
                .collect()
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut listener = Some(listener);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|rank| {
                let cfg = TcpConfig {
                    engine: config.clone(),
                    ..TcpConfig::new(rank, n, addr.clone())
                };
                let l = if rank == 0 { listener.take() } else { None };
                let f = &f;
                // A rank that cannot be spawned fails; its peers' rendezvous times out.
                std::thread::Builder::new()
                    .name(format!("pardis-tcp-rank-{rank}"))
                    .spawn_scoped(s, move || join_with(&cfg, l).map(f))
                    .map_err(|e| {
                        CollectiveError::io(format!("spawning the thread of rank {rank}"), e)
                    })
            })
            .collect();
        crate::launch::join_ranks(threads)
    })
}
