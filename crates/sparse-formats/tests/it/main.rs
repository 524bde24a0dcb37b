//! Integration tests of `sparse_formats` (one binary; modules by topic).

mod hostile;
mod lines;
mod matrix_market;
mod rmat;
