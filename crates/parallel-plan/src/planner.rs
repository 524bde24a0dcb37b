//! The planner's entry point: search, objectives, baselines and the comparison report.

use memory_model::{layers_per_stage, PipelineSchedule};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::baselines::Baseline;
use crate::error::{PlanError, Result};
use crate::ilp::{IlpObjective, IlpSolution};
use crate::plan::Plan;
use crate::search::{Candidate, Problem, StageProblem};

/// What the planner optimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    /// Minimise per-device peak memory subject to step time ≤ (1 + slack) × the minimum step
    /// time (lexicographic: min-time first).
    MinMemory {
        /// Allowed relative slowdown, e.g. 0.05.
        slack: f64,
    },
    /// Minimise step time subject to per-device memory ≤ the device memory (Alpa).
    MinTime,
}

/// Default time slack of the min-memory objective.
pub const DEFAULT_TIME_SLACK: f64 = 0.05;
/// Slacks swept by [`pareto`].
pub const PARETO_SLACKS: [f64; 7] = [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0];
/// Runners-up reported beside the best plan.
pub const RUNNERS_UP: usize = 3;

/// The planner's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanReport {
    /// The chosen plan.
    pub plan: Plan,
    /// The next best plans (other pipeline degrees, meshes or micro-batch counts).
    pub runners_up: Vec<Plan>,
    /// Baselines in the same cost model: Megatron-LM variants, pure DP, ZeRO-3, Alpa min-time.
    pub baselines: Vec<Plan>,
    /// Outer-search points (pipeline degree, stage mesh, micro-batches, layer split, schedule,
    /// recomputation) considered.
    pub candidates_searched: usize,
    /// Of those, the points whose ILPs were solved and fit the device; the others were infeasible
    /// or skipped by their time lower bound.
    pub candidates_solved: usize,
}

/// Progress callback: (done, total, what).
pub type Progress<'a> = &'a (dyn Fn(usize, usize, &str) + Sync);

struct Evaluated {
    cand: Candidate,
    stages: Vec<StageProblem>,
    fastest: Plan,
    fastest_solutions: Vec<IlpSolution>,
}

/// Memory budget for the ILP: device memory less the fixed overhead.
fn budget(problem: &Problem) -> f64 {
    problem
        .mesh
        .device_memory_bytes
        .saturating_sub(problem.setup.overhead_bytes) as f64
}

/// Which candidates phase 1 must solve: those whose step time can still matter.
#[derive(Debug, Clone, Copy)]
enum Needed {
    /// Within `(1 + slack)` of the fastest (min-memory, pareto).
    WithinSlack(f64),
    /// Among the `k` fastest (min-time and its runners-up).
    Fastest(usize),
    /// At most this step time, seconds.
    Below(f64),
}

impl Needed {
    /// The largest step time still needed, given the step times found so far (sorted).
    fn bound(self, times: &[f64]) -> f64 {
        match self {
            Needed::WithinSlack(slack) => times
                .first()
                .map_or(f64::INFINITY, |t| t * (1.0 + slack) * (1.0 + 1e-9)),
            Needed::Fastest(k) => times.get(k - 1).copied().unwrap_or(f64::INFINITY),
            Needed::Below(t) => t,
        }
    }
}

