//! `par_loop`: validates a loop's arguments, then runs it on the context's backend.

use rayon::prelude::*;

use super::colour::{self, Colouring, Writes};
use super::context::{Backend, Context};
use super::decl::{Access, Arg, Set, Target};
use super::error::{Result, UnstructuredError};
use super::exec::{Exec, Loc, Plan, ReadArg, SliceKernel, Slot, MAX_ARGS};
use super::scalar::Scalar;
use super::stats::LoopStats;

/// Elements per task of the threaded backend (fixed, so reductions combine in the same order
/// whatever the number of threads).
const CHUNK: usize = 512;

/// What validation learned about a loop.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Whether some argument writes through a map (the loop then runs the exec halo too).
    pub(crate) indirect_write: bool,
    /// Dats the loop reads indirectly, or directly while running the exec halo: their halos
    /// must be current.
    pub(crate) needs_halo: Vec<usize>,
    /// Dats the loop writes.
    pub(crate) written: Vec<usize>,
    /// `(arg, dat, map, slot)` of indirect `Write`/`ReadWrite` arguments.
    pub(crate) indirect_exclusive: Vec<(usize, usize, usize, usize)>,
    /// Reduction mode of each accumulator value.
    pub(crate) acc_ops: Vec<Access>,
}

impl Context {
    fn bad_arg(name: &str, arg: usize, detail: impl Into<String>) -> UnstructuredError {
        UnstructuredError::InvalidArgument {
            loop_name: name.to_string(),
            arg,
            detail: detail.into(),
        }
    }

    /// Checks every argument against the loop set, the declarations and each other.
    fn validate<T: Scalar>(&self, name: &str, set: Set, args: &[Arg<T>]) -> Result<Shape> {
        let s = self.set_decl(set)?;
        let mut shape = Shape::default();
        let (nr, nw) = args.iter().fold((0, 0), |(r, w), a| {
            if a.mode.writes() {
                (r, w + 1)
            } else {
                (r + 1, w)
            }
        });
        if nr > MAX_ARGS || nw > MAX_ARGS {
            return Err(Self::bad_arg(
                name,
                0,
                format!("{nr} read and {nw} written arguments; at most {MAX_ARGS} of each"),
            ));
        }
        for (k, a) in args.iter().enumerate() {
            match a.target {
                Target::Global(id) => {
                    let g = self.globals.get(id).ok_or_else(|| {
                        Self::bad_arg(name, k, "global not declared in this context")
                    })?;
                    if T::slice(&g.data).is_none() {
                        return Err(Self::bad_arg(
                            name,
                            k,
                            format!("global `{}` has another element type", g.name),
                        ));
                    }
                    match a.mode {
                        Access::Read => {}
                        Access::Inc | Access::Min | Access::Max => {
                            shape
                                .acc_ops
                                .extend(std::iter::repeat_n(a.mode, g.data.len()));
                        }
                        m => {
                            return Err(Self::bad_arg(
                                name,
                                k,
                                format!("global `{}` cannot be accessed as {}", g.name, m.name()),
                            ))
                        }
                    }
                }
                Target::Dat { id, via } => {
                    let d = self.dats.get(id).ok_or_else(|| {
                        Self::bad_arg(name, k, "dat not declared in this context")
                    })?;
                    if T::slice(&d.data).is_none() {
                        return Err(Self::bad_arg(
                            name,
                            k,
                            format!("dat `{}` has another element type", d.name),
                        ));
                    }
                    if matches!(a.mode, Access::Min | Access::Max) {
                        return Err(Self::bad_arg(
                            name,
                            k,
                            format!("dat `{}`: {} is for globals only", d.name, a.mode.name()),
                        ));
                    }
                    match via {
                        None => {
                            if d.set != set.0 {
                                return Err(Self::bad_arg(
                                    name,
                                    k,
                                    format!(
                                        "dat `{}` is on set `{}`, the loop runs over `{}`",
                                        d.name, self.sets[d.set].name, s.name
                                    ),
                                ));
                            }
                        }
                        Some((m, slot)) => {
                            let map = self.maps.get(m).ok_or_else(|| {
                                Self::bad_arg(name, k, "map not declared in this context")
                            })?;
                            if map.from != set.0 || map.to != d.set {
                                return Err(Self::bad_arg(name, k, format!("map `{}` goes from `{}` to `{}`; the loop runs over `{}` and dat `{}` is on `{}`", map.name, self.sets[map.from].name, self.sets[map.to].name, s.name, d.name, self.sets[d.set].name)));
                            }
                            if slot >= map.arity {
                                return Err(Self::bad_arg(
                                    name,
                                    k,
                                    format!(
                                        "slot {slot} of map `{}` of arity {}",
                                        map.name, map.arity
                                    ),
                                ));
                            }
                            if a.mode.writes() {
                                shape.indirect_write = true;
                                if a.mode != Access::Inc {
                                    shape.indirect_exclusive.push((k, id, m, slot));
                                }
                            }
                        }
                    }
                    if a.mode.writes() && !shape.written.contains(&id) {
                        shape.written.push(id);
                    }
                    // Conflicts with earlier arguments on the same dat.
                    for (j, b) in args[..k].iter().enumerate() {
                        if let Target::Dat { id: other, .. } = b.target {
                            let both_read = a.mode == Access::Read && b.mode == Access::Read;
                            let both_inc = a.mode == Access::Inc && b.mode == Access::Inc;
                            if other == id && !both_read && !both_inc {
                                return Err(UnstructuredError::ConflictingAccess {
                                    loop_name: name.to_string(),
                                    dat: d.name.clone(),
                                    first_arg: j,
                                    first: b.mode.name(),
                                    second_arg: k,
                                    second: a.mode.name(),
                                });
                            }
                        }
                    }
                }
            }
        }
        for a in args {
            if let Target::Dat { id, via } = a.target {
                let reads = matches!(a.mode, Access::Read | Access::ReadWrite);
                if reads
                    && (via.is_some() || shape.indirect_write)
                    && !shape.needs_halo.contains(&id)
                {
                    shape.needs_halo.push(id);
                }
            }
        }
        Ok(shape)
    }

