//! `pardis plan --emit megatron|torchtitan|deepspeed|all [--out DIR] [--force]` (issue #24): the
//! chosen plan as the files each engine runs (or the nearest configuration the engine
//! expresses, labelled so, with what it gave up and its memory and time from the same model).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::ValueEnum;
use pardis::plan::export;
use pardis::plan::{Engine, Export, Plan, Problem};

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
    /// Overwrite files that already exist in --out (without it, nothing is overwritten).
    #[arg(long, requires = "out")]
    force: bool,
}

impl EmitArgs {
    /// Whether `--emit` was given.
    pub(crate) fn requested(&self) -> bool {
        self.emit.is_some()
    }

    /// Whether the files go to `--out` (else to stdout).
    pub(crate) fn writes_files(&self) -> bool {
        self.out.is_some()
    }
}

/// Refuses `--emit` where there is no model plan to export.
pub(crate) fn check(args: &EmitArgs, graph: bool, pareto: bool, json: bool) -> anyhow::Result<()> {
    if args.emit.is_some() {
        anyhow::ensure!(
            !graph,
            "--emit exports a model's plan; it does not apply to --graph"
        );
        anyhow::ensure!(
            !pareto,
            "--emit exports the chosen plan; it does not apply to --pareto"
        );
        anyhow::ensure!(!json, "--emit writes engine files; drop --json");
    }
    Ok(())
}

/// Writes the exports' files into `dir` (created if missing). Without `force` no existing file
/// is touched: every path is checked before the first is written, and each is created with
/// `create_new`, so a file that appears meanwhile is not overwritten either.
fn write_files(dir: &Path, exports: &[Export], force: bool) -> anyhow::Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let files: Vec<(PathBuf, &str)> = exports
        .iter()
        .flat_map(|e| &e.files)
        .map(|f| (dir.join(&f.name), f.contents.as_str()))
        .collect();
    if !force {
        let existing: Vec<String> = files
            .iter()
            .filter(|(p, _)| p.exists() || p.is_symlink())
            .map(|(p, _)| p.display().to_string())
            .collect();
        anyhow::ensure!(
            existing.is_empty(),
            "refusing to overwrite {} (nothing written); pass --force to replace, or choose another --out",
            existing.join(", ")
        );
    }
    for (p, contents) in files {
        let mut options = std::fs::OpenOptions::new();
        options.write(true);
        if force {
            options.create(true).truncate(true);
        } else {
            options.create_new(true);
        }
        let mut f = options
            .open(&p)
            .with_context(|| format!("creating {}", p.display()))?;
        f.write_all(contents.as_bytes())
            .with_context(|| format!("writing {}", p.display()))?;
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
    // One line per engine, then one per thing it gave up.
    let summary = |e: &Export| {
        let mut lines = vec![format!(
            "{}: {} [{}], {}/device ({}), step {:.3} s",
            e.engine,
            e.fidelity,
            e.config.label(),
            output::bytes(e.plan.per_device_memory.total()),
            if e.plan.fits { "fits" } else { "does not fit" },
            e.plan.step_time_s
        )];
        // Per-operator differences can be many: the first few here, all of them in the files.
        const SHOWN: usize = 6;
        let operators = e
            .given_up
            .iter()
            .filter(|g| matches!(g, export::GivenUp::OperatorSharding { .. }))
            .count();
        let mut shown = 0;
        for g in &e.given_up {
            if matches!(g, export::GivenUp::OperatorSharding { .. }) {
                shown += 1;
                if shown > SHOWN {
                    continue;
                }
            }
            lines.push(format!("  gave up: {g}"));
        }
        if operators > SHOWN {
            lines.push(format!(
                "  gave up: {} more operators split otherwise (listed in the files)",
                operators - SHOWN
            ));
        }
        lines
    };
    match &args.out {
        Some(dir) => {
            write_files(dir, &exports, args.force)?;
            for e in &exports {
                let names: Vec<&str> = e.files.iter().map(|f| f.name.as_str()).collect();
                for line in summary(e) {
                    println!("{line}");
                }
                println!("  wrote {}: {}", dir.display(), names.join(", "));
            }
        }
        None => {
            for e in &exports {
                for line in summary(e) {
                    eprintln!("{line}");
                }
                for f in &e.files {
                    println!("==> {} <==", f.name);
                    print!("{}", f.contents);
                }
            }
        }
    }
    Ok(())
}
