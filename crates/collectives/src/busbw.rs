//! The nccl-tests bus-bandwidth definition
//! (<https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md>): a collective over
//! a buffer of `size` bytes that takes `time` has the algorithm bandwidth `algbw = size / time`
//! and the bus bandwidth `busbw = algbw × bus_factor(op, n)`, the rate at which every rank
//! moves data over its own link — comparable across world sizes and with the link's speed.

use crate::OpKind;

/// nccl-tests bus-bandwidth factor of `op` on `n` ranks: `2(n−1)/n` for all-reduce, `(n−1)/n`
/// for all-gather, reduce-scatter and all-to-all, 1 for the others (broadcast, reduce).
///
/// ```
/// use collectives::{bus_factor, OpKind};
///
/// assert_eq!(bus_factor(OpKind::AllReduce, 4), 1.5);
/// assert_eq!(bus_factor(OpKind::AllGather, 4), 0.75);
/// assert_eq!(bus_factor(OpKind::Broadcast, 4), 1.0);
/// ```
pub fn bus_factor(op: OpKind, n: usize) -> f64 {
    let n = n as f64;
    match op {
        OpKind::AllReduce => 2.0 * (n - 1.0) / n,
        OpKind::AllGather | OpKind::ReduceScatter | OpKind::AllToAll => (n - 1.0) / n,
        _ => 1.0,
    }
}
