//! Row-major dense matrix views with an explicit leading dimension, and ndarray interop.
//!
//! Element `(i, j)` of a view lives at `data[i * ld + j]`; `ld >= cols` lets a view address a
//! block of a wider matrix (for example the first `K` columns of a padded buffer).

use ndarray::{ArrayView2, ArrayViewMut2, ShapeBuilder};
use rayon::prelude::*;

/// A read-only row-major dense matrix: `rows × cols`, row `i` at `data[i * ld..][..cols]`.
#[derive(Debug, Clone, Copy)]
pub struct DenseRef<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    ld: usize,
}

/// A mutable row-major dense matrix: `rows × cols`, row `i` at `data[i * ld..][..cols]`.
#[derive(Debug)]
pub struct DenseMut<'a, T> {
    data: &'a mut [T],
    rows: usize,
    cols: usize,
    ld: usize,
}

#[track_caller]
fn check_shape(len: usize, rows: usize, cols: usize, ld: usize) {
    assert!(
        ld >= cols,
        "leading dimension {ld} is smaller than the {cols} columns"
    );
    let need = if rows == 0 { 0 } else { (rows - 1) * ld + cols };
    assert!(
        len >= need,
        "buffer of {len} elements is too short for {rows}×{cols} with leading dimension {ld}"
    );
}

/// The constructors and shape accessors both views share; `$data` is the buffer type.
macro_rules! view_common {
    ($data:ty) => {
        /// Views `data` as `rows × cols` with leading dimension `ld`.
        ///
        /// # Panics
        /// If `ld < cols` or `data` is too short.
        #[track_caller]
        pub fn new(data: $data, rows: usize, cols: usize, ld: usize) -> Self {
            check_shape(data.len(), rows, cols, ld);
            Self {
                data,
                rows,
                cols,
                ld,
            }
        }
        /// Views a contiguous row-major buffer (`ld = cols`).
        #[track_caller]
        pub fn contiguous(data: $data, rows: usize, cols: usize) -> Self {
            Self::new(data, rows, cols, cols)
        }
        /// Number of rows.
        pub fn rows(&self) -> usize {
            self.rows
        }
        /// Number of columns.
        pub fn cols(&self) -> usize {
            self.cols
        }
        /// Leading dimension (distance between the starts of consecutive rows).
        pub fn ld(&self) -> usize {
            self.ld
        }
    };
}

impl<'a, T> DenseRef<'a, T> {
    /// Columns `range` of this view (a K-panel): same rows and leading dimension.
    ///
    /// # Panics
    /// If `range` is not within `0..cols`.
    pub(crate) fn columns(&self, range: std::ops::Range<usize>) -> DenseRef<'a, T> {
        assert!(
            range.start <= range.end && range.end <= self.cols,
            "columns beyond the view"
        );
        let start = range.start.min(self.data.len());
        DenseRef::new(&self.data[start..], self.rows, range.len(), self.ld)
    }
    view_common!(&'a [T]);
    /// The underlying buffer.
    pub fn data(&self) -> &'a [T] {
        self.data
    }
    /// Row `i` (its `cols` elements).
    #[inline]
    pub fn row(&self, i: usize) -> &'a [T] {
        &self.data[i * self.ld..i * self.ld + self.cols]
    }
    /// Views an ndarray matrix in standard (C, row-major contiguous) layout, `None` otherwise
    /// (call `as_standard_layout()` first for other layouts).
    pub fn from_ndarray(a: ArrayView2<'a, T>) -> Option<Self> {
        let (rows, cols) = a.dim();
        a.to_slice().map(|d| Self::new(d, rows, cols, cols))
    }
    /// The same data as an ndarray view (`rows × cols`, row stride `ld`).
    pub fn to_ndarray(&self) -> ArrayView2<'a, T> {
        let len = if self.rows == 0 {
            0
        } else {
            (self.rows - 1) * self.ld + self.cols
        };
        ArrayView2::from_shape(
            (self.rows, self.cols).strides((self.ld, 1)),
            &self.data[..len],
        )
        .expect("shape checked at construction")
    }
}

