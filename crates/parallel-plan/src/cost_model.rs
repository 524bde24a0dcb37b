//! The alpha-beta cost model: time of compute and of collectives on mesh axes.
//!
//! # Assumptions
//! - A collective over a set of mesh axes runs as a ring over the devices of those axes; its
//!   bandwidth is that of the slowest axis involved and each ring step pays the largest
//!   latency involved (α). This is the textbook ring model (Thakur, Rabenseifner & Gropp 2005):
//!   all-reduce `2(p−1)α + 2(p−1)/p · n/β`, all-gather and reduce-scatter `(p−1)α + (p−1)/p · n/β`,
//!   all-to-all `(p−1)α + (p−1)/p · n/β` (each device sends `(p−1)/p` of its data), where `n` is
//!   the size of the whole (unsharded over those axes) buffer.
//! - Compute time is FLOPs divided by the sustained FLOP/s (`peak × efficiency`); element-wise
//!   operators are memory-bound and charged their bytes read and written at [`HBM_BYTES_PER_S`].
//! - Communication does not overlap computation (a conservative, order-independent model, as in
//!   Alpa's ILP); the backward pass repeats each forward resharding once (its conjugate).
//! - The backward pass costs [`BACKWARD_FLOP_FACTOR`] times the forward FLOPs.

use crate::mesh::DeviceMesh;

/// Backward FLOPs per forward FLOP (weight and input gradients).
pub const BACKWARD_FLOP_FACTOR: f64 = 2.0;
/// HBM bandwidth used for memory-bound (element-wise) operators, bytes/s (A100 80GB: 2.0 TB/s).
pub const HBM_BYTES_PER_S: f64 = 2.0e12;

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

/// Time of `flops` floating-point operations on one device, seconds.
pub fn compute_time(mesh: &DeviceMesh, flops: f64) -> f64 {
    flops / mesh.sustained_flops()
}

/// Time to stream `bytes` through HBM once (read or write), seconds.
pub fn memory_bound_time(bytes: f64) -> f64 {
    bytes / HBM_BYTES_PER_S
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
        // 8 GPUs on NVLink 300 GB/s: 7/8 GB / 300 GB/s + 7 × 5 µs.
        assert!((rs - (7.0 / 8.0 / 300.0 + 7.0 * 5e-6)).abs() < 1e-9);
        assert_eq!(collective_time(&mesh, Collective::AllGather, 0, 1e9), 0.0);
        // Over both axes the slow inter-node link dominates.
        assert!(collective_time(&mesh, Collective::AllGather, 0b11, 1e9) > 10.0 * rs);
    }
}
