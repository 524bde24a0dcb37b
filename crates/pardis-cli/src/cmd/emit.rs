//! `pardis plan --emit megatron|torchtitan|deepspeed|all [--out DIR] [--force]` (issue #24): the
//! chosen plan as the files each engine runs (or the nearest configuration the engine
//! expresses, labelled so, with what it gave up and its memory and time from the same model).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::ValueEnum;
use pardis::plan::export::{self, Engine, Export};
use pardis::plan::plan::Plan;
use pardis::plan::search::Problem;

use crate::output;

/// Which engine's files `--emit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EmitArg {
    /// Megatron-LM `pretrain_gpt.py` arguments (`megatron_args.sh`).
    Megatron,
    /// torchtitan job TOML and tensor-parallel plan.
    Torchtitan,
    /// DeepSpeed JSON config.
    Deepspeed,
    /// All three.
    All,
}

impl EmitArg {
    fn engines(self) -> Vec<Engine> {
        match self {
            EmitArg::Megatron => vec![Engine::Megatron],
            EmitArg::Torchtitan => vec![Engine::Torchtitan],
            EmitArg::Deepspeed => vec![Engine::DeepSpeed],
            EmitArg::All => Engine::ALL.to_vec(),
        }
    }
}

/// The `--emit` arguments of `pardis plan`.
#[derive(Debug, clap::Args)]
pub(crate) struct EmitArgs {
    /// Write the chosen plan as an engine's configuration (or the nearest it can express).
    #[arg(long, value_enum)]
    emit: Option<EmitArg>,
    /// Directory for the --emit files (created if missing); without it they go to stdout.
    #[arg(long, requires = "emit")]
    out: Option<PathBuf>,
    /// Overwrite existing files in --out.
    #[arg(long, requires = "out")]
    force: bool,
}

impl EmitArgs {
    /// Whether `--emit` was given.
    pub(crate) fn requested(&self) -> bool {
        self.emit.is_some()
    }
}

/// Refuses `--emit` where there is no model plan to export.
pub(crate) fn check(args: &EmitArgs, graph: bool, pareto: bool, json: bool) -> anyhow::Result<()> {
    if args.emit.is_some() {
        anyhow::ensure!(!graph, "--emit exports a model's plan; it does not apply to --graph");
        anyhow::ensure!(!pareto, "--emit exports the chosen plan; it does not apply to --pareto");
        anyhow::ensure!(!json, "--emit writes engine files; drop --json");
    }
    Ok(())
}

/// Writes `files` into `dir`, refusing to overwrite unless `force`; every path is checked
/// before the first is written.
fn write_files(dir: &Path, exports: &[Export], force: bool) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let paths: Vec<(PathBuf, &str)> = exports
        .iter()
        .flat_map(|e| &e.files)
        .map(|f| (dir.join(&f.name), f.contents.as_str()))
        .collect();
    if !force {
        if let Some((p, _)) = paths.iter().find(|(p, _)| p.exists()) {
            anyhow::bail!(
                "{} exists; pass --force to overwrite it",
                p.display()
            );
        }
    }
    for (p, contents) in paths {
        std::fs::write(&p, contents).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

/// Exports `plan` to the engines `args` asks for: the files to stdout (each after a `==> name
/// <==` line) or into `--out`, and one summary line per engine (stderr when the files go to
/// stdout).
pub(crate) fn run(args: &EmitArgs, problem: &Problem, plan: &Plan) -> anyhow::Result<()> {
    let Some(which) = args.emit else {
        return Ok(());
    };
    let exports: Vec<Export> = which
        .engines()
        .into_iter()
        .map(|engine| export::export(problem, plan, engine))
        .collect::<Result<_, _>>()?;
    let summary = |e: &Export| {
        format!(
            "{} ({}, {})",
            e.summary(),
            output::bytes(e.plan.per_device_memory.total()),
            if e.plan.fits { "fits" } else { "does not fit" }
        )
    };
    match &args.out {
        Some(dir) => {
            write_files(dir, &exports, args.force)?;
            for e in &exports {
                let names: Vec<&str> = e.files.iter().map(|f| f.name.as_str()).collect();
                println!("{} -> {}: {}", summary(e), dir.display(), names.join(", "));
            }
        }
        None => {
            for e in &exports {
                eprintln!("{}", summary(e));
                for f in &e.files {
                    println!("==> {} <==", f.name);
                    print!("{}", f.contents);
                }
            }
        }
    }
    Ok(())
}
