//! Band sweeps for grid-like matrices: the task order of a plan whose rows read the rows of B
//! of their own "plane", the plane before and the plane after (3D stencils and meshes numbered
//! plane by plane, 2D ones numbered line by line).
//!
//! Row `i` of such a matrix reads the rows of B near `i − P`, `i` and `i + P` for a period `P`
//! (the plane, `N²` on an `N × N × N` grid). In row order a worker reads each row of B three
//! times, a plane apart: the reuse survives only if three planes of B stay in its caches. A
//! *sweep* cuts every plane into bands of `W` consecutive rows and runs band `s` of plane 0,
//! then band `s` of plane 1, and so on: the rows of B one step needs are three pieces of
//! `W + 2h` rows (`h` the reach within a plane), and two of them were read by the step before,
//! so the working set is `3 (W + 2h)` rows instead of three planes. Each row is still computed
//! by one task, so the order does not change the result.

use super::task::Task;
use crate::stats::sampled_rows;
use crate::{CsrMatrix, Scalar, SpIndex};
use std::ops::Range;

/// The stride of a grid-like matrix: every sampled nonzero's column lies within `reach` of its
/// row, or of its row plus or minus `period`; and within the reach, the same structure one
/// level down with period `line` (the grid lines of a 3D grid's planes; 1 when there is none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stride {
    pub(crate) period: usize,
    pub(crate) reach: usize,
    pub(crate) line: usize,
}

/// The stride of `a`, if it has one (square, and the sampled rows' offsets `|column − row|`
/// fall into tight clusters around 0 and `P`, with `P` at least 4× their reach); from up to
/// 4096 rows spread over the matrix (`sampled_rows`).
pub(crate) fn grid_stride<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>) -> Option<Stride> {
    let n = a.nrows();
    if n != a.ncols() || n < 3 {
        return None;
    }
    let rows: Vec<usize> = sampled_rows(n, 4096).collect();
    let (period, reach) = clusters(a, &rows, u64::MAX)?;
    let line = clusters(a, &rows, reach as u64).map_or(1, |(line, _)| line);
    Some(Stride {
        period,
        reach,
        line,
    })
}

/// The period and reach of the offsets `|column − row|` up to `limit` of the rows `rows`: the
/// far edge `f` of a typical row (the median over rows of its widest offset), the offsets up
/// to `f / 2` (the centre cluster) and those above (the outer one, centred on the period);
/// `None` unless the period is at least 4× the reach of both clusters.
fn clusters<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    rows: &[usize],
    limit: u64,
) -> Option<(usize, usize)> {
    let offsets = |i: usize| {
        a.row(i)
            .0
            .iter()
            .map(move |c| c.idx().abs_diff(i) as u64)
            .filter(move |&d| d <= limit)
    };
    let mut widest: Vec<u64> = rows.iter().filter_map(|&i| offsets(i).max()).collect();
    if widest.is_empty() {
        return None;
    }
    let mid = widest.len() / 2;
    let half = *widest.select_nth_unstable(mid).1 / 2;
    let (mut centre, mut lo, mut hi) = (0u64, u64::MAX, 0u64);
    for d in rows.iter().flat_map(|&i| offsets(i)) {
        if d <= half {
            centre = centre.max(d);
        } else {
            lo = lo.min(d);
            hi = hi.max(d);
        }
    }
    if lo > hi {
        return None;
    }
    let period = lo + (hi - lo) / 2;
    let reach = centre.max(hi - period);
    (period >= 4 * reach.max(1)).then_some((period as usize, reach as usize))
}

/// Rows per band of a sweep for a matrix of `rows` rows with stride `stride`, rows of B of
/// `row_bytes`, and `cache` bytes to keep a step's rows of B in: the widest `W` with
/// `3 (W + 2 reach)` rows in the cache, at most the period, rounded down to whole lines where
/// that leaves at least one (a band that cuts lines reads more of them: `stencil27:64` ran
/// 1.06× the natural order in bands of 552 rows, 1.11× in bands of 512); `None` where a sweep
/// would leave too few bands of planes for [`SWEEP_UNITS`] units of [`MIN_UNIT_PLANES`] planes
/// (load balance), or has nothing to gain: the natural order's window (two periods and the
/// reach on each side) already fits the cache, the matrix has fewer than three periods, or a
/// band would be narrower than the reach (the halo would dominate).
pub(crate) fn band_rows(
    rows: usize,
    stride: Stride,
    row_bytes: usize,
    cache: usize,
) -> Option<usize> {
    let Stride {
        period,
        reach,
        line,
    } = stride;
    let cache_rows = cache / row_bytes.max(1);
    let window = 2 * period + 2 * reach;
    if window <= cache_rows || rows < 3 * period {
        return None;
    }
    let width = (cache_rows / 3).checked_sub(2 * reach)?.min(period);
    let lines = width / line.max(1) * line.max(1);
    let width = if lines > 0 { lines } else { width };
    let steps = rows.div_ceil(period) * period.div_ceil(width.max(1));
    (width >= reach.max(1) && steps >= SWEEP_UNITS * MIN_UNIT_PLANES).then_some(width)
}

