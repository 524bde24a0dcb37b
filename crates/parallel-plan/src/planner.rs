//! The planner's entry point: search, objectives, the peers at their strongest and the
//! comparison report.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};
use crate::ilp::{IlpObjective, IlpSolution};
use crate::peers::{self, Framework, PeerConfig};
use crate::plan::Plan;
use crate::search::{Candidate, Problem, StageProblem};

/// What the planner optimises.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    /// Minimise per-device memory subject to step time ≤ (1 + slack) × the reference step
    /// time: the strongest peer's (the fastest fitting configuration of any [`Framework`]), or
    /// pardis's own fastest plan when no peer configuration fits.
    MinMemory {
        /// Allowed relative slowdown over the reference, e.g. 0.0.
        slack: f64,
    },
    /// Minimise step time subject to per-device memory ≤ the device memory (Alpa).
    MinTime,
}

/// Default time slack of the min-memory objective: none, i.e. the strongest peer's step time.
pub const DEFAULT_TIME_SLACK: f64 = 0.0;
/// Slacks swept by [`pareto`] (relative to pardis's fastest plan).
pub const PARETO_SLACKS: [f64; 7] = [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0];
/// Runners-up reported beside the best plan.
pub const RUNNERS_UP: usize = 3;

/// A peer configuration and its plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerPlan {
    /// The configuration.
    pub config: PeerConfig,
    /// Its plan in the planner's cost model.
    pub plan: Plan,
}

/// One framework at its strongest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerSummary {
    /// The framework.
    pub framework: Framework,
    /// Configurations its knobs allow on this problem.
    pub configurations: usize,
    /// Of those, the ones that fit the device.
    pub fitting: usize,
    /// Its fastest configuration that fits (ties: the leanest).
    pub fastest: Option<PeerPlan>,
    /// Its leanest configuration that fits within the report's time budget (ties: the fastest).
    pub leanest_within_budget: Option<PeerPlan>,
}

/// The step time a plan is held to, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "basis", rename_all = "kebab-case")]
pub enum TimeReference {
    /// The fastest fitting configuration of any peer.
    StrongestPeer {
        /// Its name.
        name: String,
        /// Its step time, seconds.
        step_time_s: f64,
    },
    /// pardis's own fastest plan (no peer configuration fits, or the objective is min-time).
    FastestPardis {
        /// Its step time, seconds.
        step_time_s: f64,
    },
}

impl TimeReference {
    /// The reference step time, seconds.
    pub fn step_time_s(&self) -> f64 {
        match self {
            TimeReference::StrongestPeer { step_time_s, .. }
            | TimeReference::FastestPardis { step_time_s } => *step_time_s,
        }
    }
}

/// The planner's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlanReport {
    /// The objective.
    pub objective: ObjectiveReport,
    /// The chosen plan: the leanest within the time budget (min-memory), or the fastest.
    pub plan: Plan,
    /// pardis's fastest plan that fits (Alpa's objective).
    pub fastest: Plan,
    /// The next best plans (other pipeline degrees, meshes or micro-batch counts).
    pub runners_up: Vec<Plan>,
    /// Each peer framework at its strongest.
    pub peers: Vec<PeerSummary>,
    /// The leanest peer configuration (over every framework) that fits within the time budget:
    /// what the chosen plan's memory saving is measured against. `None` when no peer
    /// configuration is that fast.
    pub peer_reference: Option<PeerPlan>,
    /// Outer-search points (pipeline degree, stage mesh, micro-batches, layer split, schedule,
    /// recomputation) considered.
    pub candidates_searched: usize,
    /// Of those, the points whose ILPs were solved and fit the device; the others were infeasible
    /// or skipped by their time lower bound.
    pub candidates_solved: usize,
    /// Points left out because HiGHS failed on one of their min-time ILPs (stopped without a
    /// solution): the plan is chosen from the others. Usually 0.
    #[serde(default)]
    pub candidates_failed: usize,
}

impl PlanReport {
    /// Memory the chosen plan saves against [`PlanReport::peer_reference`], as a fraction of
    /// the peer's memory (positive: pardis needs less).
    pub fn memory_saving(&self) -> Option<f64> {
        self.peer_reference.as_ref().map(|r| {
            1.0 - self.plan.per_device_memory.total() as f64
                / r.plan.per_device_memory.total() as f64
        })
    }
}

