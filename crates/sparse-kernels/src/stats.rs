//! Row-length statistics: the profile that picks the kernel and the LSSM block size.

use crate::{CsrMatrix, SpIndex};

/// Coefficient of variation below which a matrix counts as regular.
pub const REGULAR_CV: f64 = 0.5;
/// Ratio `max / mean` of row lengths above which a matrix counts as having dense (arrow) rows.
pub const DENSE_ROW_RATIO: f64 = 100.0;

/// Distribution of the number of nonzeros per row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowStats {
    /// Number of rows.
    pub rows: usize,
    /// Number of stored entries.
    pub nnz: usize,
    /// Mean entries per row.
    pub mean: f64,
    /// Standard deviation divided by the mean (0 for empty matrices).
    pub cv: f64,
    /// Longest row.
    pub max: usize,
    /// Shortest row.
    pub min: usize,
    /// Rows without entries.
    pub empty_rows: usize,
}

/// The shape class of a matrix, from its row-length profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixClass {
    /// Row lengths nearly equal (`cv < REGULAR_CV`): stencils, banded, uniform random.
    Regular,
    /// A few rows far longer than the mean (`max > DENSE_ROW_RATIO · mean`) and otherwise
    /// short rows: arrow matrices.
    DenseRows,
    /// Skewed, heavy-tailed row lengths: R-MAT / Kronecker graphs, pruned weights.
    Irregular,
}

impl std::fmt::Display for MatrixClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Regular => "regular",
            Self::DenseRows => "dense-rows",
            Self::Irregular => "irregular",
        })
    }
}

impl RowStats {
    /// Profiles the rows of `a` in one pass.
    pub fn of<T, I: SpIndex>(a: &CsrMatrix<T, I>) -> Self
    where
        T: crate::Scalar,
    {
        let rows = a.nrows();
        let nnz = a.nnz();
        if rows == 0 {
            return Self {
                rows,
                nnz,
                mean: 0.0,
                cv: 0.0,
                max: 0,
                min: 0,
                empty_rows: 0,
            };
        }
        let (mut max, mut min, mut empty_rows, mut sq) = (0usize, usize::MAX, 0usize, 0.0f64);
        let mean = nnz as f64 / rows as f64;
        for w in a.offsets().windows(2) {
            let len = w[1].idx() - w[0].idx();
            max = max.max(len);
            min = min.min(len);
            empty_rows += usize::from(len == 0);
            sq += (len as f64 - mean).powi(2);
        }
        let sd = (sq / rows as f64).sqrt();
        let cv = if mean > 0.0 { sd / mean } else { 0.0 };
        Self {
            rows,
            nnz,
            mean,
            cv,
            max,
            min,
            empty_rows,
        }
    }

    /// The class of the matrix: regular, dense rows (arrow), or irregular (power law).
    pub fn class(&self) -> MatrixClass {
        if self.mean > 0.0 && self.max as f64 > DENSE_ROW_RATIO * self.mean.max(1.0) {
            MatrixClass::DenseRows
        } else if self.cv < REGULAR_CV {
            MatrixClass::Regular
        } else {
            MatrixClass::Irregular
        }
    }
}

/// At most `most` rows of `0..rows`, one in each stride of `⌈rows / most⌉` rows, at a
/// different offset in each (a fixed hash of the stride's number), so that a sample of a matrix
/// with a period (the grid lines of a stencil: 64 rows, and a stride of 64 rows) is not always
/// the same point of the period. Deterministic; every row when `rows <= most`.
pub(crate) fn sampled_rows(rows: usize, most: usize) -> impl Iterator<Item = usize> {
    let step = rows.div_ceil(most.max(1)).max(1);
    (0..rows.div_ceil(step)).filter_map(move |i| {
        let jitter = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        let r = i * step + (jitter as usize) % step;
        (r < rows).then_some(r)
    })
}

#[cfg(test)]
mod sample_tests {
    use super::sampled_rows;

    #[test]
    fn samples_cover_small_matrices_and_every_offset_of_a_period() {
        assert_eq!(
            sampled_rows(10, 4096).collect::<Vec<_>>(),
            (0..10).collect::<Vec<_>>()
        );
        let rows: Vec<usize> = sampled_rows(262_144, 4096).collect();
        assert_eq!(rows.len(), 4096);
        assert!(
            rows.windows(2).all(|w| w[0] / 64 < w[1] / 64),
            "one per stride"
        );
        let offsets: std::collections::BTreeSet<usize> = rows.iter().map(|r| r % 64).collect();
        assert!(
            offsets.len() > 48,
            "{} offsets in the period",
            offsets.len()
        );
        assert_eq!(sampled_rows(0, 4096).count(), 0);
        assert!(sampled_rows(8191, 4096).count() <= 4096);
    }
}