    /// The colliding pair that the sequential order meets first among the first `n` elements
    /// of `map`'s source set through slot `slot`: over every target that two or more of them
    /// write, the two lowest declared numbers of its writers, the pair with the lowest second
    /// one (then first) chosen. Returned as `(second, first, target)` in declared numbering,
    /// so that the minimum over the partial views of several ranks is the pair of the whole
    /// mesh (a rank that sees only some writers of a target sees a pair no lower).
    ///
    /// The result does not depend on the local numbering (locality renumbering, partition):
    /// every backend names the same pair, the one the sequential backend meets first.
    pub(crate) fn find_collision(
        &self,
        map: usize,
        slot: usize,
        n: usize,
    ) -> Option<(usize, usize, usize)> {
        let m = &self.maps[map];
        // The two lowest declared numbers of the elements writing each local target.
        let mut low = vec![(usize::MAX, usize::MAX); self.sets[m.to].local];
        for e in 0..n {
            let t = m.values[e * m.arity + slot] as usize;
            let g = self.global_id(m.from, e);
            let l = &mut low[t];
            if g < l.0 {
                *l = (g, l.0);
            } else if g < l.1 {
                l.1 = g;
            }
        }
        low.iter()
            .enumerate()
            .filter(|(_, l)| l.1 != usize::MAX)
            .map(|(t, &(a, b))| (b, a, t))
            .min()
            .map(|(b, a, t)| (b, a, self.global_id(m.to, t)))
    }

    /// Runs `kernel` on every element of `set`.
    ///
    /// The kernel gets the `Read` arguments as `reads` and all others as `writes`, each in
    /// argument order, one slice of `dim` values per argument: OP2's `op_par_loop`. Constants
    /// the kernel needs can be captured by the closure or passed as `Read` globals.
    ///
    /// # Errors
    /// [`UnstructuredError::InvalidArgument`] for an argument that does not fit the loop,
    /// [`UnstructuredError::ConflictingAccess`] for a dat both written and otherwise accessed,
    /// [`UnstructuredError::ConflictingIndirectWrite`] for an indirect `Write`/`ReadWrite` whose
    /// map sends two iterations to one element; on distributed runs, communication errors.
    pub fn par_loop<T, F>(&mut self, name: &str, set: Set, args: &[Arg<T>], kernel: F) -> Result<()>
    where
        T: Scalar,
        F: Fn(&[&[T]], &mut [&mut [T]]) + Sync,
    {
        self.run_loop(name, set, args, |_, _| SliceKernel(kernel))
    }

