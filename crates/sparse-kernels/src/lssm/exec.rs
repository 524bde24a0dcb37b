//! The numeric phase of LSSM: dynamic task distribution through an atomic counter and the
//! deterministic combination of long-row partial sums.

use super::plan::{SpmmPlan, Task};
use crate::dense::{DenseMut, DenseRef};
use crate::kernels::{check_dims, micro};
use crate::{CsrMatrix, Par, Result, Scalar, SpIndex};
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Where a task writes: rows of C, or one K-vector (a row of C or a scratch slot).
enum Target<'c, T> {
    Rows(DenseMut<'c, T>),
    Vector(&'c mut [T]),
}

fn run_task<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    b: DenseRef<'_, T>,
    task: &Task,
    target: Target<'_, T>,
) {
    match (task, target) {
        (Task::Rows(rows), Target::Rows(c)) => micro::rows_into(a, rows.start, b, c),
        (Task::Segment { nz, .. }, Target::Vector(out)) => {
            let (cols, vals) = (&a.indices()[nz.clone()], &a.values()[nz.clone()]);
            micro::segment_into(cols, vals, b, out, false);
        }
        _ => unreachable!("targets are built from the same task list"),
    }
}

impl SpmmPlan {
    /// Splits C and the scratch buffer into one disjoint target per task, in task order.
    fn targets<'c, T: Scalar>(
        &self,
        mut rest: DenseMut<'c, T>,
        scratch: &'c mut [T],
    ) -> Vec<Target<'c, T>> {
        let mut slots = scratch.chunks_mut(self.k);
        let mut out = Vec::with_capacity(self.tasks.len());
        for task in &self.tasks {
            let target = match task {
                Task::Rows(rows) => {
                    let (own, tail) = rest.split_at_row(rows.len());
                    rest = tail;
                    Target::Rows(own)
                }
                Task::Segment { slot: None, .. } => {
                    let (own, tail) = rest.split_at_row(1);
                    rest = tail;
                    Target::Vector(own.into_first_row())
                }
                Task::Segment { slot: Some(_), .. } => {
                    Target::Vector(slots.next().expect("one scratch slot per later segment"))
                }
            };
            out.push(target);
        }
        out
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
        let mut scratch = vec![T::ZERO; self.scratch_len()];
        let targets = self.targets(c.reborrow(), &mut scratch);
        if self.serial || par.is_seq() {
            for (task, target) in self.tasks.iter().zip(targets) {
                run_task(a, b, task, target);
            }
        } else {
            let cells: Vec<Mutex<Option<Target<'_, T>>>> =
                targets.into_iter().map(|t| Mutex::new(Some(t))).collect();
            let next = AtomicUsize::new(0);
            par.install(|| {
                let workers = rayon::current_num_threads().clamp(1, cells.len().max(1));
                (0..workers).into_par_iter().for_each(|_| loop {
                    // The "atomic cache": one shared counter hands out the next task.
                    let t = next.fetch_add(1, Ordering::Relaxed);
                    let Some(cell) = cells.get(t) else { break };
                    let target = cell.lock().unwrap_or_else(|e| e.into_inner()).take();
                    run_task(
                        a,
                        b,
                        &self.tasks[t],
                        target.expect("each task is taken once"),
                    );
                });
            })?;
        }
        // Long rows: add the later segments in segment order (deterministic).
        for (row, slots) in &self.long_rows {
            let out = c.row_mut(*row);
            for s in slots.clone() {
                micro::add_into(out, &scratch[s * self.k..(s + 1) * self.k]);
            }
        }
        Ok(())
    }
}
