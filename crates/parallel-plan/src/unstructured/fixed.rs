//! Loops whose kernel arguments have their dimensions in their types
//! ([`Context::par_loop_fixed`]): each argument reaches the kernel as `&[T; D]` or
//! `&mut [T; D]`, and the element loop is compiled once per loop signature, so binding an
//! element's arguments is a map look-up and an address per argument, with no per-element
//! argument list, dispatch on the argument count or bounds check (OP2's generated code).

use std::marker::PhantomData;

use super::context::Context;
use super::decl::{Access, Arg, Target};
use super::error::{Result, UnstructuredError};
use super::exec::{Exec, Loc, Plan, Slot};
use super::scalar::Scalar;

/// A `Read` argument of [`Context::par_loop_fixed`] whose dat (or global) has `D` values per
/// element: the kernel gets `&[T; D]`. Made by [`Arg::fixed_read`].
#[derive(Debug)]
pub struct Rd<T, const D: usize>(Arg<T>);

/// A written argument of [`Context::par_loop_fixed`] (`Write`, `ReadWrite`, `Inc`, or a
/// global reduction) with `D` values per element: the kernel gets `&mut [T; D]`, with the same
/// contract per mode as [`Context::par_loop`]'s slices. Made by [`Arg::fixed_write`].
#[derive(Debug)]
pub struct Wr<T, const D: usize>(Arg<T>);

impl<T, const D: usize> Clone for Rd<T, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const D: usize> Copy for Rd<T, D> {}
impl<T, const D: usize> Clone for Wr<T, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const D: usize> Copy for Wr<T, D> {}

impl<T> Arg<T> {
    /// This `Read` argument with its `D` values per element fixed in its type, for
    /// [`Context::par_loop_fixed`] (which checks `D` and the mode before running).
    pub fn fixed_read<const D: usize>(self) -> Rd<T, D> {
        Rd(self)
    }

    /// This written argument with its `D` values per element fixed in its type, for
    /// [`Context::par_loop_fixed`] (which checks `D` and the mode before running).
    pub fn fixed_write<const D: usize>(self) -> Wr<T, D> {
        Wr(self)
    }
}

pub(crate) mod private {
    use super::super::exec::Plan;

    /// Only this module's argument types are kernel arguments.
    pub trait Sealed {}

    /// Where an argument's values for loop element `e` are, once per loop: element
    /// `at[e * arity]` through a map (`at` = the map's slot column), else `e * mul` (`mul` 1:
    /// the element itself; 0: a global's values).
    #[derive(Debug, Clone, Copy)]
    pub struct Pick {
        pub(crate) at: *const u32,
        pub(crate) arity: usize,
        pub(crate) mul: usize,
    }

    /// Loops whose every argument goes through a map ([`Pick::index`]'s `K`).
    pub(crate) const ALL_VIA: u8 = 1;
    /// Loops with no argument through a map.
    pub(crate) const NO_VIA: u8 = 2;
    /// Loops with both kinds.
    pub(crate) const MIXED: u8 = 0;

    impl Pick {
        /// The element of loop element `e`. `K` says what every pick of the loop is
        /// ([`ALL_VIA`], [`NO_VIA`] or [`MIXED`]), so that the loops of one kind of arguments
        /// test nothing per element.
        ///
        /// # Safety
        /// Through a map, `e` has a row in it; `K` is true of this pick.
        #[inline(always)]
        pub(crate) unsafe fn index<const K: u8>(self, e: usize) -> usize {
            let via = match K {
                ALL_VIA => true,
                NO_VIA => false,
                _ => !self.at.is_null(),
            };
            if via {
                // SAFETY: in bounds (caller's contract).
                (unsafe { *self.at.add(e * self.arity) }) as usize
            } else {
                e * self.mul
            }
        }
    }

    /// The next read and written arguments of a plan to bind, in argument order.
    #[derive(Debug)]
    pub struct Cursor<'p, 'a, T> {
        pub(crate) plan: &'p Plan<'a, T>,
        pub(crate) read: usize,
        pub(crate) written: usize,
        /// The reduction accumulator of this run and the next global slot's offset in it.
        pub(crate) acc: *mut T,
        pub(crate) acc_off: usize,
    }
}

use private::{Cursor, Pick, Sealed, ALL_VIA, MIXED, NO_VIA};

