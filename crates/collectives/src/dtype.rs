//! Element types, reduce operators and the 8-byte-aligned message buffer.

use std::fmt;

/// Runtime tag of an element type; part of every collective's fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DType {
    /// 32-bit float.
    F32 = 1,
    /// 64-bit float.
    F64 = 2,
    /// 32-bit signed integer.
    I32 = 3,
    /// 64-bit signed integer.
    I64 = 4,
    /// Byte.
    U8 = 5,
}

impl DType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::U8 => 1,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => DType::F32,
            2 => DType::F64,
            3 => DType::I32,
            4 => DType::I64,
            5 => DType::U8,
            _ => return None,
        })
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
        };
        f.write_str(s)
    }
}

/// Reduction operator of `all_reduce`, `reduce` and `reduce_scatter`.
///
/// Integer sum and product wrap on overflow; float `min`/`max` follow `f32::min`/`f32::max`
/// (a NaN loses against a number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReduceOp {
    /// Sum.
    Sum = 1,
    /// Product.
    Prod = 2,
    /// Minimum.
    Min = 3,
    /// Maximum.
    Max = 4,
}

impl ReduceOp {
    /// All operators, for tests and sweeps.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max];
}

mod sealed {
    pub trait Sealed {}
}

/// An element type that collectives can move and reduce: `f32`, `f64`, `i32`, `i64`, `u8`.
///
/// Sealed: every implementor is plain old data with alignment at most 8 and no invalid bit
/// patterns, which the message buffers rely on.
pub trait Element: sealed::Sealed + Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    /// The runtime tag.
    const DTYPE: DType;
    /// Zero of the type (used to size receive buffers).
    const ZERO: Self;
    /// `dst[i] = dst[i] (op) src[i]` for every `i`.
    fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]);
    /// `a (op) b`, the serial reference used by tests.
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! element {
    ($t:ty, $tag:ident, $zero:expr, $add:expr, $mul:expr, $min:expr, $max:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DType = DType::$tag;
            const ZERO: Self = $zero;
            fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                assert_eq!(dst.len(), src.len(), "reduce_into: length mismatch");
                // One loop per operator so that each vectorises.
                match op {
                    ReduceOp::Sum => dst.iter_mut().zip(src).for_each(|(d, s)| *d = $add(*d, *s)),
                    ReduceOp::Prod => dst.iter_mut().zip(src).for_each(|(d, s)| *d = $mul(*d, *s)),
                    ReduceOp::Min => dst.iter_mut().zip(src).for_each(|(d, s)| *d = $min(*d, *s)),
                    ReduceOp::Max => dst.iter_mut().zip(src).for_each(|(d, s)| *d = $max(*d, *s)),
                }
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Sum => $add(a, b),
                    ReduceOp::Prod => $mul(a, b),
                    ReduceOp::Min => $min(a, b),
                    ReduceOp::Max => $max(a, b),
                }
            }
        }
    };
}

element!(
    f32,
    F32,
    0.0,
    |a, b| a + b,
    |a, b| a * b,
    f32::min,
    f32::max
);
element!(
    f64,
    F64,
    0.0,
    |a, b| a + b,
    |a, b| a * b,
    f64::min,
    f64::max
);
element!(
    i32,
    I32,
    0,
    i32::wrapping_add,
    i32::wrapping_mul,
    Ord::min,
    Ord::max
);
element!(
    i64,
    I64,
    0,
    i64::wrapping_add,
    i64::wrapping_mul,
    Ord::min,
    Ord::max
);
element!(
    u8,
    U8,
    0,
    u8::wrapping_add,
    u8::wrapping_mul,
    Ord::min,
    Ord::max
);

/// A reusable message payload: bytes stored in 8-byte words so that it can be viewed as a
/// slice of any [`Element`] without copying.
#[derive(Debug, Default)]
pub(crate) struct AlignedBuf {
    words: Vec<u64>,
    len: usize,
}

impl AlignedBuf {
    /// Sets the length to `len` bytes, growing the storage if needed (contents unspecified).
    pub(crate) fn set_len_bytes(&mut self, len: usize) {
        let words = len.div_ceil(8);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        self.len = len;
    }

    pub(crate) fn len_bytes(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Fills the buffer with a copy of `src`.
    pub(crate) fn fill_from<T: Element>(&mut self, src: &[T]) {
        self.set_len_bytes(std::mem::size_of_val(src));
        self.as_mut_slice::<T>().copy_from_slice(src);
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        // SAFETY: the words are initialised u64s; u8 has alignment 1 and every bit pattern is a
        // valid u8; `len <= words.len() * 8` is kept by `set_len_bytes`.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`, and we hold the unique borrow of `words`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    /// Views the payload as elements; `None` when the byte length is not a multiple of the size.
    pub(crate) fn as_slice<T: Element>(&self) -> Option<&[T]> {
        let size = std::mem::size_of::<T>();
        if self.len % size != 0 {
            return None;
        }
        // SAFETY: `T` is sealed to f32/f64/i32/i64/u8: alignment <= 8 (the words are 8-aligned),
        // no invalid bit patterns, and `len / size` elements fit inside the initialised words.
        Some(unsafe {
            std::slice::from_raw_parts(self.words.as_ptr().cast::<T>(), self.len / size)
        })
    }

    fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        let n = self.len / std::mem::size_of::<T>();
        // SAFETY: as in `as_slice`; `fill_from` sets `len` to an exact multiple of the size, and
        // we hold the unique borrow of `words`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<T>(), n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_roundtrip() {
        let mut b = AlignedBuf::default();
        b.fill_from(&[1.5f32, -2.0, 3.25]);
        assert_eq!(b.len_bytes(), 12);
        assert_eq!(b.as_slice::<f32>().unwrap(), &[1.5, -2.0, 3.25]);
        assert!(b.as_slice::<f64>().is_none());
        b.fill_from(&[7u8; 3]);
        assert_eq!(b.as_bytes(), &[7, 7, 7]);
    }

    #[test]
    fn reduce_ops() {
        let mut d = [1i32, 5, -3];
        i32::reduce_into(ReduceOp::Max, &mut d, &[2, 4, -4]);
        assert_eq!(d, [2, 5, -3]);
        let mut u = [250u8];
        u8::reduce_into(ReduceOp::Sum, &mut u, &[10]);
        assert_eq!(u, [4]);
    }
}
