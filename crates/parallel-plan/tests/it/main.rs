//! Integration tests of `parallel_plan` (one binary, one module per topic).

mod export;
mod graph;
mod ilp;
mod narayanan;
mod planner;
mod unstructured;
