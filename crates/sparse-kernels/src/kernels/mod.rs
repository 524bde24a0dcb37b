//! SpMM kernels `C = A · B` (A sparse CSR, B and C dense row-major): the serial reference, the
//! two baselines of the LSSM paper (row-per-task "BS-like" and RoDe-like decomposition), merge
//! path, and the shared SIMD micro-kernel. LSSM itself lives in [`crate::lssm`].

mod merge_path;
pub(crate) mod micro;
mod reference;
mod rode;
mod row_parallel;

pub use merge_path::{
    spmm_merge_path, spmm_merge_path_with, MERGE_ITEMS_PER_PART, MERGE_MAX_PARTS,
};
pub use reference::spmm_reference;
pub use rode::{spmm_rode_like, spmm_rode_like_with, RODE_BLOCK, RODE_LONG_ROW};
pub use row_parallel::{spmm_row_parallel, spmm_row_parallel_with};

use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Scalar, SpIndex};

/// Below this many multiply-adds (`nnz · K`) kernels run on the calling thread: splitting
/// such work costs more than it saves.
pub const SERIAL_WORK: usize = 1 << 16;

/// Tuning of the baseline kernels (row-parallel, merge path, RoDe-like). The defaults are the
/// named constants; tests shrink them to exercise the parallel paths on small matrices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineConfig {
    /// Work (`nnz · K`) below which a kernel runs serially. Default [`SERIAL_WORK`].
    pub serial_work: usize,
    /// Merge path: rows + nonzeros per partition. Default [`MERGE_ITEMS_PER_PART`].
    pub merge_items_per_part: usize,
    /// Merge path: most partitions. Default [`MERGE_MAX_PARTS`].
    pub merge_max_parts: usize,
    /// RoDe-like: nonzeros per regular block. Default [`RODE_BLOCK`].
    pub rode_block: usize,
    /// RoDe-like: rows at least this long are split into segments this long (rounded down to
    /// whole blocks). Default [`RODE_LONG_ROW`].
    pub rode_long_row: usize,
}

impl Default for BaselineConfig {
    fn default() -> Self {
        Self {
            serial_work: SERIAL_WORK,
            merge_items_per_part: MERGE_ITEMS_PER_PART,
            merge_max_parts: MERGE_MAX_PARTS,
            rode_block: RODE_BLOCK,
            rode_long_row: RODE_LONG_ROW,
        }
    }
}

/// Checks the programmer's contract `A: m×n`, `B: n×K`, `C: m×K`.
#[track_caller]
pub(crate) fn check_dims<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: &DenseRef<'_, T>,
    c: &DenseMut<'_, T>,
) {
    assert_eq!(
        b.rows(),
        a.ncols(),
        "B has {} rows, A has {} columns",
        b.rows(),
        a.ncols()
    );
    assert_eq!(
        c.rows(),
        a.nrows(),
        "C has {} rows, A has {} rows",
        c.rows(),
        a.nrows()
    );
    assert_eq!(
        c.cols(),
        b.cols(),
        "C has {} columns, B has {}",
        c.cols(),
        b.cols()
    );
}

/// Whether the work is small enough to skip partitioning. This does not depend on the thread
/// count, so neither do the results: `Par::Seq` runs the same partitions one after another.
pub(crate) fn run_serially<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    k: usize,
    config: &BaselineConfig,
) -> bool {
    a.nnz().saturating_mul(k) < config.serial_work || a.nrows() <= 1
}

/// Minimum items per rayon job: unbounded for `Par::Seq` (rayon then never splits, and the
/// iterator runs on the calling thread), 1 otherwise.
pub(crate) fn min_len(par: crate::Par) -> usize {
    if par.is_seq() {
        usize::MAX
    } else {
        1
    }
}

/// The kernels by name, for benchmarks and the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// [`spmm_reference`].
    Reference,
    /// [`spmm_row_parallel`].
    RowParallel,
    /// [`spmm_merge_path`].
    MergePath,
    /// [`spmm_rode_like`].
    RodeLike,
    /// [`crate::spmm_lssm`] with an automatically sized plan.
    Lssm,
}

impl Kernel {
    /// Every kernel, reference first.
    pub const ALL: [Kernel; 5] = [
        Kernel::Reference,
        Kernel::RowParallel,
        Kernel::MergePath,
        Kernel::RodeLike,
        Kernel::Lssm,
    ];

    /// Short name (`reference`, `row`, `merge`, `rode`, `lssm`).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
            Kernel::RowParallel => "row",
            Kernel::MergePath => "merge",
            Kernel::RodeLike => "rode",
            Kernel::Lssm => "lssm",
        }
    }

    /// The kernel `--kernel auto` picks from the row profile: [`Kernel::RowParallel`] for
    /// regular matrices (no row is long enough to need splitting, and rows are equal enough for
    /// rayon's adaptive splitting to balance), [`Kernel::Lssm`] for irregular and dense-row
    /// matrices, where splitting long rows and merging short ones pays off.
    pub fn choose(stats: &crate::RowStats, k: usize) -> Self {
        let block = crate::SpmmPlan::auto_block_size(stats, k);
        if stats.class() == crate::MatrixClass::Regular && stats.max <= block {
            Kernel::RowParallel
        } else {
            Kernel::Lssm
        }
    }

    /// Parses a short name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Runs this kernel with default settings (LSSM builds its plan first; use
    /// [`crate::SpmmPlan`] to reuse one).
    ///
    /// # Errors
    /// Only [`crate::SparseError::ThreadPool`] when `Par::Threads` cannot build its pool.
    pub fn run<T: Scalar, I: SpIndex>(
        self,
        a: &CsrMatrix<T, I>,
        b: DenseRef<'_, T>,
        c: DenseMut<'_, T>,
        par: crate::Par,
    ) -> crate::Result<()> {
        match self {
            Kernel::Reference => {
                spmm_reference(a, b, c);
                Ok(())
            }
            Kernel::RowParallel => spmm_row_parallel(a, b, c, par),
            Kernel::MergePath => spmm_merge_path(a, b, c, par),
            Kernel::RodeLike => spmm_rode_like(a, b, c, par),
            Kernel::Lssm => crate::spmm_lssm(a, b, c, par),
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
