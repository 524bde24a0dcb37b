//! `pardis ml` (issue #8).

/// Arguments of `pardis ml`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.json;
    anyhow::bail!("`pardis ml` is not implemented yet (issue #8)")
}
