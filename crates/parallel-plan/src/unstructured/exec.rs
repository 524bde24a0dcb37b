//! The element loop shared by every backend: gather each argument of an element, call the
//! kernel, scatter the written arguments back.

use super::decl::Access;
use super::scalar::Scalar;

/// Most `Read` arguments, and most written arguments, one loop may have.
pub const MAX_ARGS: usize = 16;

/// Where an argument's values for element `e` are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Loc<'a> {
    /// Element `e` itself.
    Direct,
    /// Element `map[e * arity + slot]`.
    Via {
        map: &'a [u32],
        arity: usize,
        slot: usize,
    },
    /// The global's values (index 0).
    Global,
}

/// A dat argument's element for loop element `e`, cheaper per element than a [`Loc`]: `e`
/// itself when `at` is null (direct), else `at[e * arity]` (`at` = the map's slot column).
#[derive(Debug, Clone, Copy)]
struct Gather {
    at: *const u32,
    arity: usize,
}

impl Gather {
    const DIRECT: Gather = Gather {
        at: std::ptr::null(),
        arity: 0,
    };

    /// The gather of a direct or mapped argument (globals are bound once, never gathered).
    fn of(loc: Loc<'_>) -> Gather {
        match loc {
            Loc::Via { map, arity, slot } => Gather {
                // Dereferenced only for elements that have a row, so in bounds then.
                at: map.as_ptr().wrapping_add(slot),
                arity,
            },
            Loc::Direct | Loc::Global => Gather::DIRECT,
        }
    }

    /// The element that loop element `e`'s argument refers to.
    ///
    /// # Safety
    /// For a map, `e` has a row in it (`e * arity + slot` is in bounds).
    #[inline(always)]
    unsafe fn index(self, e: usize) -> usize {
        if self.at.is_null() {
            e
        } else {
            // SAFETY: in bounds (caller's contract).
            (unsafe { *self.at.add(e * self.arity) }) as usize
        }
    }
}

/// How a loop's elements are run: the kernel and the element loop for its arguments
/// ([`Plan::run`] for [`Context::par_loop`](super::Context::par_loop), a loop compiled per
/// argument signature for [`Context::par_loop_fixed`](super::Context::par_loop_fixed)).
pub(crate) trait Exec<T>: Sync {
    /// Runs the kernel on `elems`, accumulating reductions into `acc`.
    ///
    /// # Safety
    /// [`Plan::run`]'s contract.
    unsafe fn run(&self, plan: &Plan<'_, T>, elems: std::ops::Range<usize>, acc: &mut [T]);
}

/// [`Context::par_loop`](super::Context::par_loop)'s kernel over slices.
pub(crate) struct SliceKernel<F>(pub(crate) F);

impl<T: Scalar, F> Exec<T> for SliceKernel<F>
where
    F: Fn(&[&[T]], &mut [&mut [T]]) + Sync,
{
    unsafe fn run(&self, plan: &Plan<'_, T>, elems: std::ops::Range<usize>, acc: &mut [T]) {
        // SAFETY: the caller's contract.
        unsafe { plan.run(elems, acc, &self.0) }
    }
}

/// A `Read` argument.
#[derive(Debug)]
pub(crate) struct ReadArg<'a, T> {
    pub(crate) data: &'a [T],
    pub(crate) dim: usize,
    pub(crate) loc: Loc<'a>,
}

/// A written argument: a dat element (through a raw pointer, so that arguments writing the same
/// dat through different map slots coexist), or a slice of the reduction accumulator.
#[derive(Debug)]
pub(crate) enum Slot<'a, T> {
    Dat {
        ptr: *mut T,
        len: usize,
        dim: usize,
        loc: Loc<'a>,
        mode: Access,
    },
    Global {
        dim: usize,
    },
}

/// One loop's arguments, ready to run over any subset of its elements.
#[derive(Debug)]
pub(crate) struct Plan<'a, T> {
    pub(crate) reads: Vec<ReadArg<'a, T>>,
    pub(crate) slots: Vec<Slot<'a, T>>,
}

// SAFETY: a `Plan` is shared between the threads of the threaded backend. Its raw pointers point
// into dats that the loop borrows mutably for the plan's whole life (see `run::par_loop`), and
// the callers of `run` guarantee that concurrent calls write disjoint dat elements (colouring).
unsafe impl<T: Sync> Sync for Plan<'_, T> {}

