//! The device mesh: devices arranged on 1–3 named axes, each with its own link bandwidth and
//! latency, plus per-device memory and compute.
//!
//! The usual shape is `nodes × devices per node`: the inner axis is the fast intra-node link
//! (NVLink, PCIe), the outer one the network between nodes (InfiniBand). A collective over one
//! axis runs over that axis' links; see [`crate::cost_model`].

use serde::{Deserialize, Serialize};

use crate::error::{PlanError, Result};

/// Bytes per second in one GB/s (decimal, as vendors quote link speeds).
const GB_PER_S: f64 = 1e9;
/// Bytes per second in one Gb/s (decimal).
const GBIT_PER_S: f64 = 1e9 / 8.0;
/// Bytes in one GiB.
const GIB: u64 = 1 << 30;

/// NVLink-3 bandwidth per A100 that collectives reach: nccl-tests `all_reduce_perf` bus
/// bandwidth on a DGX A100 is about 230 GB/s of the 300 GB/s per direction (600 bidirectional).
pub const A100_NVLINK_BYTES_PER_S: f64 = 230.0 * GB_PER_S;
/// NVLink-4 bandwidth per H100 that collectives reach: about 360 GB/s bus bandwidth of the
/// 450 GB/s per direction (900 bidirectional); the same 80 % as on A100.
pub const H100_NVLINK_BYTES_PER_S: f64 = 360.0 * GB_PER_S;
/// DGX A100 inter-node bandwidth: 8 × 200 Gb/s HDR InfiniBand compute ports per node (one per
/// GPU; NVIDIA DGX A100 datasheet) = 200 GB/s per node, of which NCCL reaches about 95 %.
pub const DGX_A100_IB_BYTES_PER_S: f64 = 0.95 * 8.0 * 200.0 * GBIT_PER_S;
/// DGX H100 inter-node bandwidth: 8 × 400 Gb/s NDR InfiniBand per node, 95 % reached.
pub const DGX_H100_IB_BYTES_PER_S: f64 = 0.95 * 8.0 * 400.0 * GBIT_PER_S;
/// A100-80GB memory bandwidth element-wise kernels sustain: about 1.75 of the 2.04 TB/s peak
/// (BabelStream copy/triad on A100-80GB).
pub const A100_HBM_BYTES_PER_S: f64 = 1.75e12;
/// H100 SXM memory bandwidth sustained: about 85 % of the 3.35 TB/s peak.
pub const H100_HBM_BYTES_PER_S: f64 = 2.85e12;
/// RTX 4090 memory bandwidth sustained: about 85 % of the 1.01 TB/s peak.
pub const RTX4090_HBM_BYTES_PER_S: f64 = 0.86e12;
/// PCIe 4.0 x16 effective bandwidth between consumer GPUs (no NVLink, through the host).
pub const PCIE4_BYTES_PER_S: f64 = 25.0 * GB_PER_S;
/// 100 Gb/s Ethernet between consumer-GPU nodes.
pub const ETH_100G_BYTES_PER_S: f64 = 100.0 * GBIT_PER_S;
/// Latency of one NVLink hop of a ring step.
pub const NVLINK_LATENCY_S: f64 = 5e-6;
/// Latency of one InfiniBand hop of a ring step.
pub const IB_LATENCY_S: f64 = 10e-6;
/// Latency of one PCIe hop.
pub const PCIE_LATENCY_S: f64 = 10e-6;
/// Latency of one Ethernet hop.
pub const ETH_LATENCY_S: f64 = 30e-6;
/// A100 dense bf16 tensor-core peak, FLOP/s.
pub const A100_PEAK_FLOPS: f64 = 312e12;
/// H100 SXM dense bf16 tensor-core peak, FLOP/s.
pub const H100_PEAK_FLOPS: f64 = 989e12;
/// RTX 4090 dense bf16 tensor-core peak (fp32 accumulate), FLOP/s.
pub const RTX4090_PEAK_FLOPS: f64 = 165e12;
/// Fraction of peak that large bf16 GEMMs sustain inside training (clocks under sustained power
/// load, fused kernels around them). Fitted, as the only free parameter of the time model, to
/// Narayanan et al. SC'21 Table 1 on A100 (every row then within ±8 %; see
/// [`crate::narayanan`]); isolated cuBLAS GEMMs reach 0.8–0.9. Used for every preset.
pub const DEFAULT_EFFICIENCY: f64 = 0.70;
/// FLOPs at which a GEMM reaches half the large-GEMM rate on A100 (a 1024³ GEMM, 2.1 GFLOP,
/// runs at about half of peak): 1.5 GFLOP, i.e. about 5.7 µs of fixed cost per GEMM.
pub const A100_GEMM_HALF_FLOPS: f64 = 1.5e9;
/// The same for H100 (3.2× A100's peak, similar fixed cost): 4.8 GFLOP.
pub const H100_GEMM_HALF_FLOPS: f64 = 4.8e9;
/// The same for RTX 4090.
pub const RTX4090_GEMM_HALF_FLOPS: f64 = 0.8e9;

