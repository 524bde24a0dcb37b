//! The alpha-beta cost model: time of compute and of collectives on mesh axes.
//!
//! # Assumptions
//! - A collective over a set of mesh axes runs as a ring over the devices of those axes; its
//!   bandwidth is that of the slowest axis involved and each ring step pays the largest
//!   latency involved (α). This is the textbook ring model (Thakur, Rabenseifner & Gropp 2005):
//!   all-reduce `2(p−1)α + 2(p−1)/p · n/β`, all-gather and reduce-scatter `(p−1)α + (p−1)/p · n/β`,
//!   all-to-all `(p−1)α + (p−1)/p · n/β` (each device sends `(p−1)/p` of its data), where `n` is
//!   the size of the whole (unsharded over those axes) buffer.
//! - A matrix multiplication of `f` FLOPs on one device takes `(f + f½) / (peak × e)`: it runs
//!   at `e · f / (f + f½)` of peak, reaching `e` ([`DeviceMesh::efficiency`], 0.70 by default,
//!   fitted to Narayanan et al. SC'21 Table 1: see [`crate::narayanan`]) for large GEMMs and half of it at `f½` ([`DeviceMesh::gemm_half_flops`]: a fixed
//!   cost per GEMM for launch, tile and wave quantisation). Small micro-batches and narrow
//!   tensor-parallel shards therefore cost time, as they do on GPUs. Element-wise operators are
//!   memory-bound and charged their bytes read and written at the device's sustained
//!   memory bandwidth ([`DeviceMesh::memory_bandwidth_bytes_per_s`]).
//! - Tensor- and sequence-parallel collectives (resharding between operators) do not overlap
//!   computation; the backward pass repeats each forward resharding once (its conjugate), and
//!   once more the forward resharding of every operator whose forward reruns (recomputation).
//! - Optimizer offload adds [`offload_step_time`] to a stage (host link and CPU optimizer).
//! - Data-parallel gradient synchronisation and ZeRO's per-micro-batch collectives overlap the
//!   operator's own computation when [`DeviceMesh::overlap_grad_reduce`] is set (bucketed
//!   reduction during the backward pass, prefetched ZeRO-3 gathers): an operator is charged only
//!   the part of its collective longer than its backward pass (once-per-step synchronisation)
//!   or than its whole forward and backward pass (per-micro-batch collectives). Without it,
//!   every collective is exposed.
//! - Pipeline point-to-point transfers are not charged (they overlap computation in 1F1B).
//! - The backward pass costs [`BACKWARD_FLOP_FACTOR`] times the forward FLOPs.

use crate::mesh::DeviceMesh;

/// Backward FLOPs per forward FLOP (weight and input gradients).
pub const BACKWARD_FLOP_FACTOR: f64 = 2.0;

/// A collective communication pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    /// Sum and replicate.
    AllReduce,
    /// Concatenate shards on every device.
    AllGather,
    /// Sum, then keep one shard per device.
    ReduceScatter,
    /// Exchange shards (re-split along another dimension).
    AllToAll,
}

impl Collective {
    /// Short name used in plans.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllToAll => "all-to-all",
        }
    }
}

/// Bit mask of mesh axes (bit `k` = axis `k`).
pub type AxisMask = u8;

/// Number of devices in the group spanned by `axes`.
pub fn group_size(mesh: &DeviceMesh, axes: AxisMask) -> usize {
    mesh.axes
        .iter()
        .enumerate()
        .filter(|(k, _)| axes & (1 << k) != 0)
        .map(|(_, a)| a.size)
        .product()
}

