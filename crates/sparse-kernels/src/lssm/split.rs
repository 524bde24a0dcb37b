//! Long-row splitting (column-aligned groups of long rows) and the order of the tasks.

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

/// Merges the long-row tasks into the runs of short rows (both kept in their own order): a
/// long-row task whose first column, scaled to the row range, is `p` goes just before the run
/// that starts at or after row `p`. Rows of B are indexed by columns of A, so in a matrix with
/// a structured diagonal (arrow, banded, meshes) the run of rows `p..` reads the rows of B near
/// `p` that the long-row task before it has just read: the two workers taking consecutive tasks
/// share them through the cache instead of reading B from memory twice (`arrow:200000:4`).
/// Only the order changes, not the tasks, so the result does not.
pub(super) fn interleave<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    runs: Vec<Task>,
    long_tasks: Vec<Task>,
    segments: &[Segment],
) -> Vec<Task> {
    let position = |task: &Task| -> usize {
        match task {
            Task::Rows(rows) => rows.start,
            Task::Segments(segs) => {
                let first = a.indices()[segments[segs.start].nz.start].idx();
                (first as u128 * a.nrows() as u128 / a.ncols().max(1) as u128) as usize
            }
        }
    };
    let mut long_tasks: Vec<(usize, Task)> =
        long_tasks.into_iter().map(|t| (position(&t), t)).collect();
    // Stable: the tasks of one group stay in column order, groups in row order.
    long_tasks.sort_by_key(|(p, _)| *p);
    let mut out = Vec::with_capacity(runs.len() + long_tasks.len());
    let mut long_tasks = long_tasks.into_iter().peekable();
    for run in runs {
        let p = position(&run);
        while let Some((_, t)) = long_tasks.next_if(|(q, _)| *q <= p) {
            out.push(t);
        }
        out.push(run);
    }
    out.extend(long_tasks.map(|(_, t)| t));
    out
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

    /// The long-row tasks of an arrow matrix (dense rows on top) go next to the runs of short
    /// rows whose diagonal reads the same rows of B, in column order.
    #[test]
    fn long_row_tasks_are_interleaved_with_the_runs_by_position() {
        let a = gen::arrow::<f64, u32>(4000, 2, 1);
        let config = LssmConfig {
            block_nnz: Some(256),
            ..LssmConfig::default()
        };
        let plan = SpmmPlan::new(&a, 16, &config);
        let first_col = |t: &Task| match t {
            Task::Segments(s) => Some(a.indices()[plan.segments[s.start].nz.start].idx()),
            Task::Rows(_) => None,
        };
        let mut last_run_start = 0;
        let mut last_col = 0;
        let mut seen_long = 0;
        for task in &plan.tasks {
            match (task, first_col(task)) {
                (Task::Rows(rows), _) => {
                    assert!(rows.start >= last_run_start, "runs stay in row order");
                    last_run_start = rows.start;
                }
                (_, Some(col)) => {
                    assert!(col >= last_col, "long-row tasks stay in column order");
                    // Placed just before the first run starting at or after its column.
                    assert!(
                        col <= last_run_start + 256,
                        "column {col} after row {last_run_start}"
                    );
                    last_col = col;
                    seen_long += 1;
                }
                _ => unreachable!(),
            }
        }
        assert!(seen_long > 10, "{seen_long} long-row tasks");
        let Some(Task::Rows(first)) = plan.tasks.iter().find(|t| matches!(t, Task::Rows(_))) else {
            panic!("runs of short rows")
        };
        assert_eq!(first.start, 2, "rows 0 and 1 are long");
    }
}