/// One argument of [`Context::par_loop_fixed`]: [`Rd`] or [`Wr`] (sealed).
pub trait FixedArg<T: Scalar>: Sealed + Copy {
    /// What the kernel gets: `&[T; D]` or `&mut [T; D]`.
    type Ref<'a>;
    #[doc(hidden)]
    type Bound: Copy;
    #[doc(hidden)]
    fn arg(&self) -> Arg<T>;
    #[doc(hidden)]
    fn dim() -> usize;
    #[doc(hidden)]
    fn writes() -> bool;
    #[doc(hidden)]
    fn bind(cur: &mut Cursor<'_, '_, T>) -> Self::Bound;
    /// # Safety
    /// `e` has a row in the argument's map and no other live reference names the values
    /// (see `FixedRun::run`).
    #[doc(hidden)]
    unsafe fn at<'a, const K: u8>(b: Self::Bound, e: usize) -> Self::Ref<'a>;
    /// Where the bound argument's values are.
    #[doc(hidden)]
    fn pick(b: &Self::Bound) -> Pick;
    #[doc(hidden)]
    fn take<'a, 'c: 'a>(
        reads: &mut std::slice::Iter<'a, &'a [T]>,
        writes: &mut std::slice::IterMut<'a, &'c mut [T]>,
    ) -> Self::Ref<'a>;
}

impl<T, const D: usize> Sealed for Rd<T, D> {}
impl<T, const D: usize> Sealed for Wr<T, D> {}

fn pick(loc: Loc<'_>) -> Pick {
    let (at, arity, mul) = match loc {
        Loc::Direct => (std::ptr::null(), 0, 1),
        Loc::Via { map, arity, slot } => (map.as_ptr().wrapping_add(slot), arity, 0),
        Loc::Global => (std::ptr::null(), 0, 0),
    };
    Pick { at, arity, mul }
}

/// A global's values: element 0 always.
const FIXED: Pick = Pick {
    at: std::ptr::null(),
    arity: 0,
    mul: 0,
};

impl<T: Scalar, const D: usize> FixedArg<T> for Rd<T, D> {
    type Ref<'a> = &'a [T; D];
    type Bound = (*const T, Pick);
    fn arg(&self) -> Arg<T> {
        self.0
    }
    fn dim() -> usize {
        D
    }
    fn writes() -> bool {
        false
    }
    fn bind(cur: &mut Cursor<'_, '_, T>) -> Self::Bound {
        let r = &cur.plan.reads[cur.read];
        cur.read += 1;
        debug_assert_eq!(r.dim, D);
        (r.data.as_ptr(), pick(r.loc))
    }
    #[inline(always)]
    unsafe fn at<'a, const K: u8>((data, p): Self::Bound, e: usize) -> &'a [T; D] {
        // SAFETY: the element's `D` values are in bounds of the dat (maps validated, `D` the
        // dat's dimension), and read-only while the loop runs (`FixedRun::run`).
        unsafe { &*data.add(p.index::<K>(e) * D).cast::<[T; D]>() }
    }
    fn pick(b: &Self::Bound) -> Pick {
        b.1
    }
    fn take<'a, 'c: 'a>(
        reads: &mut std::slice::Iter<'a, &'a [T]>,
        _: &mut std::slice::IterMut<'a, &'c mut [T]>,
    ) -> &'a [T; D] {
        let s: &'a [T] = reads.next().expect("one read per `Rd` argument");
        s.try_into().expect("dimension checked before the loop")
    }
}

