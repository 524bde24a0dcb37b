//! `pardis`: the command-line front end of the pardis workspace.
//!
//! Every subcommand prints a human-readable table by default and machine-readable JSON with
//! `--json`; progress goes to stderr; errors are one line (`error: ...`) with exit code 1.

mod cmd;
mod output;

use clap::{Parser, Subcommand};

/// Parallel and distributed computing for training large models and irregular kernels.
#[derive(Debug, Parser)]
#[command(name = "pardis", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Training memory of a large model per device, per stage and per category.
    Memory(cmd::memory::Args),
    /// Memory-minimal parallel plan for training a model on a cluster, beside Megatron-LM's.
    Plan(cmd::plan::Args),
    /// Parallel sparse × dense matrix multiplication (LSSM) on a matrix file or generator.
    Spmm(cmd::spmm::Args),
    /// Parallel breadth-first search with Graph500 validation and TEPS.
    Bfs(cmd::bfs::Args),
    /// Deadlock-free collective communication: benchmarks and the chaos-order demo.
    Collectives(cmd::collectives::Args),
    /// Machine-learning experiments (QLoRA study and others).
    Ml(cmd::ml::Args),
    /// Public data sets: where they are and whether they verify.
    Datasets(cmd::datasets::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Memory(a) => cmd::memory::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Spmm(a) => cmd::spmm::run(a),
        Command::Bfs(a) => cmd::bfs::run(a),
        Command::Collectives(a) => cmd::collectives::run(a),
        Command::Ml(a) => cmd::ml::run(a),
        Command::Datasets(a) => cmd::datasets::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