impl<'a, T> DenseMut<'a, T> {
    view_common!(&'a mut [T]);
    /// Columns `range` of this view (a K-panel): same rows and leading dimension.
    ///
    /// # Panics
    /// If `range` is not within `0..cols`.
    pub(crate) fn columns(&mut self, range: std::ops::Range<usize>) -> DenseMut<'_, T> {
        assert!(
            range.start <= range.end && range.end <= self.cols,
            "columns beyond the view"
        );
        let start = range.start.min(self.data.len());
        DenseMut::new(&mut self.data[start..], self.rows, range.len(), self.ld)
    }
    /// Row `i`, mutable.
    #[inline]
    pub fn row_mut(&mut self, i: usize) -> &mut [T] {
        &mut self.data[i * self.ld..i * self.ld + self.cols]
    }
    /// The rows as disjoint mutable slices of `cols` elements, in order.
    pub fn rows_mut(&mut self) -> impl Iterator<Item = &mut [T]> + '_ {
        let cols = self.cols;
        let rows = self.rows;
        self.data
            .chunks_mut(self.ld.max(1))
            .take(rows)
            .map(move |r| &mut r[..cols])
    }
    /// Splits into rows `0..mid` and `mid..rows`.
    pub fn split_at_row(self, mid: usize) -> (DenseMut<'a, T>, DenseMut<'a, T>) {
        assert!(
            mid <= self.rows,
            "split row {mid} beyond {} rows",
            self.rows
        );
        let at = (mid * self.ld).min(self.data.len());
        let (top, bottom) = self.data.split_at_mut(at);
        let top = DenseMut {
            data: top,
            rows: mid,
            cols: self.cols,
            ld: self.ld,
        };
        let bottom = DenseMut {
            data: bottom,
            rows: self.rows - mid,
            cols: self.cols,
            ld: self.ld,
        };
        (top, bottom)
    }
    /// The rows as an indexed parallel iterator of disjoint `cols`-element slices.
    pub(crate) fn into_par_rows(self) -> impl IndexedParallelIterator<Item = &'a mut [T]>
    where
        T: Send,
    {
        let (rows, cols) = (self.rows, self.cols);
        self.data
            .par_chunks_mut(self.ld.max(1))
            .take(rows)
            .map(move |r| &mut r[..cols])
    }
    /// The rows in chunks of `rows_per_chunk` (the last may be shorter), as an indexed parallel
    /// iterator of disjoint views; chunk `i` starts at row `i · rows_per_chunk`.
    pub(crate) fn into_par_row_chunks(
        self,
        rows_per_chunk: usize,
    ) -> impl IndexedParallelIterator<Item = DenseMut<'a, T>>
    where
        T: Send,
    {
        let g = rows_per_chunk.max(1);
        let (rows, cols, ld) = (self.rows, self.cols, self.ld);
        self.data
            .par_chunks_mut((g * ld).max(1))
            .take(rows.div_ceil(g))
            .enumerate()
            .map(move |(i, data)| DenseMut {
                data,
                rows: g.min(rows - i * g),
                cols,
                ld,
            })
    }
    /// The first row, for the rest of the borrow.
    pub(crate) fn into_first_row(self) -> &'a mut [T] {
        &mut self.data[..self.cols]
    }
    /// A shorter-lived mutable view of the same data.
    pub fn reborrow(&mut self) -> DenseMut<'_, T> {
        DenseMut {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
        }
    }
    /// A read-only view of the same data.
    pub fn as_ref(&self) -> DenseRef<'_, T> {
        DenseRef {
            data: self.data,
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
        }
    }
    /// Views a mutable ndarray matrix in standard (C) layout, `None` otherwise.
    pub fn from_ndarray(a: ArrayViewMut2<'a, T>) -> Option<Self> {
        let (rows, cols) = a.dim();
        a.into_slice().map(|d| Self::new(d, rows, cols, cols))
    }
}

/// Relative difference `max|x - y| / max(max|y|, tiny)` between two dense matrices of equal
/// shape, in `f64`; the measure the tests and the CLI use to compare a kernel with the reference.
pub fn max_relative_error<T: crate::Scalar>(x: DenseRef<'_, T>, y: DenseRef<'_, T>) -> f64 {
    assert_eq!((x.rows(), x.cols()), (y.rows(), y.cols()), "shapes differ");
    let (mut diff, mut scale) = (0.0f64, f64::MIN_POSITIVE);
    for i in 0..x.rows() {
        for (a, b) in x.row(i).iter().zip(y.row(i)) {
            diff = diff.max((a.to_f64() - b.to_f64()).abs());
            scale = scale.max(b.to_f64().abs());
        }
    }
    diff / scale
}