impl<T: Scalar, const D: usize> FixedArg<T> for Wr<T, D> {
    type Ref<'a> = &'a mut [T; D];
    /// `(values, pick, whether to zero them first)`.
    type Bound = (*mut T, Pick, bool);
    fn arg(&self) -> Arg<T> {
        self.0
    }
    fn dim() -> usize {
        D
    }
    fn writes() -> bool {
        true
    }
    fn bind(cur: &mut Cursor<'_, '_, T>) -> Self::Bound {
        let s = &cur.plan.slots[cur.written];
        cur.written += 1;
        match *s {
            Slot::Dat {
                ptr,
                dim,
                loc,
                mode,
                ..
            } => {
                debug_assert_eq!(dim, D);
                (ptr, pick(loc), mode == Access::Write)
            }
            Slot::Global { dim } => {
                debug_assert_eq!(dim, D);
                let p = cur.acc.wrapping_add(cur.acc_off);
                cur.acc_off += dim;
                (p, FIXED, false)
            }
        }
    }
    #[inline(always)]
    unsafe fn at<'a, const K: u8>((data, p, zero): Self::Bound, e: usize) -> &'a mut [T; D] {
        // SAFETY: in bounds (maps validated, `D` the dat's dimension, or the global's slice
        // of the accumulator), and no other reference names these values while the kernel
        // runs (`FixedRun::run`).
        let w = unsafe { &mut *data.add(p.index::<K>(e) * D).cast::<[T; D]>() };
        if zero {
            *w = [T::default(); D];
        }
        w
    }
    fn pick(b: &Self::Bound) -> Pick {
        b.1
    }
    fn take<'a, 'c: 'a>(
        _: &mut std::slice::Iter<'a, &'a [T]>,
        writes: &mut std::slice::IterMut<'a, &'c mut [T]>,
    ) -> &'a mut [T; D] {
        let s: &'a mut &'c mut [T] = writes.next().expect("one slot per `Wr` argument");
        (&mut **s)
            .try_into()
            .expect("dimension checked before the loop")
    }
}

/// The arguments of [`Context::par_loop_fixed`]: a tuple of 1 to 12 [`Rd`] and [`Wr`]
/// (sealed). The kernel gets the tuple of their references, in argument order.
pub trait FixedArgs<T: Scalar>: Sealed + Copy {
    /// What the kernel gets: a tuple of `&[T; D]` and `&mut [T; D]`.
    type Refs<'a>;
    #[doc(hidden)]
    type Bound: Copy;
    #[doc(hidden)]
    fn args(&self) -> Vec<Arg<T>>;
    /// `(dim, writes)` of each argument.
    #[doc(hidden)]
    fn shapes() -> Vec<(usize, bool)>;
    #[doc(hidden)]
    fn bind(cur: &mut Cursor<'_, '_, T>) -> Self::Bound;
    /// # Safety
    /// As [`FixedArg::at`] for every argument.
    #[doc(hidden)]
    unsafe fn at<'a, const K: u8>(b: Self::Bound, e: usize) -> Self::Refs<'a>;
    /// Where each bound argument's values are.
    #[doc(hidden)]
    fn picks(b: &Self::Bound) -> Vec<Pick>;
    #[doc(hidden)]
    fn take<'a, 'c: 'a>(reads: &'a [&'a [T]], writes: &'a mut [&'c mut [T]]) -> Self::Refs<'a>;
}

macro_rules! fixed_args {
    ($($a:ident $i:tt),+) => {
        impl<$($a),+> Sealed for ($($a,)+) {}
        impl<T: Scalar, $($a: FixedArg<T>),+> FixedArgs<T> for ($($a,)+) {
            type Refs<'a> = ($($a::Ref<'a>,)+);
            type Bound = ($($a::Bound,)+);
            fn args(&self) -> Vec<Arg<T>> {
                vec![$(self.$i.arg()),+]
            }
            fn shapes() -> Vec<(usize, bool)> {
                vec![$(($a::dim(), $a::writes())),+]
            }
            fn bind(cur: &mut Cursor<'_, '_, T>) -> Self::Bound {
                // Tuple fields are evaluated left to right: argument order.
                ($($a::bind(cur),)+)
            }
            #[inline(always)]
            unsafe fn at<'a, const K: u8>(b: Self::Bound, e: usize) -> Self::Refs<'a> {
                // SAFETY: the caller's contract, per argument.
                unsafe { ($($a::at::<K>(b.$i, e),)+) }
            }
            fn picks(b: &Self::Bound) -> Vec<Pick> {
                vec![$($a::pick(&b.$i)),+]
            }
            fn take<'a, 'c: 'a>(
                reads: &'a [&'a [T]],
                writes: &'a mut [&'c mut [T]],
            ) -> Self::Refs<'a> {
                let (mut r, mut w) = (reads.iter(), writes.iter_mut());
                ($($a::take(&mut r, &mut w),)+)
            }
        }
    };
}

