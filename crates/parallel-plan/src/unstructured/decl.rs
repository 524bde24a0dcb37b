//! Handles of declared objects (sets, maps, dats, globals), access modes and loop arguments.

use std::marker::PhantomData;

/// A set of mesh elements (nodes, edges, cells, boundary edges…), declared with
/// [`Context::decl_set`](super::Context::decl_set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Set(pub(crate) usize);

/// A map from each element of one set to `arity` elements of another (edge → 2 nodes,
/// cell → 4 nodes…), declared with [`Context::decl_map`](super::Context::decl_map).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Map(pub(crate) usize);

/// `dim` values of type `T` per element of a set, declared with
/// [`Context::decl_dat`](super::Context::decl_dat).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Dat<T> {
    pub(crate) id: usize,
    _t: PhantomData<fn() -> T>,
}

/// A value shared by all elements: a constant (read) or a reduction (`Inc`, `Min`, `Max`),
/// declared with [`Context::decl_global`](super::Context::decl_global).
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Global<T> {
    pub(crate) id: usize,
    _t: PhantomData<fn() -> T>,
}

macro_rules! copy_handle {
    ($h:ident) => {
        impl<T> Clone for $h<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $h<T> {}
        impl<T> $h<T> {
            pub(crate) fn new(id: usize) -> Self {
                Self {
                    id,
                    _t: PhantomData,
                }
            }
        }
    };
}
copy_handle!(Dat);
copy_handle!(Global);

/// How a loop argument is accessed, as in OP2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only: the kernel gets `&[T]`.
    Read,
    /// Written without being read (every value must be set by the kernel, which gets zeros).
    Write,
    /// Read and written.
    ReadWrite,
    /// Incremented: the kernel must only add to the values it gets (OP2's `OP_INC`; it gets
    /// the element's values in place, or zeros that are added back when two of its `Inc`
    /// arguments name one element, so what it finds there is unspecified). Order-independent,
    /// so indirect increments from many iterations are allowed.
    Inc,
    /// Global minimum reduction (globals only).
    Min,
    /// Global maximum reduction (globals only).
    Max,
}

impl Access {
    /// OP2's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "READ",
            Access::Write => "WRITE",
            Access::ReadWrite => "RW",
            Access::Inc => "INC",
            Access::Min => "MIN",
            Access::Max => "MAX",
        }
    }

    /// Whether the kernel gets the argument as `&mut [T]` (every mode but `Read`).
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

/// What an argument refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// A dat, directly (`via: None`) or through slot `.1` of map `.0`.
    Dat {
        id: usize,
        via: Option<(usize, usize)>,
    },
    /// A global.
    Global(usize),
}

/// One argument of [`Context::par_loop`](super::Context::par_loop): a dat accessed directly or
/// through a map, or a global, with an [`Access`] mode.
///
/// The kernel receives the `Read` arguments as `&[&[T]]` and all others as `&mut [&mut [T]]`,
/// each list in argument order.
#[derive(Debug)]
pub struct Arg<T> {
    pub(crate) target: Target,
    pub(crate) mode: Access,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Arg<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Arg<T> {}

impl<T> Arg<T> {
    fn new(target: Target, mode: Access) -> Self {
        Self {
            target,
            mode,
            _t: PhantomData,
        }
    }
}

impl<T> Dat<T> {
    /// The dat of the iteration element itself, accessed with `mode`.
    pub fn direct(&self, mode: Access) -> Arg<T> {
        Arg::new(
            Target::Dat {
                id: self.id,
                via: None,
            },
            mode,
        )
    }

    /// The dat of element `map[e][slot]` of iteration element `e`, accessed with `mode`.
    pub fn via(&self, map: Map, slot: usize, mode: Access) -> Arg<T> {
        Arg::new(
            Target::Dat {
                id: self.id,
                via: Some((map.0, slot)),
            },
            mode,
        )
    }

    /// `direct(Access::Read)`.
    pub fn read(&self) -> Arg<T> {
        self.direct(Access::Read)
    }

    /// `direct(Access::Write)`.
    pub fn write(&self) -> Arg<T> {
        self.direct(Access::Write)
    }

    /// `direct(Access::ReadWrite)`.
    pub fn rw(&self) -> Arg<T> {
        self.direct(Access::ReadWrite)
    }

    /// `direct(Access::Inc)`.
    pub fn inc(&self) -> Arg<T> {
        self.direct(Access::Inc)
    }

    /// `via(map, slot, Access::Read)`.
    pub fn read_via(&self, map: Map, slot: usize) -> Arg<T> {
        self.via(map, slot, Access::Read)
    }

    /// `via(map, slot, Access::Inc)`.
    pub fn inc_via(&self, map: Map, slot: usize) -> Arg<T> {
        self.via(map, slot, Access::Inc)
    }
}

impl<T> Global<T> {
    /// The global accessed with `mode` (`Read`, `Inc`, `Min` or `Max`).
    pub fn arg(&self, mode: Access) -> Arg<T> {
        Arg::new(Target::Global(self.id), mode)
    }
}
