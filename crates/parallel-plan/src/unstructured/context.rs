//! The program context: declarations of sets, maps, dats and globals, and the backend that
//! runs their loops.

use std::collections::HashMap;
use std::sync::Arc;

use super::colour::Colouring;
use super::decl::{Dat, Global, Map, Set};
use super::error::{Result, UnstructuredError};
use super::scalar::{Scalar, Storage};
use super::stats::RunStats;

/// Where a program's loops run, chosen at run time; the program is the same for all.
#[derive(Debug)]
#[non_exhaustive]
pub enum Backend {
    /// One thread, elements in order: the reference.
    Sequential,
    /// Shared-memory parallel in the caller's rayon pool (run the program inside
    /// `ThreadPool::install` to choose the threads). At the first loop the mesh is renumbered
    /// for locality (breadth-first over the primary set's connectivity; values and errors
    /// keep the declared numbering). Loops that write through maps run in blocks of
    /// consecutive, hence nearby, elements, coloured so that blocks that could write one
    /// element get different colours (OP2's block colouring); one colour runs at a time, its
    /// blocks in parallel, so increments never race.
    Threads,
    /// One rank of a distributed run over a `collectives` communicator (any transport): the
    /// mesh is renumbered for locality (as for `Threads`), partitioned and localised
    /// automatically at the first loop, halos exchanged
    /// before loops that read them, reductions all-reduced.
    #[cfg(feature = "distributed")]
    Distributed(Box<super::distributed::Runtime>),
}

impl Backend {
    /// Short name (`seq`, `threads`, `dist`).
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sequential => "seq",
            Backend::Threads => "threads",
            #[cfg(feature = "distributed")]
            Backend::Distributed(_) => "dist",
        }
    }
}

/// A declared set: its global size and, once distributed, this rank's local sizes.
#[derive(Debug, Clone)]
pub(crate) struct SetDecl {
    pub(crate) name: String,
    /// Elements in the whole mesh.
    pub(crate) size: usize,
    /// Local elements owned by this rank (`0..owned`).
    pub(crate) owned: usize,
    /// Owned plus exec halo (`0..exec`): what an indirectly writing loop executes.
    pub(crate) exec: usize,
    /// All local elements (owned, exec halo, non-exec halo).
    pub(crate) local: usize,
}

/// A declared map, in local numbering once distributed (rows `0..exec` of its source set).
#[derive(Debug, Clone)]
pub(crate) struct MapDecl {
    pub(crate) name: String,
    pub(crate) from: usize,
    pub(crate) to: usize,
    pub(crate) arity: usize,
    pub(crate) values: Vec<u32>,
}

/// A declared dat, in local numbering once distributed.
#[derive(Debug, Clone)]
pub(crate) struct DatDecl {
    pub(crate) name: String,
    pub(crate) set: usize,
    pub(crate) dim: usize,
    pub(crate) data: Storage,
    /// Whether its halo copies are stale (written since their last exchange).
    pub(crate) dirty: bool,
}

/// A declared global (replicated on every rank).
#[derive(Debug, Clone)]
pub(crate) struct GlobalDecl {
    pub(crate) name: String,
    pub(crate) data: Storage,
}

/// An unstructured-mesh program: declarations plus the backend that runs its
/// [`par_loop`](Context::par_loop)s.
///
/// Declare every set, map and dat first (in global numbering, the same on every rank), then
/// run loops. Nothing in the program depends on the backend.
#[derive(Debug)]
pub struct Context {
    pub(crate) sets: Vec<SetDecl>,
    pub(crate) maps: Vec<MapDecl>,
    pub(crate) dats: Vec<DatDecl>,
    pub(crate) globals: Vec<GlobalDecl>,
    pub(crate) backend: Backend,
    /// Colourings of the threaded backend, by loop shape.
    pub(crate) colourings: HashMap<Vec<usize>, Arc<Colouring>>,
    /// `(map, slot)` pairs already checked to send no two elements to one target.
    pub(crate) injective: HashMap<(usize, usize), bool>,
    /// Whether two `Inc` accesses (`None` direct, else `(map, slot)`) name one element for
    /// some of the first `n` loop elements, by `(first, second, n)`
    /// ([`par_loop_fixed`](Context::par_loop_fixed)).
    #[allow(clippy::type_complexity)]
    pub(crate) inc_alias: HashMap<(Option<(usize, usize)>, Option<(usize, usize)>, usize), bool>,
    pub(crate) stats: RunStats,
    /// Whether the mesh was distributed (after which declarations are refused).
    pub(crate) frozen: bool,
    /// The locality renumbering of threaded and distributed runs: `order[set][new] =
    /// declared number`.
    pub(crate) order: Option<Vec<Vec<u32>>>,
}

fn invalid(name: &str, detail: impl Into<String>) -> UnstructuredError {
    UnstructuredError::InvalidDeclaration {
        name: name.to_string(),
        detail: detail.into(),
    }
}

impl Context {
    /// An empty program on `backend`.
    pub fn new(backend: Backend) -> Self {
        Self {
            sets: Vec::new(),
            maps: Vec::new(),
            dats: Vec::new(),
            globals: Vec::new(),
            backend,
            colourings: HashMap::new(),
            injective: HashMap::new(),
            inc_alias: HashMap::new(),
            stats: RunStats::default(),
            frozen: false,
            order: None,
        }
    }