    /// A loop of either API: validation, distribution, halos, then `exec` (made by `make`
    /// from the context and the number of elements to run, once they are known) on the
    /// backend, then the reductions.
    pub(crate) fn run_loop<T, E>(
        &mut self,
        name: &str,
        set: Set,
        args: &[Arg<T>],
        make: impl FnOnce(&mut Self, usize) -> E,
    ) -> Result<()>
    where
        T: Scalar,
        E: Exec<T>,
    {
        let t0 = std::time::Instant::now();
        let shape = self.validate(name, set, args)?;
        let t = std::time::Instant::now();
        self.prepare()?;
        let mut setup = t.elapsed();
        let s = &self.sets[set.0];
        let owned = s.owned;
        let n = if shape.indirect_write { s.exec } else { owned };
        self.check_exclusive(name, n, &shape)?;
        let exec = make(self, n);
        let mut stats = LoopStats {
            calls: 1,
            elements: n as u64,
            ..LoopStats::default()
        };
        self.exchange_halos::<T>(&shape.needs_halo, &mut stats)?;

        let acc0: Vec<T> = args
            .iter()
            .filter_map(|a| match (a.target, a.mode) {
                (Target::Global(_), Access::Read) | (Target::Dat { .. }, _) => None,
                (Target::Global(id), Access::Inc) => {
                    Some(vec![T::default(); self.globals[id].data.len()])
                }
                (Target::Global(id), _) => T::slice(&self.globals[id].data).cloned(),
            })
            .flatten()
            .collect();
        let colouring = match (&self.backend, shape.indirect_write) {
            (Backend::Threads, true) => {
                let t = std::time::Instant::now();
                let c = self.colouring(set.0, n, args);
                setup += t.elapsed();
                Some(c)
            }
            _ => None,
        };
        stats.colours = colouring.as_ref().map_or(0, |c| c.len() as u64);
        let threaded = matches!(self.backend, Backend::Threads);
        let acc = {
            let plan = self.plan(args);
            if threaded {
                run_threads(&plan, n, colouring.as_deref(), &acc0, &shape.acc_ops, &exec)
            } else {
                let mut acc = acc0.clone();
                // SAFETY: one call at a time, on this thread; every index is in bounds (maps
                // validated at declaration and localisation).
                unsafe { exec.run(&plan, 0..owned, &mut acc) };
                // The exec halo (distributed runs) is executed for its increments to owned
                // elements only: its reductions belong to the rank that owns it.
                let mut discard = acc0.clone();
                // SAFETY: as above.
                unsafe { exec.run(&plan, owned..n, &mut discard) };
                acc
            }
        };
        let acc = self.all_reduce_acc(acc, &shape.acc_ops)?;
        let mut off = 0;
        for a in args {
            if let (Target::Global(id), m) = (a.target, a.mode) {
                if m == Access::Read {
                    continue;
                }
                let g = T::slice_mut(&mut self.globals[id].data).expect("type checked in validate");
                for v in g.iter_mut() {
                    *v = if m == Access::Inc {
                        T::add(*v, acc[off])
                    } else {
                        acc[off]
                    };
                    off += 1;
                }
            }
        }
        for &d in &shape.written {
            self.dats[d].dirty = true;
        }
        stats.nanos = t0.elapsed().saturating_sub(setup).as_nanos() as u64;
        self.stats.setup_nanos += setup.as_nanos() as u64;
        self.stats.record(name, &stats);
        Ok(())
    }

