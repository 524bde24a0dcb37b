//! The training setup: batch shape, precision, optimizer, parallelism, memory-saving techniques.

use serde::{Deserialize, Serialize};

use crate::error::{positive, MemoryError, Result};
use crate::model::{ModelConfig, PositionKind};
use crate::operator::Workload;
use crate::options::{BufferConfig, HostConfig, Offload, OffloadTarget, Peft};

/// Numeric precision of parameters, gradients and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in fp32 (4-byte parameters, gradients, activations, optimizer states).
    Fp32,
    /// fp16/bf16 parameters and activations, fp32 master weights and optimizer states
    /// (Micikevicius et al. 2018; the ZeRO paper's `K = 12` for Adam).
    Mixed,
    /// bf16 parameters, activations and optimizer states, no fp32 master copy.
    PureBf16,
}

impl Precision {
    /// Bytes of one stored parameter.
    pub fn param_bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Mixed | Precision::PureBf16 => 2,
        }
    }

    /// Bytes of one activation element.
    pub fn activation_bytes(self) -> u64 {
        self.param_bytes()
    }

    /// Bytes of one fp32 master weight kept by the optimizer (0 unless mixed precision).
    pub fn master_bytes(self) -> u64 {
        match self {
            Precision::Mixed => 4,
            Precision::Fp32 | Precision::PureBf16 => 0,
        }
    }

    /// Bytes of one optimizer-state element (moments).
    pub fn state_bytes(self) -> u64 {
        match self {
            Precision::Fp32 | Precision::Mixed => 4,
            Precision::PureBf16 => 2,
        }
    }
}

/// Optimizer, which decides the optimizer-state bytes per parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Optimizer {
    /// Adam / AdamW: first and second moment.
    Adam,
    /// SGD, with or without one momentum buffer.
    Sgd {
        /// Keep a momentum buffer.
        momentum: bool,
    },
    /// Adafactor (Shazeer & Stern 2018) without first moment: factored second moment,
    /// `rows + cols` values per matrix, `n` per vector.
    Adafactor,
    /// bitsandbytes 8-bit Adam (Dettmers et al. 2022): both moments in 1 byte with an fp32
    /// absmax per block of 2048; tensors under 4096 elements keep 32-bit states.
    Adam8bit,
}

/// Pipeline schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineSchedule {
    /// GPipe: all micro-batches forward, then all backward (every stage holds `m`).
    GPipe,
    /// PipeDream-flush 1F1B: stage `i` (0-based) holds `min(pp − i, m)` micro-batches.
    OneFOneB,
    /// Megatron interleaved 1F1B with `v` model chunks per device.
    Interleaved {
        /// Virtual stages (model chunks) per device.
        virtual_stages: u64,
    },
}

impl std::fmt::Display for PipelineSchedule {
    /// `GPipe`, `1F1B`, `1F1B-interleaved×v`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PipelineSchedule::GPipe => f.write_str("GPipe"),
            PipelineSchedule::OneFOneB => f.write_str("1F1B"),
            PipelineSchedule::Interleaved { virtual_stages } => {
                write!(f, "1F1B-interleaved×{virtual_stages}")
            }
        }
    }
}

/// ZeRO stage (Rajbhandari et al., SC'20), or Megatron's distributed optimizer: the
/// workspace's one ZeRO rule (what each stage shards) lives in its methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ZeroStage {
    /// Plain data parallelism: everything replicated.
    Zero0,
    /// `P_os`: optimizer states (and fp32 master weights) sharded over data parallel.
    Zero1,
    /// `P_os+g`: gradients sharded too.
    Zero2,
    /// `P_os+g+p`: parameters sharded too, gathered layer by layer.
    Zero3,
    /// Megatron-LM `--use-distributed-optimizer`: same placement as ZeRO-1.
    DistributedOptimizer,
}

impl ZeroStage {
    /// Optimizer states are sharded over data parallel.
    pub fn shards_optimizer(self) -> bool {
        self != ZeroStage::Zero0
    }
    /// Gradients are sharded over data parallel.
    pub fn shards_gradients(self) -> bool {
        matches!(self, ZeroStage::Zero2 | ZeroStage::Zero3)
    }
    /// Parameters are sharded over data parallel.
    pub fn shards_parameters(self) -> bool {
        self == ZeroStage::Zero3
    }
    /// The numeric stage 0–3 (the distributed optimizer places states as ZeRO-1 does).
    pub fn number(self) -> u8 {
        match self {
            ZeroStage::Zero0 => 0,
            ZeroStage::Zero1 | ZeroStage::DistributedOptimizer => 1,
            ZeroStage::Zero2 => 2,
            ZeroStage::Zero3 => 3,
        }
    }
    /// The ZeRO stage with the same placement (the distributed optimizer is ZeRO-1).
    pub fn placement(self) -> Self {
        match self {
            ZeroStage::DistributedOptimizer => ZeroStage::Zero1,
            z => z,
        }
    }
    /// From the numeric stage 0–3.
    pub fn from_number(stage: u64) -> Result<Self> {
        Ok(match stage {
            0 => ZeroStage::Zero0,
            1 => ZeroStage::Zero1,
            2 => ZeroStage::Zero2,
            3 => ZeroStage::Zero3,
            _ => {
                return Err(MemoryError::InvalidInput(format!(
                    "ZeRO stage must be 0..=3, got {stage}"
                )))
            }
        })
    }
}

