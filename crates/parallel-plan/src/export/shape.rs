//! What an engine needs to know of a plan, read from its per-operator shardings: the
//! tensor-parallel degree and how each layer linear is split, sequence parallelism, ZeRO.

use memory_model::{embedding_operators, head_operators, layer_operators, Dim as MmDim};
use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};
use crate::plan::{OperatorPlan, Plan};
use crate::search::Problem;

/// The linears of a layer whose splits engines set, with the split Megatron-LM uses.
pub(crate) const LAYER_LINEARS: [(&str, LinearSplit); 4] = [
    ("qkv_proj", LinearSplit::Column),
    ("out_proj", LinearSplit::Row),
    ("mlp_up", LinearSplit::Column),
    ("mlp_down", LinearSplit::Row),
];

/// How a linear's weight is split by tensor parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinearSplit {
    /// Not split (replicated over the tensor-parallel group).
    Replicated,
    /// Output features split (`ColwiseParallel`): no communication after it.
    Column,
    /// Input features split (`RowwiseParallel`): its output is a partial sum.
    Row,
    /// Input and output features both split.
    Both,
}

impl std::fmt::Display for LinearSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinearSplit::Replicated => "replicated",
            LinearSplit::Column => "column",
            LinearSplit::Row => "row",
            LinearSplit::Both => "row+column",
        })
    }
}

/// One layer linear of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinearChoice {
    /// Operator name (`qkv_proj`, `out_proj`, `mlp_up`, `mlp_down`).
    pub name: String,
    /// How the plan splits its weight.
    pub split: LinearSplit,
    /// Ways its model dimensions are split (1: replicated).
    pub ways: u64,
    /// Its parameters (elements), the weight of its vote on the TP degree.
    pub parameters: u64,
}

/// A plan read as an engine would: degrees and per-operator choices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanShape {
    /// Devices of one pipeline stage.
    pub stage_devices: u64,
    /// Tensor-parallel degree: the ways the split layer linears split model dimensions
    /// (weighted by parameters when they differ; 1 when none is split).
    pub tp: u64,
    /// The layer linears of each stage (index order).
    pub linears: Vec<Vec<LinearChoice>>,
    /// Per stage, its tensor-parallel degree read from its linears alone.
    pub stage_tp: Vec<u64>,
    /// The layer norms keep their input split along the sequence.
    pub sequence_parallel: bool,
    /// Dominant ZeRO stage over the operators with parameters and data parallelism (weighted
    /// by parameters).
    pub zero: u8,
    /// Per operator with parameters and data parallelism, its ZeRO stage.
    pub zero_by_operator: Vec<(String, u8)>,
}

/// Parses `name:size×name:size` (a stage mesh's shape string).
pub(crate) fn mesh_axes(shape: &str) -> Result<Vec<(String, u64)>> {
    shape
        .split('×')
        .map(|a| {
            let (name, size) = a.split_once(':').ok_or_else(|| bad_mesh(shape))?;
            let size = size.parse::<u64>().map_err(|_| bad_mesh(shape))?;
            Ok((name.to_string(), size))
        })
        .collect()
}

fn bad_mesh(shape: &str) -> PlanError {
    PlanError::InvalidInput(format!("stage mesh `{shape}` is not `axis:size×…`"))
}

/// Parses an operator's sharding (`batch:node,gpu0 heads:gpu1`) into (dimension, ways).
pub(crate) fn split_ways(sharding: &str, axes: &[(String, u64)]) -> Result<Vec<(String, u64)>> {
    if sharding == "replicated" {
        return Ok(Vec::new());
    }
    sharding
        .split_whitespace()
        .map(|part| {
            let (dim, names) = part.split_once(':').ok_or_else(|| bad_sharding(sharding))?;
            let mut ways = 1;
            for n in names.split(',') {
                let (_, size) = axes
                    .iter()
                    .find(|(a, _)| a == n)
                    .ok_or_else(|| bad_sharding(sharding))?;
                ways *= size;
            }
            Ok((dim.to_string(), ways))
        })
        .collect()
}

fn bad_sharding(s: &str) -> PlanError {
    PlanError::InvalidInput(format!("sharding `{s}` names no axis of the stage mesh"))
}

/// `batch×2 heads×4 zero1`: an operator's split as ways, comparable across meshes.
pub(crate) fn signature(op: &OperatorPlan, axes: &[(String, u64)]) -> Result<String> {
    let mut parts: Vec<String> = split_ways(&op.sharding, axes)?
        .into_iter()
        .map(|(d, w)| format!("{d}×{w}"))
        .collect();
    if op.zero > 0 {
        parts.push(format!("zero{}", op.zero));
    }
    Ok(if parts.is_empty() {
        "replicated".into()
    } else {
        parts.join(" ")
    })
}

/// Dimension name as the planner writes it (`heads`, `ffn`, ...).
fn dim_name(d: MmDim) -> String {
    let d = if d == MmDim::KvHeads { MmDim::Heads } else { d };
    format!("{d:?}").to_lowercase()
}

