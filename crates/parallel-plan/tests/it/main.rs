//! Integration tests of `parallel_plan` (one binary, one module per topic).

mod ilp;
mod planner;
