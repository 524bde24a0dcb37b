//! The multi-dimensional outer search: pipeline degree, stage-mesh factorization, layer
//! balancing and micro-batch count around the intra-operator ILP (Alpa's two levels, Zheng et
//! al. OSDI 2022; the memory objective of Shi et al., FITEE 2025).

use memory_model::{
    chunks_in_flight, layers_per_stage, ModelConfig, PipelineSchedule, Recompute, TrainingSetup,
};

use crate::error::{PlanError, Result};
use crate::ilp::SolverConfig;
use crate::mesh::DeviceMesh;
use crate::sharding::Sharding;
use crate::strategy::{build_strategy_space, PipelineContext, StrategySpace};
use crate::transformer::{stage_graph, StageSpec, TransformerGraph};

mod assemble;

pub use assemble::axis_names;
pub(crate) use assemble::operator_plan;

/// One point of the outer search space.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Pipeline stages.
    pub pp: u64,
    /// Mesh of one stage.
    pub stage_mesh: DeviceMesh,
    /// Micro-batches per step.
    pub micro_batches: u64,
    /// Transformer layers of each stage (sums to the model's layers).
    pub layers: Vec<u64>,
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// Activation recomputation of the first [`Candidate::recompute_stages`] stages.
    pub recompute: Recompute,
    /// Leading stages that recompute; the later ones keep every activation (the first stages
    /// hold the most micro-batches in flight, and the last one, which also runs the head, is
    /// usually the slowest, so the earlier stages have time to spare). `pp` when all do.
    pub recompute_stages: u64,
}

impl Candidate {
    /// A candidate with memory-model's even layer split ([`layers_per_stage`]), 1F1B and no
    /// recomputation.
    pub fn new(num_layers: u64, pp: u64, stage_mesh: DeviceMesh, micro_batches: u64) -> Self {
        Candidate {
            pp,
            stage_mesh,
            micro_batches,
            layers: layers_per_stage(num_layers, pp),
            schedule: PipelineSchedule::OneFOneB,
            recompute: Recompute::None,
            recompute_stages: pp,
        }
    }

    /// The recomputation of stage `stage`.
    pub fn recompute_of(&self, stage: u64) -> Recompute {
        if stage < self.recompute_stages {
            self.recompute
        } else {
            Recompute::None
        }
    }

    /// Model chunks per device: the interleaved schedule's virtual stages, else 1.
    pub fn virtual_stages(&self) -> u64 {
        match self.schedule {
            PipelineSchedule::Interleaved { virtual_stages } => virtual_stages.max(1),
            _ => 1,
        }
    }

    /// Micro-batch slots of the step: `m + (p − 1)/v` (the pipeline bubble included; `v` = 1
    /// for GPipe and 1F1B, the virtual stages for interleaved 1F1B, Narayanan et al. 2021).
    pub fn time_slots(&self) -> f64 {
        self.micro_batches as f64 + (self.pp - 1) as f64 / self.virtual_stages() as f64
    }

    /// Micro-batches (model chunks, interleaved) whose activations stage `i` holds at its peak
    /// under the schedule.
    pub fn in_flight(&self, stage: u64) -> u64 {
        chunks_in_flight(self.schedule, self.pp, stage, self.micro_batches)
    }
}

/// A pinned or restricted strategy choice: `Some(f)` keeps the shardings `f` accepts.
/// A strategy filter: keeps the shardings it accepts (baselines pin one per operator).
pub type RestrictFn = dyn Fn(&TransformerGraph, usize, &Sharding, &DeviceMesh) -> bool + Sync;
/// A borrowed [`RestrictFn`].
pub type Restriction<'a> = &'a RestrictFn;

