//! Whole-model memory per device, per pipeline stage and for the cluster: the sum of the
//! operator numbers of [`crate::sharding`] plus buffers, transient peaks and overhead.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::layers::{embedding_operators, head_operators, layer_operators};
use crate::model::ModelConfig;
use crate::operator::Operator;
use crate::options::HostConfig;
use crate::setup::{PipelineSchedule, TrainingSetup};
use crate::sharding::{operator_memory, Categories, OperatorMemory, OperatorSharding};
use crate::stage::{stage_memory, PlacedOperator, StageTensors};

/// Bytes on one device by category. `total()` is the peak: every category, transient included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeviceBreakdown {
    /// Parameters.
    pub parameters: u64,
    /// Gradients.
    pub gradients: u64,
    /// Optimizer states with fp32 master weights.
    pub optimizer_states: u64,
    /// Saved activations of all in-flight micro-batches.
    pub activations: u64,
    /// Communication buffers (DDP buckets, ZeRO reduce/gather buckets, pipeline send/receive).
    pub buffers: u64,
    /// Transient peaks (ZeRO-3 gathered layers, recomputed layer, fp32 logits gradient).
    pub transient: u64,
    /// Fixed framework overhead (CUDA context and the like).
    pub overhead: u64,
}

impl DeviceBreakdown {
    /// Peak bytes: the sum of every category.
    pub fn total(&self) -> u64 {
        self.parameters
            + self.gradients
            + self.optimizer_states
            + self.activations
            + self.buffers
            + self.transient
            + self.overhead
    }
}

/// One pipeline stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageBreakdown {
    /// Stage index (0 = first).
    pub stage: u64,
    /// Transformer layers on the stage.
    pub layers: u64,
    /// Micro-batches whose activations are held at the peak (fractional for interleaving).
    pub in_flight_microbatches: f64,
    /// Bytes on one device of the stage.
    pub memory: DeviceBreakdown,
    /// Bytes one device of the stage offloads to host memory.
    pub host: Categories,
}

/// Cluster-wide bytes and their redundancy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClusterSummary {
    /// Bytes held on all devices, per operator category.
    pub held: Categories,
    /// Distinct bytes, per operator category.
    pub unique: Categories,
    /// Bytes on all devices, every category (buffers, transient and overhead included).
    pub total: u64,
    /// Distinct bytes (buffers, transient and overhead count as distinct).
    pub unique_total: u64,
    /// `total / unique_total`: what the parallel planner minimises.
    pub redundancy_ratio: f64,
}

/// Result of [`estimate`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryReport {
    /// The peak device (of the stage with the largest total).
    pub per_device: DeviceBreakdown,
    /// Index of that stage.
    pub peak_stage: u64,
    /// Every pipeline stage.
    pub per_stage: Vec<StageBreakdown>,
    /// Cluster totals and redundancy.
    pub cluster: ClusterSummary,
    /// Host memory per node (offloaded states, or the fp32 model copies built at start-up).
    pub host_per_node: u64,
    /// Devices of the cluster.
    pub devices: u64,
}

impl MemoryReport {
    /// Whether the peak device fits in `budget` bytes.
    pub fn fits(&self, budget: u64) -> bool {
        self.per_device.total() <= budget
    }
}

/// Operators of one layer with their memory under the Megatron sharding of `setup`.
pub fn sharded_layer(
    model: &ModelConfig,
    setup: &TrainingSetup,
) -> Result<Vec<(Operator, OperatorMemory)>> {
    with_memory(layer_operators(model, &setup.workload()), setup)
}

fn with_memory(
    ops: Vec<Operator>,
    setup: &TrainingSetup,
) -> Result<Vec<(Operator, OperatorMemory)>> {
    ops.into_iter()
        .map(|op| {
            let m = operator_memory(&op, &OperatorSharding::megatron(&op, setup), setup)?;
            Ok((op, m))
        })
        .collect()
}

/// Layers on each stage: `L / pp`, the first `L mod pp` stages one more.
pub fn layers_per_stage(layers: u64, pp: u64) -> Vec<u64> {
    (0..pp)
        .map(|i| layers / pp + u64::from(i < layers % pp))
        .collect()
}