/// Parallel degrees and how they are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallelism {
    /// Data-parallel degree.
    pub dp: u64,
    /// Tensor-parallel degree (Megatron-LM).
    pub tp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// Context-parallel degree (sequence split across devices, including attention).
    pub cp: u64,
    /// Expert-parallel degree (experts split over data-parallel ranks; must divide `dp·cp`).
    pub ep: u64,
    /// Megatron sequence parallelism in the tensor-parallel group (Korthikanti et al. 2022).
    pub sequence_parallel: bool,
    /// Pipeline schedule.
    pub schedule: PipelineSchedule,
    /// ZeRO stage.
    pub zero: ZeroStage,
}

impl Default for Parallelism {
    /// One device, 1F1B, no ZeRO.
    fn default() -> Self {
        Parallelism {
            dp: 1,
            tp: 1,
            pp: 1,
            cp: 1,
            ep: 1,
            sequence_parallel: false,
            schedule: PipelineSchedule::OneFOneB,
            zero: ZeroStage::Zero0,
        }
    }
}

impl Parallelism {
    /// Devices used: `dp·tp·pp·cp`.
    pub fn devices(&self) -> u64 {
        self.dp
            .saturating_mul(self.tp)
            .saturating_mul(self.pp)
            .saturating_mul(self.cp)
    }
}

/// Activation recomputation (checkpointing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Recompute {
    /// Keep every activation.
    None,
    /// Recompute the attention core (`s×s` tensors) only (Korthikanti et al. 2022).
    Selective,
    /// Selective, plus the outputs of the pointwise operators (norms, activation functions)
    /// that feed a linear layer: the linear keeps only the pointwise operator's saved input
    /// and the operator runs again in backward (`12·sbh` of Korthikanti's `34·sbh` per layer;
    /// cheap, memory-bound work). Megatron-LM's `--recompute-modules layernorm` covers the norm
    /// part; torchtitan's per-operator selective checkpointing recomputes these and more.
    Pointwise,
    /// Keep only each layer's input; recompute the layer in backward.
    Full,
}

impl std::fmt::Display for Recompute {
    /// `none`, `selective`, `full`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Recompute::None => "none",
            Recompute::Selective => "selective",
            Recompute::Pointwise => "pointwise",
            Recompute::Full => "full",
        })
    }
}

/// Largest cluster [`TrainingSetup::validate`] and [`crate::search`] accept (2^16 devices).
pub const MAX_DEVICES: u64 = 1 << 16;

/// Everything about a training run that decides its memory, besides the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingSetup {
    /// Micro-batch `b` per device. Default 1.
    pub micro_batch: u64,
    /// Sequence length `s`. Default 2048.
    pub seq_len: u64,
    /// Micro-batches per step (gradient accumulation / pipeline). Default 1.
    pub num_microbatches: u64,
    /// Precision. Default mixed.
    pub precision: Precision,
    /// Accumulate (and keep) gradients in fp32 (Megatron's `main_grad`). Default false.
    pub fp32_grad_accumulation: bool,
    /// Optimizer. Default Adam.
    pub optimizer: Optimizer,
    /// Parallelism. Default: one device.
    pub parallel: Parallelism,
    /// Activation recomputation. Default none.
    pub recompute: Recompute,
    /// Flash attention (no saved `s×s` tensors). Default false.
    pub flash_attention: bool,
    /// Offload. Default none.
    pub offload: Offload,
    /// PEFT (LoRA / QLoRA). Default none (full training).
    pub peft: Option<Peft>,
    /// Communication buffers.
    pub buffers: BufferConfig,
    /// Host memory assumptions.
    pub host: HostConfig,
    /// Fixed per-device overhead (CUDA context, allocator fragmentation). Default 0.
    pub overhead_bytes: u64,
}

impl Default for TrainingSetup {
    fn default() -> Self {
        TrainingSetup {
            micro_batch: 1,
            seq_len: 2048,
            num_microbatches: 1,
            precision: Precision::Mixed,
            fp32_grad_accumulation: false,
            optimizer: Optimizer::Adam,
            parallel: Parallelism::default(),
            recompute: Recompute::None,
            flash_attention: false,
            offload: Offload::default(),
            peft: None,
            buffers: BufferConfig::default(),
            host: HostConfig::default(),
            overhead_bytes: 0,
        }
    }
}

impl TrainingSetup {
    /// The per-micro-batch workload that shapes the operators.
    pub fn workload(&self) -> Workload {
        Workload {
            micro_batch: self.micro_batch,
            seq_len: self.seq_len,
            flash_attention: self.flash_attention,
            lora: self.peft.map(|p| p.lora),
        }
    }

    /// Bytes of one stored gradient element.
    pub fn grad_bytes(&self) -> u64 {
        if self.fp32_grad_accumulation {
            4
        } else {
            self.precision.param_bytes()
        }
    }

