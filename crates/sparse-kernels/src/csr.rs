//! Compressed sparse row matrices with validated construction and sprs interop.

use crate::error::{Result, SparseError};
use crate::scalar::{Scalar, SpIndex};

/// A sparse matrix in compressed sparse row (CSR) form.
///
/// Row `i` holds the entries `offsets[i]..offsets[i + 1]` of `indices` (column numbers) and
/// `values`. Construction checks that the offsets start at 0, never decrease and end at `nnz`,
/// and that every column index is in range. Columns within a row may be unsorted (duplicates are
/// allowed and simply add up in a product); whether they are sorted is detected once and
/// reported by [`CsrMatrix::has_sorted_columns`].
///
/// `I` is the index type of offsets and columns: `u32` (the default, half the index traffic
/// of `usize`) or `usize`.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrMatrix<T, I = u32> {
    nrows: usize,
    ncols: usize,
    offsets: Vec<I>,
    indices: Vec<I>,
    values: Vec<T>,
    sorted: bool,
}

fn to_index<I: SpIndex>(what: &'static str, value: usize) -> Result<I> {
    I::checked_from(value).ok_or(SparseError::IndexOverflow {
        what,
        value,
        index_type: I::NAME,
    })
}

impl<T: Scalar, I: SpIndex> CsrMatrix<T, I> {
    /// Builds a matrix from its three CSR arrays after validating them.
    ///
    /// # Errors
    /// [`SparseError::InvalidStructure`] when the lengths disagree or offsets are not monotone
    /// from 0 to `nnz`; [`SparseError::ColumnOutOfRange`] for a column `>= ncols`;
    /// [`SparseError::IndexOverflow`] when `ncols` or `nnz` do not fit in `I`.
    pub fn try_new(
        nrows: usize,
        ncols: usize,
        offsets: Vec<I>,
        indices: Vec<I>,
        values: Vec<T>,
    ) -> Result<Self> {
        to_index::<I>("ncols", ncols)?;
        to_index::<I>("nnz", indices.len())?;
        if offsets.len() != nrows + 1 {
            return Err(SparseError::InvalidStructure(format!(
                "{} row offsets for {nrows} rows (expected {})",
                offsets.len(),
                nrows + 1
            )));
        }
        if indices.len() != values.len() {
            return Err(SparseError::InvalidStructure(format!(
                "{} column indices but {} values",
                indices.len(),
                values.len()
            )));
        }
        if offsets[0].idx() != 0 || offsets[nrows].idx() != indices.len() {
            return Err(SparseError::InvalidStructure(format!(
                "offsets must run from 0 to nnz = {}, found {}..{}",
                indices.len(),
                offsets[0].idx(),
                offsets[nrows].idx()
            )));
        }
        let mut sorted = true;
        for row in 0..nrows {
            let (start, end) = (offsets[row].idx(), offsets[row + 1].idx());
            if end < start || end > indices.len() {
                return Err(SparseError::InvalidStructure(format!(
                    "row offsets of row {row} ({start}..{end}) are decreasing or beyond nnz = {}",
                    indices.len()
                )));
            }
            let cols = &indices[start..end];
            if let Some(&bad) = cols.iter().find(|c| c.idx() >= ncols) {
                return Err(SparseError::ColumnOutOfRange {
                    row,
                    col: bad.idx(),
                    ncols,
                });
            }
            sorted &= cols.windows(2).all(|w| w[0] < w[1]);
        }
        Ok(Self {
            nrows,
            ncols,
            offsets,
            indices,
            values,
            sorted,
        })
    }

