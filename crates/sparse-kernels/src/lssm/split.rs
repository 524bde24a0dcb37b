//! Long-row splitting (column-aligned groups of long rows) and the units of tasks.

use super::task::{Segment, Task};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::ops::Range;

/// Splits the long rows `long` (ascending) into tasks of about `block` nonzeros: in groups of
/// `group` rows (`LssmConfig::long_row_group`) cut at common column boundaries when the columns are sorted, else
/// row by row at every `block`-th nonzero. Returns the tasks, the segments they index, each long
/// row with its scratch slots, and the number of slots.
#[allow(clippy::type_complexity)]
pub(super) fn split_long_rows<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    long: &[usize],
    block: usize,
    group: usize,
) -> (Vec<Task>, Vec<Segment>, Vec<(usize, Range<usize>)>, usize) {
    let group = if a.has_sorted_columns() {
        group.max(1)
    } else {
        1
    };
    let (mut tasks, mut segments, mut long_rows) = (Vec::new(), Vec::new(), Vec::new());
    let mut slots = 0;
    for (g, rows) in long.chunks(group).enumerate() {
        let first_long = g * group;
        // Per task, the nonzero range of each row of the group (possibly empty).
        let pieces: Vec<Vec<Range<usize>>> = if group == 1 {
            let r = a.row_range(rows[0]);
            (r.start..r.end)
                .step_by(block)
                .map(|s| std::iter::once(s..(s + block).min(r.end)).collect())
                .collect()
        } else {
            column_cuts(a, rows, block)
                .windows(2)
                .map(|w| rows.iter().map(|&r| columns_in(a, r, w[0]..w[1])).collect())
                .collect()
        };
        // Scratch slots: each row's later segments get consecutive slots, in column order.
        let mut next_slot: Vec<usize> = Vec::with_capacity(rows.len());
        for (j, &row) in rows.iter().enumerate() {
            let count = pieces.iter().filter(|p| !p[j].is_empty()).count();
            long_rows.push((row, slots..slots + count - 1));
            next_slot.push(slots);
            slots += count - 1;
        }
        let mut seen = vec![false; rows.len()];
        for task in pieces {
            let start = segments.len();
            for (j, nz) in task.into_iter().enumerate() {
                if nz.is_empty() {
                    continue;
                }
                let slot = seen[j].then(|| {
                    next_slot[j] += 1;
                    next_slot[j] - 1
                });
                seen[j] = true;
                segments.push(Segment {
                    long: first_long + j,
                    nz,
                    slot,
                });
            }
            if segments.len() > start {
                tasks.push(Task::Segments(start..segments.len()));
            }
        }
    }
    (tasks, segments, long_rows, slots)
}

/// Builds the runs of short rows and groups them with the long-row tasks into units, each run
/// by one worker in order: first its short rows, then its long-row task. A long-row task whose
/// columns (first to last, sorted columns assumed), scaled to the row range, are `p..q` opens a
/// unit at row `p`, which takes the short rows up to `q` or to the next long-row task's `p`,
/// whichever comes first (at most about `UNIT_BLOCKS · block` of them); units without a
/// long-row task are runs of about `block`. Rows of B are indexed by columns of A, so in a
/// matrix with a structured diagonal (arrow, banded, meshes) a unit's short rows read, through
/// the diagonal, the rows of B its long-row task reads: the worker reads them from memory
/// once, for the short rows, while it writes their rows of C, and finds them in its own cache
/// for the long rows (`arrow:200000:4`). `long` lists the long rows, ascending. Returns the
/// tasks (runs in row order, long-row tasks by position, a group's in column order) and the
/// units as ranges of them; the result of a plan does not depend on how its tasks are grouped.
pub(super) fn units<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    long: &[usize],
    block: usize,
    long_tasks: Vec<Task>,
    segments: &[Segment],
) -> (Vec<Task>, Vec<Range<usize>>) {
    // Rows of A scaled from columns: the rows whose diagonal reads the rows of B of column `c`.
    let scaled = |c: usize| (c as u128 * a.nrows() as u128 / a.ncols().max(1) as u128) as usize;
    let columns = |task: &Task| -> Range<usize> {
        let Task::Segments(segs) = task else {
            unreachable!("long-row tasks are segments")
        };
        let segs = &segments[segs.clone()];
        let first = segs.iter().map(|s| a.indices()[s.nz.start].idx()).min();
        let last = segs.iter().map(|s| a.indices()[s.nz.end - 1].idx()).max();
        first.unwrap_or(0)..last.map_or(0, |l| l + 1)
    };
    let mut long_tasks: Vec<(Range<usize>, Task)> = long_tasks
        .into_iter()
        .map(|t| {
            let cols = columns(&t);
            (scaled(cols.start)..scaled(cols.end), t)
        })
        .collect();
    // Stable: the tasks of one group stay in column order, groups in row order.
    long_tasks.sort_by_key(|(p, _)| p.start);
    let mut long_tasks = long_tasks.into_iter().peekable();
    let mut long_rows = long.iter().peekable();
    let mut out = UnitBuilder::default();
    for i in 0..a.nrows() {
        if out.long.is_some() && i >= out.rows_end {
            out.end_unit(i);
        }
        while let Some((rows, task)) = long_tasks.next_if(|(p, _)| p.start <= i) {
            out.end_unit(i);
            out.long = Some(task);
            out.rows_end = rows.end;
        }
        if long_rows.next_if(|&&r| r == i).is_some() {
            out.end_run(i);
            out.run_start = i + 1;
            continue;
        }
        // A short row also costs one write of C.
        out.cost += a.row_nnz(i) + 1;
        let cap = if out.long.is_some() {
            UNIT_BLOCKS * block
        } else {
            block
        };
        if out.cost >= cap {
            out.end_unit(i + 1);
        }
    }
    out.end_unit(a.nrows());
    for (_, task) in long_tasks {
        out.long = Some(task);
        out.end_unit(a.nrows());
    }
    debug_assert!(
        out.units.iter().map(|u| u.len()).sum::<usize>() == out.tasks.len()
            && out.units.windows(2).all(|w| w[0].end == w[1].start),
        "units cover the tasks in order"
    );
    (out.tasks, out.units)
}

