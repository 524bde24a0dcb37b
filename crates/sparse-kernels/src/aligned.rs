//! Dense operands that start on a 64-byte cache-line boundary.
//!
//! The micro-kernel loads rows of B in 32-byte vectors. A large `Vec<f64>` from the system
//! allocator starts 16 bytes past a line, so when B's rows are a whole number of lines apart
//! every other load straddles two lines, which cost 11–21 % in paired runs
//! (`examples/b_alignment.rs`; benches/README.md, sparse, "Measurements behind code defaults").

use crate::Scalar;
use std::ops::{Deref, DerefMut};

/// Bytes of the alignment [`AlignedVec`] guarantees: one cache line.
pub const LINE_BYTES: usize = 64;

/// A heap buffer of `len` elements whose first element is on a [`LINE_BYTES`] boundary
/// (for `f32` and `f64`; element sizes that do not divide 64 get the allocator's alignment;
/// an empty buffer allocates nothing).
/// It dereferences to a slice, so it serves wherever B or C is built from a `&[T]` / `&mut [T]`.
///
/// ```
/// use sparse_kernels::{AlignedVec, DenseRef};
///
/// let b = AlignedVec::<f64>::zeroed(100 * 64);
/// assert_eq!(b.as_ptr() as usize % 64, 0);
/// let view = DenseRef::contiguous(&b, 100, 64);
/// assert_eq!(view.rows(), 100);
/// ```
#[derive(Debug)]
pub struct AlignedVec<T> {
    buf: Vec<T>,
    start: usize,
    len: usize,
}

impl<T: Scalar> AlignedVec<T> {
    /// `len` zeros starting on a line boundary.
    pub fn zeroed(len: usize) -> Self {
        let size = std::mem::size_of::<T>().max(1);
        let slack = if len > 0 && LINE_BYTES.is_multiple_of(size) {
            LINE_BYTES / size
        } else {
            0
        };
        let buf = vec![T::ZERO; len + slack];
        // The heap block does not move when the `Vec` does, so the offset stays right.
        let start = match buf.as_ptr().align_offset(LINE_BYTES) {
            off if off <= slack => off,
            _ => 0,
        };
        Self { buf, start, len }
    }

    /// A line-aligned copy of `src`.
    pub fn from_slice(src: &[T]) -> Self {
        let mut v = Self::zeroed(src.len());
        v.copy_from_slice(src);
        v
    }
}

impl<T> Deref for AlignedVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.buf[self.start..self.start + self.len]
    }
}

impl<T> DerefMut for AlignedVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

impl<T: Scalar> Clone for AlignedVec<T> {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_line_and_holds_exactly_len_elements() {
        for len in [0, 1, 7, 8, 1000, 1 << 20] {
            let v = AlignedVec::<f64>::zeroed(len);
            assert_eq!(v.len(), len);
            if len == 0 {
                continue;
            }
            assert_eq!(v.as_ptr() as usize % LINE_BYTES, 0, "len {len}");
            assert!(v.iter().all(|&x| x == 0.0));
            let w = AlignedVec::<f32>::from_slice(&vec![1.5f32; len]);
            assert_eq!(w.as_ptr() as usize % LINE_BYTES, 0);
            assert!(w.iter().all(|&x| x == 1.5));
            let c = w.clone();
            assert_eq!(&c[..], &w[..]);
            assert_eq!(c.as_ptr() as usize % LINE_BYTES, 0);
        }
    }
}
