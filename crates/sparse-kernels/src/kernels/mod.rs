//! SpMM kernels `C = A · B` (A sparse CSR, B and C dense row-major): the serial reference, the
//! two baselines of the LSSM paper (row-per-task "BS-like" and RoDe-like decomposition), merge
//! path, and the shared SIMD micro-kernel. LSSM itself lives in [`crate::lssm`].

mod merge_path;
pub(crate) mod micro;
pub(crate) mod narrow_pairs;
mod prefetch_and_stream;
mod reference;
mod rode;
mod row_pairs;
mod row_parallel;
pub(crate) mod shift_pairs;

pub use merge_path::{spmm_merge_path, spmm_merge_path_with};
use merge_path::{MERGE_ITEMS_PER_PART, MERGE_MAX_PARTS};
pub use reference::spmm_reference;
pub use rode::{spmm_rode_like, spmm_rode_like_with};
use rode::{RODE_BLOCK, RODE_LONG_ROW};
pub use row_pairs::{spmm_row_pairs, RowPairs};
pub use row_parallel::{spmm_row_parallel, spmm_row_parallel_with};

use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Scalar, SpIndex};

/// Below this many multiply-adds (`nnz · K`) kernels run on the calling thread: splitting
/// such work costs more than it saves. 2¹⁴: on the AMD EPYC VM every LSSM job measured between
/// 2¹⁴ and 2¹⁶ ran 1.20–1.87× faster on 2 threads (`olm1000`, `jagmesh7`, DLMC `attention_q`,
/// `stencil5:40`, `uniform:*` at K = 4 to 16), jobs just under 2¹⁴ (16 000) no faster (0.98–1.00;
/// benches/README.md, sparse, "Measurements behind code defaults").
pub(crate) const SERIAL_WORK: usize = 1 << 14;

/// Tuning of the baseline kernels (row-parallel, merge path, RoDe-like); tests shrink the
/// defaults to exercise the parallel paths on small matrices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineConfig {
    /// Work (`nnz · K`) below which a kernel runs serially. Default 2¹⁴.
    pub serial_work: usize,
    /// Merge path: rows + nonzeros per partition. Default 4096.
    pub merge_items_per_part: usize,
    /// Merge path: most partitions. Default 256.
    pub merge_max_parts: usize,
    /// RoDe-like: nonzeros per regular block. Default 32.
    pub rode_block: usize,
    /// RoDe-like: rows at least this long are split into segments this long (rounded down to
    /// whole blocks). Default 32 blocks (1024).
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
    micro::check_b(a, b, c.cols());
    let rows = c.rows();
    assert_eq!(
        rows,
        a.nrows(),
        "C has {rows} rows, A has {} rows",
        a.nrows()
    );
}

/// One call of a baseline kernel: the operands and the settings.
pub(crate) struct Call<'a, 'c, T, I> {
    pub(crate) a: &'a CsrMatrix<T, I>,
    pub(crate) b: DenseRef<'a, T>,
    pub(crate) c: DenseMut<'c, T>,
    pub(crate) par: crate::Par,
    pub(crate) config: &'a BaselineConfig,
}

impl<'a, 'c, T, I> Call<'a, 'c, T, I> {
    /// `(a, b, c, par, config)`.
    #[allow(clippy::type_complexity)]
    pub(crate) fn into_parts(
        self,
    ) -> (
        &'a CsrMatrix<T, I>,
        DenseRef<'a, T>,
        DenseMut<'c, T>,
        crate::Par,
        &'a BaselineConfig,
    ) {
        (self.a, self.b, self.c, self.par, self.config)
    }
}

/// Defines a baseline kernel's public pair `$name(a, b, c, par)` (default settings) and
/// `$with(a, b, c, par, config)` around `$parallel(Call)`: both check the shapes, and work
/// below `config.serial_work` runs serially on the calling thread without partitioning.
macro_rules! baseline_kernel {
    ($(#[$doc:meta])* $name:ident, $with:ident, $parallel:ident) => {
        $(#[$doc])*
        ///
        /// # Errors
        /// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
        ///
        /// # Panics
        /// If the shapes do not match.
        #[track_caller]
        pub fn $name<T: Scalar, I: SpIndex>(
            a: &CsrMatrix<T, I>, b: DenseRef<'_, T>, c: DenseMut<'_, T>, par: Par,
        ) -> Result<()> {
            $with(a, b, c, par, &BaselineConfig::default())
        }

        #[doc = concat!("[`", stringify!($name), "`] with explicit tuning.")]
        ///
        /// # Errors
        #[doc = concat!("As [`", stringify!($name), "`].")]
        ///
        /// # Panics
        /// If the shapes do not match.
        #[track_caller]
        pub fn $with<T: Scalar, I: SpIndex>(
            a: &CsrMatrix<T, I>,
            b: DenseRef<'_, T>,
            c: DenseMut<'_, T>,
            par: Par,
            config: &BaselineConfig,
        ) -> Result<()> {
            super::check_dims(a, &b, &c);
            if super::run_serially(a, b.cols(), config) {
                super::micro::rows_into(a, 0, b, c, super::micro::Options::default());
                return Ok(());
            }
            $parallel(super::Call {
                a,
                b,
                c,
                par,
                config,
            })
        }
    };
}
pub(crate) use baseline_kernel;

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
    /// [`spmm_row_pairs`]: rows in pairs sharing their loads of B (builds [`RowPairs`] first).
    RowPairs,
}

impl Kernel {
    /// Every kernel, reference first.
    pub const ALL: [Kernel; 6] = [
        Kernel::Reference,
        Kernel::RowParallel,
        Kernel::MergePath,
        Kernel::RodeLike,
        Kernel::Lssm,
        Kernel::RowPairs,
    ];

    /// Short name (`reference`, `row`, `merge`, `rode`, `lssm`, `pairs`).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
            Kernel::RowParallel => "row",
            Kernel::MergePath => "merge",
            Kernel::RodeLike => "rode",
            Kernel::Lssm => "lssm",
            Kernel::RowPairs => "pairs",
        }
    }

    /// The kernel `--kernel auto` picks from the row profile and K: [`Kernel::Lssm`]. Its plan
    /// adapts to the profile itself — long rows split, short rows merged, and on matrices
    /// without long rows the schedule of [`Kernel::RowParallel`] (so it is never structurally
    /// slower than it) — so it fits every profile;
    /// small work runs serially.
    pub fn choose(stats: &crate::RowStats, k: usize) -> Self {
        let _ = (stats, k);
        Kernel::Lssm
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
            Kernel::RowPairs => spmm_row_pairs(a, b, c, par),
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