/// The tasks and units of [`units`] as they are built: the open unit starts at task
/// `unit_start`, its current run of short rows at row `run_start`.
#[derive(Default)]
struct UnitBuilder {
    tasks: Vec<Task>,
    units: Vec<Range<usize>>,
    unit_start: usize,
    run_start: usize,
    /// Cost of the open unit's short rows (nonzeros plus one per row).
    cost: usize,
    /// The open unit's long-row task, placed after its short rows.
    long: Option<Task>,
    /// The row after the last whose diagonal reads the long-row task's rows of B.
    rows_end: usize,
}

/// At most this many blocks of short rows go into a unit with a long-row task (those whose
/// columns are spread wide, as in power-law graphs, would otherwise take most of the rows).
const UNIT_BLOCKS: usize = 4;

impl UnitBuilder {
    /// Ends the current run of short rows before row `at`.
    fn end_run(&mut self, at: usize) {
        if self.run_start < at {
            self.tasks.push(Task::Rows(self.run_start..at));
        }
        self.run_start = at;
    }

    /// Ends the open unit before row `at`.
    fn end_unit(&mut self, at: usize) {
        self.end_run(at);
        self.tasks.extend(self.long.take());
        if self.tasks.len() > self.unit_start {
            self.units.push(self.unit_start..self.tasks.len());
        }
        self.unit_start = self.tasks.len();
        self.cost = 0;
    }
}

/// The nonzeros of row `r` (sorted columns) whose columns lie in `cols`.
fn columns_in<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    r: usize,
    cols: Range<usize>,
) -> Range<usize> {
    let range = a.row_range(r);
    let c = &a.indices()[range.clone()];
    let lo = c.partition_point(|x| x.idx() < cols.start);
    let hi = c.partition_point(|x| x.idx() < cols.end);
    range.start + lo..range.start + hi
}

/// Column boundaries `0 = c_0 < c_1 < … = ncols` such that the rows `rows` (sorted columns)
/// have about `block` nonzeros in total between consecutive boundaries: `c_t` is the smallest
/// column with at least `t · block` of their nonzeros before it (binary search).
fn column_cuts<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    rows: &[usize],
    block: usize,
) -> Vec<usize> {
    let below = |c: usize| -> usize { rows.iter().map(|&r| columns_in(a, r, 0..c).len()).sum() };
    let total: usize = rows.iter().map(|&r| a.row_nnz(r)).sum();
    let mut cuts = vec![0];
    for t in 1..total.div_ceil(block) {
        let (mut lo, mut hi) = (cuts[cuts.len() - 1] + 1, a.ncols());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if below(mid) >= t * block {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        if lo < a.ncols() {
            cuts.push(lo);
        }
    }
    cuts.push(a.ncols());
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gen, LssmConfig, SpmmPlan};

    /// The units of an arrow matrix (dense rows on top): each long-row task comes after the
    /// short rows whose diagonal reads its columns, in one unit; every task is in one unit.
    #[test]
    fn long_row_tasks_follow_the_rows_that_read_their_rows_of_b() {
        let a = gen::arrow::<f64, u32>(4000, 2, 1);
        let config = LssmConfig {
            block_nnz: Some(256),
            ..LssmConfig::default()
        };
        let plan = SpmmPlan::new(&a, 16, &config);
        let mut next = 0;
        let mut with_long = 0;
        let mut last_row = 0;
        for unit in &plan.units {
            assert_eq!(unit.start, next, "units cover the tasks in order");
            assert!(unit.end > unit.start, "no empty unit");
            next = unit.end;
            let tasks = &plan.tasks[unit.clone()];
            let rows: Vec<&Range<usize>> = tasks
                .iter()
                .filter_map(|t| match t {
                    Task::Rows(r) => Some(r),
                    Task::Segments(_) => None,
                })
                .collect();
            for r in &rows {
                assert!(r.start >= last_row, "runs stay in row order");
                last_row = r.end;
            }
            let Some(Task::Segments(segs)) = tasks.last() else {
                continue;
            };
            assert_eq!(
                tasks.len(),
                rows.len() + 1,
                "one long-row task, after the rows"
            );
            let segs = &plan.segments[segs.clone()];
            let first = segs.iter().map(|s| a.indices()[s.nz.start].idx()).min();
            let last = segs.iter().map(|s| a.indices()[s.nz.end - 1].idx()).max();
            let columns = first.unwrap()..last.unwrap() + 1;
            // At most 128 columns per task (2 rows × 128 = 256 nonzeros); rows of cost 3: all
            // of them fit the cap of 4 blocks.
            assert!(columns.len() <= 128);
            let covered: usize = rows.iter().map(|r| r.len()).sum();
            assert_eq!(
                covered,
                columns.clone().filter(|&r| r >= 2).count(),
                "the rows of {columns:?} but the long ones"
            );
            assert!(rows
                .iter()
                .all(|r| columns.start <= r.start && r.end <= columns.end));
            with_long += 1;
        }
        assert_eq!(next, plan.tasks.len());
        let long_tasks = plan.tasks.iter().filter(|t| matches!(t, Task::Segments(_)));
        assert_eq!(
            with_long,
            long_tasks.count(),
            "every long-row task in a unit with rows"
        );
        assert_eq!(last_row, 4000);
    }
}
