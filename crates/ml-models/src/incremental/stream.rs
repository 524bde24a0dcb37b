//! The task stream: a labelled data set cut into tasks of disjoint classes, each with a small
//! labelled part and a large unlabelled part.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::data::ClassData;
use crate::{MlError, Result};

/// How to cut a data set into tasks.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamConfig {
    /// Number of tasks `T`, default 5. The classes are dealt out in order; when `T` does not
    /// divide the class count the first tasks get one class more.
    pub tasks: usize,
    /// Fraction ρ of each class's training rows that keep their label, default 0.1 (at least one
    /// row per class is labelled).
    pub label_ratio: f64,
    /// Seed of the class order and of the labelled/unlabelled draw, default 0.
    pub seed: u64,
    /// A fixed class order (original labels) instead of the seeded shuffle, default `None`.
    pub class_order: Option<Vec<u32>>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            tasks: 5,
            label_ratio: 0.1,
            seed: 0,
            class_order: None,
        }
    }
}

impl StreamConfig {
    /// Checks what does not depend on the data: at least one task and a label ratio in
    /// `(0, 1]` ([`TaskStream::new`] checks this too, and the task count against the classes).
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] naming the bad setting.
    pub fn check(&self) -> Result<()> {
        if !(self.label_ratio > 0.0 && self.label_ratio <= 1.0) {
            return Err(MlError::InvalidInput(format!(
                "label ratio {} is not in (0, 1]",
                self.label_ratio
            )));
        }
        if self.tasks == 0 {
            return Err(MlError::InvalidInput("0 tasks (need at least one)".into()));
        }
        Ok(())
    }
}

/// One task: its classes and the rows that belong to them.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The task's classes (original labels), in arrival order.
    pub classes: Vec<u32>,
    /// Training rows whose label the learner may see.
    pub labeled: Vec<usize>,
    /// Training rows whose label is hidden from the learner.
    pub unlabeled: Vec<usize>,
    /// Test rows of the task's classes.
    pub test: Vec<usize>,
}

/// A labelled data set cut into tasks of disjoint classes.
///
/// Classes are renumbered by arrival: the `k`-th class of the stream is output `k` of the
/// growing classification head ([`TaskStream::target`]), so a model that has seen `c` classes
/// has exactly `c` outputs.
#[derive(Debug, Clone)]
pub struct TaskStream {
    /// Training rows (labels of unlabelled rows are kept for bookkeeping only; learners get them
    /// through [`TaskStream::task_view`], which drops them).
    pub train: ClassData,
    /// Test rows.
    pub test: ClassData,
    /// The classes (original labels) in arrival order.
    pub class_order: Vec<u32>,
    /// The tasks in order.
    pub tasks: Vec<Task>,
    rank: Vec<u32>,
    task_of_target: Vec<usize>,
}

/// What a learner is given of one task: labelled rows with their head targets, unlabelled rows
/// without labels.
#[derive(Debug, Clone)]
pub struct TaskView {
    /// Labelled features, row-major.
    pub labeled_x: Vec<f32>,
    /// Head targets (arrival indices) of the labelled rows.
    pub labeled_y: Vec<u32>,
    /// Unlabelled features, row-major.
    pub unlabeled_x: Vec<f32>,
    /// Features per row.
    pub dim: usize,
    /// Head outputs after this task (classes seen so far).
    pub seen_classes: usize,
    /// Head outputs added by this task.
    pub new_classes: usize,
}