fixed_args!(A0 0);
fixed_args!(A0 0, A1 1);
fixed_args!(A0 0, A1 1, A2 2);
fixed_args!(A0 0, A1 1, A2 2, A3 3);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9, A10 10);
fixed_args!(A0 0, A1 1, A2 2, A3 3, A4 4, A5 5, A6 6, A7 7, A8 8, A9 9, A10 10, A11 11);

/// A typed loop's runner: the monomorphised element loop when no element's `Inc` arguments
/// name one dat element, else the generic loop (with its scratch) through an adapter.
pub(crate) struct FixedRun<A, F> {
    pub(crate) kernel: F,
    /// Whether some element has two `Inc` arguments naming one dat element.
    pub(crate) aliased: bool,
    pub(crate) _args: PhantomData<fn() -> A>,
}

impl<T, A, F> Exec<T> for FixedRun<A, F>
where
    T: Scalar,
    A: FixedArgs<T>,
    F: for<'a> Fn(A::Refs<'a>) + Sync,
{
    /// # Safety
    /// `Plan::run`'s contract, and the plan was built from `A`'s arguments (so its reads and
    /// slots are theirs, in order, with the checked dimensions). Then every reference a
    /// binding makes is in bounds, and none aliases another live one: `Read` dats are not
    /// written by the loop (validation), written dats have no other argument but `Inc`
    /// arguments of the same dat, which name distinct elements on this path (`aliased` is
    /// false), distinct elements write distinct `Write`/`ReadWrite` elements, globals'
    /// accumulator slices are disjoint, and concurrent calls write disjoint elements.
    unsafe fn run(&self, plan: &Plan<'_, T>, elems: std::ops::Range<usize>, acc: &mut [T]) {
        if self.aliased {
            let adapter = |r: &[&[T]], w: &mut [&mut [T]]| (self.kernel)(A::take(r, w));
            // SAFETY: the caller's contract.
            unsafe { plan.run(elems, acc, &adapter) };
            return;
        }
        let mut cur = Cursor {
            plan,
            read: 0,
            written: 0,
            acc: acc.as_mut_ptr(),
            acc_off: 0,
        };
        let b = A::bind(&mut cur);
        debug_assert_eq!(
            (cur.read, cur.written),
            (plan.reads.len(), plan.slots.len())
        );
        // One loop per kind of picks, so that a loop whose arguments all go through maps
        // (or none does) tests nothing per element and argument.
        let picks = A::picks(&b);
        let (via, direct) = (
            picks.iter().filter(|p| !p.at.is_null()).count(),
            picks.iter().filter(|p| p.at.is_null()).count(),
        );
        if direct == 0 {
            for e in elems {
                // SAFETY: see above, and every pick goes through a map; each element's
                // references end with its kernel call.
                (self.kernel)(unsafe { A::at::<ALL_VIA>(b, e) });
            }
        } else if via == 0 {
            for e in elems {
                // SAFETY: see above, and no pick goes through a map; as above.
                (self.kernel)(unsafe { A::at::<NO_VIA>(b, e) });
            }
        } else {
            for e in elems {
                // SAFETY: see above (each pick tests its kind); as above.
                (self.kernel)(unsafe { A::at::<MIXED>(b, e) });
            }
        }
    }
}

