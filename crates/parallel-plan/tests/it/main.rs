//! Integration tests of `parallel_plan` (one binary, one module per topic).

mod graph;
mod ilp;
mod export;
mod narayanan;
mod planner;
mod unstructured;
