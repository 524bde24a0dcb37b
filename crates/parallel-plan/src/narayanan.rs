//! The time model checked against published throughput: Narayanan et al., "Efficient
//! Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC'21), Table 1 —
//! GPT models of 1.7 B to 1 T parameters on 32 to 3072 A100-80GB GPUs (Selene: DGX A100 nodes,
//! NVLink inside a node, 8 × 200 Gb/s HDR InfiniBand per node), vocabulary 51 200, sequence
//! 2048, mixed precision, activation recomputation, with their published tensor, pipeline and
//! data-parallel degrees and global batch.
//!
//! [`predict`] prices each row as Megatron-LM of that time (no sequence parallelism, no
//! distributed optimizer, full recomputation, no flash attention), tuning the micro-batch size
//! as the authors did (1, 2, 4 or 8 sequences), and converts the step time to teraFLOP/s per GPU
//! with the paper's own count `F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))` (recomputation
//! included).

use memory_model::{ModelConfig, PipelineSchedule, Recompute, ZeroStage};

use crate::error::Result;
use crate::mesh::DeviceMesh;
use crate::peers::{self, Framework, PeerConfig};
use crate::search::Problem;

/// One row of Table 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PublishedRow {
    /// Parameters, billions (as published).
    pub billions: f64,
    /// Attention heads.
    pub heads: u64,
    /// Hidden size `h`.
    pub hidden: u64,
    /// Layers `l`.
    pub layers: u64,
    /// Tensor-parallel degree `t`.
    pub tp: u64,
    /// Pipeline-parallel degree `p`.
    pub pp: u64,
    /// GPUs `n`.
    pub gpus: u64,
    /// Global batch `B` (sequences).
    pub batch: u64,
    /// Achieved teraFLOP/s per GPU.
    pub tflops_per_gpu: f64,
}

/// Table 1 of Narayanan et al. (SC'21).
pub const TABLE_1: [PublishedRow; 10] = [
    row(1.7, 24, 2304, 24, 1, 1, 32, 512, 137.0),
    row(3.6, 32, 3072, 30, 2, 1, 64, 512, 138.0),
    row(7.5, 32, 4096, 36, 4, 1, 128, 512, 142.0),
    row(18.4, 48, 6144, 40, 8, 1, 256, 1024, 135.0),
    row(39.1, 64, 8192, 48, 8, 2, 512, 1536, 138.0),
    row(76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140.0),
    row(145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148.0),
    row(310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155.0),
    row(529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163.0),
    row(1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163.0),
];

#[allow(clippy::too_many_arguments)]
const fn row(
    billions: f64,
    heads: u64,
    hidden: u64,
    layers: u64,
    tp: u64,
    pp: u64,
    gpus: u64,
    batch: u64,
    tflops_per_gpu: f64,
) -> PublishedRow {
    PublishedRow {
        billions,
        heads,
        hidden,
        layers,
        tp,
        pp,
        gpus,
        batch,
        tflops_per_gpu,
    }
}

/// Vocabulary of every row.
pub const VOCAB: u64 = 51_200;
/// Sequence length of every row.
pub const SEQ: u64 = 2048;
/// Micro-batch sizes tried per row.
pub const MICRO_BATCHES: [u64; 4] = [1, 2, 4, 8];

/// The model of a row: GPT (learned positions, GeLU MLP of `4h`, LayerNorm, biases).
///
/// # Errors
/// None in practice (the GPT-3 preset it starts from is built in).
pub fn model(r: &PublishedRow) -> Result<ModelConfig> {
    let mut m = ModelConfig::preset("gpt3-1.3b")?;
    m.name = format!("gpt-{}b", r.billions);
    m.num_layers = r.layers;
    m.hidden = r.hidden;
    m.num_heads = r.heads;
    m.num_kv_heads = r.heads;
    m.head_dim = r.hidden / r.heads;
    m.ffn_hidden = 4 * r.hidden;
    m.vocab_size = VOCAB;
    m.max_positions = SEQ;
    Ok(m)
}

/// The paper's FLOPs of one step of `r` (GEMMs, recomputation included).
pub fn step_flops(r: &PublishedRow) -> f64 {
    let (b, s, l, h, v) = (
        r.batch as f64,
        SEQ as f64,
        r.layers as f64,
        r.hidden as f64,
        VOCAB as f64,
    );
    96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h))
}

/// The planner's prediction for one row.
#[derive(Debug, Clone, PartialEq)]
pub struct Prediction {
    /// The row.
    pub row: PublishedRow,
    /// The fastest configuration over [`MICRO_BATCHES`].
    pub config: PeerConfig,
    /// Its step time, seconds.
    pub step_time_s: f64,
    /// Its per-device memory fits the 80 GB device.
    pub fits: bool,
    /// Predicted teraFLOP/s per GPU.
    pub tflops_per_gpu: f64,
}

impl Prediction {
    /// Predicted over published throughput.
    pub fn ratio(&self) -> f64 {
        self.tflops_per_gpu / self.row.tflops_per_gpu
    }
}

/// The problem of row `r` on `mesh_preset` (`dgx-a100-80g` for the paper's machine).
///
/// # Errors
/// Mesh errors.
pub fn problem(r: &PublishedRow, mesh_preset: &str) -> Result<Problem> {
    let mut mesh = DeviceMesh::preset(mesh_preset, (r.gpus / 8) as usize)?;
    // Megatron-LM of 2021 reduced gradients after the backward pass (its local DDP).
    mesh.overlap_grad_reduce = false;
    let mut p = Problem::new(model(r)?, mesh);
    p.global_batch = r.batch;
    p.setup.seq_len = SEQ;
    p.setup.flash_attention = false;
    Ok(p)
}

/// Predicts row `r` on `problem` (see [`problem`]).
///
/// # Errors
/// [`crate::PlanError::InvalidInput`] when no micro-batch size lays out; solver and
/// memory-model errors.
pub fn predict(r: &PublishedRow, problem: &Problem) -> Result<Prediction> {
    let dp = r.gpus / (r.tp * r.pp);
    let mut best: Option<Prediction> = None;
    for b in MICRO_BATCHES {
        if !r.batch.is_multiple_of(b * dp) || r.batch / (b * dp) < r.pp {
            continue;
        }
        let config = PeerConfig {
            framework: Framework::MegatronLm,
            tp: r.tp,
            pp: r.pp,
            dp,
            sequence_parallel: false,
            zero: ZeroStage::Zero0,
            recompute: Recompute::Full,
            micro_batch_size: b,
            micro_batches: r.batch / (b * dp),
            schedule: PipelineSchedule::OneFOneB,
            offload_optimizer: false,
        };
        let plan = peers::evaluate(problem, &config)?;
        let tflops = step_flops(r) / (plan.step_time_s * r.gpus as f64) / 1e12;
        if best
            .as_ref()
            .is_none_or(|b| plan.step_time_s < b.step_time_s)
        {
            best = Some(Prediction {
                row: *r,
                config,
                step_time_s: plan.step_time_s,
                fits: plan.fits,
                tflops_per_gpu: tflops,
            });
        }
    }
    best.ok_or_else(|| {
        crate::PlanError::InvalidInput(format!(
            "no micro-batch size of {MICRO_BATCHES:?} divides the batch of the {} B row",
            r.billions
        ))
    })
}
