//! Integration tests of graph-kernels (one binary; modules by topic).

mod bfs_props;
mod common;
mod convert;
mod generate;
mod graph500_teps;
mod io;
mod real_data;
mod validate;