impl<T: Scalar> Plan<'_, T> {
    /// Values per element of the `Inc` dat slots (the per-element scratch).
    fn scratch_len(&self) -> usize {
        self.slots
            .iter()
            .map(|s| match s {
                Slot::Dat {
                    dim,
                    mode: Access::Inc,
                    ..
                } => *dim,
                _ => 0,
            })
            .sum()
    }

    /// Runs `kernel` on every element of `elems`, accumulating global reductions into `acc`
    /// (the global slots' values, concatenated in argument order).
    ///
    /// Per element, only what depends on the element is done: `Read` globals are bound once;
    /// `Write` and `ReadWrite` dat arguments are handed to the kernel in place (a `Write`
    /// zeroed first), which is sound because validation gives such a dat no other argument
    /// and `check_exclusive` rejects maps that send two executed elements to one target; `Inc`
    /// arguments too (the kernel only adds to them; colouring keeps concurrent blocks off one
    /// element), unless two of an element's `Inc` arguments name one element: then each gets
    /// zeros in a scratch, added back afterwards in argument order.
    ///
    /// # Safety
    /// Every element of `elems` has a row in every map of the plan, every index that a `Loc`
    /// yields for these elements is in bounds of its dat (maps are validated at declaration and
    /// localisation, and loops run over the rows their maps have), no two elements of `elems`
    /// reach one element through a `Write`/`ReadWrite` argument (validated before the loop),
    /// and no other call running at the same time writes a dat element that this call writes.
    pub(crate) unsafe fn run<F>(
        &self,
        elems: impl Iterator<Item = usize>,
        acc: &mut [T],
        kernel: &F,
    ) where
        F: Fn(&[&[T]], &mut [&mut [T]]),
    {
        let mut scratch = vec![T::default(); self.scratch_len()];
        let mut reads: [&[T]; MAX_ARGS] = [&[]; MAX_ARGS];
        let (nr, nw) = (self.reads.len(), self.slots.len());
        // Reads that depend on the element (the others, globals, are bound here once).
        let mut varying: [Varying<'_, T>; MAX_ARGS] = [(0, &[], 0, Gather::DIRECT); MAX_ARGS];
        let mut nv = 0;
        for (k, r) in self.reads.iter().enumerate() {
            if let Loc::Global = r.loc {
                reads[k] = &r.data[..r.dim];
            } else {
                varying[nv] = (k, r.data, r.dim, Gather::of(r.loc));
                nv += 1;
            }
        }
        // Written dat slots: in place (`Write`, `ReadWrite`), `Inc` in place or through the
        // scratch.
        let mut in_place: [(usize, *mut T, usize, usize, Gather, bool); MAX_ARGS] =
            [(0, std::ptr::null_mut(), 0, 0, Gather::DIRECT, false); MAX_ARGS];
        // `(slot, dat, dim, gather, offset in the scratch)`.
        let mut incs: [(usize, *mut T, usize, Gather, usize); MAX_ARGS] =
            [(0, std::ptr::null_mut(), 0, Gather::DIRECT, 0); MAX_ARGS];
        let (mut np, mut ni, mut off) = (0, 0, 0);
        // The kernel's written arguments: global slots in `acc` (accumulated in place), dat
        // slots rebound per element.
        let mut ws: [&mut [T]; MAX_ARGS] = Default::default();
        {
            let mut ac = &mut acc[..];
            for (k, s) in self.slots.iter().enumerate() {
                match *s {
                    Slot::Dat {
                        ptr,
                        dim,
                        loc,
                        mode: Access::Inc,
                        ..
                    } => {
                        incs[ni] = (k, ptr, dim, Gather::of(loc), off);
                        ni += 1;
                        off += dim;
                    }
                    Slot::Dat {
                        ptr,
                        len,
                        dim,
                        loc,
                        mode,
                    } => {
                        in_place[np] = (k, ptr, len, dim, Gather::of(loc), mode == Access::Write);
                        np += 1;
                    }
                    Slot::Global { dim } => {
                        let (head, tail) = std::mem::take(&mut ac).split_at_mut(dim);
                        ws[k] = head;
                        ac = tail;
                    }
                }
            }
        }
        // Pairs of `Inc` slots on one dat: they may name one element, and then go through
        // the scratch (at most 120 pairs of 16 slots).
        let mut pairs = [(0u8, 0u8); MAX_ARGS * (MAX_ARGS - 1) / 2];
        let mut npairs = 0;
        for b in 0..ni {
            for a in 0..b {
                if incs[a].1 == incs[b].1 {
                    pairs[npairs] = (a as u8, b as u8);
                    npairs += 1;
                }
            }
        }
        let (in_place, incs) = (&in_place[..np], &incs[..ni]);
        let pairs = &pairs[..npairs];
        let scratch = scratch.as_mut_ptr();
        let mut at = [0usize; MAX_ARGS];
        for e in elems {
            // The reads that depend on the element, with the count a constant for the common
            // counts (an unrolled binding instead of a loop over a runtime-length slice).
            // SAFETY: (every arm) `e` has a row in every map of the loop, and every map entry
            // is an element of its dat (`run`'s contract).
            unsafe {
                match nv {
                    0 => {}
                    1 => bind::<T, 1>(&mut reads, &varying, e),
                    2 => bind::<T, 2>(&mut reads, &varying, e),
                    3 => bind::<T, 3>(&mut reads, &varying, e),
                    4 => bind::<T, 4>(&mut reads, &varying, e),
                    5 => bind::<T, 5>(&mut reads, &varying, e),
                    6 => bind::<T, 6>(&mut reads, &varying, e),
                    _ => bind_n(&mut reads, &varying[..nv], e),
                }
            }
            for &(k, ptr, len, dim, loc, zero) in in_place {
                // SAFETY: `e` has a row in the map (`run`'s contract).
                let at = unsafe { loc.index(e) } * dim;
                debug_assert!(at + dim <= len);
                // SAFETY: in bounds (`run`'s contract); no other argument, element or
                // concurrent call touches this dat element while the kernel runs (validation,
                // `check_exclusive`, colouring), so this is the only reference to it.
                let w = unsafe { std::slice::from_raw_parts_mut(ptr.add(at), dim) };
                if zero {
                    zero_small(w);
                }
                ws[k] = w;
            }
            for (j, &(_, _, dim, loc, _)) in incs.iter().enumerate() {
                // SAFETY: `e` has a row in the map (`run`'s contract).
                at[j] = unsafe { loc.index(e) } * dim;
            }
            if pairs.iter().all(|&(a, b)| at[a as usize] != at[b as usize]) {
                // Every `Inc` target of this element is a distinct dat element: the kernel
                // adds to them in place (OP2's sequential `OP_INC`).
                for (j, &(k, ptr, dim, ..)) in incs.iter().enumerate() {
                    // SAFETY: in bounds (`run`'s contract); no other argument of this element
                    // names this dat element (the pairs differ; validation gives an `Inc` dat
                    // no other kind of argument), and no concurrent call writes it
                    // (colouring), so this is the only reference to it while the kernel runs.
                    ws[k] = unsafe { std::slice::from_raw_parts_mut(ptr.add(at[j]), dim) };
                }
                kernel(&reads[..nr], &mut ws[..nw]);
            } else {
                // Two `Inc` arguments name one element: each gets zeros in the scratch, added
                // back in argument order.
                for &(k, _, dim, _, o) in incs {
                    // SAFETY: `o..o + dim` are this slot's own values of the scratch (the
                    // slots' ranges are disjoint and within it).
                    let w = unsafe { std::slice::from_raw_parts_mut(scratch.add(o), dim) };
                    zero_small(w);
                    ws[k] = w;
                }
                kernel(&reads[..nr], &mut ws[..nw]);
                for (j, &(k, ptr, dim, ..)) in incs.iter().enumerate() {
                    // SAFETY: in bounds (`run`'s contract), and this call is the only writer
                    // of the element while it runs; the slice lives for this statement only.
                    let dst = unsafe { std::slice::from_raw_parts_mut(ptr.add(at[j]), dim) };
                    add_small(dst, ws[k]);
                }
            }
        }
    }
}

