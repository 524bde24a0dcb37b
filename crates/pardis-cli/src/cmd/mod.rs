//! One module per subcommand; each exposes `Args` (clap) and `run(Args)`.

pub(crate) mod bfs;
pub(crate) mod collectives;
pub(crate) mod datasets;
pub(crate) mod memory;
pub(crate) mod ml;
pub(crate) mod plan;
pub(crate) mod spmm;