/// Phase 1: build every candidate's stage ILPs, then solve min-time (within the memory
/// budget) in order of increasing time lower bound ([`StrategyGraph::time_lower_bound`] of the
/// slowest stage), skipping candidates whose bound exceeds what `needed` still admits: their
/// plans could be neither the fastest nor within the slack, so skipping them changes no result.
///
/// [`StrategyGraph::time_lower_bound`]: crate::ilp::StrategyGraph::time_lower_bound
fn evaluate_all(
    problem: &Problem,
    cands: Vec<Candidate>,
    needed: Needed,
    progress: Progress<'_>,
) -> Result<(Vec<Evaluated>, u64)> {
    let total = cands.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let budget = budget(problem);
    let tick = || {
        let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        progress(n, total, "min-time ILPs");
    };
    let mut built: Vec<(Candidate, Vec<StageProblem>, f64)> = cands
        .into_par_iter()
        .map(|cand| {
            let stages = problem.build(&cand, None)?;
            let bound = stages
                .iter()
                .map(|s| s.space.ilp.time_lower_bound())
                .fold(0.0, f64::max);
            Ok((cand, stages, bound))
        })
        .collect::<Result<_>>()?;
    built.sort_by(|a, b| a.2.total_cmp(&b.2));
    // The smallest per-device memory any candidate can reach (for the infeasibility error).
    let smallest = built
        .iter()
        .map(|(_, st, _)| {
            st.iter()
                .map(|s| s.space.ilp.min_memory())
                .max()
                .unwrap_or(0)
        })
        .min()
        .map_or(u64::MAX, |m| m + problem.setup.overhead_bytes);
    let mut ok: Vec<Evaluated> = Vec::new();
    let mut times: Vec<f64> = Vec::new();
    let batch = rayon::current_num_threads().max(1);
    let mut rest = built.into_iter().peekable();
    while rest.peek().is_some() {
        let limit = needed.bound(&times);
        let chunk: Vec<_> = rest.by_ref().take(batch).collect();
        let (todo, skipped): (Vec<_>, Vec<_>) = chunk.into_iter().partition(|c| c.2 <= limit);
        skipped.iter().for_each(|_| tick());
        let solved: Vec<Result<Option<Evaluated>>> = todo
            .into_par_iter()
            .map(|(cand, stages, _)| {
                let objective = IlpObjective::MinTime {
                    memory_budget: Some(budget),
                };
                let mut sols = Vec::new();
                for st in &stages {
                    match st.space.ilp.solve(objective, &problem.solver) {
                        Ok(s) => sols.push(s),
                        Err(PlanError::Infeasible { .. }) => {
                            tick();
                            return Ok(None);
                        }
                        Err(e) => return Err(e),
                    }
                }
                tick();
                let fastest = problem.assemble("Alpa-style min-time", &cand, &stages, &sols);
                Ok(Some(Evaluated {
                    cand,
                    stages,
                    fastest,
                    fastest_solutions: sols,
                }))
            })
            .collect();
        for e in solved {
            if let Some(e) = e? {
                times.push(e.fastest.step_time_s);
                ok.push(e);
            }
        }
        times.sort_by(f64::total_cmp);
    }
    Ok((ok, smallest))
}

/// Phase 1 over every candidate of `problem`: the evaluated (fitting) candidates and the number
/// of candidates, or [`PlanError::Infeasible`] with the smallest achievable memory when none fits.
fn evaluate_feasible(
    problem: &Problem,
    needed: Needed,
    progress: Progress<'_>,
) -> Result<(Vec<Evaluated>, usize)> {
    let cands = problem.candidates(None);
    let searched = cands.len();
    let (evaluated, smallest) = evaluate_all(problem, cands, needed, progress)?;
    if evaluated.is_empty() {
        return Err(PlanError::Infeasible {
            budget: problem.mesh.device_memory_bytes,
            min_achievable: smallest,
        });
    }
    Ok((evaluated, searched))
}

fn sort_plans(plans: &mut [Plan], by_memory: bool) {
    plans.sort_by(|a, b| {
        let (ka, kb) = if by_memory {
            (
                (a.per_device_memory.total() as f64, a.step_time_s),
                (b.per_device_memory.total() as f64, b.step_time_s),
            )
        } else {
            (
                (a.step_time_s, a.per_device_memory.total() as f64),
                (b.step_time_s, b.per_device_memory.total() as f64),
            )
        };
        ka.partial_cmp(&kb).unwrap_or(std::cmp::Ordering::Equal)
    });
}

