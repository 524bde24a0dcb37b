//! Operator-by-operator comparison of a plan with the engine configuration that stands for it.

use super::shape::{mesh_axes, signature};
use super::GivenUp;
use crate::error::Result;
use crate::plan::Plan;

/// Relative step-time difference below which two plans take the same time (sums of the same
/// terms in another order).
const SAME_TIME: f64 = 1e-9;

/// Appends to `given_up` every operator that `engine` splits differently from `plan` (ways per
/// dimension and ZeRO stage, stage by stage, each operator once; a ZeRO or sequence-parallel
/// difference already listed is not repeated per operator), and, when nothing differs but
/// memory or time do, the cost difference.
pub(crate) fn residual_differences(
    plan: &Plan,
    engine: &Plan,
    given_up: &mut Vec<GivenUp>,
) -> Result<()> {
    let zero_noted = given_up
        .iter()
        .any(|g| matches!(g, GivenUp::MixedZero { .. } | GivenUp::ZeroStage { .. }));
    let sp_noted = given_up
        .iter()
        .any(|g| matches!(g, GivenUp::SequenceParallel { .. }));
    // An operator's split without the parts already listed (its ZeRO stage, its sequence split).
    let residual = |sig: &str| -> String {
        sig.split(' ')
            .filter(|p| !(zero_noted && p.starts_with("zero")))
            .filter(|p| !(sp_noted && p.starts_with("seq×")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let plan_axes = mesh_axes(&plan.stage_mesh)?;
    let engine_axes = mesh_axes(&engine.stage_mesh)?;
    let mut seen: Vec<String> = Vec::new();
    for ps in &plan.stages {
        let Some(es) = engine.stages.iter().find(|s| s.index == ps.index) else {
            continue;
        };
        for po in &ps.operators {
            let Some(eo) = es.operators.iter().find(|o| o.name == po.name) else {
                continue;
            };
            let (a, b) = (signature(po, &plan_axes)?, signature(eo, &engine_axes)?);
            if residual(&a) != residual(&b) && !seen.contains(&po.name) {
                seen.push(po.name.clone());
                given_up.push(GivenUp::OperatorSharding {
                    operator: po.name.clone(),
                    plan: a,
                    engine: b,
                });
            }
        }
    }
    let memory = engine.per_device_memory.total() as i64 - plan.per_device_memory.total() as i64;
    let time = engine.step_time_s - plan.step_time_s;
    let same_time = time.abs() <= SAME_TIME * plan.step_time_s.max(engine.step_time_s);
    if given_up.is_empty() && (memory != 0 || !same_time) {
        given_up.push(GivenUp::CostDifference {
            memory_bytes: memory,
            step_time_s: time,
        });
    }
    Ok(())
}