/// Activation sets in flight on stage `i`, in model chunks (= micro-batches unless interleaved).
/// GPipe: `m`; 1F1B: `min(pp − i, m)`; interleaved with `v` chunks: Megatron's warm-up
/// `2(pp − i − 1) + (v − 1)·pp` plus one, at most `m·v` (Narayanan et al. SC'21; its first-stage
/// value `pp + (pp − 1)/v` micro-batches is Korthikanti et al.'s `1 + (p − 1)/(p·v)` factor).
pub fn chunks_in_flight(schedule: PipelineSchedule, pp: u64, stage: u64, m: u64) -> u64 {
    match schedule {
        PipelineSchedule::GPipe => m,
        PipelineSchedule::OneFOneB => (pp - stage).min(m),
        PipelineSchedule::Interleaved { virtual_stages: v } => {
            (2 * (pp - stage - 1) + (v - 1) * pp + 1).min(m * v)
        }
    }
}

/// Host bytes per node: `buffer_factor · max(offloaded bytes of the node's devices, fp32 start-up
/// copies of `init_params_per_process` parameters in each process)`.
///
/// DeepSpeed's estimators (stage_1_and_2.py, stage3.py) assume every process first builds its
/// model in fp32 on the host (`4·P` per process), or only the largest layer under `zero.Init`;
/// [`estimate`] passes the model-parallel shard, or the largest operator when
/// [`HostConfig::zero_init`] is set. pardis counts the processes of one node (`gpus_per_node`),
/// where DeepSpeed's ZeRO-2 estimator multiplies by all GPUs of all nodes.
pub fn host_memory_per_node(
    offloaded_per_device: u64,
    init_params_per_process: u64,
    host: &HostConfig,
) -> u64 {
    let init = 4 * init_params_per_process * host.gpus_per_node;
    let offloaded = offloaded_per_device * host.gpus_per_node;
    (offloaded.max(init) as f64 * host.buffer_factor) as u64
}

/// Memory of training `model` with `setup`: per device, per stage, on the cluster.
///
/// Every number is a sum of [`operator_memory`] values under [`OperatorSharding::megatron`]:
/// layer operators times the layers of a stage (activations also times the in-flight
/// micro-batches of the schedule), plus the embedding on the first stage and the head on the last.
///
/// # Errors
/// Any [`crate::MemoryError`] of [`TrainingSetup::validate`].
pub fn estimate(model: &ModelConfig, setup: &TrainingSetup) -> Result<MemoryReport> {
    setup.validate(model, None)?;
    let ops = OperatorLists::new(model, setup);
    estimate_validated(model, setup, &ops)
}

/// The operators of a layer, of the embedding and of the head for one workload.
#[derive(Debug, Clone)]
pub(crate) struct OperatorLists {
    layer: Vec<Operator>,
    embed: Vec<Operator>,
    head: Vec<Operator>,
}

impl OperatorLists {
    pub(crate) fn new(model: &ModelConfig, setup: &TrainingSetup) -> Self {
        let w = setup.workload();
        let tied_copy = model.tied_embeddings && setup.parallel.pp > 1;
        OperatorLists {
            layer: layer_operators(model, &w),
            embed: embedding_operators(model, &w),
            head: head_operators(model, &w, tied_copy),
        }
    }
}

