//! One launcher over every transport, in the style of timely dataflow's `execute(Config, ..)`:
//! a [`Launch`] value says where the ranks run — threads of this process (shared memory or
//! loopback TCP), one process of a TCP job, one process of an MPI job — and [`Launch::run`]
//! runs the same closure on every rank this process hosts. The per-transport entry points
//! ([`run_local`](crate::run_local), [`run_local_with`](crate::run_local_with),
//! [`tcp::run_tcp_local`], [`tcp::join`], [`from_env`](crate::from_env), `mpi::MpiJob::init`)
//! stay; this is the one to reach for when the transport is a run-time choice.

#[cfg(feature = "mpi")]
use crate::transport::mpi::{MpiConfig, MpiJob};
use crate::transport::tcp::{self, TcpConfig};
use crate::{run_local_with, Communicator, Config, Result};

/// Where the ranks of a job run.
///
/// ```
/// use collectives::{Config, Launch, ReduceOp};
///
/// for launch in [Launch::threads(3), Launch::LocalTcp { ranks: 3, engine: Config::default() }] {
///     let sums = launch
///         .run(|comm| comm.all_reduce(vec![comm.rank() as i64], ReduceOp::Sum))
///         .unwrap();
///     assert!(sums.iter().all(|s| s.as_ref().unwrap() == &vec![3]));
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Launch {
    /// `ranks` threads of this process over the shared-memory transport
    /// ([`run_local_with`](crate::run_local_with)).
    Local {
        /// Number of ranks (1 to [`MAX_LOCAL_RANKS`](crate::MAX_LOCAL_RANKS)).
        ranks: usize,
        /// Engine settings of every rank.
        engine: Config,
    },
    /// `ranks` threads of this process over loopback TCP ([`tcp::run_tcp_local`]).
    LocalTcp {
        /// Number of ranks (1 to [`MAX_LOCAL_RANKS`](crate::MAX_LOCAL_RANKS), within the
        /// open-file limit).
        ranks: usize,
        /// Engine settings of every rank.
        engine: Config,
    },
    /// This process is one rank of a multi-process TCP job ([`tcp::join`]; build the settings
    /// with [`TcpConfig::new`] or [`TcpConfig::from_lookup`]).
    Tcp(TcpConfig),
    /// This process is one rank of an MPI job started by `mpirun` (cargo feature `mpi`); MPI
    /// is initialised when the job starts and finalised when the closure has returned.
    #[cfg(feature = "mpi")]
    Mpi(MpiConfig),
}

impl Launch {
    /// `ranks` threads of this process over shared memory, default engine settings.
    pub fn threads(ranks: usize) -> Self {
        Self::Local {
            ranks,
            engine: Config::default(),
        }
    }

    /// Runs `f` on every rank this process hosts and returns their results in rank order (one
    /// result for a process of a TCP or MPI job), or the first error: the launcher's own
    /// ([`InvalidInput`](crate::CollectiveError::InvalidInput) for an impossible world,
    /// rendezvous and I/O errors) or a rank's
    /// [`RankPanicked`](crate::CollectiveError::RankPanicked), as
    /// [`run_local`](crate::run_local) reports them.
    pub fn run<R, F>(&self, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(Communicator) -> R + Send + Sync,
    {
        match self {
            Self::Local { ranks, engine } => {
                run_local_with(engine, *ranks, f).into_iter().collect()
            }
            Self::LocalTcp { ranks, engine } => {
                tcp::run_tcp_local(engine, *ranks, f).into_iter().collect()
            }
            Self::Tcp(cfg) => Ok(vec![f(tcp::join(cfg)?)]),
            #[cfg(feature = "mpi")]
            Self::Mpi(cfg) => {
                let job = MpiJob::init(cfg)?;
                let out = f(job.world().clone());
                drop(job);
                Ok(vec![out])
            }
        }
    }
}
