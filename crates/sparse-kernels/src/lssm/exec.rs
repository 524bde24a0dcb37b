//! The numeric phase of LSSM: dynamic distribution of the units of tasks (a contiguous share
//! per worker, then the back of the largest share left; or, without long rows, the
//! row-parallel schedule: rayon's adaptive splitting of the rows of C), the deterministic
//! combination of long-row partial sums, and optional K-panels (one pass over A per panel of
//! columns of B and C, each panel of B packed into a contiguous buffer first).

use super::plan::SpmmPlan;
use super::task::Task;
use crate::dense::{DenseMut, DenseRef};
use crate::kernels::{check_dims, micro};
use crate::{AlignedVec, CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;
use std::ops::Range;
use std::sync::Mutex;

/// The units of a parallel run, handed out to its workers: each worker starts on its own
/// contiguous share of the units and runs it front to back, so that consecutive units — a
/// sweep's bands of planes, runs of neighbouring rows — stay on one core with the rows of B they
/// share (from one counter in order, as the paper's "atomic cache" hands them out, the workers
/// took every other unit); a worker whose share is done takes units from the back of the share
/// with the most left, so the load still balances. Which worker runs a unit never changes the
/// result.
struct Shares {
    /// Per worker: what is left of its share.
    left: Vec<Mutex<Range<usize>>>,
}

impl Shares {
    fn new(units: usize, workers: usize) -> Self {
        let workers = workers.max(1);
        // `units · w / workers` without overflow on any target.
        let at = |w: usize| (units as u128 * w as u128 / workers as u128) as usize;
        let left = (0..workers).map(|w| Mutex::new(at(w)..at(w + 1))).collect();
        Self { left }
    }

    /// The next unit for worker `w`: the front of its own share, else the back of the largest
    /// share left; `None` when every share is done.
    fn next(&self, w: usize) -> Option<usize> {
        fn lock(share: &Mutex<Range<usize>>) -> std::sync::MutexGuard<'_, Range<usize>> {
            // No task runs under these locks, so a poisoned one still holds a valid range.
            share.lock().unwrap_or_else(|e| e.into_inner())
        }
        if let Some(u) = lock(&self.left[w]).next() {
            return Some(u);
        }
        loop {
            let victim = self.left.iter().max_by_key(|share| lock(share).len())?;
            let mut left = lock(victim);
            if left.is_empty() {
                // Every share was empty when measured, or this one emptied since: look again
                // only if some other share still has units.
                drop(left);
                if self.left.iter().all(|share| lock(share).is_empty()) {
                    return None;
                }
                continue;
            }
            return left.next_back();
        }
    }
}

