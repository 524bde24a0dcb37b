//! `pardis bfs` (issue #6).

/// Arguments of `pardis bfs`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.json;
    anyhow::bail!("`pardis bfs` is not implemented yet (issue #6)")
}