/// DGX A100 host link per GPU when every GPU of the node transfers at once: each A100 has a
/// PCIe 4.0 x16 link (about 25 GB/s reached) to a PCIe switch it shares with a second GPU, and
/// the switch's one x16 uplink to the CPU carries both (NVIDIA DGX A100 system architecture:
/// four switches, two GPUs each), so about 12.5 GB/s per GPU.
pub const DGX_A100_HOST_LINK_BYTES_PER_S: f64 = 12.5 * GB_PER_S;
/// DGX A100 host memory bandwidth a streaming CPU optimizer sustains: 2 × AMD EPYC 7742 with
/// eight DDR4-3200 channels each (409.6 GB/s peak), of which STREAM-like kernels reach about
/// 70 %.
pub const DGX_A100_HOST_MEMORY_BYTES_PER_S: f64 = 0.7 * 409.6 * GB_PER_S;
/// DGX H100 host link per GPU with every GPU transferring: PCIe 5.0 x16 (about 50 GB/s
/// reached), assumed shared by two GPUs per switch uplink as on DGX A100.
pub const DGX_H100_HOST_LINK_BYTES_PER_S: f64 = 25.0 * GB_PER_S;
/// DGX H100 host memory bandwidth sustained: 2 × Intel Xeon Platinum 8480C with eight
/// DDR5-4800 channels each (614.4 GB/s peak), 70 % reached.
pub const DGX_H100_HOST_MEMORY_BYTES_PER_S: f64 = 0.7 * 614.4 * GB_PER_S;
/// Host link per GPU of an 8 × RTX 4090 PCIe 4.0 server with every GPU transferring: two GPUs
/// per x16 switch uplink (assumed), about 12.5 GB/s.
pub const PCIE_4090_HOST_LINK_BYTES_PER_S: f64 = 12.5 * GB_PER_S;
/// Host memory bandwidth of a one-socket server (eight DDR4-3200 channels, 204.8 GB/s peak),
/// 70 % reached.
pub const PCIE_4090_HOST_MEMORY_BYTES_PER_S: f64 = 0.7 * 204.8 * GB_PER_S;

/// DGX A100 system memory: 1 TB (2 TB is an option).
pub const DGX_A100_HOST_MEMORY_BYTES: u64 = 1 << 40;
/// DGX H100 system memory: 2 TB.
pub const DGX_H100_HOST_MEMORY_BYTES: u64 = 2 << 40;
/// System memory of an 8 × RTX 4090 server (assumed): 512 GiB.
pub const PCIE_4090_HOST_MEMORY_BYTES: u64 = 512 * GIB;

/// The host side of a node, for optimizer offload (ZeRO-Offload: the CPU updates the optimizer
/// partitions of every device of its node; see [`crate::cost_model::offload_step_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HostSide {
    /// Devices sharing one host (its CPUs and memory).
    pub devices_per_host: usize,
    /// Device ↔ host bandwidth per device when all devices of the host transfer at once,
    /// bytes/s (one direction).
    pub link_bytes_per_s: f64,
    /// Host memory bandwidth a streaming CPU optimizer sustains, bytes/s for the whole host.
    pub memory_bandwidth_bytes_per_s: f64,
    /// Host memory, bytes: what the devices of the host may offload together.
    pub memory_bytes: u64,
}

impl Default for HostSide {
    /// A DGX A100 node.
    fn default() -> Self {
        HostSide {
            devices_per_host: 8,
            link_bytes_per_s: DGX_A100_HOST_LINK_BYTES_PER_S,
            memory_bandwidth_bytes_per_s: DGX_A100_HOST_MEMORY_BYTES_PER_S,
            memory_bytes: DGX_A100_HOST_MEMORY_BYTES,
        }
    }
}

/// One axis of the mesh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshAxis {
    /// Name shown in plans, e.g. `node` or `gpu`.
    pub name: String,
    /// Number of devices along the axis.
    pub size: usize,
    /// Per-device bandwidth of one link of this axis, bytes/s (one direction).
    pub bandwidth_bytes_per_s: f64,
    /// Latency of one step of a ring collective over this axis, seconds.
    pub latency_s: f64,
}

