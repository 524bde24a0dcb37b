//! Integration tests of `sparse_kernels` (one binary; see the modules).

mod alloc;
mod common;
mod csr;
mod data;
mod io;
mod kernels;
mod panels;
mod row_pairs;
mod shift_pairs;
mod sweep;
