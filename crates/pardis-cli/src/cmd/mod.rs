//! One module per subcommand; each exposes `Args` (clap) and `run(Args)`. A subcommand whose
//! cargo feature is off is replaced by [`NotBuilt`], which explains how to get it.

#[cfg(feature = "graph")]
pub(crate) mod bfs;
#[cfg(feature = "collectives")]
pub(crate) mod collectives;
pub(crate) mod datasets;
#[cfg(feature = "memory")]
pub(crate) mod memory;
#[cfg(feature = "ml")]
pub(crate) mod ml;
#[cfg(feature = "plan")]
pub(crate) mod plan;
#[cfg(feature = "sparse")]
pub(crate) mod spmm;

/// Arguments of a subcommand left out of this build: accepted and reported, not parsed.
#[cfg(not(feature = "full"))]
#[derive(Debug, clap::Args)]
pub(crate) struct NotBuilt {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<String>,
}

/// The error for a subcommand whose cargo feature was not enabled in this build.
#[cfg(not(feature = "full"))]
pub(crate) fn not_built(subcommand: &str, feature: &str) -> anyhow::Result<()> {
    anyhow::bail!(
        "`pardis {subcommand}` is not in this build (cargo feature `{feature}` of pardis-cli is \
         off); build every subcommand with `cargo build --release -p pardis-cli`"
    )
}
