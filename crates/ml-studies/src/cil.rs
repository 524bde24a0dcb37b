//! The class-incremental benchmark of `ml_models::incremental` (issue 29): every method over
//! several seeded class orders of split Fashion-MNIST or the UCI digits, a table of mean ± std
//! and a PNG of the accuracy after each task.

use std::collections::BTreeMap;
use std::path::Path;

use ml_models::incremental::{
    load_fashion_mnist, run_method, Arch, CilConfig, ClassData, Method, StreamConfig, TaskStream,
};
use ml_models::stats::mean_std;
use pardis_datasets::DataRoots;
use serde::Serialize;

use crate::{Result, StudyError};

/// The most class orders one benchmark runs (each builds its own task stream up front).
pub const MAX_ORDERS: u64 = 1000;

/// The two data sets of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CilData {
    /// UCI handwritten digits 8×8 (`images/digits.csv`), split 70/30 per class (seed 0).
    Digits,
    /// Fashion-MNIST 28×28 (`fashion-mnist/*.gz`, Debian's `dataset-fashion-mnist`), its own
    /// 60 000 / 10 000 split.
    FashionMnist,
}

impl CilData {
    /// `digits` or `fashion-mnist`.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "digits" => Ok(Self::Digits),
            "fashion-mnist" | "fashion" => Ok(Self::FashionMnist),
            o => Err(StudyError::InvalidInput(format!(
                "unknown data set `{o}` (digits, fashion-mnist)"
            ))),
        }
    }

    /// The name [`CilData::parse`] takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Digits => "digits",
            Self::FashionMnist => "fashion-mnist",
        }
    }

    /// `(train, test)` located through `roots`.
    pub fn load(self, roots: &DataRoots) -> Result<(ClassData, ClassData)> {
        match self {
            Self::Digits => {
                let p = roots.require_path("images/digits.csv")?.path;
                let d = ClassData::from_csv_label_last(&p, Some((8, 8)))?;
                Ok(d.stratified_split(0.3, 0)?)
            }
            Self::FashionMnist => {
                let p = roots
                    .require_path("fashion-mnist/train-images-idx3-ubyte.gz")?
                    .path;
                let dir = p.parent().unwrap_or(Path::new("."));
                Ok(load_fashion_mnist(dir)?)
            }
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct CilBenchConfig {
    /// The data set.
    pub data: CilData,
    /// Tasks `T` (5 × 2 classes by default).
    pub tasks: usize,
    /// Labelled fraction ρ per class, default 0.1.
    pub label_ratio: f64,
    /// Class orders: seeds `0..orders` of the stream and of the runs, default 3.
    pub orders: u64,
    /// The methods, default all six.
    pub methods: Vec<Method>,
    /// Shared training settings (memory size, steps, network).
    pub run: CilConfig,
    /// Runs (one method on one class order) trained at once (`pardis ml cil --jobs`), default
    /// the number of CPUs (`std::thread::available_parallelism`); 1 runs them one after the
    /// other. The results do not depend on it: every run has its own seeds and network.
    pub jobs: usize,
}

impl CilBenchConfig {
    /// The benchmark's settings for `data`: MLP 256-256, memory 500, 5 tasks, ρ = 0.1, three
    /// class orders; 200 steps per task of batch 32 on the digits, 500 on Fashion-MNIST.
    pub fn for_data(data: CilData) -> Self {
        let steps = match data {
            CilData::Digits => 200,
            CilData::FashionMnist => 500,
        };
        Self {
            data,
            tasks: 5,
            label_ratio: 0.1,
            orders: 3,
            methods: Method::NAMES
                .iter()
                .map(|n| Method::by_name(n).expect("known name"))
                .collect(),
            run: CilConfig {
                arch: Arch::default(),
                steps_per_task: steps,
                ..CilConfig::default()
            },
            jobs: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

impl CilBenchConfig {
    /// Checks the settings that do not depend on the data (tasks, label ratio, class orders,
    /// methods, batch and steps), so that a front end can refuse them before loading anything.
    /// [`run_cil_benchmark`] runs it too.
    ///
    /// # Errors
    /// [`StudyError::InvalidInput`] or the library's error naming the bad setting.
    pub fn check(&self) -> Result<()> {
        StreamConfig {
            tasks: self.tasks,
            label_ratio: self.label_ratio,
            ..StreamConfig::default()
        }
        .check()?;
        if self.orders == 0 || self.methods.is_empty() {
            return Err(StudyError::InvalidInput(
                "need at least one class order and one method".into(),
            ));
        }
        if self.orders > MAX_ORDERS {
            return Err(StudyError::InvalidInput(format!(
                "{} class orders is more than {MAX_ORDERS}",
                self.orders
            )));
        }
        if self.run.batch == 0 || self.run.steps_per_task == 0 {
            return Err(StudyError::InvalidInput(
                "batch and steps per task must be positive".into(),
            ));
        }
        Ok(())
    }

    /// One line naming the data, its size and the settings, for progress output.
    pub fn describe(&self, train: &ClassData, test: &ClassData) -> String {
        format!(
            "{}: {} train / {} test rows; {} tasks, ρ = {}, M = {}, {} steps per task, {} order(s)",
            self.data.name(),
            train.len(),
            test.len(),
            self.tasks,
            self.label_ratio,
            self.run.memory,
            self.run.steps_per_task,
            self.orders
        )
    }
}

/// One method on one class order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CilRow {
    /// Method name.
    pub method: String,
    /// Seed of the class order (and of the run).
    pub order: u64,
    /// The class order (original labels).
    pub class_order: Vec<u32>,
    /// Accuracy on all classes seen, after each task.
    pub curve: Vec<f64>,
    /// Accuracy on each task's classes after each task (row `t` has `t + 1` entries).
    pub per_task: Vec<Vec<f64>>,
    /// Mean of the curve.
    pub average_incremental: f64,
    /// Last point of the curve.
    pub final_accuracy: f64,
    /// Average forgetting.
    pub forgetting: f64,
    /// Rows in memory at the end (labelled, unlabelled).
    pub memory_rows: (usize, usize),
    /// Wall-clock seconds (with several workers, other runs shared the CPU meanwhile).
    pub seconds: f64,
}

impl CilRow {
    /// One line for progress output: order, method, final and average incremental accuracy,
    /// forgetting, seconds.
    pub fn progress_line(&self) -> String {
        format!(
            "  order {} {:9} final {:.3}  avg incremental {:.3}  forgetting {:.3}  ({:.0} s)",
            self.order,
            self.method,
            self.final_accuracy,
            self.average_incremental,
            self.forgetting,
            self.seconds
        )
    }
}

/// Runs every method on every class order, `cfg.jobs` runs at a time; `on_row` sees each
/// result as it comes (in the order the runs finish). The rows come back sorted by class order,
/// then method, whatever the number of workers.
///
/// Each run is sequential code apart from candle's matrix products (two threads on large
/// products), so one run at a time leaves a core idle most of the time; the runs are
/// independent (own network, seeds and memory), so several at once give the same rows. The
/// costliest methods start first (temporal, DER++, iCaRL-style, then the others), so that the
/// last runs to finish are short.
pub fn run_cil_benchmark(
    cfg: &CilBenchConfig,
    train: &ClassData,
    test: &ClassData,
    on_row: &mut dyn FnMut(&CilRow),
) -> Result<Vec<CilRow>> {
    cfg.check()?;
    let streams = (0..cfg.orders)
        .map(|order| {
            TaskStream::new(
                train.clone(),
                test.clone(),
                &StreamConfig {
                    tasks: cfg.tasks,
                    label_ratio: cfg.label_ratio,
                    seed: order,
                    class_order: None,
                },
            )
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    // Runs (order, method index), costliest methods first.
    let cost = |m: &Method| match m {
        Method::Temporal(_) => 0,
        Method::Der(_) => 1,
        Method::Icarl(_) => 2,
        _ => 3,
    };
    let mut queue: Vec<(usize, usize)> = (0..streams.len())
        .flat_map(|o| (0..cfg.methods.len()).map(move |m| (o, m)))
        .collect();
    queue.sort_by_key(|&(o, m)| (cost(&cfg.methods[m]), o, m));
    let run_job = |(o, m): (usize, usize)| -> Result<CilRow> {
        let stream = &streams[o];
        let order = o as u64;
        let run = CilConfig {
            seed: order,
            ..cfg.run.clone()
        };
        let r = run_method(stream, &cfg.methods[m], &run)?;
        Ok(CilRow {
            method: r.method,
            order,
            class_order: stream.class_order.clone(),
            curve: r.metrics.accuracy_curve(),
            per_task: r.metrics.evals.iter().map(|e| e.per_task.clone()).collect(),
            average_incremental: r.metrics.average_incremental_accuracy(),
            final_accuracy: r.metrics.final_accuracy(),
            forgetting: r.metrics.average_forgetting(),
            memory_rows: r.memory_rows,
            seconds: r.seconds,
        })
    };
    let mut done: Vec<((usize, usize), CilRow)> = Vec::with_capacity(queue.len());
    let workers = cfg.jobs.clamp(1, queue.len());
    if workers == 1 {
        for &job in &queue {
            let row = run_job(job)?;
            on_row(&row);
            done.push((job, row));
        }
    } else {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failed = std::sync::atomic::AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut first_error = None;
        std::thread::scope(|scope| {
            for _ in 0..workers {
                let tx = tx.clone();
                let (next, failed, queue, run_job) = (&next, &failed, &queue, &run_job);
                scope.spawn(move || {
                    use std::sync::atomic::Ordering::SeqCst;
                    while !failed.load(SeqCst) {
                        let Some(&job) = queue.get(next.fetch_add(1, SeqCst)) else {
                            break;
                        };
                        let r = run_job(job);
                        if r.is_err() {
                            failed.store(true, SeqCst);
                        }
                        if tx.send((job, r)).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            for (job, r) in rx {
                match r {
                    Ok(row) => {
                        on_row(&row);
                        done.push((job, row));
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
        });
        if let Some(e) = first_error {
            return Err(e);
        }
    }
    done.sort_by_key(|&(job, _)| job);
    Ok(done.into_iter().map(|(_, row)| row).collect())
}

/// Mean ± std of one method over the class orders.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CilSummary {
    /// Method name.
    pub method: String,
    /// Class orders averaged.
    pub runs: usize,
    /// Final accuracy (mean, std).
    pub final_accuracy: (f64, f64),
    /// Average incremental accuracy (mean, std).
    pub average_incremental: (f64, f64),
    /// Average forgetting (mean, std).
    pub forgetting: (f64, f64),
    /// Mean accuracy curve.
    pub curve: Vec<f64>,
    /// Mean seconds per run.
    pub seconds: f64,
}

/// One summary per method, in the order the methods first appear in `rows`.
pub fn cil_summary(rows: &[CilRow]) -> Vec<CilSummary> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&r.method.as_str()) {
            names.push(&r.method);
        }
    }
    names
        .into_iter()
        .map(|n| {
            let rs: Vec<&CilRow> = rows.iter().filter(|r| r.method == n).collect();
            let pick =
                |f: fn(&CilRow) -> f64| mean_std(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
            let len = rs.iter().map(|r| r.curve.len()).min().unwrap_or(0);
            CilSummary {
                method: n.to_string(),
                runs: rs.len(),
                final_accuracy: pick(|r| r.final_accuracy),
                average_incremental: pick(|r| r.average_incremental),
                forgetting: pick(|r| r.forgetting),
                curve: (0..len)
                    .map(|t| rs.iter().map(|r| r.curve[t]).sum::<f64>() / rs.len() as f64)
                    .collect(),
                seconds: pick(|r| r.seconds).0,
            }
        })
        .collect()
}

/// The summary as a Markdown table.
pub fn cil_markdown(summary: &[CilSummary]) -> String {
    let mut s = String::from(
        "| method | final accuracy | avg incremental accuracy | forgetting | accuracy after each task | s/run |\n\
         |---|---|---|---|---|---|\n",
    );
    for r in summary {
        let curve: Vec<String> = r.curve.iter().map(|a| format!("{a:.3}")).collect();
        s.push_str(&format!(
            "| {} | {:.3} ± {:.3} | {:.3} ± {:.3} | {:.3} ± {:.3} | {} | {:.0} |\n",
            r.method,
            r.final_accuracy.0,
            r.final_accuracy.1,
            r.average_incremental.0,
            r.average_incremental.1,
            r.forgetting.0,
            r.forgetting.1,
            curve.join(" "),
            r.seconds
        ));
    }
    s
}

/// PNG of the mean accuracy curve of every method.
pub fn plot_cil(summary: &[CilSummary], caption: &str, path: &Path) -> Result<()> {
    let curves: BTreeMap<String, Vec<f64>> = summary
        .iter()
        .map(|s| (s.method.clone(), s.curve.clone()))
        .collect();
    crate::plot::plot_task_curves(&curves, caption, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(method: &str, order: u64, curve: Vec<f64>, forgetting: f64) -> CilRow {
        CilRow {
            method: method.into(),
            order,
            class_order: vec![],
            per_task: vec![],
            average_incremental: curve.iter().sum::<f64>() / curve.len() as f64,
            final_accuracy: *curve.last().unwrap(),
            curve,
            forgetting,
            memory_rows: (0, 0),
            seconds: 2.0,
        }
    }

    #[test]
    fn summary_is_mean_and_std_per_method_in_first_seen_order() {
        let rows = vec![
            row("er", 0, vec![1.0, 0.6], 0.4),
            row("joint", 0, vec![1.0, 0.9], 0.1),
            row("er", 1, vec![0.8, 0.8], 0.2),
        ];
        let s = cil_summary(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].method.as_str(), s[0].runs), ("er", 2));
        assert!((s[0].final_accuracy.0 - 0.7).abs() < 1e-12);
        assert!((s[0].final_accuracy.1 - (0.02f64).sqrt()).abs() < 1e-12);
        assert!((s[0].forgetting.0 - 0.3).abs() < 1e-12);
        assert!((s[0].curve[0] - 0.9).abs() < 1e-12 && (s[0].curve[1] - 0.7).abs() < 1e-12);
        assert_eq!(s[1].final_accuracy, (0.9, 0.0));
        let md = cil_markdown(&s);
        assert!(md.contains("| er | 0.700 ± 0.141 |"), "{md}");
        assert_eq!(md.lines().count(), 4);
    }

    /// Settings that need no data are refused by `check` (which the CLI runs before loading).
    #[test]
    fn check_refuses_bad_settings_without_data() {
        let ok = CilBenchConfig::for_data(CilData::Digits);
        assert!(ok.check().is_ok());
        let bad = [
            CilBenchConfig {
                tasks: 0,
                ..ok.clone()
            },
            CilBenchConfig {
                label_ratio: 1.5,
                ..ok.clone()
            },
            CilBenchConfig {
                label_ratio: 0.0,
                ..ok.clone()
            },
            CilBenchConfig {
                orders: 0,
                ..ok.clone()
            },
            CilBenchConfig {
                methods: vec![],
                ..ok.clone()
            },
            CilBenchConfig {
                run: CilConfig {
                    steps_per_task: 0,
                    ..ok.run.clone()
                },
                ..ok.clone()
            },
        ];
        for (i, c) in bad.iter().enumerate() {
            assert!(c.check().is_err(), "case {i}");
        }
    }

    /// Several workers give the rows one worker gives, in the same order.
    #[test]
    fn workers_do_not_change_the_rows() {
        // 4 classes of 30 rows in 6 dimensions, class c around c / 4.
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for c in 0..4u32 {
            for i in 0..30u32 {
                for d in 0..6u32 {
                    x.push(c as f32 / 4.0 + ((i * 7 + d * 3) % 11) as f32 / 40.0);
                }
                y.push(c);
            }
        }
        let data = ClassData::new(x, y, 6, None).unwrap();
        let mut cfg = CilBenchConfig::for_data(CilData::Digits);
        cfg.tasks = 2;
        cfg.label_ratio = 0.3;
        cfg.orders = 2;
        cfg.run.steps_per_task = 6;
        cfg.run.batch = 8;
        cfg.run.memory = 20;
        cfg.run.arch = Arch::Mlp { hidden: vec![8] };
        cfg.methods = ["er", "temporal", "finetune"]
            .iter()
            .map(|n| Method::by_name(n).unwrap())
            .collect();
        let run = |workers: usize| {
            let cfg = CilBenchConfig {
                jobs: workers,
                ..cfg.clone()
            };
            let mut seen = 0;
            let rows = run_cil_benchmark(&cfg, &data, &data, &mut |_| seen += 1).unwrap();
            assert_eq!(seen, rows.len());
            rows.into_iter()
                .map(|r| CilRow { seconds: 0.0, ..r })
                .collect::<Vec<_>>()
        };
        let one = run(1);
        assert_eq!(one.len(), 6);
        let order: Vec<(u64, &str)> = one.iter().map(|r| (r.order, r.method.as_str())).collect();
        assert_eq!(
            order,
            [
                (0, "er"),
                (0, "temporal"),
                (0, "finetune"),
                (1, "er"),
                (1, "temporal"),
                (1, "finetune")
            ]
        );
        assert_eq!(run(3), one);
    }

    #[test]
    fn names_parse_and_bad_settings_are_refused() {
        assert_eq!(
            CilData::parse("fashion-mnist").unwrap(),
            CilData::FashionMnist
        );
        assert_eq!(CilData::parse("digits").unwrap().name(), "digits");
        assert!(CilData::parse("cifar").is_err());
        let cfg = CilBenchConfig {
            orders: 0,
            ..CilBenchConfig::for_data(CilData::Digits)
        };
        let d = ClassData::new(vec![0.0, 1.0], vec![0, 1], 1, None).unwrap();
        assert!(run_cil_benchmark(&cfg, &d, &d, &mut |_| {}).is_err());
    }
}