/// [`estimate`] for a setup already validated, with prebuilt operator lists.
pub(crate) fn estimate_validated(
    model: &ModelConfig,
    setup: &TrainingSetup,
    ops_lists: &OperatorLists,
) -> Result<MemoryReport> {
    let p = &setup.parallel;
    let v = match p.schedule {
        PipelineSchedule::Interleaved { virtual_stages } => virtual_stages,
        _ => 1,
    };
    let per_stage_devices = p.tp * p.cp * p.dp;
    let tensors = megatron_stage_tensors(model, setup);
    fn placed<'a>(
        list: &'a [Operator],
        setup: &TrainingSetup,
        copies: u64,
        activation_sets: u64,
        in_layer: bool,
    ) -> impl Iterator<Item = PlacedOperator<'a>> + 'a {
        let setup = setup.clone();
        list.iter().map(move |op| PlacedOperator {
            op,
            sharding: OperatorSharding::megatron(op, &setup),
            copies,
            activation_sets,
            in_layer,
            data_parallel: setup.parallel.dp * setup.parallel.cp,
        })
    }
    let mut stages = Vec::with_capacity(p.pp as usize);
    let mut held = Categories::default();
    let mut unique = Categories::default();
    let (mut total, mut extra_total) = (0u64, 0u64);
    for (i, &layers) in layers_per_stage(model.num_layers, p.pp).iter().enumerate() {
        let i = i as u64;
        let chunks = chunks_in_flight(p.schedule, p.pp, i, setup.num_microbatches);
        let micro = chunks.div_ceil(v);
        let mut stage_ops: Vec<_> =
            placed(&ops_lists.layer, setup, layers, chunks * (layers / v), true).collect();
        if i == 0 {
            stage_ops.extend(placed(&ops_lists.embed, setup, 1, micro, false));
        }
        let last = i == p.pp - 1;
        if last {
            stage_ops.extend(placed(&ops_lists.head, setup, 1, micro, false));
        }
        let stage_tensors = StageTensors {
            logits_bytes: if last { tensors.logits_bytes } else { 0 },
            ..tensors
        };
        let m = stage_memory(setup, &stage_ops, &stage_tensors)?;
        let memory = m.device;
        held.add(&m.cluster);
        unique.add(&m.unique);
        let extra = (memory.buffers + memory.transient + memory.overhead) * per_stage_devices;
        total += m.cluster.total() + extra;
        extra_total += extra;
        stages.push(StageBreakdown {
            stage: i,
            layers,
            in_flight_microbatches: chunks as f64 / v as f64,
            memory,
            host: m.host,
        });
    }
    let peak = stages
        .iter()
        .max_by_key(|s| (s.memory.total(), std::cmp::Reverse(s.stage)))
        .expect("pp ≥ 1");
    let offloaded = stages.iter().map(|s| s.host.total()).max().unwrap_or(0);
    let params_per_process = if setup.host.zero_init {
        let all = ops_lists
            .layer
            .iter()
            .chain(&ops_lists.embed)
            .chain(&ops_lists.head);
        all.map(Operator::parameter_elements)
            .max()
            .unwrap_or(0)
            .div_ceil(p.tp)
    } else {
        model.num_parameters().div_ceil(p.tp * p.pp)
    };
    let unique_total = unique.total() + extra_total;
    Ok(MemoryReport {
        per_device: peak.memory,
        peak_stage: peak.stage,
        host_per_node: host_memory_per_node(
            offloaded,
            params_per_process,
            &HostConfig {
                gpus_per_node: setup.host.gpus_per_node.min(p.devices()),
                ..setup.host
            },
        ),
        cluster: ClusterSummary {
            held,
            unique,
            total,
            unique_total,
            redundancy_ratio: total as f64 / unique_total.max(1) as f64,
        },
        per_stage: stages,
        devices: p.devices(),
    })
}

/// The stage tensors of a uniform Megatron-style layout: the `[b, s/(cp·sp), h]` activation at a
/// stage boundary when pipelined, and the last stage's fp32 `[b, s, V/tp]` logits.
pub fn megatron_stage_tensors(model: &ModelConfig, setup: &TrainingSetup) -> StageTensors {
    let p = &setup.parallel;
    let sp = if p.sequence_parallel { p.tp } else { 1 };
    let pipeline_boundary_bytes = if p.pp > 1 {
        setup.micro_batch
            * setup.seq_len.div_ceil(p.cp * sp)
            * model.hidden
            * setup.precision.activation_bytes()
    } else {
        0
    };
    StageTensors {
        pipeline_boundary_bytes,
        logits_bytes: 4 * setup.micro_batch * setup.seq_len * model.padded_vocab().div_ceil(p.tp),
    }
}
