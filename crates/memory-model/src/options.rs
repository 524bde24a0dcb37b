//! Memory-saving options of a training setup: offload, PEFT/quantized base weights,
//! communication buffers, host memory.

use serde::{Deserialize, Serialize};

use crate::operator::LoraRanks;

/// Where offloaded state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffloadTarget {
    /// Kept on the device.
    None,
    /// Host memory (ZeRO-Offload).
    Cpu,
    /// NVMe (ZeRO-Infinity); counted neither on the device nor in host memory.
    Nvme,
}

/// ZeRO-Offload / ZeRO-Infinity placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// Optimizer states, fp32 master weights and the fp32 gradient partition.
    pub optimizer: OffloadTarget,
    /// Parameters (ZeRO-3 only): the device keeps only gathered layers.
    pub parameters: OffloadTarget,
}

impl Default for Offload {
    /// Nothing offloaded.
    fn default() -> Self {
        Offload {
            optimizer: OffloadTarget::None,
            parameters: OffloadTarget::None,
        }
    }
}

/// Storage of the frozen base weights under PEFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BaseQuant {
    /// Kept in the parameter precision.
    None,
    /// LLM.int8(): 1 byte per weight plus an fp32 scale per output row.
    Int8,
    /// QLoRA NormalFloat4 (Dettmers et al. 2023): 4 bits per weight, fp32 absmax per block of
    /// 64; with `double_quant` the absmax values are themselves 8-bit with an fp32 constant per
    /// block of 256.
    Nf4 {
        /// Double quantization of the absmax constants.
        double_quant: bool,
    },
}

/// Parameter-efficient fine-tuning: frozen base, trainable LoRA adapters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peft {
    /// LoRA ranks per layer type.
    pub lora: LoraRanks,
    /// Storage of the frozen linear weights inside the layers (embeddings and norms stay 16-bit).
    pub base: BaseQuant,
}

/// Sizes of communication buffers. Defaults are the frameworks' defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferConfig {
    /// PyTorch DDP bucket (`bucket_cap_mb = 25`), two in flight. Default 25 MiB.
    pub ddp_bucket_bytes: u64,
    /// DeepSpeed `reduce_bucket_size` in elements (ZeRO 1–3). Default 5e8.
    pub zero_reduce_bucket_elements: u64,
    /// DeepSpeed `allgather_bucket_size` in elements (ZeRO 1–2). Default 5e8.
    pub zero_allgather_bucket_elements: u64,
    /// DeepSpeed `stage3_prefetch_bucket_size` in elements (ZeRO-3). Default 5e7.
    pub zero3_prefetch_elements: u64,
}

impl Default for BufferConfig {
    fn default() -> Self {
        BufferConfig {
            ddp_bucket_bytes: 25 << 20,
            zero_reduce_bucket_elements: 500_000_000,
            zero_allgather_bucket_elements: 500_000_000,
            zero3_prefetch_elements: 50_000_000,
        }
    }
}

/// Host (CPU) memory assumptions, used for offload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostConfig {
    /// GPUs (processes) per node. Default 8; a cluster smaller than a node counts its devices.
    pub gpus_per_node: u64,
    /// Safety factor on host memory (DeepSpeed's `additional_buffer_factor`). Default 1.5.
    pub buffer_factor: f64,
    /// Parameters are partitioned at construction (`deepspeed.zero.Init`), so a process builds
    /// only its largest operator in fp32 on the host, not its whole model shard. Default false.
    pub zero_init: bool,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            gpus_per_node: 8,
            buffer_factor: 1.5,
            zero_init: false,
        }
    }
}
