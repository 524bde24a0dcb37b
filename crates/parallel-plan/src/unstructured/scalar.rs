//! Element types of dats and globals: `f64` and `i64` (sealed), stored type-erased.

use std::fmt::Debug;

/// The communication bound of [`Scalar`]: with the `distributed` feature, values travel through
/// `collectives`, so they must be its element type.
#[cfg(feature = "distributed")]
pub trait Wire: collectives::Element {}
#[cfg(feature = "distributed")]
impl<T: collectives::Element> Wire for T {}
/// The communication bound of [`Scalar`] (none without the `distributed` feature).
#[cfg(not(feature = "distributed"))]
pub trait Wire {}
#[cfg(not(feature = "distributed"))]
impl<T> Wire for T {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for i64 {}
}

/// A value type of dats and globals (`Default` is zero): `f64` or `i64` (integer increments are exact whatever the
/// execution order, which the tests use).
pub trait Scalar:
    sealed::Sealed + Wire + Copy + Send + Sync + Default + PartialEq + PartialOrd + Debug + 'static
{
    /// `a + b` (wrapping for integers).
    fn add(a: Self, b: Self) -> Self;
    /// The smaller of the two.
    fn min_of(a: Self, b: Self) -> Self;
    /// The larger of the two.
    fn max_of(a: Self, b: Self) -> Self;
    /// The storage of this type, if `data` holds it.
    fn slice(data: &Storage) -> Option<&Vec<Self>>;
    /// The mutable storage of this type, if `data` holds it.
    fn slice_mut(data: &mut Storage) -> Option<&mut Vec<Self>>;
    /// Wraps values into storage.
    fn wrap(values: Vec<Self>) -> Storage;
}

/// Type-erased values of a dat or a global.
#[derive(Debug, Clone, PartialEq)]
pub enum Storage {
    /// `f64` values.
    F64(Vec<f64>),
    /// `i64` values.
    I64(Vec<i64>),
}

impl Storage {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Storage::F64(v) => v.len(),
            Storage::I64(v) => v.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes per value.
    pub fn value_bytes(&self) -> usize {
        8
    }
}

impl Scalar for f64 {
    fn add(a: Self, b: Self) -> Self {
        a + b
    }
    fn min_of(a: Self, b: Self) -> Self {
        a.min(b)
    }
    fn max_of(a: Self, b: Self) -> Self {
        a.max(b)
    }
    fn slice(data: &Storage) -> Option<&Vec<Self>> {
        match data {
            Storage::F64(v) => Some(v),
            Storage::I64(_) => None,
        }
    }
    fn slice_mut(data: &mut Storage) -> Option<&mut Vec<Self>> {
        match data {
            Storage::F64(v) => Some(v),
            Storage::I64(_) => None,
        }
    }
    fn wrap(values: Vec<Self>) -> Storage {
        Storage::F64(values)
    }
}

impl Scalar for i64 {
    fn add(a: Self, b: Self) -> Self {
        a.wrapping_add(b)
    }
    fn min_of(a: Self, b: Self) -> Self {
        a.min(b)
    }
    fn max_of(a: Self, b: Self) -> Self {
        a.max(b)
    }
    fn slice(data: &Storage) -> Option<&Vec<Self>> {
        match data {
            Storage::I64(v) => Some(v),
            Storage::F64(_) => None,
        }
    }
    fn slice_mut(data: &mut Storage) -> Option<&mut Vec<Self>> {
        match data {
            Storage::I64(v) => Some(v),
            Storage::F64(_) => None,
        }
    }
    fn wrap(values: Vec<Self>) -> Storage {
        Storage::I64(values)
    }
}
