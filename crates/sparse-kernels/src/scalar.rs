//! The element types (`f32`, `f64`) and index types (`u32`, `usize`) the kernels accept.

use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::ops::{Add, AddAssign, Mul};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for u32 {}
    impl Sealed for usize {}
}

/// A floating-point element type of a sparse or dense matrix: `f32` or `f64`.
pub trait Scalar:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Default
    + PartialEq
    + PartialOrd
    + Debug
    + Display
    + Add<Output = Self>
    + AddAssign
    + Mul<Output = Self>
    + Sum
    + 'static
{
    /// Zero.
    const ZERO: Self;
    /// Name of the type (`"f32"`, `"f64"`).
    const NAME: &'static str;
    /// Columns of C kept in registers by the SIMD micro-kernel: 256 bytes, i.e. 8 AVX2
    /// registers (64 `f32` or 32 `f64`); twice that on CPUs with AVX-512.
    const TILE: usize;
    /// Converts from `f64` (rounding for `f32`).
    fn from_f64(v: f64) -> Self;
    /// Converts to `f64`.
    fn to_f64(self) -> f64;
    /// Parses a decimal number.
    fn parse(s: &str) -> Option<Self>;
    /// `self · a + b` with one rounding (fused multiply-add). Only used where the target has an
    /// FMA instruction: elsewhere it is a slow library call.
    fn mul_add(self, a: Self, b: Self) -> Self;
}

macro_rules! impl_scalar {
    ($t:ty, $name:literal, $tile:literal) => {
        impl Scalar for $t {
            const ZERO: Self = 0.0;
            const NAME: &'static str = $name;
            const TILE: usize = $tile;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn parse(s: &str) -> Option<Self> {
                s.parse::<$t>().ok()
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
        }
    };
}
impl_scalar!(f32, "f32", 64);
impl_scalar!(f64, "f64", 32);

/// An index type for CSR offsets and column indices: `u32` (default, half the index traffic) or
/// `usize`. It is also a [`sprs::SpIndex`], so that conversions to and from sprs move the arrays.
pub trait SpIndex:
    sealed::Sealed + sprs::SpIndex + Copy + Send + Sync + Debug + Ord + 'static
{
    /// Name of the type (`"u32"`, `"usize"`).
    const NAME: &'static str;
    /// Widens to `usize`.
    fn idx(self) -> usize;
    /// Narrows from `usize`, `None` when it does not fit.
    fn checked_from(v: usize) -> Option<Self>;
}

impl SpIndex for u32 {
    const NAME: &'static str = "u32";
    #[inline(always)]
    fn idx(self) -> usize {
        self as usize
    }
    fn checked_from(v: usize) -> Option<Self> {
        u32::try_from(v).ok()
    }
}

impl SpIndex for usize {
    const NAME: &'static str = "usize";
    #[inline(always)]
    fn idx(self) -> usize {
        self
    }
    fn checked_from(v: usize) -> Option<Self> {
        Some(v)
    }
}
