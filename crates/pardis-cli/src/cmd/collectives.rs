//! `pardis collectives` (issue #7).

/// Arguments of `pardis collectives`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.json;
    anyhow::bail!("`pardis collectives` is not implemented yet (issue #7)")
}