/// A device mesh of 1–3 axes with per-device memory and compute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceMesh {
    /// Preset or user-given name.
    pub name: String,
    /// Axes, outermost first (e.g. `[node, gpu]`).
    pub axes: Vec<MeshAxis>,
    /// Memory of one device, bytes.
    pub device_memory_bytes: u64,
    /// Peak FLOP/s of one device for the training precision.
    pub peak_flops: f64,
    /// Fraction of `peak_flops` that large matrix multiplications reach, in (0, 1].
    pub efficiency: f64,
    /// A GEMM of `f` FLOPs runs at `efficiency · f / (f + gemm_half_flops)` of peak: the FLOPs
    /// at which a GEMM reaches half of the large-GEMM rate (launch, tile and wave quantisation
    /// costs; see [`crate::cost_model`]). 0 disables the size dependence.
    #[serde(default)]
    pub gemm_half_flops: f64,
    /// Sustained memory bandwidth of one device for memory-bound (element-wise) operators,
    /// bytes/s. Default [`A100_HBM_BYTES_PER_S`].
    #[serde(default = "default_hbm")]
    pub memory_bandwidth_bytes_per_s: f64,
    /// The engine overlaps data-parallel gradient reduction (and ZeRO's per-micro-batch
    /// collectives) with computation, as Megatron-LM's `--overlap-grad-reduce`, DeepSpeed's
    /// `overlap_comm` and PyTorch DDP/FSDP do; only the part longer than the computation it
    /// overlaps costs time. Default true.
    #[serde(default = "default_true")]
    pub overlap_grad_reduce: bool,
    /// The host side of a node (optimizer offload). Default a DGX A100 node.
    #[serde(default)]
    pub host: HostSide,
}

fn default_true() -> bool {
    true
}

fn default_hbm() -> f64 {
    A100_HBM_BYTES_PER_S
}

/// Names of the built-in mesh presets.
pub const PRESETS: [&str; 3] = ["dgx-a100-80g", "dgx-h100", "pcie-4090"];

impl DeviceMesh {
    /// A preset with `nodes` nodes: `dgx-a100-80g`, `dgx-h100` (8 GPUs per node) or
    /// `pcie-4090` (8 GPUs per node on PCIe, 100 GbE between nodes).
    ///
    /// A single node gives a 1-axis mesh; more nodes give `[node, gpu]`.
    pub fn preset(name: &str, nodes: usize) -> Result<Self> {
        let (node_bw, node_lat, gpu_bw, gpu_lat, mem, flops, half, hbm, host) = match name {
            "dgx-a100-80g" => (
                DGX_A100_IB_BYTES_PER_S / 8.0,
                IB_LATENCY_S,
                A100_NVLINK_BYTES_PER_S,
                NVLINK_LATENCY_S,
                80 * GIB,
                A100_PEAK_FLOPS,
                A100_GEMM_HALF_FLOPS,
                A100_HBM_BYTES_PER_S,
                HostSide {
                    devices_per_host: 8,
                    link_bytes_per_s: DGX_A100_HOST_LINK_BYTES_PER_S,
                    memory_bandwidth_bytes_per_s: DGX_A100_HOST_MEMORY_BYTES_PER_S,
                    memory_bytes: DGX_A100_HOST_MEMORY_BYTES,
                },
            ),
            "dgx-h100" => (
                DGX_H100_IB_BYTES_PER_S / 8.0,
                IB_LATENCY_S,
                H100_NVLINK_BYTES_PER_S,
                NVLINK_LATENCY_S,
                80 * GIB,
                H100_PEAK_FLOPS,
                H100_GEMM_HALF_FLOPS,
                H100_HBM_BYTES_PER_S,
                HostSide {
                    devices_per_host: 8,
                    link_bytes_per_s: DGX_H100_HOST_LINK_BYTES_PER_S,
                    memory_bandwidth_bytes_per_s: DGX_H100_HOST_MEMORY_BYTES_PER_S,
                    memory_bytes: DGX_H100_HOST_MEMORY_BYTES,
                },
            ),
            "pcie-4090" => (
                ETH_100G_BYTES_PER_S / 8.0,
                ETH_LATENCY_S,
                PCIE4_BYTES_PER_S,
                PCIE_LATENCY_S,
                24 * GIB,
                RTX4090_PEAK_FLOPS,
                RTX4090_GEMM_HALF_FLOPS,
                RTX4090_HBM_BYTES_PER_S,
                HostSide {
                    devices_per_host: 8,
                    link_bytes_per_s: PCIE_4090_HOST_LINK_BYTES_PER_S,
                    memory_bandwidth_bytes_per_s: PCIE_4090_HOST_MEMORY_BYTES_PER_S,
                    memory_bytes: PCIE_4090_HOST_MEMORY_BYTES,
                },
            ),
            other => {
                return Err(PlanError::UnknownMesh {
                    name: other.to_string(),
                    known: PRESETS.join(", "),
                })
            }
        };
        if nodes == 0 {
            return Err(PlanError::InvalidInput(
                "a mesh needs at least one node".into(),
            ));
        }
        let gpu = MeshAxis {
            name: "gpu".into(),
            size: 8,
            bandwidth_bytes_per_s: gpu_bw,
            latency_s: gpu_lat,
        };
        let mut axes = Vec::new();
        if nodes > 1 {
            // Per-GPU share of the node's network: a ring over nodes carries 8 concurrent rings
            // (one per GPU rail), each with 1/8 of the node bandwidth.
            axes.push(MeshAxis {
                name: "node".into(),
                size: nodes,
                bandwidth_bytes_per_s: node_bw,
                latency_s: node_lat,
            });
        }
        axes.push(gpu);
        let mesh = DeviceMesh {
            name: name.to_string(),
            axes,
            device_memory_bytes: mem,
            peak_flops: flops,
            efficiency: DEFAULT_EFFICIENCY,
            gemm_half_flops: half,
            memory_bandwidth_bytes_per_s: hbm,
            overlap_grad_reduce: true,
            host,
        };
        mesh.validate()?;
        Ok(mesh)
    }

