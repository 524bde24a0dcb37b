//! The symbolic phase of LSSM: block size, row classification, task list, scratch size.

use crate::kernels::SERIAL_WORK;
use crate::stats::{MatrixClass, RowStats};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::ops::Range;

/// Target multiply-adds (`nnz · K`) per task when the block size is automatic.
pub const BLOCK_WORK: usize = 1 << 16;
/// Smallest automatic block (nonzeros per task).
pub const MIN_BLOCK: usize = 32;
/// Largest automatic block (nonzeros per task).
pub const MAX_BLOCK: usize = 8192;
/// The automatic block is small enough to give at least this many tasks (for load balance on
/// any core count; it does not depend on the thread count, so neither does the result).
pub const MIN_TASKS: usize = 128;

/// Settings of an LSSM plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LssmConfig {
    /// Nonzeros per task (the paper's block size). `None` (the default) picks it with
    /// [`SpmmPlan::auto_block_size`].
    pub block_nnz: Option<usize>,
    /// Work (`nnz · K` multiply-adds) below which the plan runs serially. Default
    /// [`SERIAL_WORK`].
    pub serial_work: usize,
}

impl Default for LssmConfig {
    fn default() -> Self {
        Self {
            block_nnz: None,
            serial_work: SERIAL_WORK,
        }
    }
}

/// One unit of work handed out through the atomic counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Task {
    /// A run of whole short rows `start..end` (merged).
    Rows(Range<usize>),
    /// Nonzeros `nz` of the long row `row`; `slot` is its scratch vector, `None` for the first
    /// segment, which writes the row of C itself.
    Segment {
        row: usize,
        nz: Range<usize>,
        slot: Option<usize>,
    },
}

/// A reusable LSSM execution plan for one sparsity pattern and one K (the symbolic phase).
#[derive(Debug, Clone)]
pub struct SpmmPlan {
    pub(crate) shape: (usize, usize, usize),
    pub(crate) k: usize,
    pub(crate) block: usize,
    pub(crate) stats: RowStats,
    pub(crate) tasks: Vec<Task>,
    /// Long rows and the scratch slots of their later segments, in order.
    pub(crate) long_rows: Vec<(usize, Range<usize>)>,
    pub(crate) slots: usize,
    pub(crate) serial: bool,
}

impl SpmmPlan {
    /// The automatic block size (nonzeros per task) for a row profile and K.
    ///
    /// `BLOCK_WORK / K` nonzeros make a task of about 2¹⁶ multiply-adds, clamped to
    /// `[MIN_BLOCK, MAX_BLOCK]`; it is lowered to `nnz / MIN_TASKS` so that there are enough
    /// tasks to balance, and on regular matrices it is raised to the longest row (when that is at
    /// most 4× larger) so that no row is split for nothing.
    pub fn auto_block_size(stats: &RowStats, k: usize) -> usize {
        let by_work = (BLOCK_WORK / k.max(1)).clamp(MIN_BLOCK, MAX_BLOCK);
        let by_balance = (stats.nnz / MIN_TASKS).max(MIN_BLOCK);
        let block = by_work.min(by_balance);
        if stats.class() == MatrixClass::Regular && stats.max <= 4 * block {
            block.max(stats.max)
        } else {
            block
        }
    }

    /// Builds the plan for `a` and dense operands with `k` columns.
    ///
    /// Complexity: `O(rows + tasks)`.
    ///
    /// # Panics
    /// If `config.block_nnz` is `Some(0)`.
    pub fn new<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>, k: usize, config: &LssmConfig) -> Self {
        let stats = RowStats::of(a);
        let block = config
            .block_nnz
            .unwrap_or_else(|| Self::auto_block_size(&stats, k));
        assert!(block > 0, "the LSSM block size must be positive");
        let mut tasks = Vec::new();
        let mut long_rows = Vec::new();
        let mut slots = 0;
        let mut run_start = 0;
        let mut run_cost = 0;
        for i in 0..a.nrows() {
            let r = a.row_range(i);
            if r.len() <= block {
                // Short row: merge into the current run; a row also costs one write of C.
                run_cost += r.len() + 1;
                if run_cost >= block {
                    tasks.push(Task::Rows(run_start..i + 1));
                    (run_start, run_cost) = (i + 1, 0);
                }
                continue;
            }
            if run_start < i {
                tasks.push(Task::Rows(run_start..i));
            }
            let first_slot = slots;
            for (s, start) in r.clone().step_by(block).enumerate() {
                let nz = start..(start + block).min(r.end);
                let slot = (s > 0).then(|| {
                    slots += 1;
                    slots - 1
                });
                tasks.push(Task::Segment { row: i, nz, slot });
            }
            long_rows.push((i, first_slot..slots));
            (run_start, run_cost) = (i + 1, 0);
        }
        if run_start < a.nrows() {
            tasks.push(Task::Rows(run_start..a.nrows()));
        }
        let serial = a.nnz().saturating_mul(k) < config.serial_work || a.nrows() <= 1;
        Self {
            shape: (a.nrows(), a.ncols(), a.nnz()),
            k,
            block,
            stats,
            tasks,
            long_rows,
            slots,
            serial,
        }
    }

    /// Nonzeros per task.
    pub fn block_nnz(&self) -> usize {
        self.block
    }
    /// Number of columns of B and C this plan was built for.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The row profile of the matrix.
    pub fn stats(&self) -> &RowStats {
        &self.stats
    }
    /// Number of tasks (merged short-row runs plus long-row segments).
    pub fn num_tasks(&self) -> usize {
        self.tasks.len()
    }
    /// Number of long (split) rows.
    pub fn num_long_rows(&self) -> usize {
        self.long_rows.len()
    }
    /// Number of short (merged) rows.
    pub fn num_short_rows(&self) -> usize {
        self.shape.0 - self.long_rows.len()
    }
    /// Number of long-row segments (tasks that work on part of a row).
    pub fn num_segments(&self) -> usize {
        self.slots + self.long_rows.len()
    }
    /// Scratch elements the numeric phase allocates: one K-vector per long-row segment after
    /// the first.
    pub fn scratch_len(&self) -> usize {
        self.slots * self.k
    }
    /// Whether the numeric phase runs on the calling thread (too little work to split).
    pub fn is_serial(&self) -> bool {
        self.serial
    }
}
