//! Element types, reduce operators and the 8-byte-aligned message buffer.

use std::fmt;

use half::bf16;

/// Defines a `#[repr(u8)]` enum whose variants carry a wire code and a name, with `ALL`,
/// `name()`, `from_u8()` and `Display`. Variants are listed as
/// `Variant = code, "name", "doc";`.
macro_rules! wire_enum {
    ($(#[$meta:meta])* pub enum $ty:ident { $($v:ident = $code:literal, $name:literal, $doc:literal;)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $ty { $(#[doc = $doc] $v = $code,)* }

        impl $ty {
            /// Every variant, in wire-code order.
            pub const ALL: [Self; [$($code),*].len()] = [$(Self::$v),*];

            /// Human-readable name, e.g. as printed in errors.
            pub fn name(self) -> &'static str {
                match self { $(Self::$v => $name,)* }
            }

            /// The variant with wire code `code`.
            #[allow(dead_code)]
            pub(crate) fn from_u8(code: u8) -> Option<Self> {
                Self::ALL.into_iter().find(|v| *v as u8 == code)
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
    /// Runtime tag of an element type; part of every collective's fingerprint.
    pub enum DType {
        F32 = 1, "f32", "32-bit float."; F64 = 2, "f64", "64-bit float.";
        I32 = 3, "i32", "32-bit signed integer."; I64 = 4, "i64", "64-bit signed integer.";
        U8 = 5, "u8", "Byte."; BF16 = 6, "bf16", "bfloat16 (`half::bf16`); reductions compute in f32.";
    }
}

impl DType {
    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::BF16 => 2,
            DType::U8 => 1,
        }
    }
}

wire_enum! {
    /// Reduction operator of `all_reduce`, `reduce` and `reduce_scatter`.
    ///
    /// Integer sum and product wrap on overflow; float `min`/`max` follow `f32::min`/`f32::max`
    /// (a NaN loses against a number). For bf16 every pairwise reduction converts both operands
    /// to f32, computes in f32 and rounds the result to bf16 once.
    pub enum ReduceOp {
        Sum = 1, "sum", "Sum."; Prod = 2, "prod", "Product.";
        Min = 3, "min", "Minimum."; Max = 4, "max", "Maximum.";
    }
}

mod sealed {
    pub trait Sealed {}
}

/// An element type that collectives can move and reduce: `f32`, `f64`, `i32`, `i64`, `u8` and
/// [`half::bf16`].
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

element! { f32, F32, 0.0, |a, b| a + b, |a, b| a * b, f32::min, f32::max }
element! { f64, F64, 0.0, |a, b| a + b, |a, b| a * b, f64::min, f64::max }
element! { i32, I32, 0, i32::wrapping_add, i32::wrapping_mul, Ord::min, Ord::max }
element! { i64, I64, 0, i64::wrapping_add, i64::wrapping_mul, Ord::min, Ord::max }
element! { u8, U8, 0, u8::wrapping_add, u8::wrapping_mul, Ord::min, Ord::max }

/// bf16 through f32: `op(a, b)` is computed in f32 and rounded to bf16 once per element pair.
fn via_f32(f: impl Fn(f32, f32) -> f32) -> impl Fn(bf16, bf16) -> bf16 {
    move |a, b| bf16::from_f32(f(a.to_f32(), b.to_f32()))
}

element! { bf16, BF16, bf16::ZERO, via_f32(|a, b| a + b), via_f32(|a, b| a * b), via_f32(f32::min), via_f32(f32::max) }

/// The bytes of a slice of elements.
pub(crate) fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `T` is sealed to plain-old-data types without padding; every byte of them is
    // initialised and may be viewed as `u8` (alignment 1).
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

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
        crate::copy::copy_slice(self.as_mut_slice::<T>(), src);
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
        // The words are 8-aligned, so only the length can refuse.
        elements_of(self.as_bytes())
    }

    fn as_mut_slice<T: Element>(&mut self) -> &mut [T] {
        let n = self.len / std::mem::size_of::<T>();
        // SAFETY: as in `as_slice`; `fill_from` sets `len` to an exact multiple of the size, and
        // we hold the unique borrow of `words`.
        unsafe { std::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<T>(), n) }
    }
}

/// `bytes` viewed as elements of `T`; `None` unless its start is aligned for `T` and its length
/// is a multiple of the size (a pooled payload, or one read in place from a receive buffer).
pub(crate) fn elements_of<T: Element>(bytes: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size)
        || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>())
    {
        return None;
    }
    // SAFETY: `T` is sealed to f32/f64/i32/i64/u8/bf16 (no invalid bit patterns; bf16 is
    // `repr(transparent)` over u16), the start is aligned for `T` (checked) and
    // `len / size` elements lie within `bytes`.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
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
    fn wire_codes_names_and_sizes() {
        for d in DType::ALL {
            assert_eq!(DType::from_u8(d as u8), Some(d));
        }
        assert_eq!(DType::from_u8(0), None);
        assert_eq!(ReduceOp::from_u8(ReduceOp::Min as u8), Some(ReduceOp::Min));
        assert_eq!(
            (DType::BF16.to_string(), ReduceOp::Prod.name()),
            ("bf16".into(), "prod")
        );
        fn size_of_element<T: Element>() -> (usize, usize) {
            (T::DTYPE.size(), std::mem::size_of::<T>())
        }
        for (tag, real) in [
            size_of_element::<f32>(),
            size_of_element::<f64>(),
            size_of_element::<i32>(),
            size_of_element::<i64>(),
            size_of_element::<u8>(),
            size_of_element::<bf16>(),
        ] {
            assert_eq!(tag, real);
        }
    }

    #[test]
    fn bf16_reduces_through_f32() {
        let v = |x: f32| bf16::from_f32(x);
        let mut d = [v(1.0), v(256.0), v(-3.5)];
        bf16::reduce_into(ReduceOp::Sum, &mut d, &[v(1.0), v(1.0), v(0.25)]);
        // 256 + 1 = 257 is not a bf16 (8 significant bits): rounds to even, 256.
        assert_eq!(d, [v(2.0), v(256.0), v(-3.25)]);
        bf16::reduce_into(ReduceOp::Max, &mut d, &[v(3.0), v(-1.0), v(-4.0)]);
        assert_eq!(d, [v(3.0), v(256.0), v(-3.25)]);
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