    /// The loop's arguments as raw views of the dats (written dats by pointer, the others by
    /// shared slices).
    fn plan<T: Scalar>(&mut self, args: &[Arg<T>]) -> Plan<'_, T> {
        let written: Vec<usize> = args
            .iter()
            .filter_map(|a| match a.target {
                Target::Dat { id, .. } if a.mode.writes() => Some(id),
                _ => None,
            })
            .collect();
        enum View<'a, T> {
            Read(&'a [T]),
            Write(*mut T, usize),
        }
        let dims: Vec<usize> = self.dats.iter().map(|d| d.dim).collect();
        let views: Vec<View<'_, T>> = self
            .dats
            .iter_mut()
            .enumerate()
            .map(|(id, d)| {
                let v = T::slice_mut(&mut d.data);
                match v {
                    Some(v) if written.contains(&id) => View::Write(v.as_mut_ptr(), v.len()),
                    Some(v) => View::Read(&v[..]),
                    None => View::Read(&[]),
                }
            })
            .collect();
        let (maps, globals) = (&self.maps, &self.globals);
        let mut plan = Plan {
            reads: Vec::new(),
            slots: Vec::new(),
        };
        for a in args {
            match a.target {
                Target::Global(id) => {
                    let g = T::slice(&globals[id].data).expect("type checked in validate");
                    if a.mode == Access::Read {
                        plan.reads.push(ReadArg {
                            data: g,
                            dim: g.len(),
                            loc: Loc::Global,
                        });
                    } else {
                        plan.slots.push(Slot::Global { dim: g.len() });
                    }
                }
                Target::Dat { id, via } => {
                    let dim = dims[id];
                    let loc = match via {
                        None => Loc::Direct,
                        Some((m, slot)) => Loc::Via {
                            map: &maps[m].values,
                            arity: maps[m].arity,
                            slot,
                        },
                    };
                    match views[id] {
                        View::Read(data) => plan.reads.push(ReadArg { data, dim, loc }),
                        View::Write(ptr, len) => plan.slots.push(Slot::Dat {
                            ptr,
                            len,
                            dim,
                            loc,
                            mode: a.mode,
                        }),
                    }
                }
            }
        }
        plan
    }

    /// The (cached) colouring of the first `n` elements of `set` for these arguments.
    fn colouring<T>(&mut self, set: usize, n: usize, args: &[Arg<T>]) -> std::sync::Arc<Colouring> {
        let mut key = vec![set, n];
        for a in args {
            if let (
                Target::Dat {
                    id,
                    via: Some((m, slot)),
                },
                true,
            ) = (a.target, a.mode.writes())
            {
                key.extend([m, slot, self.dats[id].set]);
            }
        }
        if let Some(c) = self.colourings.get(&key) {
            return c.clone();
        }
        let spaces: Vec<usize> = key[2..].chunks(3).map(|c| c[2]).collect();
        let mut space_ids: Vec<usize> = spaces.clone();
        space_ids.sort_unstable();
        space_ids.dedup();
        let writes: Vec<Writes<'_>> = key[2..]
            .chunks(3)
            .map(|c| {
                let m = &self.maps[c[0]];
                Writes {
                    map: &m.values,
                    arity: m.arity,
                    slot: c[1],
                    space: space_ids.binary_search(&c[2]).expect("present"),
                }
            })
            .collect();
        let sizes: Vec<usize> = space_ids.iter().map(|&s| self.sets[s].local).collect();
        let c = std::sync::Arc::new(colour::colour(n, &writes, &sizes, colour::BLOCK));
        self.colourings.insert(key, c.clone());
        c
    }
}

/// Combines reduction accumulator `from` into `into`.
pub(crate) fn combine<T: Scalar>(into: &mut [T], from: &[T], ops: &[Access]) {
    for ((i, f), op) in into.iter_mut().zip(from).zip(ops) {
        *i = match op {
            Access::Min => T::min_of(*i, *f),
            Access::Max => T::max_of(*i, *f),
            _ => T::add(*i, *f),
        };
    }
}

/// The threaded backend: colour by colour, the colour's blocks in parallel (or, when nothing
/// is written indirectly, chunks of [`CHUNK`] elements in parallel) in the caller's rayon pool.
/// Reductions combine per block (per chunk) in a fixed order, whatever the number of threads.
fn run_threads<T, E>(
    plan: &Plan<'_, T>,
    n: usize,
    colouring: Option<&Colouring>,
    acc0: &[T],
    ops: &[Access],
    exec: &E,
) -> Vec<T>
where
    T: Scalar,
    E: Exec<T>,
{
    let identity: Vec<T> = acc0
        .iter()
        .zip(ops)
        .map(|(v, op)| if *op == Access::Inc { T::default() } else { *v })
        .collect();
    let mut acc = acc0.to_vec();
    // SAFETY (both calls below): blocks of one colour write pairwise distinct elements of
    // every indirectly written dat (block colouring), one block runs on one thread, and
    // distinct elements write distinct direct elements; so concurrent chunks never write one
    // element. Indices are in bounds (validated maps), and every element has its map rows.
    let partials: Vec<Vec<T>> = match colouring {
        None => {
            let chunks = n.div_ceil(CHUNK);
            (0..chunks)
                .into_par_iter()
                .map(|c| {
                    let mut a = identity.clone();
                    // SAFETY: see above.
                    unsafe { exec.run(plan, c * CHUNK..((c + 1) * CHUNK).min(n), &mut a) };
                    a
                })
                .collect()
        }
        Some(col) => (0..col.len())
            .flat_map(|c| {
                col.blocks_of(c)
                    .par_iter()
                    .map(|&(lo, hi)| {
                        let mut a = identity.clone();
                        // SAFETY: see above.
                        unsafe { exec.run(plan, lo..hi, &mut a) };
                        a
                    })
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    for p in &partials {
        combine(&mut acc, p, ops);
    }
    acc
}