/// A model, a mesh and a training setup: everything the search needs besides the objective.
#[derive(Debug, Clone)]
pub struct Problem {
    /// The model.
    pub model: ModelConfig,
    /// The whole mesh.
    pub mesh: DeviceMesh,
    /// Precision, optimizer, recomputation, flash attention, sequence length, overhead; the
    /// parallel degrees and micro-batch fields are set by the search.
    pub setup: TrainingSetup,
    /// Sequences per training step.
    pub global_batch: u64,
    /// HiGHS settings.
    pub solver: SolverConfig,
    /// Tie identical layers (default true).
    pub tie_layers: bool,
    /// Pipeline schedules the search tries (default 1F1B, GPipe and interleaved 1F1B with 2 and
    /// 4 virtual stages; a schedule that holds at least as many micro-batches on every stage as
    /// another with the same step time is pruned, see [`Problem::candidates`]). Interleaving
    /// needs tied layers, a micro-batch count that the pipeline degree divides, and every
    /// stage's layers divisible by the virtual stages (Megatron-LM's rules).
    pub schedules: Vec<PipelineSchedule>,
    /// Recomputation modes the search tries (default none, selective, pointwise, full; a mode
    /// that changes no operator of the model, e.g. selective with flash attention, is pruned).
    /// The cheap modes are also tried on the leading stages only ([`Candidate::recompute_stages`]).
    pub recomputes: Vec<Recompute>,
    /// Also try a layer split balanced for time (embedding and head counted in layer
    /// equivalents) beside the even split, when the pipeline has several stages (default true).
    pub balance_layers: bool,
}

/// A distinct stage of a candidate: its layers, ends and the most micro-batches in flight.
#[derive(Debug, Clone)]
struct StageKey {
    index: u64,
    spec: StageSpec,
    in_flight: u64,
}

/// The built ILP of one distinct stage (solver internals).
#[doc(hidden)]
#[derive(Debug)]
pub struct StageProblem {
    /// Index of the (first) stage this problem stands for.
    pub key_index: u64,
    /// Transformer layers on the stage.
    pub layers: u64,
    /// The stage's computation graph.
    pub graph: TransformerGraph,
    /// Candidate strategies and the ILP.
    pub space: StrategySpace,
}