impl Context {
    /// [`par_loop`](Context::par_loop) with each argument's dimension in its type: the
    /// kernel gets a tuple of `&[T; D]` ([`Rd`], from [`Arg::fixed_read`]) and `&mut [T; D]`
    /// ([`Wr`], from [`Arg::fixed_write`]) in argument order, and the element loop is
    /// compiled for this loop's arguments (no per-element argument list, no bounds checks in
    /// the kernel). Same modes, validation, halos, colouring and results as `par_loop`.
    ///
    /// ```
    /// use parallel_plan::unstructured::{Backend, Context};
    ///
    /// let mut ctx = Context::new(Backend::Sequential);
    /// let nodes = ctx.decl_set("nodes", 3)?;
    /// let edges = ctx.decl_set("edges", 2)?;
    /// let e2n = ctx.decl_map("e2n", edges, nodes, 2, vec![0, 1, 1, 2])?;
    /// let x = ctx.decl_dat("x", nodes, 2, vec![0.0, 0.0, 1.0, 0.0, 1.0, 2.0])?;
    /// let deg = ctx.decl_dat("deg", nodes, 1, vec![0.0; 3])?;
    /// let len = ctx.decl_dat("len", edges, 1, vec![0.0; 2])?;
    /// ctx.par_loop_fixed(
    ///     "lengths",
    ///     edges,
    ///     (
    ///         x.read_via(e2n, 0).fixed_read::<2>(),
    ///         x.read_via(e2n, 1).fixed_read::<2>(),
    ///         len.write().fixed_write::<1>(),
    ///         deg.inc_via(e2n, 0).fixed_write::<1>(),
    ///         deg.inc_via(e2n, 1).fixed_write::<1>(),
    ///     ),
    ///     |(a, b, l, d0, d1)| {
    ///         l[0] = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    ///         d0[0] += 1.0;
    ///         d1[0] += 1.0;
    ///     },
    /// )?;
    /// assert_eq!(ctx.dat_values(len)?, vec![1.0, 2.0]);
    /// assert_eq!(ctx.dat_values(deg)?, vec![1.0, 2.0, 1.0]);
    /// # Ok::<(), parallel_plan::unstructured::UnstructuredError>(())
    /// ```
    ///
    /// # Errors
    /// Those of [`par_loop`](Context::par_loop), and
    /// [`UnstructuredError::InvalidArgument`] for an argument whose `D` is not its dat's
    /// dimension (or its global's length), an [`Rd`] that is not `Read` or a [`Wr`] that is.
    pub fn par_loop_fixed<T, A, F>(
        &mut self,
        name: &str,
        set: super::Set,
        args: A,
        kernel: F,
    ) -> Result<()>
    where
        T: Scalar,
        A: FixedArgs<T>,
        F: for<'a> Fn(A::Refs<'a>) + Sync,
    {
        let list = args.args();
        for (k, (a, (dim, writes))) in list.iter().zip(A::shapes()).enumerate() {
            let bad = |detail: String| UnstructuredError::InvalidArgument {
                loop_name: name.to_string(),
                arg: k,
                detail,
            };
            if a.mode.writes() != writes {
                return Err(bad(format!(
                    "{} argument given as {}",
                    a.mode.name(),
                    if writes {
                        "`Wr` (fixed_write)"
                    } else {
                        "`Rd` (fixed_read)"
                    }
                )));
            }
            let (what, actual) = match a.target {
                Target::Dat { id, .. } => {
                    ("dat", self.dats.get(id).map(|d| (d.name.clone(), d.dim)))
                }
                Target::Global(id) => (
                    "global",
                    self.globals.get(id).map(|g| (g.name.clone(), g.data.len())),
                ),
            };
            // An undeclared target is reported by the loop's validation.
            if let Some((dname, actual)) = actual {
                if actual != dim {
                    return Err(bad(format!(
                        "{what} `{dname}` has {actual} values per element, the argument {dim}"
                    )));
                }
            }
        }
        self.run_loop(name, set, &list, |ctx, n| FixedRun::<A, F> {
            kernel,
            aliased: ctx.inc_aliased(n, &list),
            _args: PhantomData,
        })
    }

    /// Whether some of the first `n` loop elements have two `Inc` arguments of `args` naming
    /// one element of their dat (cached per pair of accesses).
    pub(crate) fn inc_aliased<T>(&mut self, n: usize, args: &[Arg<T>]) -> bool {
        let incs: Vec<(usize, Option<(usize, usize)>)> = args
            .iter()
            .filter_map(|a| match (a.target, a.mode) {
                (Target::Dat { id, via }, Access::Inc) => Some((id, via)),
                _ => None,
            })
            .collect();
        let mut aliased = false;
        for (j, &(d, b)) in incs.iter().enumerate() {
            for &(_, a) in incs[..j].iter().filter(|(other, _)| *other == d) {
                let key = (a, b, n);
                let hit = match self.inc_alias.get(&key) {
                    Some(&h) => h,
                    None => {
                        let at = |via: Option<(usize, usize)>, e: usize| match via {
                            None => e as u32,
                            Some((m, s)) => {
                                let m = &self.maps[m];
                                m.values[e * m.arity + s]
                            }
                        };
                        let h = (0..n).any(|e| at(a, e) == at(b, e));
                        self.inc_alias.insert(key, h);
                        h
                    }
                };
                aliased |= hit;
            }
        }
        aliased
    }
}
