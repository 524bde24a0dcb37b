//! Where a kernel runs: on the calling thread, in the caller's rayon pool, or in a dedicated
//! pool of a given size.

use crate::error::{Result, SparseError};

/// The parallelism argument of every parallel kernel.
///
/// Library code never builds rayon's global pool: `Par::Current` uses whatever pool the caller
/// runs in (the global one, or theirs via `ThreadPool::install`), `Par::Threads(n)` builds a
/// dedicated pool of `n` threads for the duration of one call (convenient, but building a pool
/// costs tens of microseconds: inside a loop prefer `install` + `Current`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Par {
    /// Run on the calling thread only.
    Seq,
    /// Run in the rayon pool the caller is in (the default).
    #[default]
    Current,
    /// Run in a dedicated pool of this many threads (0 means rayon's default count).
    Threads(usize),
}

impl Par {
    /// The number of threads the kernel will use.
    pub fn threads(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Current => rayon::current_num_threads(),
            Par::Threads(0) => rayon::ThreadPoolBuilder::new()
                .build()
                .map_or(1, |p| p.current_num_threads()),
            Par::Threads(n) => n,
        }
    }

    /// Whether this argument asks for the calling thread only.
    pub fn is_seq(self) -> bool {
        self == Par::Seq || self == Par::Threads(1)
    }

    /// Runs `f` where this argument says: in place for `Seq`/`Current`, inside a fresh pool for
    /// `Threads(n)`.
    ///
    /// # Errors
    /// [`SparseError::ThreadPool`] when the dedicated pool cannot be built.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> Result<R> {
        match self {
            Par::Seq | Par::Current | Par::Threads(1) => Ok(f()),
            Par::Threads(n) => {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| SparseError::ThreadPool(e.to_string()))?;
                Ok(pool.install(f))
            }
        }
    }
}
