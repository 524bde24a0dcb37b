//! `pardis spmm` (issue #5).

/// Arguments of `pardis spmm`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let _ = args.json;
    anyhow::bail!("`pardis spmm` is not implemented yet (issue #5)")
}
