//! One module per subcommand; each exposes `Args` (clap) and `run(Args)`. A subcommand whose
//! cargo feature is off is replaced by [`NotBuilt`], which explains how to get it.

#[cfg(feature = "graph")]
pub(crate) mod bfs;
#[cfg(feature = "collectives")]
pub(crate) mod collectives;
pub(crate) mod datasets;
#[cfg(feature = "plan")]
pub(crate) mod emit;
#[cfg(feature = "memory")]
pub(crate) mod memory;
#[cfg(feature = "mesh")]
pub(crate) mod mesh;
#[cfg(feature = "ml")]
pub(crate) mod ml;
#[cfg(feature = "plan")]
pub(crate) mod plan;
#[cfg(feature = "sparse")]
pub(crate) mod spmm;

/// The most worker threads `--threads` accepts (`spmm`, `bfs`).
#[cfg(any(feature = "sparse", feature = "graph"))]
pub(crate) const MAX_THREADS: usize = 1024;

/// The `--threads` rule of `spmm` and `bfs`: omitted or 0 means all cores (rayon's default),
/// otherwise 1 to [`MAX_THREADS`] worker threads in a pool of the command's own.
#[cfg(any(feature = "sparse", feature = "graph"))]
pub(crate) fn thread_pool(threads: Option<usize>) -> anyhow::Result<rayon::ThreadPool> {
    use anyhow::Context;
    let threads = threads.unwrap_or(0);
    anyhow::ensure!(
        threads <= MAX_THREADS,
        "--threads {threads} is more than {MAX_THREADS} (0 or omitted: all cores)"
    );
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("building the thread pool")
}

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