/// Plans `problem` for `objective`, beside the baselines.
///
/// # Errors
/// [`PlanError::Infeasible`] with the smallest achievable per-device memory when no plan fits
/// the device; solver and memory-model errors.
pub fn plan(problem: &Problem, objective: Objective, progress: Progress<'_>) -> Result<PlanReport> {
    let needed = match objective {
        Objective::MinMemory { slack } => Needed::WithinSlack(slack),
        Objective::MinTime => Needed::Fastest(RUNNERS_UP + 1),
    };
    let (evaluated, searched) = evaluate_feasible(problem, needed, progress)?;
    let solved = evaluated.len();
    let mut fastest: Vec<Plan> = evaluated.iter().map(|e| e.fastest.clone()).collect();
    sort_plans(&mut fastest, false);
    let t_star = fastest[0].step_time_s;
    let alpa = fastest[0].clone();
    let (mut plans, by_memory) = match objective {
        Objective::MinTime => (fastest.clone(), false),
        Objective::MinMemory { slack } => (
            min_memory_plans(problem, &evaluated, t_star * (1.0 + slack), progress)?,
            true,
        ),
    };
    sort_plans(&mut plans, by_memory);
    let mut best = plans.remove(0);
    best.name = match objective {
        Objective::MinMemory { slack } => {
            format!("pardis min-memory (slack {:.0}%)", slack * 100.0)
        }
        Objective::MinTime => "pardis min-time".into(),
    };
    plans.truncate(RUNNERS_UP);
    let slack = match objective {
        Objective::MinMemory { slack } => slack,
        Objective::MinTime => 0.0,
    };
    let mut baselines = baseline_plans(problem, slack, progress)?;
    baselines.push(alpa);
    Ok(PlanReport {
        plan: best,
        runners_up: plans,
        baselines,
        candidates_searched: searched,
        candidates_solved: solved,
    })
}

/// The leanest plan whose step time is at most `step_time_s` (e.g. a baseline's step time, to
/// compare memory at equal throughput), without baselines.
///
/// # Errors
/// [`PlanError::Infeasible`] when no plan fits the device; [`PlanError::Solver`] when none is
/// fast enough.
pub fn leanest_within(problem: &Problem, step_time_s: f64, progress: Progress<'_>) -> Result<Plan> {
    let bound = step_time_s * (1.0 + 1e-9);
    let (evaluated, _) = evaluate_feasible(problem, Needed::Below(bound), progress)?;
    let mut plans = min_memory_plans(problem, &evaluated, step_time_s, progress)?;
    sort_plans(&mut plans, true);
    let mut best = plans.remove(0);
    best.name = format!("pardis min-memory (≤ {step_time_s:.3} s)");
    Ok(best)
}