/// Time of `collective` over the devices of `axes` on a buffer of `bytes` (the full,
/// unsharded-over-`axes` size), seconds. Zero for an empty or 1-device group.
pub fn collective_time(
    mesh: &DeviceMesh,
    collective: Collective,
    axes: AxisMask,
    bytes: f64,
) -> f64 {
    let p = group_size(mesh, axes);
    if p <= 1 || bytes <= 0.0 {
        return 0.0;
    }
    let mut bandwidth = f64::INFINITY;
    let mut latency: f64 = 0.0;
    for (k, a) in mesh.axes.iter().enumerate() {
        if axes & (1 << k) != 0 && a.size > 1 {
            bandwidth = bandwidth.min(a.bandwidth_bytes_per_s);
            latency = latency.max(a.latency_s);
        }
    }
    let steps = (p - 1) as f64;
    let fraction = steps / p as f64;
    let one_pass = steps * latency + fraction * bytes / bandwidth;
    match collective {
        Collective::AllReduce => 2.0 * one_pass,
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => one_pass,
    }
}

/// Time of one matrix multiplication of `flops` floating-point operations on one device,
/// seconds: `(flops + gemm_half_flops) / (peak × efficiency)`; 0 for no FLOPs.
pub fn compute_time(mesh: &DeviceMesh, flops: f64) -> f64 {
    if flops <= 0.0 {
        return 0.0;
    }
    (flops + mesh.gemm_half_flops) / mesh.sustained_flops()
}

/// The part of a collective of `comm` seconds that computation of `window` seconds does not
/// hide: all of it unless the mesh overlaps gradient reduction.
pub fn exposed(mesh: &DeviceMesh, comm: f64, window: f64) -> f64 {
    if mesh.overlap_grad_reduce {
        (comm - window).max(0.0)
    } else {
        comm
    }
}

/// One device's optimizer partition kept on the host (ZeRO-Offload), for
/// [`offload_step_time`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OffloadedPartition {
    /// Parameters in the device's optimizer partition.
    pub elements: u64,
    /// Host bytes of its fp32 gradients.
    pub gradient_bytes: u64,
    /// Host bytes of its optimizer states (fp32 master weights and moments).
    pub state_bytes: u64,
    /// Bytes per element of the gradients the device sends (its gradient precision).
    pub sent_gradient_element_bytes: u64,
    /// Bytes per element of the parameters the host sends back (the parameter precision).
    pub parameter_element_bytes: u64,
}

/// Time optimizer offload adds to a step on one device, seconds (ZeRO-Offload, Ren et al.
/// 2021, as DeepSpeed's ZeRO stage 2 runs it: `deepspeed/runtime/zero/stage_1_and_2.py`, no
/// delayed parameter update).
///
/// - Gradients to the host: each of the `m − 1` accumulating micro-batches sends the device's
///   partition in its gradient precision, the last one in fp32
///   (`async_inplace_copy_grad_to_fp32_buffer_from_gpu`); with
///   [`DeviceMesh::overlap_grad_reduce`] (`overlap_comm`) that overlaps the backward passes of
///   `backward_s` seconds, and only the excess counts.
/// - After the last backward pass the host's CPU optimizer updates the partitions of all
///   devices of its node ([`crate::mesh::HostSide::devices_per_host`], at most the mesh's
///   devices) at its streaming memory bandwidth: it reads the fp32 gradients and states and
///   writes the states, then converts the fp32 master weights to the parameter precision in a
///   second pass (read 4, write the parameter bytes).
/// - Then the parameters go back to the device, after the update (DeepSpeed's fused copy is
///   disabled), so the three parts add up.
pub fn offload_step_time(
    mesh: &DeviceMesh,
    part: &OffloadedPartition,
    micro_batches: u64,
    backward_s: f64,
) -> f64 {
    if part.elements == 0 {
        return 0.0;
    }
    let host = &mesh.host;
    let per_host = host.devices_per_host.min(mesh.num_devices()) as u64;
    let sent_bytes =
        (micro_batches.saturating_sub(1) * part.sent_gradient_element_bytes + 4) * part.elements;
    let sent = sent_bytes as f64 / host.link_bytes_per_s;
    let cpu_bytes = part.gradient_bytes
        + 2 * part.state_bytes
        + part.elements * (4 + part.parameter_element_bytes);
    let update = (per_host * cpu_bytes) as f64 / host.memory_bandwidth_bytes_per_s;
    let back = (part.elements * part.parameter_element_bytes) as f64 / host.link_bytes_per_s;
    update + back + exposed(mesh, sent, backward_s)
}