    /// Builds a matrix from `(row, col, value)` triplets in any order; duplicates are summed and
    /// columns come out sorted.
    ///
    /// # Errors
    /// [`SparseError::InvalidInput`] for a row out of range, [`SparseError::ColumnOutOfRange`]
    /// for a column out of range, [`SparseError::IndexOverflow`] when sizes do not fit in `I`.
    pub fn from_triplets(
        nrows: usize,
        ncols: usize,
        triplets: &[(usize, usize, T)],
    ) -> Result<Self> {
        to_index::<I>("ncols", ncols)?;
        let mut counts = vec![0usize; nrows + 1];
        for &(r, c, _) in triplets {
            if r >= nrows {
                return Err(SparseError::InvalidInput(format!(
                    "row index {r} out of range (matrix has {nrows} rows)"
                )));
            }
            if c >= ncols {
                return Err(SparseError::ColumnOutOfRange {
                    row: r,
                    col: c,
                    ncols,
                });
            }
            counts[r + 1] += 1;
        }
        for i in 0..nrows {
            counts[i + 1] += counts[i];
        }
        let mut next = counts.clone();
        let mut entries = vec![(0usize, T::ZERO); triplets.len()];
        for &(r, c, v) in triplets {
            entries[next[r]] = (c, v);
            next[r] += 1;
        }
        let mut offsets = Vec::with_capacity(nrows + 1);
        let mut indices = Vec::with_capacity(triplets.len());
        let mut values = Vec::with_capacity(triplets.len());
        offsets.push(to_index::<I>("nnz", 0)?);
        for r in 0..nrows {
            let row = &mut entries[counts[r]..counts[r + 1]];
            row.sort_unstable_by_key(|e| e.0);
            let mut last = usize::MAX;
            for &(c, v) in row.iter() {
                if c == last {
                    *values.last_mut().expect("a previous entry exists") += v;
                } else {
                    indices.push(to_index::<I>("column", c)?);
                    values.push(v);
                    last = c;
                }
            }
            offsets.push(to_index::<I>("nnz", indices.len())?);
        }
        Self::try_new(nrows, ncols, offsets, indices, values)
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.indices.len()
    }
    /// Row offsets (`nrows + 1` entries, from 0 to `nnz`).
    pub fn offsets(&self) -> &[I] {
        &self.offsets
    }
    /// Column index of every stored entry.
    pub fn indices(&self) -> &[I] {
        &self.indices
    }
    /// Value of every stored entry.
    pub fn values(&self) -> &[T] {
        &self.values
    }
    /// Mutable values (the structure stays fixed).
    pub fn values_mut(&mut self) -> &mut [T] {
        &mut self.values
    }
    /// Whether the columns of every row are strictly increasing (detected at construction).
    pub fn has_sorted_columns(&self) -> bool {
        self.sorted
    }
    /// Range of entries of row `i`.
    #[inline]
    pub fn row_range(&self, i: usize) -> std::ops::Range<usize> {
        self.offsets[i].idx()..self.offsets[i + 1].idx()
    }
    /// Number of entries of row `i`.
    #[inline]
    pub fn row_nnz(&self, i: usize) -> usize {
        self.offsets[i + 1].idx() - self.offsets[i].idx()
    }
    /// Columns and values of row `i`.
    pub fn row(&self, i: usize) -> (&[I], &[T]) {
        let r = self.row_range(i);
        (&self.indices[r.clone()], &self.values[r])
    }
    /// Takes the matrix apart: `(nrows, ncols, offsets, indices, values)`.
    pub fn into_parts(self) -> (usize, usize, Vec<I>, Vec<I>, Vec<T>) {
        (
            self.nrows,
            self.ncols,
            self.offsets,
            self.indices,
            self.values,
        )
    }
    /// The same structure with values converted to another element type.
    pub fn cast<U: Scalar>(&self) -> CsrMatrix<U, I> {
        CsrMatrix {
            nrows: self.nrows,
            ncols: self.ncols,
            offsets: self.offsets.clone(),
            indices: self.indices.clone(),
            values: self
                .values
                .iter()
                .map(|v| U::from_f64(v.to_f64()))
                .collect(),
            sorted: self.sorted,
        }
    }
    /// Replaces every value by a deterministic pseudo-random number in `[-1, 1)` derived from
    /// `seed` and the entry's position (used for pattern-only files such as DLMC).
    pub fn fill_deterministic(&mut self, seed: u64) {
        for (k, v) in self.values.iter_mut().enumerate() {
            *v = T::from_f64(crate::gen::unit_hash(seed, k as u64));
        }
    }
}

impl<T: Scalar, I: SpIndex> TryFrom<sprs::CsMatI<T, I>> for CsrMatrix<T, I> {
    type Error = SparseError;

    /// Moves the arrays of a sprs matrix (CSR; a CSC matrix is converted to CSR first).
    fn try_from(m: sprs::CsMatI<T, I>) -> Result<Self> {
        let m = if m.is_csr() { m } else { m.to_csr() };
        let (nrows, ncols) = (m.rows(), m.cols());
        let (offsets, indices, values) = m.into_raw_storage();
        Self::try_new(nrows, ncols, offsets, indices, values)
    }
}

impl<T: Scalar, I: SpIndex> From<CsrMatrix<T, I>> for sprs::CsMatI<T, I> {
    /// Moves the arrays into a sprs matrix (sorting columns in place first if needed, since
    /// sprs requires sorted rows; duplicate columns are summed).
    fn from(m: CsrMatrix<T, I>) -> Self {
        let m = if m.sorted {
            m
        } else {
            let mut t = Vec::with_capacity(m.nnz());
            for r in 0..m.nrows {
                let (c, v) = m.row(r);
                t.extend(c.iter().zip(v).map(|(&c, &v)| (r, c.idx(), v)));
            }
            CsrMatrix::from_triplets(m.nrows, m.ncols, &t).expect("valid input stays valid")
        };
        let shape = (m.nrows, m.ncols);
        sprs::CsMatI::try_new(shape, m.offsets, m.indices, m.values)
            .map_err(|e| e.3)
            .expect("a validated, sorted CSR matrix is a valid sprs matrix")
    }
}