/// Where a task writes: rows of C, or one K-vector per segment (a row of C or a scratch slot).
enum Target<'c, T> {
    Rows(DenseMut<'c, T>),
    Segments(Vec<&'c mut [T]>),
}

impl SpmmPlan {
    fn run_task<T: Scalar, I: SpIndex>(
        &self,
        a: &CsrMatrix<T, I>,
        b: DenseRef<'_, T>,
        task: &Task,
        target: Target<'_, T>,
    ) {
        match (task, target) {
            (Task::Rows(rows), Target::Rows(c)) => {
                micro::rows_into(a, rows.start, b, c, self.options)
            }
            (Task::Segments(segs), Target::Segments(outs)) => {
                let segs = self.segments[segs.clone()].iter().map(|s| s.nz.clone());
                micro::segments_into(a, segs.zip(outs).collect(), b, self.options);
            }
            _ => unreachable!("targets are built from the same task list"),
        }
    }

    /// Splits C and the scratch buffer into one disjoint target per task, in task order.
    fn targets<'c, T: Scalar>(
        &self,
        c: DenseMut<'c, T>,
        scratch: &'c mut [T],
    ) -> Vec<Target<'c, T>> {
        let c_cols = c.cols();
        // The runs of short rows by first row (a sweep's tasks are not in row order).
        let mut by_row: Vec<(usize, usize)> = self
            .tasks
            .iter()
            .enumerate()
            .filter_map(|(t, task)| match task {
                Task::Rows(rows) => Some((rows.start, t)),
                Task::Segments(_) => None,
            })
            .collect();
        if !by_row.is_sorted() {
            by_row.sort_unstable();
        }
        // Walk the rows of C in order: each belongs to one run of short rows or is long.
        let mut runs: Vec<Option<DenseMut<'c, T>>> = Vec::with_capacity(self.tasks.len());
        runs.resize_with(self.tasks.len(), || None);
        let mut first_segment: Vec<Option<&'c mut [T]>> = Vec::with_capacity(self.long_rows.len());
        let mut longs = self.long_rows.iter().map(|(r, _)| *r).peekable();
        let (mut rest, mut at) = (c, 0);
        for (start, t) in by_row {
            let Task::Rows(rows) = &self.tasks[t] else {
                unreachable!("runs of rows only")
            };
            while longs.next_if(|&l| l < start).is_some() {
                let (own, tail) = rest.split_at_row(1);
                first_segment.push(Some(own.into_first_row()));
                (rest, at) = (tail, at + 1);
            }
            debug_assert_eq!(at, rows.start, "runs and long rows tile the rows");
            let (own, tail) = rest.split_at_row(rows.len());
            runs[t] = Some(own);
            (rest, at) = (tail, rows.end);
        }
        for _ in longs {
            let (own, tail) = rest.split_at_row(1);
            first_segment.push(Some(own.into_first_row()));
            rest = tail;
        }
        let width = c_cols.max(1);
        let mut slots: Vec<Option<&'c mut [T]>> = scratch.chunks_mut(width).map(Some).collect();
        let taken = "each output is taken by one segment";
        self.tasks
            .iter()
            .zip(runs)
            .map(|(task, run)| match task {
                Task::Rows(_) => Target::Rows(run.expect("split above")),
                Task::Segments(segs) => Target::Segments(
                    self.segments[segs.clone()]
                        .iter()
                        .map(|seg| match seg.slot {
                            Some(s) => slots[s].take().expect(taken),
                            None => first_segment[seg.long].take().expect(taken),
                        })
                        .collect(),
                ),
            })
            .collect()
    }

    /// The K-panels of the numeric phase for this B: `k_panel` columns each, except that the
    /// first also takes the columns before the first 64-byte line boundary of B's rows (when
    /// every row starts at the same offset in a line) and the last takes a remainder shorter
    /// than half a panel, so that a panel of a row of B covers whole lines. Which columns share
    /// a panel does not change the result (see `micro::Options::chunk_k`).
    fn panels<T>(&self, b: &DenseRef<'_, T>) -> Vec<Range<usize>> {
        let (k, p) = (self.k, self.k_panel.max(1));
        if p >= k {
            return std::iter::once(0..k).collect();
        }
        let size = std::mem::size_of::<T>().max(1);
        let addr = b.data().as_ptr() as usize;
        let line = (64 / size).max(1);
        let lead = if p >= line && (b.ld() * size).is_multiple_of(64) && addr.is_multiple_of(size) {
            (64 - addr % 64) % 64 / size
        } else {
            0
        };
        let (mut out, mut start, mut end) = (Vec::new(), 0, lead + p);
        while start < k {
            if end >= k || k - end < p.div_ceil(2) {
                end = k;
            }
            out.push(start..end);
            (start, end) = (end, end + p);
        }
        out
    }

    /// Rows per chunk of the row-parallel schedule for `rows` rows on `threads` threads: the
    /// plan's `row_chunk`, but no more than leaves every thread [`MIN_CHUNKS_PER_THREAD`]
    /// chunks to balance with; even, so that no chunk splits a shift pair.
    pub(crate) fn row_chunk_for(&self, rows: usize, threads: usize) -> usize {
        let share = rows.div_ceil(threads.max(1).saturating_mul(MIN_CHUNKS_PER_THREAD));
        self.row_chunk.min(share).max(1).next_multiple_of(2)
    }

    /// One pass over A for the columns of `b` and `c` (a K-panel, or all of K): in task order
    /// on this thread, or in parallel in the current rayon pool; then the long rows' later
    /// segments are added in segment order. `scratch` holds at least `slots · c.cols()`.
    fn run_panel<T: Scalar, I: SpIndex>(
        &self,
        a: &CsrMatrix<T, I>,
        b: DenseRef<'_, T>,
        mut c: DenseMut<'_, T>,
        scratch: &mut [T],
        parallel: bool,
    ) {
        let kp = c.cols();
        let scratch = &mut scratch[..self.slots * kp];
        if !parallel && self.segments.is_empty() && self.sweep.is_none() {
            // Serial without long rows: every task is a run of rows, so one call of the
            // micro-kernel over all of them gives the same bits without the per-task targets.
            micro::rows_into(a, 0, b, c.reborrow(), self.options);
        } else if !parallel {
            let targets = self.targets(c.reborrow(), scratch);
            for (task, target) in self.tasks.iter().zip(targets) {
                self.run_task(a, b, task, target);
            }
        } else if self.segments.is_empty() && self.sweep.is_none() {
            // No long rows: the row-parallel schedule of `spmm_row_parallel` (rayon's adaptive
            // splitting of the rows of C), in chunks of rows (`row_chunk_for`, about
            // `LssmConfig::row_chunk_work` multiply-adds) that keep the per-call costs out of
            // the loop over the rows.
            let g = self.row_chunk_for(c.rows(), rayon::current_num_threads());
            c.reborrow()
                .into_par_row_chunks(g)
                .enumerate()
                .for_each(|(i, rows)| micro::rows_into(a, i * g, b, rows, self.options));
        } else {
            let targets = self.targets(c.reborrow(), scratch);
            let cells: Vec<Mutex<Option<Target<'_, T>>>> =
                targets.into_iter().map(|t| Mutex::new(Some(t))).collect();
            let workers = rayon::current_num_threads().clamp(1, self.units.len().max(1));
            let shares = Shares::new(self.units.len(), workers);
            // Share `w` goes to the `w`-th job; a thread that runs two jobs in turn, or a
            // job that starts late, still finds every unit in some share exactly once.
            (0..workers).into_par_iter().for_each(|w| {
                while let Some(unit) = shares.next(w).and_then(|u| self.units.get(u)) {
                    for t in unit.clone() {
                        let target = cells[t].lock().unwrap_or_else(|e| e.into_inner()).take();
                        let target = target.expect("each task is taken once");
                        self.run_task(a, b, &self.tasks[t], target);
                    }
                }
            });
        }
        // Long rows: add the later segments in segment order (deterministic).
        for (row, slots) in &self.long_rows {
            let out = c.row_mut(*row);
            for s in slots.clone() {
                micro::add_into(out, &scratch[s * kp..(s + 1) * kp]);
            }
        }
    }

    /// Computes `C = A · B` with this plan (the numeric phase). `a` must be the matrix (or one
    /// with the same sparsity pattern) the plan was built from.
    ///
    /// # Errors
    /// [`crate::SparseError::ThreadPool`] if `par` asks for a pool that cannot be built.
    ///
    /// # Panics
    /// If the shapes do not match each other or the plan.
    #[track_caller]
    pub fn execute<T: Scalar, I: SpIndex>(
        &self,
        a: &CsrMatrix<T, I>,
        b: DenseRef<'_, T>,
        mut c: DenseMut<'_, T>,
        par: Par,
    ) -> Result<()> {
        check_dims(a, &b, &c);
        assert_eq!(
            self.shape,
            (a.nrows(), a.ncols(), a.nnz()),
            "matrix differs from the plan's"
        );
        assert_eq!(
            self.k,
            b.cols(),
            "plan built for K = {}, B has {} columns",
            self.k,
            b.cols()
        );
        if self.k == 0 {
            return Ok(());
        }
        let panels = self.panels(&b);
        let widest = panels.iter().map(Range::len).max().unwrap_or(0);
        let mut scratch = vec![T::ZERO; self.slots * widest];
        let parallel = !(self.serial || par.is_seq());
        // Panels are packed one at a time into a contiguous, line-aligned buffer: the gathers
        // of a pass then touch `ncols · width` elements in few pages, not all of B's pages.
        let mut packed = AlignedVec::<T>::zeroed(if panels.len() > 1 {
            b.rows() * widest
        } else {
            0
        });
        let mut run = || {
            for p in &panels {
                let bp = if panels.len() > 1 {
                    pack(b.columns(p.clone()), &mut packed, parallel)
                } else {
                    b
                };
                self.run_panel(a, bp, c.columns(p.clone()), &mut scratch, parallel);
            }
        };
        if parallel {
            par.install(run)?;
        } else {
            run();
        }
        Ok(())
    }
}

