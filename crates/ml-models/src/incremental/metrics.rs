//! Class-incremental accuracy bookkeeping: the accuracy matrix, accuracy on all classes seen so
//! far after each task, average incremental accuracy, final accuracy and average forgetting.

use serde::Serialize;

use crate::{MlError, Result};

/// The evaluation after one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskEval {
    /// Accuracy on the test rows of every class seen so far (row-weighted).
    pub seen_accuracy: f64,
    /// Accuracy on the test rows of each task `0..=t` separately.
    pub per_task: Vec<f64>,
}

impl TaskEval {
    /// Scores predictions after task `t`: `predicted[i]` and `truth[i]` are head outputs of test
    /// row `i` (every row of a class seen so far), `task_of_target[c]` is the task that
    /// introduced output `c`. A task without test rows scores 0.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when the lengths differ, there are no rows, or a true target
    /// belongs to a task after `t` (a future class leaked into the evaluation).
    pub fn from_predictions(
        predicted: &[u32],
        truth: &[u32],
        task_of_target: &[usize],
        t: usize,
    ) -> Result<Self> {
        if predicted.len() != truth.len() || truth.is_empty() {
            return Err(MlError::InvalidInput(format!(
                "{} predictions for {} test rows",
                predicted.len(),
                truth.len()
            )));
        }
        let mut hits = vec![0usize; t + 1];
        let mut rows = vec![0usize; t + 1];
        for (&p, &y) in predicted.iter().zip(truth) {
            let task = task_of_target
                .get(y as usize)
                .copied()
                .unwrap_or(usize::MAX);
            if task > t {
                return Err(MlError::InvalidInput(format!(
                    "test target {y} belongs to task {task}, evaluated after task {t}"
                )));
            }
            rows[task] += 1;
            hits[task] += usize::from(p == y);
        }
        let total: usize = hits.iter().sum();
        Ok(Self {
            seen_accuracy: total as f64 / truth.len() as f64,
            per_task: hits
                .iter()
                .zip(&rows)
                .map(|(&h, &n)| if n == 0 { 0.0 } else { h as f64 / n as f64 })
                .collect(),
        })
    }
}

/// The evaluations of one run, task by task.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CilMetrics {
    /// One evaluation after each task, in order.
    pub evals: Vec<TaskEval>,
}

impl CilMetrics {
    /// Accuracy on all classes seen so far, after each task.
    pub fn accuracy_curve(&self) -> Vec<f64> {
        self.evals.iter().map(|e| e.seen_accuracy).collect()
    }

    /// Mean of [`CilMetrics::accuracy_curve`] (Rebuffi et al.'s average incremental accuracy);
    /// NaN before the first task.
    pub fn average_incremental_accuracy(&self) -> f64 {
        let c = self.accuracy_curve();
        c.iter().sum::<f64>() / c.len() as f64
    }

    /// Accuracy on all classes after the last task; NaN before the first task.
    pub fn final_accuracy(&self) -> f64 {
        self.evals.last().map_or(f64::NAN, |e| e.seen_accuracy)
    }

    /// Average forgetting (Chaudhry et al. 2018): over the tasks `j < T−1`, the best accuracy
    /// on task `j` after any task `l < T−1` minus its accuracy after the last task, averaged;
    /// 0 with fewer than two tasks.
    pub fn average_forgetting(&self) -> f64 {
        let n = self.evals.len();
        if n < 2 {
            return 0.0;
        }
        let last = &self.evals[n - 1].per_task;
        let f: f64 = (0..n - 1)
            .map(|j| {
                let best = self.evals[j..n - 1]
                    .iter()
                    .map(|e| e.per_task[j])
                    .fold(f64::NEG_INFINITY, f64::max);
                best - last[j]
            })
            .sum();
        f / (n - 1) as f64
    }
}