impl TaskStream {
    /// Cuts `train` and `test` into tasks.
    ///
    /// # Errors
    /// [`MlError::InvalidInput`] when the two sets differ in features, `tasks` is 0 or exceeds
    /// the number of classes present, `label_ratio` is not in `(0, 1]`, or a given class order
    /// is not a permutation of the classes present.
    pub fn new(train: ClassData, test: ClassData, cfg: &StreamConfig) -> Result<Self> {
        let bad = |m: String| MlError::InvalidInput(m);
        if train.dim != test.dim {
            return Err(bad(format!(
                "train rows have {} features, test rows {}",
                train.dim, test.dim
            )));
        }
        cfg.check()?;
        let mut present: Vec<u32> = train.y.clone();
        present.sort_unstable();
        present.dedup();
        if cfg.tasks == 0 || cfg.tasks > present.len() {
            return Err(bad(format!(
                "{} tasks for {} classes (need 1 ≤ tasks ≤ classes)",
                cfg.tasks,
                present.len()
            )));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let order = match &cfg.class_order {
            Some(o) => {
                let mut s = o.clone();
                s.sort_unstable();
                if s != present {
                    return Err(bad(format!(
                        "class order {o:?} is not a permutation of the classes {present:?}"
                    )));
                }
                o.clone()
            }
            None => {
                let mut o = present.clone();
                o.shuffle(&mut rng);
                o
            }
        };
        let classes = train.classes.max(test.classes);
        let mut rank = vec![u32::MAX; classes];
        for (k, &c) in order.iter().enumerate() {
            rank[c as usize] = k as u32;
        }
        let (base, extra) = (order.len() / cfg.tasks, order.len() % cfg.tasks);
        let mut tasks = Vec::with_capacity(cfg.tasks);
        let mut task_of_target = Vec::with_capacity(order.len());
        let mut start = 0;
        for t in 0..cfg.tasks {
            let n = base + usize::from(t < extra);
            let cls = order[start..start + n].to_vec();
            start += n;
            let (mut labeled, mut unlabeled) = (Vec::new(), Vec::new());
            for &c in &cls {
                let mut rows: Vec<usize> = (0..train.len()).filter(|&i| train.y[i] == c).collect();
                rows.shuffle(&mut rng);
                let k =
                    ((cfg.label_ratio * rows.len() as f64).round() as usize).clamp(1, rows.len());
                labeled.extend_from_slice(&rows[..k]);
                unlabeled.extend_from_slice(&rows[k..]);
            }
            labeled.sort_unstable();
            unlabeled.sort_unstable();
            let test_rows = (0..test.len())
                .filter(|&i| cls.contains(&test.y[i]))
                .collect();
            task_of_target.extend(std::iter::repeat_n(t, n));
            tasks.push(Task {
                classes: cls,
                labeled,
                unlabeled,
                test: test_rows,
            });
        }
        Ok(Self {
            train,
            test,
            class_order: order,
            tasks,
            rank,
            task_of_target,
        })
    }

    /// The head output (arrival index) of original class `class`; `None` for a class that is not
    /// in the stream.
    pub fn target(&self, class: u32) -> Option<u32> {
        self.rank
            .get(class as usize)
            .copied()
            .filter(|&r| r != u32::MAX)
    }

    /// The task that introduces head output `target`.
    pub fn task_of_target(&self) -> &[usize] {
        &self.task_of_target
    }

    /// Head outputs after task `t` (classes of tasks `0..=t`).
    pub fn seen_classes(&self, t: usize) -> usize {
        self.tasks[..=t].iter().map(|k| k.classes.len()).sum()
    }

    /// Test rows of the classes of tasks `0..=t`, in row order.
    pub fn test_seen(&self, t: usize) -> Vec<usize> {
        let mut v: Vec<usize> = self.tasks[..=t]
            .iter()
            .flat_map(|k| k.test.clone())
            .collect();
        v.sort_unstable();
        v
    }

    /// Head targets of training or test rows `idx` of `data` (which is `self.train` or
    /// `self.test`).
    pub fn targets(&self, data: &ClassData, idx: &[usize]) -> Vec<u32> {
        idx.iter().map(|&i| self.rank[data.y[i] as usize]).collect()
    }

    /// What a learner may see of task `t`: labelled rows with head targets, unlabelled rows
    /// without labels.
    pub fn task_view(&self, t: usize) -> TaskView {
        let task = &self.tasks[t];
        let rows = |idx: &[usize]| self.train.select(idx).x;
        TaskView {
            labeled_x: rows(&task.labeled),
            labeled_y: self.targets(&self.train, &task.labeled),
            unlabeled_x: rows(&task.unlabeled),
            dim: self.train.dim,
            seen_classes: self.seen_classes(t),
            new_classes: task.classes.len(),
        }
    }
}
