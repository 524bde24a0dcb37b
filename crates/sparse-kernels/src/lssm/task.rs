//! The pieces of work of an LSSM plan, shared by the symbolic phase (`plan`) and the long-row
//! splitting (`split`): a [`Task`] is a run of short rows or a run of long-row [`Segment`]s.

use std::ops::Range;

/// One piece of work; consecutive tasks are grouped into the units (`SpmmPlan::units`) that
/// the workers take (`exec::Shares`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Task {
    /// A run of whole short rows `start..end` (merged).
    Rows(Range<usize>),
    /// Segments `plan.segments[range]` of long rows, computed one after the other (they
    /// cover one range of columns, so the rows of B they read are shared through the cache).
    Segments(Range<usize>),
}

/// Nonzeros `nz` of one long row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Index of the row in `plan.long_rows`.
    pub(crate) long: usize,
    pub(crate) nz: Range<usize>,
    /// Scratch K-vector of this segment; `None` for the row's first segment, which writes the
    /// row of C itself.
    pub(crate) slot: Option<usize>,
}

/// One piece of a plan's work, as [`crate::SpmmPlan::steps`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanStep {
    /// Whole rows `start..end` of A (and of C).
    Rows(Range<usize>),
    /// Nonzeros `nz` (positions in A's index and value arrays) of the long row `row`.
    Segment {
        /// The row of A.
        row: usize,
        /// Its nonzeros this step multiplies.
        nz: Range<usize>,
    },
}