    /// Parses a custom mesh from JSON (the serde form of [`DeviceMesh`]) and validates it.
    pub fn from_json(text: &str) -> Result<Self> {
        let mesh: DeviceMesh =
            serde_json::from_str(text).map_err(|e| PlanError::Json(e.to_string()))?;
        mesh.validate()?;
        Ok(mesh)
    }

    /// Checks 1–3 axes, positive sizes, bandwidths, memory, FLOP/s and efficiency in (0, 1].
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| {
            Err(PlanError::InvalidInput(format!(
                "mesh `{}`: {m}",
                self.name
            )))
        };
        if self.axes.is_empty() || self.axes.len() > 3 {
            return bad(format!("needs 1–3 axes, has {}", self.axes.len()));
        }
        let devices = self
            .axes
            .iter()
            .try_fold(1u64, |n, a| n.checked_mul(a.size as u64));
        if devices.is_none_or(|n| n > memory_model::MAX_DEVICES) {
            return bad(format!(
                "has more than {} devices, the most memory-model supports",
                memory_model::MAX_DEVICES
            ));
        }
        for a in &self.axes {
            if a.size == 0 {
                return bad(format!("axis `{}` has size 0", a.name));
            }
            if !(a.bandwidth_bytes_per_s > 0.0 && a.bandwidth_bytes_per_s.is_finite()) {
                return bad(format!("axis `{}` needs a positive bandwidth", a.name));
            }
            if !(a.latency_s >= 0.0 && a.latency_s.is_finite()) {
                return bad(format!("axis `{}` needs a non-negative latency", a.name));
            }
        }
        if self.device_memory_bytes == 0 {
            return bad("device memory must be positive".into());
        }
        if !(self.peak_flops > 0.0 && self.peak_flops.is_finite()) {
            return bad("peak FLOP/s must be positive".into());
        }
        if !(self.efficiency > 0.0 && self.efficiency <= 1.0) {
            return bad(format!("efficiency {} is not in (0, 1]", self.efficiency));
        }
        if !(self.memory_bandwidth_bytes_per_s > 0.0
            && self.memory_bandwidth_bytes_per_s.is_finite())
        {
            return bad("memory bandwidth must be positive".into());
        }
        if !(self.gemm_half_flops >= 0.0 && self.gemm_half_flops.is_finite()) {
            return bad("gemm_half_flops must be finite and ≥ 0".into());
        }
        let host = &self.host;
        if host.devices_per_host == 0
            || host.memory_bytes == 0
            || !(host.link_bytes_per_s > 0.0 && host.link_bytes_per_s.is_finite())
            || !(host.memory_bandwidth_bytes_per_s > 0.0
                && host.memory_bandwidth_bytes_per_s.is_finite())
        {
            return bad(
                "host: devices_per_host, memory_bytes and both bandwidths must be positive".into(),
            );
        }
        Ok(())
    }

    /// Total number of devices.
    pub fn num_devices(&self) -> usize {
        self.axes.iter().map(|a| a.size).product()
    }

    /// Sustained FLOP/s of one device (`peak_flops × efficiency`).
    pub fn sustained_flops(&self) -> f64 {
        self.peak_flops * self.efficiency
    }

    /// The same devices seen as a 1-axis mesh (a ring over all of them runs at the slowest
    /// link's bandwidth and the largest latency).
    pub fn flattened(&self) -> Self {
        let slowest = self
            .axes
            .iter()
            .min_by(|a, b| a.bandwidth_bytes_per_s.total_cmp(&b.bandwidth_bytes_per_s))
            .expect("validated mesh has an axis");
        let latency = self.axes.iter().map(|a| a.latency_s).fold(0.0, f64::max);
        DeviceMesh {
            axes: vec![MeshAxis {
                name: self
                    .axes
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join("*"),
                size: self.num_devices(),
                bandwidth_bytes_per_s: slowest.bandwidth_bytes_per_s,
                latency_s: latency,
            }],
            ..self.clone()
        }
    }

    /// A sub-mesh for one pipeline stage: `nodes_per_stage` nodes of this mesh (or, when one
    /// node is split over stages, `gpus_per_stage` GPUs of its innermost axis).
    pub fn stage_mesh(&self, devices: usize) -> Result<Self> {
        let inner = self.axes.last().expect("validated mesh has an axis");
        if devices == 0 || !self.num_devices().is_multiple_of(devices) {
            return Err(PlanError::InvalidInput(format!(
                "a stage of {devices} devices does not divide the {}-device mesh",
                self.num_devices()
            )));
        }
        let mut mesh = self.clone();
        if devices <= inner.size {
            if !inner.size.is_multiple_of(devices) {
                return Err(PlanError::InvalidInput(format!(
                    "a stage of {devices} devices does not divide an axis of {}",
                    inner.size
                )));
            }
            mesh.axes = vec![MeshAxis {
                size: devices,
                ..inner.clone()
            }];
        } else {
            let outer = devices / inner.size;
            mesh.axes = vec![
                MeshAxis {
                    size: outer,
                    ..self.axes[0].clone()
                },
                inner.clone(),
            ];
        }
        Ok(mesh)
    }

    /// Splits a 1-axis mesh into two axes `a × b` of the same link (e.g. 8 GPUs as 2 × 4), so
    /// that two operator dimensions can be split at once inside a node.
    pub fn factorized(&self, outer: usize) -> Option<Self> {
        if self.axes.len() != 1 {
            return None;
        }
        let a = &self.axes[0];
        if outer <= 1 || outer >= a.size || !a.size.is_multiple_of(outer) {
            return None;
        }
        let mut mesh = self.clone();
        mesh.axes = vec![
            MeshAxis {
                name: format!("{}0", a.name),
                size: outer,
                ..a.clone()
            },
            MeshAxis {
                name: format!("{}1", a.name),
                size: a.size / outer,
                ..a.clone()
            },
        ];
        Some(mesh)
    }

    /// The same devices with the innermost axis split into `size / inner` × `inner` devices of
    /// the same link, other axes kept (e.g. `node:2×gpu:8` as `node:2×gpu0:2×gpu1:4`), so that a
    /// group of `inner` neighbours can be addressed alone. `None` when `inner` does not divide
    /// the innermost axis properly or the mesh would exceed 3 axes.
    pub fn split_innermost(&self, inner: usize) -> Option<Self> {
        let last = self.axes.last()?;
        if inner <= 1
            || inner >= last.size
            || !last.size.is_multiple_of(inner)
            || self.axes.len() >= 3
        {
            return None;
        }
        let mut mesh = self.clone();
        let last = mesh.axes.pop()?;
        mesh.axes.push(MeshAxis {
            name: format!("{}0", last.name),
            size: last.size / inner,
            ..last.clone()
        });
        mesh.axes.push(MeshAxis {
            name: format!("{}1", last.name),
            size: inner,
            ..last
        });
        Some(mesh)
    }

    /// A short description, axis `name:size`, e.g. `node:2×gpu:8`, or `gpu0:2×gpu1:4` for 8
    /// GPUs of one node [factorized](Self::factorized) as 2 × 4.
    pub fn shape_string(&self) -> String {
        self.axes
            .iter()
            .map(|a| format!("{}:{}", a.name, a.size))
            .collect::<Vec<_>>()
            .join("×")
    }
}