/// Copies `b` (a panel of columns) into `buf` (line-aligned, [`AlignedVec`]) with leading
/// dimension `b.cols()` and returns the view of the copy; in parallel (current rayon pool) when
/// `parallel`. `buf` holds `b.rows() · b.cols()` elements.
fn pack<'p, T: Scalar>(b: DenseRef<'_, T>, buf: &'p mut [T], parallel: bool) -> DenseRef<'p, T> {
    let (rows, w) = (b.rows(), b.cols());
    let dst = &mut buf[..rows * w];
    let copy = |(i, out): (usize, &mut [T])| {
        for (j, row) in out.chunks_exact_mut(w.max(1)).enumerate() {
            row.copy_from_slice(b.row(i * PACK_ROWS + j));
        }
    };
    if w > 0 {
        if parallel {
            dst.par_chunks_mut(PACK_ROWS * w).enumerate().for_each(copy);
        } else {
            dst.chunks_mut(PACK_ROWS * w).enumerate().for_each(copy);
        }
    }
    DenseRef::new(&buf[..rows * w], rows, w, w)
}

/// Rows of B per parallel piece of [`pack`].
const PACK_ROWS: usize = 4096;

/// Chunks per thread that the row-parallel schedule keeps at least, so that rayon can balance
/// matrices too small for the plan's chunks ([`SpmmPlan::row_chunk_for`]; benches/README.md,
/// sparse, "Measurements behind code defaults").
const MIN_CHUNKS_PER_THREAD: usize = 8;