impl Problem {
    /// Pipeline degrees, stage meshes (and their 2-axis factorizations), micro-batch counts,
    /// layer splits, schedules and recomputation modes worth trying: `pp` divides the devices
    /// and is at most the layers; a stage is a whole number of nodes or a divisor of one node;
    /// `m ≥ pp` runs over the divisors of the global batch with at most
    /// [`MAX_SEQUENCES_PER_DEVICE`] sequences per device per micro-batch (so every peer's
    /// micro-batch count is in the space); the layers split evenly and, with [`Problem::balance_layers`], balanced
    /// for time ([`balanced_layers`]).
    ///
    /// Pruned without loss: a schedule holding at least as many micro-batches in flight on
    /// every stage as an earlier one of the list (same step time in this cost model: both run
    /// `m + p − 1` micro-batch slots), and a recomputation mode that drops no saved tensor of
    /// the model (it would only add time).
    pub fn candidates(&self, max_pp: Option<u64>) -> Vec<Candidate> {
        let n = self.mesh.num_devices() as u64;
        let recomputes = self.effective_recomputes();
        let mut out = Vec::new();
        for pp in (1..=n).filter(|p| {
            n.is_multiple_of(*p) && *p <= self.model.num_layers && max_pp.is_none_or(|m| *p <= m)
        }) {
            let Ok(stage) = self.mesh.stage_mesh((n / pp) as usize) else {
                continue;
            };
            let mut meshes = vec![stage.clone()];
            let inner = stage.axes.last().map_or(1, |a| a.size);
            for outer in 2..inner {
                if let Some(f) = stage.factorized(outer) {
                    meshes.push(f);
                }
            }
            let mut splits = vec![layers_per_stage(self.model.num_layers, pp)];
            if self.balance_layers && pp > 1 {
                let b = balanced_layers(&self.model, pp);
                if !splits.contains(&b) {
                    splits.push(b);
                }
            }
            let devices = n / pp;
            for mesh in meshes {
                for m in (pp..=self.global_batch).filter(|&m| {
                    self.global_batch.is_multiple_of(m)
                        && self.global_batch / m <= MAX_SEQUENCES_PER_DEVICE * devices
                }) {
                    for schedule in self.useful_schedules(pp, m) {
                        for layers in splits.iter().filter(|l| self.can_run(schedule, pp, m, l)) {
                            for &recompute in &recomputes {
                                for recompute_stages in recompute_prefixes(recompute, pp) {
                                    out.push(Candidate {
                                        pp,
                                        stage_mesh: mesh.clone(),
                                        micro_batches: m,
                                        layers: layers.clone(),
                                        schedule,
                                        recompute,
                                        recompute_stages,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// `base` (a peer configuration's layout: pipeline, stage mesh, micro-batches, schedule,
    /// layer split) with every recomputation mode and leading-stage prefix the search tries,
    /// for pardis's own ILPs to shard freely; points [`Problem::candidates`] already has are left
    /// out. The outer search factorizes only one-axis stage meshes, so a multi-node stage
    /// mesh with its GPU axis split (a tensor-parallel group of part of a node) enters the
    /// search this way.
    pub fn candidates_around(&self, base: &Candidate, known: &[Candidate]) -> Vec<Candidate> {
        let same = |a: &Candidate, b: &Candidate| {
            a.pp == b.pp
                && a.stage_mesh == b.stage_mesh
                && a.micro_batches == b.micro_batches
                && a.layers == b.layers
                && a.schedule == b.schedule
                && a.recompute == b.recompute
                && a.recompute_stages == b.recompute_stages
        };
        let mut out: Vec<Candidate> = Vec::new();
        if !self.can_run(base.schedule, base.pp, base.micro_batches, &base.layers) {
            return out;
        }
        for recompute in self.effective_recomputes() {
            for recompute_stages in recompute_prefixes(recompute, base.pp) {
                let c = Candidate {
                    recompute,
                    recompute_stages,
                    ..base.clone()
                };
                if !known.iter().chain(&out).any(|k| same(k, &c)) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Whether `schedule` runs `pp` stages of `layers` with `m` micro-batches: interleaving
    /// needs several stages, tied layers, `pp | m` and every stage's layers divisible by its
    /// virtual stages.
    fn can_run(&self, schedule: PipelineSchedule, pp: u64, m: u64, layers: &[u64]) -> bool {
        match schedule {
            PipelineSchedule::Interleaved { virtual_stages: v } => {
                v >= 2
                    && pp > 1
                    && self.tie_layers
                    && m.is_multiple_of(pp)
                    && layers.iter().all(|l| l.is_multiple_of(v))
            }
            _ => true,
        }
    }

    /// The schedules of [`Problem::schedules`] not dominated by an earlier one for `pp`, `m`
    /// (interleaved schedules have a smaller bubble, so only one with the same virtual stages
    /// dominates them).
    fn useful_schedules(&self, pp: u64, m: u64) -> Vec<PipelineSchedule> {
        let mut kept: Vec<PipelineSchedule> = Vec::new();
        for &s in &self.schedules {
            if kept.contains(&s) {
                continue;
            }
            if matches!(s, PipelineSchedule::Interleaved { .. }) {
                if pp > 1 {
                    kept.push(s);
                }
                continue;
            }
            let holds = |x: PipelineSchedule| -> Vec<u64> {
                (0..pp).map(|i| chunks_in_flight(x, pp, i, m)).collect()
            };
            let mine = holds(s);
            if !kept
                .iter()
                .any(|&k| holds(k).iter().zip(&mine).all(|(a, b)| a <= b))
            {
                kept.push(s);
            }
        }
        kept
    }

    /// The recomputation modes of [`Problem::recomputes`] that change some saved tensor.
    fn effective_recomputes(&self) -> Vec<Recompute> {
        self.effective_recomputes_of(&self.recomputes)
    }

    /// The modes of `modes` that keep different saved tensors of the model (the first of each
    /// equivalent group; e.g. selective recomputation drops nothing under flash attention).
    pub(crate) fn effective_recomputes_of(&self, modes: &[Recompute]) -> Vec<Recompute> {
        let workload = self.setup.workload();
        let ops = memory_model::layer_operators(&self.model, &workload);
        let kept = |r: Recompute| -> Vec<bool> {
            ops.iter()
                .flat_map(|o| {
                    o.saved
                        .iter()
                        .map(move |a| memory_model::is_kept(a.class, r))
                })
                .collect()
        };
        let mut out: Vec<Recompute> = Vec::new();
        for &r in modes {
            if !out.iter().any(|&o| kept(o) == kept(r)) {
                out.push(r);
            }
        }
        if out.is_empty() {
            out.push(Recompute::None);
        }
        out
    }

    fn stage_keys(&self, cand: &Candidate) -> Vec<StageKey> {
        let pp = cand.pp;
        let mut keys: Vec<StageKey> = Vec::new();
        for (i, &l) in cand.layers.iter().enumerate() {
            let i = i as u64;
            let spec = StageSpec {
                layers: l,
                first: i == 0,
                last: i + 1 == pp,
                pipelined: pp > 1,
                tie_layers: self.tie_layers,
                recompute: cand.recompute_of(i),
            };
            if keys.iter().any(|k| k.spec == spec) {
                continue; // an earlier stage with the same operators holds at least as much
            }
            keys.push(StageKey {
                index: i,
                spec,
                in_flight: cand.in_flight(i),
            });
        }
        keys
    }

    /// Builds the stage ILPs of a candidate (one per distinct stage: first, middle, last).
    pub fn build(
        &self,
        cand: &Candidate,
        restrict: Option<Restriction<'_>>,
    ) -> Result<Vec<StageProblem>> {
        let mut out = Vec::new();
        for key in self.stage_keys(cand) {
            let setup = self.stage_setup(cand, key.index);
            let workload = setup.workload();
            let graph = stage_graph(&self.model, &workload, &key.spec);
            let ctx = PipelineContext {
                micro_batches: cand.micro_batches,
                stages: cand.pp,
                in_flight: key.in_flight,
                virtual_stages: cand.virtual_stages(),
            };
            let mesh = &cand.stage_mesh;
            let failure: std::cell::RefCell<Option<PlanError>> = std::cell::RefCell::new(None);
            let memory =
                |op: usize, s: &Sharding| match graph.operator_memory(op, s, mesh, &setup, &ctx) {
                    Ok(m) => m,
                    Err(e) => {
                        failure.borrow_mut().get_or_insert(e);
                        Default::default()
                    }
                };
            let keep = |op: usize, s: &Sharding| restrict.is_none_or(|r| r(&graph, op, s, mesh));
            let mut space = build_strategy_space(&graph.graph, mesh, &ctx, &memory, &keep);
            space.add_stage_terms(&setup);
            if let Some(e) = failure.into_inner() {
                return Err(e);
            }
            if let Some(op) = space.ilp.nodes.iter().find(|n| n.time.is_empty()) {
                return Err(PlanError::InvalidInput(format!(
                    "operator `{}` has no valid sharding on {}",
                    op.name,
                    mesh.shape_string()
                )));
            }
            out.push(StageProblem {
                key_index: key.index,
                layers: key.spec.layers,
                graph,
                space,
            });
        }
        Ok(out)
    }

    /// The training setup of stage `stage` of `cand`: the micro-batch (whole stage),
    /// micro-batch count and the stage's recomputation.
    fn stage_setup(&self, cand: &Candidate, stage: u64) -> TrainingSetup {
        let mut setup = self.setup.clone();
        setup.micro_batch = self.global_batch / cand.micro_batches;
        setup.num_microbatches = cand.micro_batches;
        setup.recompute = cand.recompute_of(stage);
        setup
    }
}

/// The numbers of leading stages that may recompute under `recompute` with `pp` stages: all of
/// them, and for the cheap modes (selective, pointwise) also all but the last and the first
/// half, where the earlier stages' spare time (the last stage also runs the head) buys memory
/// on the stages that hold the most micro-batches in flight.
fn recompute_prefixes(recompute: Recompute, pp: u64) -> Vec<u64> {
    let mut out = vec![pp];
    if pp > 1 && matches!(recompute, Recompute::Selective | Recompute::Pointwise) {
        for k in [pp - 1, pp.div_ceil(2)] {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// A layer split over `pp` stages balanced for compute: the last stage's head (a
/// `hidden × vocabulary` matmul per token) counts as `h·V / layer parameters` layers, the
/// embedding lookup as none; the last stage takes the layer count that minimises the largest
/// stage and the others split the rest evenly (earlier stages one more).
pub fn balanced_layers(model: &ModelConfig, pp: u64) -> Vec<u64> {
    let total = model.num_layers;
    if pp <= 1 {
        return vec![total];
    }
    let head =
        (model.hidden * model.padded_vocab()) as f64 / model.layer_parameters().max(1) as f64;
    let mut best: Option<(f64, Vec<u64>)> = None;
    for last in 1..=total.saturating_sub(pp - 1) {
        let mut split = layers_per_stage(total - last, pp - 1);
        split.push(last);
        let worst = split[..split.len() - 1]
            .iter()
            .map(|&l| l as f64)
            .fold(last as f64 + head, f64::max);
        if best.as_ref().is_none_or(|(w, _)| worst < *w) {
            best = Some((worst, split));
        }
    }
    best.map_or_else(|| layers_per_stage(total, pp), |(_, s)| s)
}

/// Most sequences one device processes per micro-batch in the search: the peers' largest
/// micro-batch ([`crate::peers::MAX_PEER_MICRO_BATCH`]), so that every peer configuration's
/// micro-batch count is in pardis's space too (large micro-batches run GEMMs nearer their full
/// rate; see [`crate::cost_model`]).
pub const MAX_SEQUENCES_PER_DEVICE: u64 = crate::peers::MAX_PEER_MICRO_BATCH;

/// Default sequences per training step (GPT-3's 1.3B run: 0.5 M tokens of 2048 = 256 sequences).
pub const DEFAULT_GLOBAL_BATCH: u64 = 256;
/// Default sequence length (GPT-3).
pub const DEFAULT_SEQ_LEN: u64 = 2048;

impl Problem {
    /// A problem with the defaults: mixed-precision Adam (16 B per parameter), flash attention,
    /// no recomputation, sequence length [`DEFAULT_SEQ_LEN`], [`DEFAULT_GLOBAL_BATCH`]
    /// sequences per step, schedules 1F1B, GPipe and interleaved 1F1B (2 and 4 virtual stages),
    /// every recomputation mode, layers tied and
    /// balanced, default HiGHS settings. The model is taken as given: a vocabulary that tensor
    /// parallelism should split must be padded by the caller ([`ModelConfig::with_vocab_padding`]).
    pub fn new(model: ModelConfig, mesh: DeviceMesh) -> Self {
        let setup = TrainingSetup {
            seq_len: DEFAULT_SEQ_LEN,
            flash_attention: true,
            ..TrainingSetup::default()
        };
        Problem {
            model,
            mesh,
            setup,
            global_batch: DEFAULT_GLOBAL_BATCH,
            solver: SolverConfig::default(),
            tie_layers: true,
            schedules: vec![
                PipelineSchedule::OneFOneB,
                PipelineSchedule::GPipe,
                PipelineSchedule::Interleaved { virtual_stages: 2 },
                PipelineSchedule::Interleaved { virtual_stages: 4 },
            ],
            recomputes: vec![
                Recompute::None,
                Recompute::Selective,
                Recompute::Pointwise,
                Recompute::Full,
            ],
            balance_layers: true,
        }
    }
}
