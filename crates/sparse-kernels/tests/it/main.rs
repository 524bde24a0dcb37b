//! Integration tests of `sparse_kernels` (one binary; see the modules).

mod common;
mod csr;
mod data;
mod io;
mod kernels;
mod panels;
