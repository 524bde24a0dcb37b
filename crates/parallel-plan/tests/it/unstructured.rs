//! `parallel_plan::unstructured`: the API's typed errors, the mesh file format, the
//! applications, and every backend against the sequential reference.

mod apps;
#[cfg(feature = "distributed")]
mod distributed;
mod errors;
mod grid;
#[cfg(feature = "mpi")]
mod mpi;
mod random;

/// Largest difference relative to the largest magnitude: `max |a - b| / max |b|` (the
/// ∞-norm relative difference; component-wise ratios are meaningless for components that are
/// zero up to rounding, such as the cross-flow momentum of a uniform flow).
pub(crate) fn rel_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-300);
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
        / scale
}
