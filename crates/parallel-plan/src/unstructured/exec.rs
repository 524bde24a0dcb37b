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

impl Loc<'_> {
    /// The element that element `e`'s argument refers to.
    ///
    /// # Safety
    /// For `Via`, `e * arity + slot` is in bounds of the map (`e` is an element the map has a
    /// row for).
    #[inline(always)]
    pub(crate) unsafe fn index(&self, e: usize) -> usize {
        match *self {
            Loc::Direct => e,
            Loc::Via { map, arity, slot } => {
                debug_assert!(e * arity + slot < map.len());
                // SAFETY: in bounds (caller's contract).
                (unsafe { *map.get_unchecked(e * arity + slot) }) as usize
            }
            Loc::Global => 0,
        }
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
    /// Values per element of all dat slots (the per-element scratch).
    fn scratch_len(&self) -> usize {
        self.slots
            .iter()
            .map(|s| match s {
                Slot::Dat { dim, .. } => *dim,
                Slot::Global { .. } => 0,
            })
            .sum()
    }

    /// Runs `kernel` on every element of `elems`, accumulating global reductions into `acc`
    /// (the global slots' values, concatenated in argument order).
    ///
    /// # Safety
    /// Every element of `elems` has a row in every map of the plan, every index that a `Loc`
    /// yields for these elements is in bounds of its dat (maps are validated at declaration and
    /// localisation, and loops run over the rows their maps have), and no other call running at
    /// the same time writes a dat element that this call writes.
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
        // The kernel's written arguments, built once: dat slots in `scratch` (gathered before
        // and scattered after each element), global slots in `acc` (accumulated in place).
        let mut ws: [&mut [T]; MAX_ARGS] = Default::default();
        {
            let (mut sc, mut ac) = (&mut scratch[..], &mut acc[..]);
            for (k, s) in self.slots.iter().enumerate() {
                let (from, dim) = match s {
                    Slot::Dat { dim, .. } => (&mut sc, *dim),
                    Slot::Global { dim } => (&mut ac, *dim),
                };
                let (head, tail) = std::mem::take(from).split_at_mut(dim);
                ws[k] = head;
                *from = tail;
            }
        }
        for e in elems {
            for (k, r) in self.reads.iter().enumerate() {
                // SAFETY: `e` has a row in every map of the loop, and every map entry is an
                // element of its dat (`run`'s contract); globals have `dim` values at 0.
                reads[k] = unsafe {
                    let i = r.loc.index(e);
                    debug_assert!((i + 1) * r.dim <= r.data.len());
                    r.data.get_unchecked(i * r.dim..(i + 1) * r.dim)
                };
            }
            for (s, w) in self.slots.iter().zip(ws.iter_mut()) {
                if let Slot::Dat {
                    ptr,
                    len,
                    dim,
                    loc,
                    mode,
                } = *s
                {
                    // SAFETY: `e` has a row in the map (`run`'s contract).
                    let at = unsafe { loc.index(e) } * dim;
                    debug_assert!(at + dim <= len);
                    if mode == Access::ReadWrite {
                        // SAFETY: `at + dim <= len` (caller's contract), and no other thread
                        // writes this element now (caller's contract).
                        copy_small(w, unsafe { std::slice::from_raw_parts(ptr.add(at), dim) });
                    } else {
                        zero_small(w);
                    }
                }
            }
            kernel(&reads[..nr], &mut ws[..nw]);
            for (s, w) in self.slots.iter().zip(ws.iter()) {
                if let Slot::Dat {
                    ptr,
                    dim,
                    loc,
                    mode,
                    ..
                } = *s
                {
                    // SAFETY: `e` has a row in the map (`run`'s contract).
                    let at = unsafe { loc.index(e) } * dim;
                    // SAFETY: as above: in bounds, and this call is the only writer of the
                    // element while it runs.
                    let dst = unsafe { std::slice::from_raw_parts_mut(ptr.add(at), dim) };
                    if mode == Access::Inc {
                        dst.iter_mut()
                            .zip(w.iter())
                            .for_each(|(d, s)| *d = T::add(*d, *s));
                    } else {
                        copy_small(dst, w);
                    }
                }
            }
        }
    }
}

/// `dst = src` element-wise for the few values of one element (inline, no `memcpy` call).
#[inline(always)]
fn copy_small<T: Copy>(dst: &mut [T], src: &[T]) {
    match (dst, src) {
        ([d0], [s0]) => *d0 = *s0,
        ([d0, d1], [s0, s1]) => (*d0, *d1) = (*s0, *s1),
        ([d0, d1, d2, d3], [s0, s1, s2, s3]) => (*d0, *d1, *d2, *d3) = (*s0, *s1, *s2, *s3),
        (d, s) => d.iter_mut().zip(s).for_each(|(d, s)| *d = *s),
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
