//! Helpers shared by the examples (each example uses a subset).
#![allow(dead_code)]

use memory_model::ModelConfig;
use memory_model::MEGATRON_VOCAB_PADDING;
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::plan::Plan;
use parallel_plan::planner::{self, Objective, PlanReport};
use parallel_plan::search::Problem;

/// Bytes per GiB.
pub(crate) const GIB: f64 = (1u64 << 30) as f64;

/// The default problem for a built-in model on `nodes` DGX A100-80GB nodes.
pub(crate) fn dgx_problem(
    model: &str,
    nodes: usize,
) -> Result<Problem, Box<dyn std::error::Error>> {
    Ok(Problem::new(
        ModelConfig::preset(model)?.with_vocab_padding(MEGATRON_VOCAB_PADDING),
        DeviceMesh::preset("dgx-a100-80g", nodes)?,
    ))
}

/// The min-memory plan within `slack` of the strongest peer's step time, and the wall-clock
/// seconds it took.
pub(crate) fn timed_min_memory(
    problem: &Problem,
    slack: f64,
) -> Result<(PlanReport, f64), Box<dyn std::error::Error>> {
    let start = std::time::Instant::now();
    let report = planner::plan(problem, Objective::MinMemory { slack }, &|_, _, _| {})?;
    Ok((report, start.elapsed().as_secs_f64()))
}

/// The chosen plan, its runners-up, pardis's fastest plan and each peer's fastest and leanest
/// configurations of a report.
pub(crate) fn reported(report: &PlanReport) -> impl Iterator<Item = &Plan> {
    let peers = report.peers.iter().flat_map(|s| {
        s.fastest
            .iter()
            .chain(&s.leanest_within_budget)
            .map(|p| &p.plan)
    });
    std::iter::once(&report.plan)
        .chain(&report.runners_up)
        .chain(std::iter::once(&report.fastest))
        .chain(peers)
}

/// `pp2 (12/12) gpu8 m32 1F1B none`: the shape of a plan in one cell.
pub(crate) fn shape(p: &Plan) -> String {
    let layers: Vec<String> = p.layers_per_stage.iter().map(u64::to_string).collect();
    format!(
        "pp{} ({}) {} m{} {} {}",
        p.pipeline_stages,
        layers.join("/"),
        p.stage_mesh,
        p.micro_batches,
        p.schedule,
        p.recompute_label()
    )
}
