//! The multi-dimensional outer search: pipeline degree, stage-mesh factorization, layer
//! balancing and micro-batch count around the intra-operator ILP (Alpa's two levels, Zheng et
//! al. OSDI 2022; the memory objective of Shi et al., FITEE 2025).

use memory_model::{
    chunks_in_flight, layers_per_stage, ModelConfig, PipelineSchedule, TrainingSetup,
};

use crate::error::{PlanError, Result};
use crate::ilp::{IlpObjective, IlpSolution, SolverConfig};
use crate::mesh::DeviceMesh;
use crate::plan::{IlpSummary, MemoryBreakdown, OperatorPlan, Plan, StagePlan};
use crate::sharding::Sharding;
use crate::strategy::{build_strategy_space, edge_collectives, PipelineContext, StrategySpace};
use crate::transformer::{stage_graph, StageSpec, TransformerGraph};

/// One point of the outer search space.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Pipeline stages.
    pub pp: u64,
    /// Mesh of one stage.
    pub stage_mesh: DeviceMesh,
    /// Micro-batches per step.
    pub micro_batches: u64,
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
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// HiGHS settings.
    pub solver: SolverConfig,
    /// Tie identical layers (default true).
    pub tie_layers: bool,
}

/// A distinct stage of a candidate: its layers, ends and the most micro-batches in flight.
#[derive(Debug, Clone)]
struct StageKey {
    index: u64,
    spec: StageSpec,
    in_flight: u64,
}