/// The layer linears of one stage (each with its copies) and the stage's degree (their ways,
/// weighted by parameters when they differ).
fn stage_linears(
    stage: &crate::plan::StagePlan,
    mm_layer: &[memory_model::Operator],
    axes: &[(String, u64)],
) -> Result<(Vec<(LinearChoice, u32)>, u64)> {
    let mut out = Vec::new();
    for (name, _) in LAYER_LINEARS {
        let (Some(o), Some(src)) = (
            stage.operators.iter().find(|o| o.name == name),
            mm_layer.iter().find(|m| m.name == name),
        ) else {
            continue;
        };
        let outputs: Vec<String> = src
            .outputs
            .iter()
            .flat_map(|s| s.0.iter().map(|&(d, _)| dim_name(d)))
            .collect();
        let (mut column, mut row, mut ways) = (false, false, 1);
        for (d, w) in split_ways(&o.sharding, axes)? {
            if d == "batch" || d == "seq" {
                continue;
            }
            ways *= w;
            if outputs.contains(&d) {
                column = true;
            } else {
                row = true;
            }
        }
        let split = match (column, row) {
            (false, false) => LinearSplit::Replicated,
            (true, false) => LinearSplit::Column,
            (false, true) => LinearSplit::Row,
            (true, true) => LinearSplit::Both,
        };
        let parameters = src.params.iter().map(|p| p.shape.elements()).sum();
        out.push((
            LinearChoice {
                name: name.to_string(),
                split,
                ways,
                parameters,
            },
            o.copies,
        ));
    }
    let mut votes: Vec<(u64, u64)> = Vec::new();
    // Only split linears vote: a linear left whole does not make the group smaller.
    for (l, _) in out.iter().filter(|(l, _)| l.ways > 1) {
        match votes.iter_mut().find(|(w, _)| *w == l.ways) {
            Some(v) => v.1 += l.parameters,
            None => votes.push((l.ways, l.parameters)),
        }
    }
    let tp = votes
        .iter()
        .max_by_key(|&&(w, p)| (p, w))
        .map_or(1, |&(w, _)| w);
    Ok((out, tp))
}

impl PlanShape {
    /// Reads `plan` (a plan of `problem`).
    ///
    /// # Errors
    /// [`PlanError::InvalidInput`] when its stage mesh or shardings cannot be parsed or it has
    /// no stage.
    pub fn read(problem: &Problem, plan: &Plan) -> Result<Self> {
        let axes = mesh_axes(&plan.stage_mesh)?;
        let stage_devices: u64 = axes.iter().map(|(_, s)| s).product();
        if plan.stages.is_empty() {
            return Err(PlanError::InvalidInput("the plan has no stage".into()));
        }
        let mut stages: Vec<&crate::plan::StagePlan> = plan.stages.iter().collect();
        stages.sort_by_key(|s| s.index);
        let workload = problem.setup.workload();
        let mm_layer = layer_operators(&problem.model, &workload);
        let mut linears = Vec::new();
        let mut stage_tp = Vec::new();
        // Votes on the degree: (ways, parameters × copies) over every stage.
        let mut votes: Vec<(u64, u64)> = Vec::new();
        for stage in &stages {
            let (choices, tp) = stage_linears(stage, &mm_layer, &axes)?;
            for (l, copies) in choices.iter().filter(|(l, _)| l.ways > 1) {
                let weight = l.parameters * *copies as u64;
                match votes.iter_mut().find(|(w, _)| *w == l.ways) {
                    Some(v) => v.1 += weight,
                    None => votes.push((l.ways, weight)),
                }
            }
            linears.push(choices.into_iter().map(|(l, _)| l).collect());
            stage_tp.push(tp);
        }
        let tp = votes
            .iter()
            .max_by_key(|&&(w, p)| (p, w))
            .map_or(1, |&(w, _)| w);
        // Sequence parallelism as the stages at the chosen degree run it.
        let sequence_parallel = stages.iter().zip(&stage_tp).any(|(stage, &t)| {
            t == tp
                && ["input_norm", "mlp_norm"].iter().any(|n| {
                    stage
                        .operators
                        .iter()
                        .find(|o| o.name == *n)
                        .is_some_and(|o| {
                            split_ways(&o.sharding, &axes)
                                .is_ok_and(|s| s.iter().any(|(d, _)| d == "seq"))
                        })
                })
        });
        // Parameters of every operator by name (layer operators count per copy).
        let mut params: Vec<(String, u64)> = Vec::new();
        let all = embedding_operators(&problem.model, &workload)
            .into_iter()
            .chain(mm_layer)
            .chain(head_operators(
                &problem.model,
                &workload,
                plan.pipeline_stages > 1,
            ));
        for o in all {
            let p: u64 = o.params.iter().map(|p| p.shape.elements()).sum();
            params.push((o.name.to_string(), p));
        }
        let mut zero_by_operator: Vec<(String, u8)> = Vec::new();
        let mut zero_votes = [0u64; 4];
        for s in &plan.stages {
            for o in &s.operators {
                let p = params.iter().find(|(n, _)| *n == o.name).map_or(0, |x| x.1);
                let data_parallel = split_ways(&o.sharding, &axes)?
                    .iter()
                    .any(|(d, w)| d == "batch" && *w > 1);
                if p == 0 || !data_parallel {
                    continue;
                }
                zero_votes[o.zero.min(3) as usize] += p * o.copies as u64;
                if !zero_by_operator.iter().any(|(n, _)| *n == o.name) {
                    zero_by_operator.push((o.name.clone(), o.zero));
                }
            }
        }
        let zero = (0..4u8)
            .max_by_key(|&z| (zero_votes[z as usize], z))
            .filter(|&z| zero_votes[z as usize] > 0)
            .unwrap_or(0);
        Ok(PlanShape {
            stage_devices,
            tp,
            linears,
            stage_tp,
            sequence_parallel,
            zero,
            zero_by_operator,
        })
    }

