//! # bench-timing
//!
//! The one place of the workspace's summary statistics for measurements: the median of samples
//! (the upper one of an even count, so that it is always a measured sample), quantiles of sorted
//! samples, the order statistics bounding a 95 % confidence interval of the median, and the
//! median wall time of repeated calls. The comparison examples of the kernel crates, the
//! `collectives-bench` measurement crate and the ml-models timing example use it; it has no
//! dependencies and is not published (library crates take it as a path-only dev-dependency, so
//! `cargo package` drops it).
//!
//! ```
//! use bench_timing::{median, median_ci, quantile};
//!
//! assert_eq!(median(vec![3.0, 1.0, 2.0, 4.0]), 3.0);
//! assert!(median(Vec::new()).is_nan());
//! let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
//! assert_eq!(quantile(&sorted, 0.25), 2.0);
//! assert_eq!(median_ci(100), (40, 60));
//! let secs = bench_timing::median_secs(3, || std::hint::black_box(()));
//! assert!(secs >= 0.0);
//! ```

use std::time::Instant;

/// Median of `v` (the upper one of an even count); NaN when `v` is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Quantile `q` (0 to 1) of the sorted samples `v`: the sample at rank `round((len − 1) q)`;
/// NaN when `v` is empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
    v[i.min(v.len() - 1)]
}

/// Indices into `len` sorted samples bounding an approximate 95 % confidence interval of the
/// median (order statistics, normal approximation of the binomial: `len/2 ± 0.98 √len`).
pub fn median_ci(len: usize) -> (usize, usize) {
    let half = 0.98 * (len as f64).sqrt();
    let mid = len as f64 / 2.0;
    let lo = (mid - half).floor().max(0.0) as usize;
    let hi = ((mid + half).ceil() as usize).min(len.saturating_sub(1));
    (lo, hi)
}

/// Median wall time in seconds of `reps` timed calls of `f` (at least one), after one untimed
/// warm-up call.
pub fn median_secs(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let times = (0..reps.max(1))
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    median(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_is_the_upper_middle_sample() {
        assert_eq!(median(vec![5.0]), 5.0);
        assert_eq!(median(vec![2.0, 1.0]), 2.0);
        assert_eq!(median(vec![9.0, 1.0, 5.0]), 5.0);
        assert_eq!(median(vec![f64::INFINITY, 0.0, -1.0, 3.0]), 3.0);
    }

    #[test]
    fn quantiles_pick_samples_and_clamp() {
        let v = [1.0, 2.0, 3.0];
        assert_eq!(quantile(&v, 0.0), 1.0);
        assert_eq!(quantile(&v, 0.5), 2.0);
        assert_eq!(quantile(&v, 1.0), 3.0);
        assert_eq!(quantile(&v, 7.0), 3.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn median_interval_brackets_the_middle() {
        assert_eq!(median_ci(0), (0, 0));
        assert_eq!(median_ci(1), (0, 0));
        for len in 2..200 {
            let (lo, hi) = median_ci(len);
            assert!(
                lo <= len / 2 && len / 2 <= hi && hi < len,
                "{len}: {lo}..{hi}"
            );
        }
    }

    #[test]
    fn median_secs_calls_warmup_plus_reps() {
        let mut calls = 0;
        median_secs(4, || calls += 1);
        assert_eq!(calls, 5);
        let mut calls = 0;
        median_secs(0, || calls += 1);
        assert_eq!(calls, 2);
    }
}
