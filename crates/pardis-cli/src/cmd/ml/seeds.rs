//! `pardis ml qlora-study --jobs N`: the seeds of the GPT study fine-tuned in parallel
//! processes (this binary again, with hidden arguments), after pretraining once here.
//!
//! One process per group of seeds keeps the per-variant peak-memory figure a property of one
//! fine-tuning (VmHWM is per process), while the machine's cores are all busy: a single study
//! process keeps only ~1.2 of them busy (candle's element-wise ops are serial). Each child
//! reports progress as `PROGRESS_PREFIX` lines on stderr, shown here as one bar per child.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use indicatif::MultiProgress;
use ml_studies::relation_study::{RelationStudyConfig, RelationStudyRow};
use ml_studies::study::{run_study, StudyConfig, StudyData, StudyHooks, StudyReport, StudyRow};

use super::{vm_hwm, Bar};
use crate::output::progress;

/// Marks a child's progress line on its stderr.
const PROGRESS_PREFIX: &str = "pardis-progress ";

/// Hooks of a child process: progress as lines for the parent, peak RSS per variant.
pub(super) struct ChildHooks;

impl StudyHooks for ChildHooks {
    fn phase(&mut self, name: &str, steps: usize) {
        eprintln!("{PROGRESS_PREFIX}phase {steps} {name}");
    }
    fn step(&mut self) {
        eprintln!("{PROGRESS_PREFIX}step");
    }
    fn measure_begin(&mut self) {
        // Writing 5 resets the peak RSS to the current RSS (Linux ≥ 4.0).
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
    fn measure_end(&mut self) -> Option<u64> {
        vm_hwm()
    }
}

/// How many of a child's last stderr lines (other than progress) an error message carries.
const KEPT_STDERR_LINES: usize = 200;

/// One child process of a study: its label, arguments after `pardis`, and its report file.
pub(super) struct Child {
    pub label: String,
    pub args: Vec<std::ffi::OsString>,
    pub report: PathBuf,
}

/// Runs `children` (this binary with their arguments) at once, one progress bar each driven by
/// their `PROGRESS_PREFIX` lines, and waits for all; an error carries a failed child's stderr.
pub(super) fn run_children(children: Vec<Child>) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let multi = MultiProgress::new();
    let mut running = Vec::new();
    for c in children {
        let mut child = Command::new(&exe)
            .args(&c.args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let pb = multi.add(progress(1, &c.label));
        let label = c.label.clone();
        // Drains the child's stderr (so it never blocks on a full pipe), driving its bar and
        // keeping its other lines for an error message.
        let reader = std::thread::spawn(move || {
            let mut other = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                match line.strip_prefix(PROGRESS_PREFIX) {
                    Some("step") => pb.inc(1),
                    Some(p) => {
                        let mut it = p.strip_prefix("phase ").unwrap_or(p).splitn(2, ' ');
                        let steps = it.next().and_then(|n| n.parse().ok()).unwrap_or(1);
                        pb.set_length(steps);
                        pb.set_position(0);
                        pb.set_message(format!("{label}: {}", it.next().unwrap_or("")));
                    }
                    None => {
                        // The last lines only: an error message, not a log.
                        if other.len() == KEPT_STDERR_LINES {
                            other.remove(0);
                        }
                        other.push(line);
                    }
                }
            }
            pb.finish_and_clear();
            other
        });
        running.push((child, reader, c.label));
    }
    let mut failed = Vec::new();
    for (mut child, reader, label) in running {
        let status = child.wait()?;
        let other = reader.join().unwrap_or_default();
        if !status.success() {
            failed.push(format!("{label}: {status}\n{}", other.join("\n")));
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "study processes failed:\n{}",
        failed.join("\n")
    );
    Ok(())
}

/// A directory only this process writes to, for its children's reports: created new (never an
/// existing one) under the system's temporary directory, removed with everything in it when
/// dropped. The user's `--out` directory only receives the files the command documents.
struct PrivateDir(PathBuf);

impl PrivateDir {
    fn new() -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("pardis-seeds-{}-{nanos:09}", std::process::id()));
        std::fs::create_dir(&dir)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        Ok(PrivateDir(dir))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // Only what this process created: the directory made by `new` and its children's files.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Pretrains (or loads `cfg.pretrained_path`) here, then fine-tunes `cfg.seeds` split into
/// `jobs` contiguous groups, one child process each, and merges their rows (variant-major,
/// seeds in order) into this process's report.
pub(super) fn run_in_processes(
    cfg: &StudyConfig,
    data: &StudyData,
    jobs: usize,
    out: &Path,
    quick: bool,
) -> anyhow::Result<StudyReport> {
    let pretrain_only = StudyConfig {
        seeds: Vec::new(),
        ..cfg.clone()
    };
    let mut bar = Bar(progress(1, "pretraining"));
    let mut rep = run_study(&pretrain_only, data, &mut bar)?;
    bar.0.finish_and_clear();

    let per = cfg.seeds.len().div_ceil(jobs);
    let private = PrivateDir::new()?;
    let children: Vec<Child> = cfg
        .seeds
        .chunks(per)
        .map(|group| {
            let report = private
                .0
                .join(format!("seeds-{}-{}.json", group[0], group.len()));
            let mut args: Vec<std::ffi::OsString> = ["ml", "qlora-study", "--preset"]
                .iter()
                .map(Into::into)
                .collect();
            args.push(cfg.preset.clone().into());
            for (flag, v) in [
                ("--seeds", group.len().to_string()),
                ("--first-seed", group[0].to_string()),
                ("--steps", cfg.finetune_steps.to_string()),
                ("--pretrain-steps", cfg.pretrain_steps.to_string()),
            ] {
                args.push(flag.into());
                args.push(v.into());
            }
            args.extend(["--out".into(), out.into()]);
            args.extend(["--save-report".into(), report.clone().into()]);
            if quick {
                args.push("--quick".into());
            }
            Child {
                label: format!("seeds {}..={}", group[0], group[group.len() - 1]),
                args,
                report,
            }
        })
        .collect();
    let files: Vec<PathBuf> = children.iter().map(|c| c.report.clone()).collect();
    run_children(children)?;
    for file in files {
        let part: StudyReport = serde_json::from_str(&crate::output::read_text_capped(
            &file,
            crate::output::MAX_JSON_BYTES,
        )?)?;
        rep.rows.extend(part.rows);
    }
    // Variant-major in run order, seeds in order (each child's rows are seed-major).
    let key = |r: &StudyRow| (r.group.clone(), r.variant.clone());
    let order: Vec<_> = rep.rows.iter().map(key).collect();
    let first = |r: &StudyRow| order.iter().position(|o| *o == key(r)).unwrap_or(0);
    rep.rows.sort_by_key(|r| (first(r), r.seed));
    Ok(rep)
}

/// The MiniLM study with `cfg.seeds` split into `jobs` contiguous groups, one child process
/// each (same ranks and subset sizes as `a`); rows variant-major, seeds in order.
pub(super) fn minilm_in_processes(
    cfg: &RelationStudyConfig,
    jobs: usize,
    a: &super::StudyArgs,
) -> anyhow::Result<Vec<RelationStudyRow>> {
    let per = cfg.seeds.len().div_ceil(jobs);
    let ranks: Vec<String> = cfg.ranks.iter().map(|r| r.to_string()).collect();
    let private = PrivateDir::new()?;
    let children: Vec<Child> = cfg
        .seeds
        .chunks(per)
        .map(|group| {
            let report = private
                .0
                .join(format!("minilm-seeds-{}-{}.json", group[0], group.len()));
            let mut args: Vec<std::ffi::OsString> = Vec::new();
            for (flag, v) in [
                ("--model", "minilm".to_string()),
                ("--ranks", ranks.join(",")),
                ("--seeds", group.len().to_string()),
                ("--first-seed", group[0].to_string()),
                ("--train-per-class", cfg.run.train_per_class.to_string()),
                ("--test-per-class", cfg.run.test_per_class.to_string()),
            ] {
                args.push(flag.into());
                args.push(v.into());
            }
            args.extend(["--out".into(), a.out.clone().into()]);
            args.extend(["--save-report".into(), report.clone().into()]);
            let mut all: Vec<std::ffi::OsString> = vec!["ml".into(), "qlora-study".into()];
            all.extend(args);
            Child {
                label: format!("seeds {}..={}", group[0], group[group.len() - 1]),
                args: all,
                report,
            }
        })
        .collect();
    let files: Vec<PathBuf> = children.iter().map(|c| c.report.clone()).collect();
    run_children(children)?;
    let mut rows: Vec<RelationStudyRow> = Vec::new();
    for file in files {
        rows.extend(serde_json::from_str::<Vec<RelationStudyRow>>(
            &crate::output::read_text_capped(&file, crate::output::MAX_JSON_BYTES)?,
        )?);
    }
    // Variant-major (each child ran the same variant list), seeds in order: a stable sort by
    // the variant's first position.
    let names: Vec<String> = rows.iter().map(|r| r.variant.name.clone()).collect();
    rows.sort_by_key(|r| (names.iter().position(|n| *n == r.variant.name), r.seed));
    Ok(rows)
}