/// The built ILP of one distinct stage.
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
    /// Pipeline degrees, stage meshes (and their 2-axis factorizations) and micro-batch counts
    /// worth trying: `pp` divides the devices and is at most the layers; a stage is a whole
    /// number of nodes or a divisor of one node; `m` runs over powers of [`MICRO_BATCH_STEP`] times
    /// the power of two ≥ `pp`, dividing the
    /// global batch with at most [`MAX_SEQUENCES_PER_DEVICE`] sequences per device per micro-batch.
    pub fn candidates(&self, max_pp: Option<u64>) -> Vec<Candidate> {
        let n = self.mesh.num_devices() as u64;
        let mut out = Vec::new();
        for pp in (1..=n)
            .filter(|p| n % p == 0 && *p <= self.model.num_layers && max_pp.is_none_or(|m| *p <= m))
        {
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
            let devices = n / pp;
            for mesh in meshes {
                let mut m = pp.next_power_of_two();
                while m <= self.global_batch {
                    let b = self.global_batch / m;
                    if self.global_batch % m == 0
                        && b <= MAX_SEQUENCES_PER_DEVICE * devices
                        && m >= pp
                    {
                        out.push(Candidate {
                            pp,
                            stage_mesh: mesh.clone(),
                            micro_batches: m,
                        });
                    }
                    m *= MICRO_BATCH_STEP;
                }
            }
        }
        out
    }

    fn stage_keys(&self, pp: u64, m: u64) -> Vec<StageKey> {
        let layers = layers_per_stage(self.model.num_layers, pp);
        let mut keys: Vec<StageKey> = Vec::new();
        for (i, &l) in layers.iter().enumerate() {
            let i = i as u64;
            let spec = StageSpec {
                layers: l,
                first: i == 0,
                last: i + 1 == pp,
                pipelined: pp > 1,
                tie_layers: self.tie_layers,
            };
            if keys.iter().any(|k| k.spec == spec) {
                continue; // an earlier stage with the same operators holds at least as much
            }
            keys.push(StageKey {
                index: i,
                spec,
                in_flight: chunks_in_flight(self.schedule, pp, i, m),
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
        let b = self.global_batch / cand.micro_batches;
        let mut setup = self.setup.clone();
        setup.micro_batch = b;
        setup.num_microbatches = cand.micro_batches;
        let workload = setup.workload();
        let mut out = Vec::new();
        for key in self.stage_keys(cand.pp, cand.micro_batches) {
            let graph = stage_graph(&self.model, &workload, &key.spec);
            let ctx = PipelineContext {
                micro_batches: cand.micro_batches,
                stages: cand.pp,
                in_flight: key.in_flight,
            };
            let mesh = &cand.stage_mesh;
            let failure: std::cell::RefCell<Option<PlanError>> = std::cell::RefCell::new(None);
            let memory = |op: usize, s: &Sharding| match graph.operator_memory(op, s, mesh, &setup)
            {
                Ok(m) => m,
                Err(e) => {
                    failure.borrow_mut().get_or_insert(e);
                    Default::default()
                }
            };
            let keep = |op: usize, s: &Sharding| restrict.is_none_or(|r| r(&graph, op, s, mesh));
            let space = build_strategy_space(&graph.graph, mesh, &ctx, &memory, &keep);
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

    /// Solves every stage of `cand` for `objective` and assembles the plan.
    pub(crate) fn solve(
        &self,
        name: &str,
        cand: &Candidate,
        stages: &[StageProblem],
        objective: IlpObjective,
    ) -> Result<Plan> {
        let solutions = stages
            .iter()
            .map(|st| st.space.ilp.solve(objective, &self.solver))
            .collect::<Result<Vec<_>>>()?;
        Ok(self.assemble(name, cand, stages, &solutions))
    }

    /// Turns stage solutions into a [`Plan`], recomputing every stage's memory by category with
    /// memory-model's `operator_memory` for the chosen shardings.
    pub(crate) fn assemble(
        &self,
        name: &str,
        cand: &Candidate,
        stages: &[StageProblem],
        solutions: &[IlpSolution],
    ) -> Plan {
        let b = self.global_batch / cand.micro_batches;
        let mut setup = self.setup.clone();
        setup.micro_batch = b;
        let mesh = &cand.stage_mesh;
        let keys = self.stage_keys(cand.pp, cand.micro_batches);
        let mut stage_plans = Vec::new();
        for ((st, sol), key) in stages.iter().zip(solutions).zip(&keys) {
            let mut mem = MemoryBreakdown {
                overhead: self.setup.overhead_bytes,
                ..Default::default()
            };
            let mut ops = Vec::new();
            for (i, &c) in sol.choice.iter().enumerate() {
                let s = &st.space.shardings[i][c];
                let copies = st.graph.graph.ops[i].copies as u64;
                let sharding = st.graph.operator_sharding(i, s, mesh);
                if let Ok(m) =
                    memory_model::operator_memory(&st.graph.source_ops[i], &sharding, &setup)
                {
                    mem.parameters += copies * m.device.parameters;
                    mem.gradients += copies * m.device.gradients;
                    mem.optimizer_states += copies * m.device.optimizer_states;
                    mem.activations += copies * m.device.activations * key.in_flight;
                }
                ops.push(operator_plan(st, mesh, i, s, &sol.choice));
            }
            mem.total = mem.parameters
                + mem.gradients
                + mem.optimizer_states
                + mem.activations
                + mem.buffers
                + mem.transient
                + mem.overhead;
            stage_plans.push(StagePlan {
                index: st.key_index,
                layers: st.layers,
                operators: ops,
                memory: mem,
                ilp_memory: sol.memory,
                time_s: sol.time,
                ilp: sol.stats.clone(),
            });
        }
        let peak = stage_plans
            .iter()
            .map(|s| s.memory)
            .max_by_key(|m| m.total)
            .unwrap_or_default();
        let time = stage_plans.iter().map(|s| s.time_s).fold(0.0, f64::max);
        Plan {
            name: name.to_string(),
            pipeline_stages: cand.pp,
            stage_mesh: mesh.shape_string(),
            micro_batches: cand.micro_batches,
            micro_batch_size: b,
            schedule: format!("{:?}", self.schedule),
            per_device_memory: peak,
            step_time_s: time,
            fits: peak.total <= self.mesh.device_memory_bytes,
            ilp: IlpSummary::of(stage_plans.iter().map(|s| &s.ilp)),
            stages: stage_plans,
        }
    }
}

/// Names of the axes in `mask`, e.g. `node,gpu`.
pub fn axis_names(mesh: &DeviceMesh, mask: u8) -> String {
    let names: Vec<&str> = mesh
        .axes
        .iter()
        .enumerate()
        .filter(|(k, _)| mask & (1 << k) != 0)
        .map(|(_, a)| a.name.as_str())
        .collect();
    names.join(",")
}

fn operator_plan(
    st: &StageProblem,
    mesh: &DeviceMesh,
    op: usize,
    s: &Sharding,
    choice: &[usize],
) -> OperatorPlan {
    let g = &st.graph.graph;
    let o = &g.ops[op];
    let parts: Vec<String> = o
        .dims
        .iter()
        .zip(&s.dim_axes)
        .filter(|(_, &a)| a != 0)
        .map(|(d, &a)| format!("{}:{}", d.name, axis_names(mesh, a)))
        .collect();
    let mut collectives = Vec::new();
    for (k, e) in g.edges.iter().enumerate().filter(|(_, e)| e.to == op) {
        let su = &st.space.shardings[e.from][choice[e.from]];
        for (c, axes) in edge_collectives(g, mesh, k, su, s) {
            collectives.push(format!(
                "{c}@{} from {}",
                axis_names(mesh, axes),
                g.ops[e.from].name
            ));
        }
    }
    let dp = s.dp_axes(o);
    if o.weight.is_some() && dp != 0 {
        let sync = match s.zero.number() {
            0 => "grad all-reduce",
            1 => "grad reduce-scatter + param all-gather",
            2 => "grad reduce-scatter per micro-batch + param all-gather",
            _ => "param all-gather ×2 + grad reduce-scatter per micro-batch",
        };
        collectives.push(format!("{sync}@{}", axis_names(mesh, dp)));
    }
    OperatorPlan {
        name: o.name.clone(),
        copies: o.copies,
        sharding: if parts.is_empty() {
            "replicated".into()
        } else {
            parts.join(" ")
        },
        zero: s.zero.number(),
        collectives,
    }
}

/// Most sequences one device processes per micro-batch in the search.
pub const MAX_SEQUENCES_PER_DEVICE: u64 = 4;
/// Ratio between successive micro-batch counts tried by the search.
pub const MICRO_BATCH_STEP: u64 = 4;

/// Default sequences per training step (GPT-3's 1.3B run: 0.5 M tokens of 2048 = 256 sequences).
pub const DEFAULT_GLOBAL_BATCH: u64 = 256;
/// Default sequence length (GPT-3).
pub const DEFAULT_SEQ_LEN: u64 = 2048;

impl Problem {
    /// A problem with the defaults: the vocabulary padded to [`VOCAB_PAD_MULTIPLE`] when the
    /// model does not pad it (so that it splits 8 ways, as Megatron-LM pads it), mixed-precision Adam (16 B per parameter), flash attention,
    /// no recomputation, sequence length [`DEFAULT_SEQ_LEN`], [`DEFAULT_GLOBAL_BATCH`] sequences
    /// per step, 1F1B, layers tied, default HiGHS settings.
    pub fn new(mut model: ModelConfig, mesh: DeviceMesh) -> Self {
        if model.vocab_pad_multiple == 1 {
            model.vocab_pad_multiple = VOCAB_PAD_MULTIPLE;
        }
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
            schedule: PipelineSchedule::OneFOneB,
            solver: SolverConfig::default(),
            tie_layers: true,
        }
    }
}

/// Vocabulary padding applied by [`Problem::new`] to unpadded models: Megatron-LM's 128 × 8.
pub const VOCAB_PAD_MULTIPLE: u64 = 1024;