/// The objective of a report and the time budget it implies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveReport {
    /// `min-memory` or `min-time`.
    pub kind: String,
    /// Allowed relative slowdown over the reference.
    pub slack: f64,
    /// The reference step time.
    pub reference: TimeReference,
    /// `(1 + slack) × reference`, seconds: plans and peers are compared within it.
    pub time_budget_s: f64,
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
    /// At most this step time, or among the `k` fastest.
    BelowOrFastest(f64, usize),
}

impl Needed {
    /// The largest step time still needed, given the step times found so far (sorted).
    fn bound(self, times: &[f64]) -> f64 {
        match self {
            Needed::WithinSlack(slack) => times
                .first()
                .map_or(f64::INFINITY, |t| t * (1.0 + slack) * (1.0 + 1e-9)),
            Needed::Fastest(k) => times.get(k - 1).copied().unwrap_or(f64::INFINITY),
            Needed::BelowOrFastest(t, k) => {
                t.max(times.get(k - 1).copied().unwrap_or(f64::INFINITY))
            }
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
) -> Result<Phase1> {
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
    // The candidates that can reach the least operator memory (for the infeasibility error).
    let mut leanest: Vec<(u64, Candidate)> = built
        .iter()
        .map(|(c, st, _)| {
            let m = st.iter().map(|s| s.space.ilp.min_memory()).max();
            (m.unwrap_or(0), c.clone())
        })
        .collect();
    leanest.sort_by_key(|(m, _)| *m);
    let mut ok: Vec<Evaluated> = Vec::new();
    let mut failures: Vec<PlanError> = Vec::new();
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
                let solved = solve_fitting(problem, &cand, &stages, budget)?;
                tick();
                Ok(solved.map(|(fastest, sols)| Evaluated {
                    cand,
                    stages,
                    fastest,
                    fastest_solutions: sols,
                }))
            })
            .collect();
        let before = ok.len();
        keep_solved(solved, &mut ok, &mut failures)?;
        times.extend(ok[before..].iter().map(|e| e.fastest.step_time_s));
        times.sort_by(f64::total_cmp);
    }
    if ok.is_empty() {
        // Nothing fits: a solver failure says more than "infeasible" would.
        if let Some(err) = failures.into_iter().next() {
            return Err(err);
        }
        let smallest = smallest_total(problem, leanest.into_iter().map(|(_, c)| c))?;
        return Ok(Phase1 {
            evaluated: ok,
            smallest,
            failed: 0,
        });
    }
    Ok(Phase1 {
        evaluated: ok,
        smallest: 0,
        failed: failures.len(),
    })
}

/// What phase 1 found: the evaluated (fitting) candidates, the smallest whole memory any
/// candidate reaches when none fits (0 otherwise), and the candidates HiGHS failed on.
struct Phase1 {
    evaluated: Vec<Evaluated>,
    smallest: u64,
    failed: usize,
}

