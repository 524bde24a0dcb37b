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

/// Declares the subcommands: each is built when its cargo feature is on, and otherwise kept as a
/// [`cmd::NotBuilt`] placeholder that says how to build it.
macro_rules! subcommands {
    ($( $(#[$doc:meta])* $variant:ident($module:ident, $feature:literal, $name:literal), )*) => {
        #[derive(Debug, Subcommand)]
        enum Command {
            $(
                $(#[$doc])*
                #[cfg(feature = $feature)]
                $variant(cmd::$module::Args),
                $(#[$doc])*
                #[cfg(not(feature = $feature))]
                $variant(cmd::NotBuilt),
            )*
            /// Public data sets: where they are and whether they verify.
            Datasets(cmd::datasets::Args),
        }

        fn dispatch(command: Command) -> anyhow::Result<()> {
            match command {
                $(
                    #[cfg(feature = $feature)]
                    Command::$variant(a) => cmd::$module::run(a),
                    #[cfg(not(feature = $feature))]
                    Command::$variant(_) => cmd::not_built($name, $feature),
                )*
                Command::Datasets(a) => cmd::datasets::run(a),
            }
        }
    };
}

subcommands! {
    /// Training memory of a large model per device, per stage and per category.
    Memory(memory, "memory", "memory"),
    /// Memory-minimal parallel plan for training a model on a cluster, beside Megatron-LM's.
    Plan(plan, "plan", "plan"),
    /// Unstructured-mesh programs (OP2 Airfoil, Jacobi) run sequentially, threaded or distributed.
    Mesh(mesh, "mesh", "mesh"),
    /// Parallel sparse × dense matrix multiplication (LSSM) on a matrix file or generator.
    Spmm(spmm, "sparse", "spmm"),
    /// Parallel breadth-first search with Graph500 validation and TEPS.
    Bfs(bfs, "graph", "bfs"),
    /// Deadlock-free collective communication: benchmarks and the chaos-order demo.
    Collectives(collectives, "collectives", "collectives"),
    /// Machine-learning experiments (QLoRA study and others).
    Ml(ml, "ml", "ml"),
}

/// Turns the standard library's panic on a failed `println!` into what command-line tools do: a
/// closed pipe (`pardis … | head -1`) ends the program quietly with success, any other write
/// error (a full disk) is reported in one line with exit status 1. Other panics keep the
/// default report.
fn handle_stdout_errors() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if let Some(reason) = message.strip_prefix("failed printing to stdout: ") {
            if reason.starts_with("Broken pipe") {
                std::process::exit(0);
            }
            eprintln!("error: writing to standard output: {reason}");
            std::process::exit(1);
        }
        default(info);
    }));
}

fn main() {
    handle_stdout_errors();
    let cli = Cli::parse();
    let result = dispatch(cli.command);
    if let Err(e) = result {
        eprintln!("error: {}", output::error_line(&e));
        std::process::exit(1);
    }
}