/// A read argument that depends on the element: `(position among the reads, data, dim,
/// gather)`.
type Varying<'a, T> = (usize, &'a [T], usize, Gather);

/// Binds the first `N` varying reads for element `e` (`N` a constant: unrolled).
///
/// # Safety
/// As [`bind_n`].
#[inline(always)]
unsafe fn bind<'a, T, const N: usize>(
    reads: &mut [&'a [T]; MAX_ARGS],
    varying: &[Varying<'a, T>; MAX_ARGS],
    e: usize,
) {
    // SAFETY: the caller's contract.
    unsafe { bind_n(reads, &varying[..N], e) }
}

/// Binds each varying read's values for element `e` into `reads`.
///
/// # Safety
/// `e` has a row in every map of `varying`, and every map entry is an element of its dat.
#[inline(always)]
unsafe fn bind_n<'a, T>(reads: &mut [&'a [T]; MAX_ARGS], varying: &[Varying<'a, T>], e: usize) {
    for &(k, data, dim, loc) in varying {
        // SAFETY: the caller's contract.
        reads[k] = unsafe {
            let i = loc.index(e);
            debug_assert!((i + 1) * dim <= data.len());
            data.get_unchecked(i * dim..(i + 1) * dim)
        };
    }
}

/// `dst += src` element-wise for the few values of one element (unrolled for 1, 2 and 4).
#[inline(always)]
fn add_small<T: Scalar>(dst: &mut [T], src: &[T]) {
    match (dst, src) {
        ([d0], [s0]) => *d0 = T::add(*d0, *s0),
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (T::add(*d0, *s0), T::add(*d1, *s1)),
        ([d0, d1, d2, d3], [s0, s1, s2, s3]) => {
            (*d0, *d1, *d2, *d3) = (
                T::add(*d0, *s0),
                T::add(*d1, *s1),
                T::add(*d2, *s2),
                T::add(*d3, *s3),
            )
        }
        (d, s) => d.iter_mut().zip(s).for_each(|(d, s)| *d = T::add(*d, *s)),
    }
}

/// Zeros the few values of one element (inline, no `memset` call).
#[inline(always)]
fn zero_small<T: Scalar>(dst: &mut [T]) {
    let z = T::default();
    match dst {
        [d0] => *d0 = z,
        [d0, d1] => (*d0, *d1) = (z, z),
        [d0, d1, d2, d3] => (*d0, *d1, *d2, *d3) = (z, z, z, z),
        d => d.iter_mut().for_each(|d| *d = z),
    }
}
