//! `pardis memory` (issue #3).

/// Arguments of `pardis memory`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.json;
    anyhow::bail!("`pardis memory` is not implemented yet (issue #3)")
}