    /// The backend's short name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    fn check_open(&self, name: &str) -> Result<()> {
        if self.frozen {
            return Err(UnstructuredError::DeclaredAfterDistribution {
                name: name.to_string(),
            });
        }
        Ok(())
    }

    pub(crate) fn set_decl(&self, set: Set) -> Result<&SetDecl> {
        self.sets
            .get(set.0)
            .ok_or_else(|| invalid(&format!("set #{}", set.0), "not declared in this context"))
    }

    /// Declares a set of `size` elements.
    pub fn decl_set(&mut self, name: &str, size: usize) -> Result<Set> {
        self.check_open(name)?;
        if size > u32::MAX as usize {
            return Err(invalid(
                name,
                format!("{size} elements exceed u32 numbering"),
            ));
        }
        self.sets.push(SetDecl {
            name: name.to_string(),
            size,
            owned: size,
            exec: size,
            local: size,
        });
        Ok(Set(self.sets.len() - 1))
    }

    /// Declares a map sending each element `e` of `from` to `values[e * arity .. (e + 1) * arity]`
    /// of `to` (global numbering).
    ///
    /// # Errors
    /// [`UnstructuredError::InvalidDeclaration`] if the length is not `arity × |from|`,
    /// [`UnstructuredError::MapOutOfRange`] naming the first entry outside `to`.
    pub fn decl_map(
        &mut self,
        name: &str,
        from: Set,
        to: Set,
        arity: usize,
        values: Vec<u32>,
    ) -> Result<Map> {
        self.check_open(name)?;
        let (f, t) = (self.set_decl(from)?.clone(), self.set_decl(to)?.clone());
        if arity == 0 {
            return Err(invalid(name, "arity must be at least 1"));
        }
        if values.len() != arity * f.size {
            return Err(invalid(
                name,
                format!(
                    "{} values for {} elements of `{}` × arity {arity}",
                    values.len(),
                    f.size,
                    f.name
                ),
            ));
        }
        super::error::check_map_range(name, &values, arity, &t.name, t.size)?;
        self.maps.push(MapDecl {
            name: name.to_string(),
            from: from.0,
            to: to.0,
            arity,
            values,
        });
        Ok(Map(self.maps.len() - 1))
    }

    /// Declares `dim` values per element of `set`, element-major (global numbering).
    ///
    /// # Errors
    /// [`UnstructuredError::InvalidDeclaration`] if the length is not `dim × |set|`.
    pub fn decl_dat<T: Scalar>(
        &mut self,
        name: &str,
        set: Set,
        dim: usize,
        values: Vec<T>,
    ) -> Result<Dat<T>> {
        self.check_open(name)?;
        let s = self.set_decl(set)?;
        if dim == 0 || values.len() != dim * s.size {
            return Err(invalid(
                name,
                format!(
                    "{} values for {} elements of `{}` × dim {dim} (dim ≥ 1)",
                    values.len(),
                    s.size,
                    s.name
                ),
            ));
        }
        self.dats.push(DatDecl {
            name: name.to_string(),
            set: set.0,
            dim,
            data: T::wrap(values),
            dirty: true,
        });
        Ok(Dat::new(self.dats.len() - 1))
    }

    /// Declares a global of `values.len()` values (a constant, or a reduction's start value).
    pub fn decl_global<T: Scalar>(&mut self, name: &str, values: Vec<T>) -> Result<Global<T>> {
        if values.is_empty() {
            return Err(invalid(name, "a global needs at least one value"));
        }
        self.globals.push(GlobalDecl {
            name: name.to_string(),
            data: T::wrap(values),
        });
        Ok(Global::new(self.globals.len() - 1))
    }

    fn global_decl(&self, id: usize) -> Result<&GlobalDecl> {
        self.globals
            .get(id)
            .ok_or_else(|| invalid(&format!("global #{id}"), "not declared in this context"))
    }

    /// The values of a global (the same on every rank).
    pub fn global_values<T: Scalar>(&self, global: Global<T>) -> Result<Vec<T>> {
        let g = self.global_decl(global.id)?;
        T::slice(&g.data)
            .cloned()
            .ok_or_else(|| invalid(&g.name, "element type differs from the declaration"))
    }

    /// Overwrites the values of a global (same length as declared), e.g. to reset a reduction.
    pub fn set_global<T: Scalar>(&mut self, global: Global<T>, values: &[T]) -> Result<()> {
        let g = self
            .globals
            .get_mut(global.id)
            .ok_or_else(|| invalid(&format!("global #{}", global.id), "not declared"))?;
        let name = g.name.clone();
        let v = T::slice_mut(&mut g.data)
            .ok_or_else(|| invalid(&name, "element type differs from the declaration"))?;
        if v.len() != values.len() {
            return Err(invalid(
                &name,
                format!("{} values for a global of {}", values.len(), v.len()),
            ));
        }
        v.copy_from_slice(values);
        Ok(())
    }

    /// Number of elements of `set` in the whole mesh.
    pub fn set_size(&self, set: Set) -> Result<usize> {
        Ok(self.set_decl(set)?.size)
    }

    /// Statistics of the loops run so far (calls, elements, halo exchanges and bytes).
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// The values of a dat in global numbering (on a distributed run every rank gets them all;
    /// every rank must call this together).
    pub fn dat_values<T: Scalar>(&mut self, dat: Dat<T>) -> Result<Vec<T>> {
        let d = self
            .dats
            .get(dat.id)
            .ok_or_else(|| invalid(&format!("dat #{}", dat.id), "not declared"))?;
        let local = T::slice(&d.data)
            .ok_or_else(|| invalid(&d.name, "element type differs from the declaration"))?;
        match &self.backend {
            Backend::Sequential | Backend::Threads => Ok(self.unrenumber(d.set, d.dim, local)),
            #[cfg(feature = "distributed")]
            Backend::Distributed(rt) => {
                let all = rt.gather(&self.sets[d.set], d.set, d.dim, local)?;
                Ok(self.unrenumber(d.set, d.dim, &all))
            }
        }
    }
}