/// Phase 2: min-memory under the time limit for each candidate fast enough.
fn min_memory_plans(
    problem: &Problem,
    evaluated: &[Evaluated],
    limit: f64,
    progress: Progress<'_>,
) -> Result<Vec<Plan>> {
    let eligible: Vec<&Evaluated> = evaluated
        .iter()
        .filter(|e| e.fastest.step_time_s <= limit * (1.0 + 1e-9))
        .collect();
    let total = eligible.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let plans: Vec<Result<Plan>> = eligible
        .into_par_iter()
        .map(|e| {
            let sols = e
                .stages
                .iter()
                .zip(&e.fastest_solutions)
                .map(|(st, fast)| {
                    let leanest = st.space.ilp.solve_from(
                        IlpObjective::MinMemory { time_limit: limit },
                        &problem.solver,
                        Some(&fast.choice),
                    )?;
                    // Keep the min-time solution when the ILP found nothing leaner.
                    Ok(if leanest.memory <= fast.memory {
                        leanest
                    } else {
                        fast.clone()
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total, "min-memory ILPs");
            Ok(problem.assemble("pardis", &e.cand, &e.stages, &sols))
        })
        .collect();
    let mut out: Vec<Plan> = plans.into_iter().collect::<Result<_>>()?;
    out.retain(|p| p.fits);
    if out.is_empty() {
        return Err(PlanError::Solver("no candidate met the time bound".into()));
    }
    Ok(out)
}

/// Every baseline of [`Baseline::ALL`] in the same cost model, each at its leanest pipeline
/// degree and micro-batch count among those that fit and are within `slack` of its fastest
/// (the same time slack as the pardis plan), or its leanest overall, marked not fitting.
pub fn baseline_plans(problem: &Problem, slack: f64, progress: Progress<'_>) -> Result<Vec<Plan>> {
    let nodes = if problem.mesh.axes.len() > 1 {
        problem.mesh.axes[0].size as u64
    } else {
        1
    };
    let gpus = problem.mesh.num_devices() as u64 / nodes;
    let all = problem.candidates(None);
    let total = Baseline::ALL.len();
    let out: Vec<Result<Option<Plan>>> = Baseline::ALL
        .par_iter()
        .enumerate()
        .map(|(i, &b)| {
            // Stages of whole nodes, unfactorized; pipelines only for Megatron.
            let cands: Vec<&Candidate> = all
                .iter()
                .filter(|c| {
                    c.stage_mesh.axes.last().map(|a| a.size as u64) == Some(gpus)
                        && !c
                            .stage_mesh
                            .axes
                            .iter()
                            .any(|a| a.name.starts_with("gpu") && a.name.len() > 3)
                })
                .filter(|c| b.pipelines() || c.pp == 1)
                // Megatron-LM's even layer split and 1F1B; every recomputation mode.
                .filter(|c| {
                    c.schedule == PipelineSchedule::OneFOneB
                        && c.layers == layers_per_stage(problem.model.num_layers, c.pp)
                })
                .collect();
            let restrict = b.restriction();
            let mut plans = Vec::new();
            for c in cands {
                let stages = match problem.build(c, Some(&*restrict)) {
                    Ok(s) => s,
                    Err(PlanError::InvalidInput(_)) => continue, // the baseline cannot shard this shape
                    Err(e) => return Err(e),
                };
                plans.push(problem.solve(
                    &b.name(),
                    c,
                    &stages,
                    IlpObjective::MinTime {
                        memory_budget: None,
                    },
                )?);
            }
            progress(i + 1, total, "baselines");
            // Equal slack: the leanest fitting configuration within `slack` of the fastest one.
            let fitting: Vec<&Plan> = plans.iter().filter(|p| p.fits).collect();
            let fastest = fitting
                .iter()
                .map(|p| p.step_time_s)
                .fold(f64::INFINITY, f64::min);
            let pick = if fitting.is_empty() {
                plans.iter().min_by_key(|p| p.per_device_memory.total())
            } else {
                fitting
                    .into_iter()
                    .filter(|p| p.step_time_s <= fastest * (1.0 + slack) * (1.0 + 1e-9))
                    .min_by_key(|p| p.per_device_memory.total())
            };
            Ok(pick.cloned())
        })
        .collect();
    Ok(out
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect())
}

/// The memory/time frontier: the min-memory plan for each slack of [`PARETO_SLACKS`].
pub fn pareto(problem: &Problem, progress: Progress<'_>) -> Result<Vec<Plan>> {
    let slack = PARETO_SLACKS.iter().copied().fold(0.0, f64::max);
    let (evaluated, _) = evaluate_feasible(problem, Needed::WithinSlack(slack), progress)?;
    let t_star = evaluated
        .iter()
        .map(|e| e.fastest.step_time_s)
        .fold(f64::INFINITY, f64::min);
    let mut frontier = Vec::new();
    for slack in PARETO_SLACKS {
        let mut plans = min_memory_plans(problem, &evaluated, t_star * (1.0 + slack), progress)?;
        sort_plans(&mut plans, true);
        let mut p = plans.remove(0);
        p.name = format!("pardis slack {:.0}%", slack * 100.0);
        frontier.push(p);
    }
    Ok(frontier)
}