#[cfg(test)]
mod tests {
    use super::Shares;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn shares_hand_out_every_unit_once() {
        for units in [0, 1, 5, 64, 1000] {
            for workers in 1..=6 {
                let shares = Shares::new(units, workers);
                let taken: Vec<AtomicU32> = (0..units).map(|_| AtomicU32::new(0)).collect();
                std::thread::scope(|s| {
                    for w in 0..workers {
                        let (shares, taken) = (&shares, &taken);
                        s.spawn(move || {
                            while let Some(u) = shares.next(w) {
                                taken[u].fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    }
                });
                assert!(
                    taken.iter().all(|t| t.load(Ordering::Relaxed) == 1),
                    "{units} units, {workers} workers"
                );
            }
        }
    }

    #[test]
    fn a_worker_runs_its_own_share_first_then_takes_from_the_back_of_the_largest() {
        let shares = Shares::new(10, 2);
        // Worker 0 owns 0..5, worker 1 owns 5..10.
        assert_eq!(shares.next(1), Some(5));
        assert_eq!(shares.next(1), Some(6));
        assert_eq!(shares.next(0), Some(0));
        for u in 7..10 {
            assert_eq!(shares.next(1), Some(u));
        }
        // Worker 1's share is done: it takes worker 0's last units.
        assert_eq!(shares.next(1), Some(4));
        assert_eq!(shares.next(0), Some(1));
        assert_eq!(shares.next(1), Some(3));
        assert_eq!(shares.next(0), Some(2));
        assert_eq!(shares.next(0), None);
        assert_eq!(shares.next(1), None);
    }
}