/// Units a sweep aims at, for load balance on any core count (the plan does not depend on it).
const SWEEP_UNITS: usize = 32;

/// Fewest planes per unit worth a sweep: a unit's first step reads the bands of the planes on
/// either side afresh.
const MIN_UNIT_PLANES: usize = 4;

/// The tasks and units of a sweep of `rows` rows with period `period` in bands of `width`
/// rows: task `(s, p)` is band `s` of plane `p` (rows `p · period + s · width ..` up to `width`
/// of them, within the plane); a unit is a run of consecutive planes of one band (about
/// [`SWEEP_UNITS`] units), and units go band by band. Every row is in exactly one task.
pub(crate) fn sweep_tasks(
    rows: usize,
    period: usize,
    width: usize,
) -> (Vec<Task>, Vec<Range<usize>>) {
    let (period, width) = (period.max(1), width.clamp(1, period.max(1)));
    let planes = rows.div_ceil(period);
    let bands = period.div_ceil(width);
    let per_unit = (planes * bands)
        .div_ceil(SWEEP_UNITS)
        .clamp(1, planes.max(1));
    let (mut tasks, mut units) = (Vec::new(), Vec::new());
    for band in 0..bands {
        for first in (0..planes).step_by(per_unit.max(1)) {
            let start = tasks.len();
            for plane in first..(first + per_unit).min(planes) {
                let lo = plane * period + band * width;
                let hi = (lo + width).min((plane + 1) * period).min(rows);
                if lo < hi {
                    tasks.push(Task::Rows(lo..hi));
                }
            }
            if tasks.len() > start {
                units.push(start..tasks.len());
            }
        }
    }
    (tasks, units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    #[test]
    fn a_stencil_has_the_stride_of_its_planes_and_a_band_has_none() {
        let s = grid_stride(&gen::stencil_3d_27pt::<f64, u32>(20)).unwrap();
        assert_eq!(
            s,
            Stride {
                period: 400,
                reach: 21,
                line: 20
            }
        );
        let s = grid_stride(&gen::stencil_2d_5pt::<f64, u32>(100, 40)).unwrap();
        assert_eq!(
            s,
            Stride {
                period: 100,
                reach: 1,
                line: 1
            }
        );
        assert_eq!(grid_stride(&gen::banded::<f64, u32>(5000, 13, 1)), None);
        assert_eq!(grid_stride(&gen::kronecker::<f64, u32>(12, 1)), None);
        assert_eq!(grid_stride(&gen::arrow::<f64, u32>(5000, 2, 1)), None);
    }

    #[test]
    fn bands_fit_the_cache_and_small_grids_are_not_swept() {
        let s = Stride {
            period: 4096,
            reach: 65,
            line: 64,
        };
        // 1 MiB of rows of 512 bytes: 2048 rows, 682 per piece, minus the halo: 552, eight
        // lines of 64.
        assert_eq!(band_rows(262_144, s, 512, 1 << 20), Some(512));
        assert_eq!(
            band_rows(262_144, Stride { line: 1, ..s }, 512, 1 << 20),
            Some(552)
        );
        // Three planes fit: nothing to gain.
        assert_eq!(band_rows(262_144, s, 512, 8 << 20), None);
        // Fewer than three planes.
        assert_eq!(band_rows(8000, s, 512, 1 << 20), None);
        // The halo alone fills the cache.
        assert_eq!(band_rows(262_144, s, 512, 128 << 10), None);
        // Three planes of two bands: too few steps to balance.
        let small = Stride {
            period: 1100,
            reach: 10,
            line: 1,
        };
        assert_eq!(band_rows(3300, small, 512, 1 << 20), None);
        assert_eq!(band_rows(3300 * 30, small, 512, 1 << 20), Some(662));
    }

    #[test]
    fn a_sweep_covers_every_row_once_band_by_band() {
        for (rows, period, width) in [(1000, 100, 30), (64_000, 1600, 400), (997, 50, 50)] {
            let (tasks, units) = sweep_tasks(rows, period, width);
            let mut seen = vec![0u8; rows];
            for t in &tasks {
                let Task::Rows(r) = t else {
                    panic!("rows only")
                };
                assert!(r.len() <= width && r.start / period == (r.end - 1) / period);
                r.clone().for_each(|i| seen[i] += 1);
            }
            assert!(seen.iter().all(|&s| s == 1), "{rows} {period} {width}");
            assert_eq!(units.first().map(|u| u.start), Some(0));
            assert!(units.windows(2).all(|w| w[0].end == w[1].start));
            assert_eq!(units.last().map(|u| u.end), Some(tasks.len()));
            // Within a unit the tasks step plane by plane in one band.
            for u in &units {
                for w in tasks[u.clone()].windows(2) {
                    let (Task::Rows(x), Task::Rows(y)) = (&w[0], &w[1]) else {
                        unreachable!()
                    };
                    assert_eq!(y.start - x.start, period);
                }
            }
        }
    }
}