    /// Checks the setup against the model (and the device count, when given).
    pub fn validate(&self, model: &ModelConfig, devices: Option<u64>) -> Result<()> {
        model.validate()?;
        positive("micro_batch", self.micro_batch)?;
        positive("seq_len", self.seq_len)?;
        positive("num_microbatches", self.num_microbatches)?;
        let p = &self.parallel;
        for (name, v) in [
            ("dp", p.dp),
            ("tp", p.tp),
            ("pp", p.pp),
            ("cp", p.cp),
            ("ep", p.ep),
        ] {
            positive(name, v)?;
        }
        if p.devices() > MAX_DEVICES || p.ep > MAX_DEVICES {
            return Err(MemoryError::InvalidInput(format!(
                "{} devices; pardis models at most {MAX_DEVICES}",
                p.devices()
            )));
        }
        if let Some(n) = devices {
            if p.devices() != n {
                return Err(MemoryError::DeviceCountMismatch {
                    dp: p.dp,
                    tp: p.tp,
                    pp: p.pp,
                    cp: p.cp,
                    product: p.devices(),
                    devices: n,
                });
            }
        }
        divides("tp", p.tp, "num_heads", model.num_heads)?;
        divides("tp", p.tp, "num_kv_heads", model.num_kv_heads)?;
        divides("cp", p.cp, "seq_len", self.seq_len)?;
        if p.pp > model.num_layers {
            return Err(MemoryError::TooManyStages {
                pp: p.pp,
                layers: model.num_layers,
            });
        }
        if let PipelineSchedule::Interleaved { virtual_stages } = p.schedule {
            positive("virtual_stages", virtual_stages)?;
            if virtual_stages > model.num_layers {
                return Err(MemoryError::InvalidInput(format!(
                    "virtual_stages = {virtual_stages} exceeds the number of layers ({})",
                    model.num_layers
                )));
            }
            divides(
                "pp·v",
                p.pp * virtual_stages,
                "num_layers",
                model.num_layers,
            )?;
        }
        match &model.moe {
            Some(moe) => {
                divides("ep", p.ep, "num_experts", moe.num_experts)?;
                divides("ep", p.ep, "dp·cp", p.dp * p.cp)?;
            }
            None if p.ep > 1 => {
                return Err(MemoryError::Unsupported(format!(
                    "ep = {} on a dense model (no experts)",
                    p.ep
                )))
            }
            None => {}
        }
        if p.zero == ZeroStage::Zero3 && p.pp > 1 {
            return Err(MemoryError::Unsupported(
                "ZeRO-3 with pipeline parallelism (pp > 1); DeepSpeed rejects it too".into(),
            ));
        }
        if self.offload.parameters != OffloadTarget::None && p.zero != ZeroStage::Zero3 {
            return Err(MemoryError::Unsupported(
                "parameter offload needs ZeRO-3".into(),
            ));
        }
        if model.position == PositionKind::Learned && self.seq_len > model.max_positions {
            return Err(MemoryError::InvalidInput(format!(
                "seq_len = {} exceeds the learned position table ({})",
                self.seq_len, model.max_positions
            )));
        }
        if !self.host.buffer_factor.is_finite() || self.host.buffer_factor < 1.0 {
            return Err(MemoryError::InvalidInput(format!(
                "host buffer factor must be ≥ 1, got {}",
                self.host.buffer_factor
            )));
        }
        positive("gpus_per_node", self.host.gpus_per_node)?;
        // Largest activation tensor of one micro-batch, times the micro-batches one device may
        // hold and the devices of one node (host memory sums per-device bytes over a node),
        // must stay far below 2^64 bytes. The device count itself does not enter: per-device
        // bytes shrink or stay as devices grow.
        let topk = model.moe.map_or(1, |m| m.top_k) as u128;
        let widest = [
            model.padded_vocab() as u128,
            model.ffn_hidden as u128 * topk,
            model.num_heads as u128 * self.seq_len as u128,
            model.hidden as u128,
        ]
        .into_iter()
        .max()
        .unwrap_or(1);
        let per_mb = self.micro_batch as u128
            * self.seq_len as u128
            * widest
            * 8
            * (model.num_layers as u128 + 2)
            * 32;
        let bound = per_mb
            * self.num_microbatches as u128
            * self.host.gpus_per_node.min(p.devices()) as u128;
        if bound > u64::MAX as u128 / 16 {
            return Err(MemoryError::InvalidInput(format!(
                "sizes too large to count in 64-bit bytes (micro_batch {}, seq_len {}, {} micro-batches)",
                self.micro_batch, self.seq_len, self.num_microbatches
            )));
        }
        Ok(())
    }
}

/// `NotDivisible` unless `divisor | value`.
fn divides(what: &'static str, divisor: u64, dimension: &'static str, value: u64) -> Result<()> {
    if value.is_multiple_of(divisor) {
        Ok(())
    } else {
        Err(MemoryError::NotDivisible {
            what,
            divisor,
            dimension,
            value,
        })
    }
}