/// Folds candidates' phase-1 outcomes into `kept`: a candidate HiGHS failed on
/// ([`PlanError::Solver`]) is left out and its error put in `failed`, so that one candidate's
/// failure never fails the whole plan (as in phase 2); any other error is returned.
fn keep_solved<E>(
    outcomes: impl IntoIterator<Item = Result<Option<E>>>,
    kept: &mut Vec<E>,
    failed: &mut Vec<PlanError>,
) -> Result<()> {
    for outcome in outcomes {
        match outcome {
            Ok(Some(e)) => kept.push(e),
            Ok(None) => {}
            Err(err @ PlanError::Solver(_)) => failed.push(err),
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// The smallest whole per-device memory (buffers, transients and overhead included) of the
/// leanest plan (least operator memory) of any of `cands` (`u64::MAX` for none).
fn smallest_total(problem: &Problem, cands: impl Iterator<Item = Candidate>) -> Result<u64> {
    let cands: Vec<Candidate> = cands.collect();
    let totals: Vec<Result<u64>> = cands
        .into_par_iter()
        .map(|cand| {
            let stages = problem.build(&cand, None)?;
            let plan = problem.solve(
                "leanest",
                &cand,
                &stages,
                IlpObjective::MinMemory {
                    time_limit: f64::INFINITY,
                },
            )?;
            Ok(plan.per_device_memory.total())
        })
        .collect();
    // A candidate HiGHS failed on is left out here too; its error is returned only when it
    // was every candidate's.
    let (mut reached, mut failed) = (Vec::new(), Vec::new());
    keep_solved(
        totals.into_iter().map(|t| t.map(Some)),
        &mut reached,
        &mut failed,
    )?;
    match (reached.into_iter().min(), failed.into_iter().next()) {
        (Some(m), _) => Ok(m),
        (None, Some(err)) => Err(err),
        (None, None) => Ok(u64::MAX),
    }
}

/// Attempts at fitting a candidate's fastest plan: a stage whose whole memory overflows is solved
/// again with its budget lowered by the overflow (a safeguard: the ILP's memory is the stage's
/// whole memory, so the first attempt fits unless round-off intervenes).
const FIT_ATTEMPTS: usize = 4;

/// The fastest plan of `cand` whose whole per-device memory fits, and its stage solutions; `None`
/// when no strategy fits.
fn solve_fitting(
    problem: &Problem,
    cand: &Candidate,
    stages: &[StageProblem],
    budget: f64,
) -> Result<Option<(Plan, Vec<IlpSolution>)>> {
    let device = problem.mesh.device_memory_bytes;
    let mut budgets = vec![budget; stages.len()];
    for _ in 0..FIT_ATTEMPTS {
        let mut sols = Vec::with_capacity(stages.len());
        for (st, &b) in stages.iter().zip(&budgets) {
            let objective = IlpObjective::MinTime {
                memory_budget: Some(b),
            };
            match st.space.ilp.solve(objective, &problem.solver) {
                Ok(s) => sols.push(s),
                Err(PlanError::Infeasible { .. }) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let plan = problem.assemble("Alpa-style min-time", cand, stages, &sols);
        if plan.fits {
            return Ok(Some((plan, sols)));
        }
        for (b, s) in budgets.iter_mut().zip(&plan.stages) {
            let over = s.memory.total().saturating_sub(device);
            if over > 0 {
                *b = (*b - over as f64).max(0.0);
            }
        }
    }
    Ok(None)
}

/// Phase 1 over every candidate of `problem`: the evaluated (fitting) candidates, the number of
/// candidates and the number HiGHS failed on, or [`PlanError::Infeasible`] with the smallest
/// achievable memory when none fits (the first solver failure when that is why).
fn evaluate_feasible(
    problem: &Problem,
    around: Option<&Candidate>,
    needed: Needed,
    progress: Progress<'_>,
) -> Result<(Vec<Evaluated>, usize, usize)> {
    let mut cands = problem.candidates(None);
    if let Some(base) = around {
        let extra = problem.candidates_around(base, &cands);
        cands.extend(extra);
    }
    let searched = cands.len();
    let phase1 = evaluate_all(problem, cands, needed, progress)?;
    if phase1.evaluated.is_empty() {
        return Err(PlanError::Infeasible {
            budget: problem.mesh.device_memory_bytes,
            min_achievable: phase1.smallest,
        });
    }
    Ok((phase1.evaluated, searched, phase1.failed))
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

/// Plans `problem` for `objective`, beside every peer framework at its strongest.
///
/// Min-memory: the reference is the strongest peer's step time (its fastest fitting
/// configuration), or pardis's own fastest plan when no peer configuration fits; the chosen plan
/// is the leanest within `(1 + slack) ×` that, and [`PlanReport::peer_reference`] is the leanest
/// peer configuration within the same budget. The peers' configurations are points of pardis's
/// space (save those that offload the optimizer, which the problem's setup fixes) and are
/// candidates too: when one beats every plan the search found (a safeguard; the
/// ILPs model the whole memory, so this happens only within their MIP gap), it is the chosen
/// plan, named `pardis … (= <peer>)`. When no pardis plan meets the budget, the chosen
/// plan is pardis's fastest. Min-time: the fastest plan; the budget is its step time.
///
/// # Errors
/// [`PlanError::Infeasible`] with the smallest achievable per-device memory when no plan fits
/// the device; solver and memory-model errors.
pub fn plan(problem: &Problem, objective: Objective, progress: Progress<'_>) -> Result<PlanReport> {
    let peer_plans = evaluate_peers(problem, progress)?;
    let fitting_peers = || {
        peer_plans
            .iter()
            .flat_map(|(_, plans, _)| plans)
            .filter(|p| p.plan.fits)
    };
    let strongest = fitting_peers().min_by(|a, b| by_time(&a.plan, &b.plan));
    let (slack, needed) = match objective {
        Objective::MinMemory { slack } => (
            slack,
            match strongest {
                Some(s) => Needed::BelowOrFastest(
                    s.plan.step_time_s * (1.0 + slack) * (1.0 + 1e-9),
                    RUNNERS_UP + 1,
                ),
                None => Needed::WithinSlack(slack),
            },
        ),
        Objective::MinTime => (0.0, Needed::Fastest(RUNNERS_UP + 1)),
    };
    // The strongest peer's layout is a point of pardis's space too (sharded freely by the
    // ILPs, with every recomputation mode).
    let around = strongest.and_then(|s| s.config.candidate(problem).ok());
    let (evaluated, searched, failed) =
        evaluate_feasible(problem, around.as_ref(), needed, progress)?;
    let solved = evaluated.len();
    let mut fastest: Vec<Plan> = evaluated.iter().map(|e| e.fastest.clone()).collect();
    fastest.sort_by(by_time);
    let t_star = fastest[0].step_time_s;
    let reference = match (objective, strongest) {
        (Objective::MinMemory { .. }, Some(s)) => TimeReference::StrongestPeer {
            name: s.plan.name.clone(),
            step_time_s: s.plan.step_time_s,
        },
        _ => TimeReference::FastestPardis {
            step_time_s: t_star,
        },
    };
    let budget = reference.step_time_s() * (1.0 + slack);
    // The peers' configurations are points of pardis's own space (a sharding per operator, a
    // pipeline, a micro-batch, a schedule, a recomputation mode), priced by the same model. The
    // per-stage ILPs stop at a relative MIP gap, so a peer's configuration can still be a
    // slightly better plan than any the ILPs returned; it is then pardis's answer too, named
    // after it.
    // Optimizer offload is not a point of pardis's space (the problem's setup fixes it): a peer
    // configuration that changes it is never adopted.
    let in_space =
        |p: &PeerPlan| p.config.offload_target(problem) == problem.setup.offload.optimizer;
    let as_candidate = |p: &PeerPlan| {
        let mut plan = p.plan.clone();
        plan.name = format!("{PEER_CONFIGURATION}{}", p.plan.name);
        plan
    };
    let mut pardis_fastest = match strongest {
        Some(s) if in_space(s) && by_time(&s.plan, &fastest[0]).is_lt() => as_candidate(s),
        _ => fastest[0].clone(),
    };
    pardis_fastest.name = chosen_name("pardis fastest", &pardis_fastest.name);
    let within = |p: &Plan| p.fits && p.step_time_s <= budget * (1.0 + 1e-9);
    let (mut plans, by_memory) = match objective {
        Objective::MinTime => (fastest, false),
        Objective::MinMemory { .. } => {
            match min_memory_plans(problem, &evaluated, budget, progress) {
                Ok(plans) => (plans, true),
                // Nothing of pardis's is that fast: its fastest plans, by time.
                Err(PlanError::TimeBoundUnmet { .. }) => (fastest, false),
                Err(e) => return Err(e),
            }
        }
    };
    sort_plans(&mut plans, by_memory);
    // A peer's configuration replaces pardis's plan only when strictly better: leaner within
    // the budget, or faster by more than the tie tolerance.
    let better_peer = fitting_peers()
        .filter(|p| in_space(p) && (!by_memory || within(&p.plan)))
        .map(as_candidate)
        .filter(|c| {
            if by_memory {
                c.per_device_memory.total() < plans[0].per_device_memory.total()
            } else {
                by_time(c, &plans[0]).is_lt()
            }
        })
        .min_by(|a, b| {
            if by_memory {
                by_memory_then_time(a, b)
            } else {
                by_time(a, b)
            }
        });
    if let Some(c) = better_peer {
        plans.insert(0, c);
    }
    let mut best = plans.remove(0);
    best.name = chosen_name(
        if by_memory {
            "pardis min-memory"
        } else {
            "pardis fastest"
        },
        &best.name,
    );
    plans.retain(|p| !p.name.starts_with(PEER_CONFIGURATION));
    plans.truncate(RUNNERS_UP);
    let peers: Vec<PeerSummary> = peer_plans
        .iter()
        .map(|(framework, plans, configurations)| PeerSummary {
            framework: *framework,
            configurations: *configurations,
            fitting: plans.iter().filter(|p| p.plan.fits).count(),
            fastest: plans
                .iter()
                .filter(|p| p.plan.fits)
                .min_by(|a, b| by_time(&a.plan, &b.plan))
                .cloned(),
            leanest_within_budget: plans
                .iter()
                .filter(|p| within(&p.plan))
                .min_by(|a, b| by_memory_then_time(&a.plan, &b.plan))
                .cloned(),
        })
        .collect();
    let peer_reference = peers
        .iter()
        .filter_map(|p| p.leanest_within_budget.as_ref())
        .min_by(|a, b| by_memory_then_time(&a.plan, &b.plan))
        .cloned();
    Ok(PlanReport {
        objective: ObjectiveReport {
            kind: match objective {
                Objective::MinMemory { .. } => "min-memory".into(),
                Objective::MinTime => "min-time".into(),
            },
            slack,
            reference,
            time_budget_s: budget,
        },
        plan: best,
        fastest: pardis_fastest,
        runners_up: plans,
        peers,
        peer_reference,
        candidates_searched: searched,
        candidates_solved: solved,
        candidates_failed: failed,
    })
}

/// Step times within this relative distance are equal (sums of the same terms in another order).
const SAME_TIME: f64 = 1e-9;

/// Faster first; equal times (within [`SAME_TIME`]): leaner first.
/// Name prefix of a peer's configuration taken as a pardis candidate.
const PEER_CONFIGURATION: &str = "= ";

/// `base`, or `base (= peer configuration)` when the chosen plan is a peer's configuration.
fn chosen_name(base: &str, plan_name: &str) -> String {
    match plan_name.strip_prefix(PEER_CONFIGURATION) {
        Some(peer) => format!("{base} (= {peer})"),
        None => base.to_string(),
    }
}

fn by_time(a: &Plan, b: &Plan) -> std::cmp::Ordering {
    if (a.step_time_s - b.step_time_s).abs() <= SAME_TIME * a.step_time_s.max(b.step_time_s) {
        a.per_device_memory
            .total()
            .cmp(&b.per_device_memory.total())
    } else {
        a.step_time_s.total_cmp(&b.step_time_s)
    }
}

fn by_memory_then_time(a: &Plan, b: &Plan) -> std::cmp::Ordering {
    a.per_device_memory
        .total()
        .cmp(&b.per_device_memory.total())
        .then(a.step_time_s.total_cmp(&b.step_time_s))
}

/// Every configuration of every peer framework, priced: per framework, its plans and the number
/// of configurations its rules allow (those the mesh cannot lay out are left out).
fn evaluate_peers(
    problem: &Problem,
    progress: Progress<'_>,
) -> Result<Vec<(Framework, Vec<PeerPlan>, usize)>> {
    let all: Vec<PeerConfig> = Framework::ALL
        .iter()
        .flat_map(|&f| peers::configurations(problem, f))
        .collect();
    let total = all.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let priced: Vec<Result<Option<PeerPlan>>> = all
        .into_par_iter()
        .map(|config| {
            let r = match peers::evaluate(problem, &config) {
                Ok(plan) => Ok(Some(PeerPlan { config, plan })),
                Err(PlanError::InvalidInput(_)) => Ok(None),
                Err(e) => Err(e),
            };
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total, "peer configurations");
            r
        })
        .collect();
    let mut out: Vec<(Framework, Vec<PeerPlan>, usize)> =
        Framework::ALL.iter().map(|&f| (f, Vec::new(), 0)).collect();
    for p in priced {
        if let Some(p) = p? {
            let slot = out
                .iter_mut()
                .find(|(f, _, _)| *f == p.config.framework)
                .expect("every framework has a slot");
            slot.1.push(p);
            slot.2 += 1;
        }
    }
    Ok(out)
}

/// Phase 2: min-memory under the time limit for each candidate fast enough.
fn min_memory_plans(
    problem: &Problem,
    evaluated: &[Evaluated],
    limit: f64,
    progress: Progress<'_>,
) -> Result<Vec<Plan>> {
    // The min-time solves stop at a relative MIP gap, so a candidate whose min-time plan is
    // up to that gap slower than the limit may still have a plan within it: it is tried too.
    let tolerance = 1.0 + problem.solver.mip_rel_gap.max(0.0) + 1e-9;
    let eligible: Vec<&Evaluated> = evaluated
        .iter()
        .filter(|e| e.fastest.step_time_s <= limit * tolerance)
        .collect();
    let total = eligible.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let plans: Vec<Result<Option<Plan>>> = eligible
        .into_par_iter()
        .map(|e| {
            let mut sols = Vec::with_capacity(e.stages.len());
            for (st, fast) in e.stages.iter().zip(&e.fastest_solutions) {
                let fast_within = fast.time <= limit * (1.0 + 1e-9);
                let leanest = match st.space.ilp.solve_from(
                    IlpObjective::MinMemory { time_limit: limit },
                    &problem.solver,
                    Some(&fast.choice),
                ) {
                    Ok(s) => s,
                    // HiGHS gave up on this stage: its min-time solution, where it meets the
                    // limit, is still a plan. One candidate's failure never drops the others'
                    // plans (it once made every min-memory plan give way to the fastest).
                    Err(PlanError::Solver(_)) if fast_within => fast.clone(),
                    // Only a candidate admitted by the tolerance can miss the limit.
                    Err(PlanError::TimeBoundUnmet { .. } | PlanError::Solver(_)) => {
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        return Ok(None);
                    }
                    Err(err) => return Err(err),
                };
                // Keep the min-time solution when the ILP found nothing leaner within the
                // limit.
                sols.push(if fast_within && leanest.memory > fast.memory {
                    fast.clone()
                } else {
                    leanest
                });
            }
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total, "min-memory ILPs");
            Ok(Some(problem.assemble("pardis", &e.cand, &e.stages, &sols)))
        })
        .collect();
    let mut out: Vec<Plan> = plans
        .into_iter()
        .filter_map(|p| p.transpose())
        .collect::<Result<_>>()?;
    out.retain(|p| p.fits && p.step_time_s <= limit * (1.0 + 1e-9));
    if out.is_empty() {
        return Err(PlanError::TimeBoundUnmet {
            time_limit_s: limit,
        });
    }
    Ok(out)
}

/// The memory/time frontier: the min-memory plan for each slack of [`PARETO_SLACKS`].
pub fn pareto(problem: &Problem, progress: Progress<'_>) -> Result<Vec<Plan>> {
    let slack = PARETO_SLACKS.iter().copied().fold(0.0, f64::max);
    let (evaluated, _, _) = evaluate_feasible(problem, None, Needed::WithinSlack(slack), progress)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_candidate_highs_failed_on_is_left_out_not_fatal() {
        let outcomes: Vec<Result<Option<u32>>> = vec![
            Ok(Some(1)),
            Err(PlanError::Solver("HiGHS stopped without a solution".into())),
            Ok(None),
            Ok(Some(2)),
        ];
        let (mut kept, mut failed) = (Vec::new(), Vec::new());
        keep_solved(outcomes, &mut kept, &mut failed).unwrap();
        assert_eq!(kept, [1, 2]);
        assert!(matches!(failed.as_slice(), [PlanError::Solver(_)]));
        // Any other error still fails the plan.
        let other: Vec<Result<Option<u32>>> = vec![
            Ok(Some(3)),
            Err(PlanError::TimeBoundUnmet { time_limit_s: 1.0 }),
        ];
        let err = keep_solved(other, &mut kept, &mut failed).unwrap_err();
        assert!(matches!(err, PlanError::TimeBoundUnmet { .. }), "{err}");
    }
}