/// Time to stream `bytes` through device memory once (read or write), seconds.
pub fn memory_bound_time(mesh: &DeviceMesh, bytes: f64) -> f64 {
    bytes / mesh.memory_bandwidth_bytes_per_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_all_reduce_is_twice_reduce_scatter() {
        let mesh = DeviceMesh::preset("dgx-a100-80g", 2).unwrap();
        let ar = collective_time(&mesh, Collective::AllReduce, 0b10, 1e9);
        let rs = collective_time(&mesh, Collective::ReduceScatter, 0b10, 1e9);
        assert!((ar - 2.0 * rs).abs() < 1e-12);
        // 8 GPUs on NVLink at 230 GB/s: 7/8 GB / 230 GB/s + 7 × 5 µs.
        assert!((rs - (7.0 / 8.0 / 230.0 + 7.0 * 5e-6)).abs() < 1e-9);
        assert_eq!(collective_time(&mesh, Collective::AllGather, 0, 1e9), 0.0);
        // Over both axes the slow inter-node link dominates.
        assert!(collective_time(&mesh, Collective::AllGather, 0b11, 1e9) > 10.0 * rs);
    }

    #[test]
    fn gemm_rate_reaches_half_at_the_half_flops_and_efficiency_when_large() {
        let mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
        let rate = |f: f64| f / compute_time(&mesh, f) / mesh.sustained_flops();
        assert!((rate(mesh.gemm_half_flops) - 0.5).abs() < 1e-12);
        assert!(rate(1e15) > 0.999);
        assert!(rate(1e8) < 0.1);
        assert_eq!(compute_time(&mesh, 0.0), 0.0);
    }

    #[test]
    fn offload_pays_the_host_update_and_the_unhidden_gradient_traffic() {
        let mut mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
        // 100 M parameters per device, mixed-precision Adam: 4 B fp32 gradient + 12 B states on
        // the host; the CPU streams 4 + 2·12 + (4 + 2) = 34 B per parameter for 8 devices, and
        // 2 B per parameter go back.
        let part = OffloadedPartition {
            elements: 100_000_000,
            gradient_bytes: 400_000_000,
            state_bytes: 1_200_000_000,
            sent_gradient_element_bytes: 2,
            parameter_element_bytes: 2,
        };
        let update = 8.0 * 34e8 / mesh.host.memory_bandwidth_bytes_per_s;
        let back = 2e8 / mesh.host.link_bytes_per_s;
        // 4 micro-batches: three 16-bit sends and one fp32.
        let sent = (3.0 * 2e8 + 4e8) / mesh.host.link_bytes_per_s;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b;
        assert!(close(
            offload_step_time(&mesh, &part, 4, 1e3),
            update + back
        ));
        assert!(close(
            offload_step_time(&mesh, &part, 4, 0.0),
            update + back + sent
        ));
        mesh.overlap_grad_reduce = false;
        assert!(close(
            offload_step_time(&mesh, &part, 4, 1e3),
            update + back + sent
        ));
        // A host shared by fewer devices than a node updates fewer partitions.
        let small = DeviceMesh::preset("dgx-a100-80g", 1)
            .unwrap()
            .stage_mesh(2)
            .unwrap();
        let update2 = 2.0 * 34e8 / small.host.memory_bandwidth_bytes_per_s;
        assert!(close(
            offload_step_time(&small, &part, 1, 1e3),
            update2 + back
        ));
        assert_eq!(
            offload_step_time(&mesh, &OffloadedPartition::default(), 4, 0.0),
            0.0
        );
    }

    #[test]
    fn only_the_collective_longer_than_its_window_is_exposed() {
        let mut mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
        assert_eq!(exposed(&mesh, 3.0, 2.0), 1.0);
        assert_eq!(exposed(&mesh, 1.0, 2.0), 0.0);
        mesh.overlap_grad_reduce = false;
        assert_eq!(exposed(&mesh, 1.0, 2.0), 1.0);
    }
}