    /// Whether operators with parameters use different ZeRO stages.
    pub fn zero_mixed(&self) -> bool {
        self.zero_by_operator
            .iter()
            .any(|(_, z)| *z != self.zero_by_operator[0].1)
    }

    /// Tensor-parallel degrees to try, best first: the plan's, then every smaller divisor of
    /// the stage that divides the heads.
    pub(crate) fn tp_choices(&self, problem: &Problem) -> Vec<u64> {
        let m = &problem.model;
        let ok = |t: u64| {
            self.stage_devices.is_multiple_of(t)
                && m.num_heads.is_multiple_of(t)
                && m.num_kv_heads.is_multiple_of(t)
        };
        let mut out: Vec<u64> = (1..=self.tp).rev().filter(|&t| ok(t)).collect();
        if out.is_empty() {
            out.push(1);
        }
        out
    }

    /// The layer linears' splits an engine that takes a plan per linear (torchtitan's
    /// `parallelize_module`) runs at degree `tp`, and what that gives up of the plan. Each
    /// linear keeps the plan's column, row or replicated split (read from the first stage) when
    /// it is split `tp` ways or not at all; a linear split another number of ways, or along
    /// both of its feature dimensions, gets the standard split.
    pub(crate) fn per_linear_layout(
        &self,
        tp: u64,
    ) -> (crate::peers::LinearLayout, Vec<super::GivenUp>) {
        let mut layout = [LinearSplit::Replicated; LAYER_LINEARS.len()];
        for (i, (name, standard)) in LAYER_LINEARS.iter().enumerate() {
            if tp <= 1 {
                continue;
            }
            let choice = self.linears[0].iter().find(|l| l.name == *name);
            layout[i] = match choice {
                Some(l) if l.split == LinearSplit::Replicated => LinearSplit::Replicated,
                Some(l) if l.ways == tp && l.split != LinearSplit::Both => l.split,
                _ => *standard,
            };
        }
        let out = self.differences(
            tp,
            |stage| stage.iter().any(|l| l.ways != 1 && l.ways != tp),
            |l| {
                let i = LAYER_LINEARS.iter().position(|(n, _)| *n == l.name)?;
                (l.split != layout[i]).then_some(layout[i])
            },
        );
        (layout, out)
    }

    /// Records how the plan's linears differ from the engine's standard layout at degree `tp`
    /// (column-parallel q/k/v and MLP-up, row-parallel out-projection and MLP-down, one degree
    /// on every stage).
    pub(crate) fn layout_differences(&self, tp: u64) -> Vec<super::GivenUp> {
        self.differences(
            tp,
            |stage| stage.iter().any(|l| l.ways != stage[0].ways),
            |l| {
                let standard = LAYER_LINEARS
                    .iter()
                    .find(|(n, _)| *n == l.name)
                    .map_or(LinearSplit::Replicated, |x| x.1);
                let engine = if tp > 1 {
                    standard
                } else {
                    LinearSplit::Replicated
                };
                (l.split != engine && l.split != LinearSplit::Replicated).then_some(engine)
            },
        )
    }

    /// What an engine running the layer linears at degree `tp` gives up of the plan: one degree
    /// for every stage, a stage whose linears `mixed` says are split unevenly, and (once per
    /// linear) each linear for which `engine_split` names a different split.
    fn differences(
        &self,
        tp: u64,
        mixed: impl Fn(&[LinearChoice]) -> bool,
        engine_split: impl Fn(&LinearChoice) -> Option<LinearSplit>,
    ) -> Vec<super::GivenUp> {
        let mut out = Vec::new();
        if self.stage_tp.iter().any(|&t| t != self.stage_tp[0]) {
            out.push(super::GivenUp::StageTensorParallel {
                plan: self.stage_tp.clone(),
                engine: tp,
            });
        }
        let mut seen: Vec<&str> = Vec::new();
        for stage in &self.linears {
            if mixed(stage) {
                out.push(super::GivenUp::MixedTensorParallel {
                    plan: stage.iter().map(|l| (l.name.clone(), l.ways)).collect(),
                    engine: tp,
                });
            }
            for l in stage {
                if let Some(engine) = engine_split(l) {
                    if !seen.contains(&l.name.as_str()) {
                        seen.push(&l.name);
                        out.push(super::GivenUp::LinearLayout {
                            linear: l.name.clone(),
                            plan: l.split,
                            engine,
                        });
                    }
                }
            }
        }
        out
    }
}
