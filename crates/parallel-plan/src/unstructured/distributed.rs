//! The distributed runtime (cargo feature `distributed`): MARO's generated MPI pre-processing,
//! done at run time over a `collectives` communicator on any of its transports.
//!
//! At the first loop every rank, holding the same global declarations, computes the same
//! partition ([`Partitioner`]) and ownership of every set, builds its own layout (owned, exec
//! halo, non-exec halo), learns from its neighbours which of its elements they import
//! (all-to-all of counts, then their global numbers point to point), and keeps only its local
//! part of every map and dat. Afterwards a dat's halo is exchanged before a loop that reads it
//! only if the dat was written since its last exchange (dirty bit), and reductions are
//! all-reduced.

use std::time::Instant;

use collectives::{CollectiveError, Communicator, Element, ReduceOp};

use super::context::{Backend, Context, DatDecl, GlobalDecl, MapDecl, SetDecl};
use super::decl::Access;
use super::error::{Result, UnstructuredError};
use super::layout::{global_to_local, layout, localise_map, SetLayout};
use super::ownership;
use super::partition::Partitioner;
use super::renumber::pick_storage;
use super::scalar::{Scalar, Storage};

/// Settings of a distributed run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DistConfig {
    /// How the primary set is partitioned. Default: [`Partitioner::Metis`] with the `metis`
    /// feature, else [`Partitioner::Graph`].
    pub partitioner: Partitioner,
    /// For [`Partitioner::Rcb`]: the name of the dat of coordinates on the primary set.
    /// Default `None`: the first 2-D or 3-D `f64` dat declared on it.
    pub coordinates: Option<String>,
    /// The rank that holds the mesh, if only one does (MARO's scatter from one mesh file):
    /// it partitions the mesh and sends every other rank its part (local maps and dat rows,
    /// global numbers of its elements, owners of its halo) at the first loop. The other
    /// ranks declare the same sets, maps and dats with no elements (size 0, empty values),
    /// and afterwards see the global sizes ([`Context::set_size`]) and values
    /// ([`Context::dat_values`]) like every rank. Default `None`: every rank declares the
    /// whole mesh and keeps its part.
    pub scatter_from: Option<usize>,
}

/// Per-rank sizes of one set in the distribution plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SetPlan {
    /// The set's name.
    pub name: String,
    /// Owned elements per rank.
    pub owned: Vec<usize>,
    /// Exec-halo elements per rank (executed redundantly by indirectly writing loops).
    pub exec_halo: Vec<usize>,
    /// Non-exec-halo elements per rank (only read).
    pub nonexec_halo: Vec<usize>,
}

/// The distribution plan of a run, the same on every rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlanReport {
    /// Ranks.
    pub ranks: usize,
    /// The partitioner used.
    pub partitioner: String,
    /// The partitioned (primary) set.
    pub primary: Option<String>,
    /// Edges of the primary set's connectivity graph cut by the partition.
    pub edge_cut: usize,
    /// Seconds to partition (on rank 0).
    pub partition_seconds: f64,
    /// Seconds for the whole setup: locality renumbering, partition, layouts, import/export
    /// lists, localisation (on rank 0).
    pub setup_seconds: f64,
    /// Sizes per set.
    pub sets: Vec<SetPlan>,
}

/// Import and export lists of one set on one rank.
#[derive(Debug, Clone, Default)]
struct Exchange {
    /// `(owner rank, local indices of halo elements it sends)`.
    imports: Vec<(usize, Vec<u32>)>,
    /// `(rank, local indices of owned elements to send it)`.
    exports: Vec<(usize, Vec<u32>)>,
}

#[derive(Debug)]
struct Layout {
    sets: Vec<SetLayout>,
    exchanges: Vec<Exchange>,
}

/// One rank of a distributed run: its communicator and, once the mesh is distributed, its
/// layout.
#[derive(Debug)]
pub struct Runtime {
    comm: Communicator,
    config: DistConfig,
    layout: Option<Layout>,
    report: Option<PlanReport>,
    /// The first rank whose scatter or halo lists failed and the step, once one did (every
    /// rank knows it): this runtime then refuses to distribute again, its point-to-point
    /// streams being out of step.
    failed: Option<(usize, &'static str)>,
}

impl Backend {
    /// The distributed backend on `comm` (every rank of it runs the same program).
    pub fn distributed(comm: Communicator, config: DistConfig) -> Backend {
        Backend::Distributed(Box::new(Runtime {
            comm,
            config,
            layout: None,
            report: None,
            failed: None,
        }))
    }
}

impl Runtime {
    fn comm_err(&self, source: CollectiveError) -> UnstructuredError {
        UnstructuredError::Comm {
            rank: self.comm.rank(),
            source,
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        self.comm.world_size()
    }

    pub(crate) fn global_id(&self, set: usize, e: usize) -> usize {
        self.layout
            .as_ref()
            .map_or(e, |l| l.sets[set].global[e] as usize)
    }

    /// The lexicographically smallest triple any rank found.
    pub(crate) fn agree(
        &self,
        hit: Option<(usize, usize, usize)>,
        _step: &str,
    ) -> Result<Option<(usize, usize, usize)>> {
        let mine = match hit {
            Some((a, b, t)) => vec![a as i64, b as i64, t as i64],
            None => vec![i64::MAX; 3],
        };
        let all = self.comm.all_gather(mine).map_err(|e| self.comm_err(e))?;
        Ok(all
            .chunks(3)
            .filter(|c| c[0] != i64::MAX)
            .map(|c| (c[0] as usize, c[1] as usize, c[2] as usize))
            .min())
    }

    /// Sends owned values to the ranks that import them and receives this rank's halo of
    /// `set`; returns the bytes sent.
    pub(crate) fn exchange<T: Scalar>(
        &self,
        set: usize,
        dim: usize,
        values: &mut [T],
    ) -> Result<u64> {
        let Some(layout) = &self.layout else {
            return Ok(0);
        };
        let x = &layout.exchanges[set];
        let mut bytes = 0u64;
        let mut sends = Vec::with_capacity(x.exports.len());
        for (q, list) in &x.exports {
            let mut buf = Vec::with_capacity(list.len() * dim);
            for &i in list {
                buf.extend_from_slice(&values[i as usize * dim..(i as usize + 1) * dim]);
            }
            bytes += (buf.len() * std::mem::size_of::<T>()) as u64;
            sends.push(self.comm.isend(buf, *q).map_err(|e| self.comm_err(e))?);
        }
        let recvs = x
            .imports
            .iter()
            .map(|(q, list)| self.comm.irecv::<T>(*q, list.len() * dim))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.comm_err(e))?;
        for ((_, list), h) in x.imports.iter().zip(recvs) {
            let buf = h.wait().map_err(|e| self.comm_err(e))?;
            for (k, &i) in list.iter().enumerate() {
                values[i as usize * dim..(i as usize + 1) * dim]
                    .copy_from_slice(&buf[k * dim..(k + 1) * dim]);
            }
        }
        for h in sends {
            h.wait().map_err(|e| self.comm_err(e))?;
        }
        Ok(bytes)
    }

    /// All-reduces reduction accumulators, one all-reduce per reduction kind present.
    pub(crate) fn all_reduce<T: Scalar>(&self, mut acc: Vec<T>, ops: &[Access]) -> Result<Vec<T>> {
        for (mode, op) in [
            (Access::Inc, ReduceOp::Sum),
            (Access::Min, ReduceOp::Min),
            (Access::Max, ReduceOp::Max),
        ] {
            let idx: Vec<usize> = (0..ops.len()).filter(|&i| ops[i] == mode).collect();
            if idx.is_empty() {
                continue;
            }
            let part: Vec<T> = idx.iter().map(|&i| acc[i]).collect();
            let red = self
                .comm
                .all_reduce(part, op)
                .map_err(|e| self.comm_err(e))?;
            idx.iter().zip(red).for_each(|(&i, v)| acc[i] = v);
        }
        Ok(acc)
    }

    /// The owned values of every rank, assembled in global numbering on every rank.
    pub(crate) fn gather<T: Scalar>(
        &self,
        set: &SetDecl,
        set_id: usize,
        dim: usize,
        local: &[T],
    ) -> Result<Vec<T>> {
        let Some(layout) = &self.layout else {
            return Ok(local.to_vec());
        };
        let l = &layout.sets[set_id];
        let counts = self
            .comm
            .all_gather(vec![l.owned as i64])
            .map_err(|e| self.comm_err(e))?;
        let max = counts.iter().copied().max().unwrap_or(0) as usize;
        let mut out = vec![T::default(); set.size * dim];
        if max == 0 {
            return Ok(out);
        }
        let mut ids = vec![-1i64; max];
        ids.iter_mut()
            .zip(&l.global[..l.owned])
            .for_each(|(i, &g)| *i = g as i64);
        let mut vals = vec![T::default(); max * dim];
        vals[..l.owned * dim].copy_from_slice(&local[..l.owned * dim]);
        let all_ids = self.comm.all_gather(ids).map_err(|e| self.comm_err(e))?;
        let all_vals = self.comm.all_gather(vals).map_err(|e| self.comm_err(e))?;
        for (k, &g) in all_ids.iter().enumerate() {
            if g >= 0 {
                let g = g as usize;
                out[g * dim..(g + 1) * dim].copy_from_slice(&all_vals[k * dim..(k + 1) * dim]);
            }
        }
        Ok(out)
    }

    /// The import/export lists of one set: imports grouped by owner (`halo_owners[k]` owns
    /// local element `l.owned + k`), exports learnt from the importers. Memory: O(local
    /// elements), nothing per global element.
    ///
    /// Ends with an agreement round (an all-gather of the first peer whose request this rank
    /// refused), so that a refused request is every rank's failure at once: the refusing
    /// rank returns its error, the others [`UnstructuredError::PeerFailed`] (step `halo
    /// lists`), instead of waiting for it in the next step until `op_timeout`.
    ///
    /// # Errors
    /// Communication errors; [`UnstructuredError::DistributionMismatch`] (`halo lists`) if a
    /// peer asks for an element this rank does not own (a corrupt scatter root).
    fn exchange_lists(&mut self, l: &SetLayout, halo_owners: &[u32]) -> Result<Exchange> {
        let n = self.world_size();
        let mut imports: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (k, &p) in halo_owners.iter().enumerate() {
            imports[p as usize].push((l.owned + k) as u32);
        }
        let counts: Vec<i64> = imports.iter().map(|v| v.len() as i64).collect();
        let theirs = self.comm.all_to_all(counts).map_err(|e| self.comm_err(e))?;
        let mut sends = Vec::new();
        for (q, list) in imports.iter().enumerate() {
            if !list.is_empty() {
                let ids: Vec<i64> = list.iter().map(|&i| l.global[i as usize] as i64).collect();
                sends.push(self.comm.isend(ids, q).map_err(|e| self.comm_err(e))?);
            }
        }
        // This rank's owned elements by global number, to answer the importers.
        let mut owned: Vec<(u32, u32)> = l.global[..l.owned]
            .iter()
            .enumerate()
            .map(|(i, &g)| (g, i as u32))
            .collect();
        owned.sort_unstable();
        // The first peer that asked for more elements than this rank owns (its request is
        // not received: nothing is allocated by its count) or for one it does not own.
        let mut foreign = None;
        let mut exports = Vec::new();
        for (q, &c) in theirs.iter().enumerate() {
            if c > l.owned as i64 {
                foreign = foreign.or(Some(q));
                continue;
            }
            if c > 0 {
                let ids = self
                    .comm
                    .recv::<i64>(q, c as usize)
                    .map_err(|e| self.comm_err(e))?;
                let local = ids
                    .iter()
                    .map(|&g| {
                        let g = u32::try_from(g).ok()?;
                        let k = owned.binary_search_by_key(&g, |&(x, _)| x).ok()?;
                        Some(owned[k].1)
                    })
                    .collect::<Option<Vec<u32>>>();
                match local {
                    Some(local) => exports.push((q, local)),
                    None => foreign = foreign.or(Some(q)),
                }
            }
        }
        for h in sends {
            h.wait().map_err(|e| self.comm_err(e))?;
        }
        let mine = vec![foreign.map_or(-1, |q| q as i64)];
        let all = self.comm.all_gather(mine).map_err(|e| self.comm_err(e))?;
        if let Some(q) = foreign {
            self.failed = Some((self.rank(), "halo lists"));
            return Err(UnstructuredError::DistributionMismatch {
                what: "halo lists",
                ranks: vec![q],
            });
        }
        if let Some(r) = all.iter().position(|&q| q >= 0) {
            self.failed = Some((r, "halo lists"));
            return Err(UnstructuredError::PeerFailed {
                rank: r,
                step: "halo lists".into(),
            });
        }
        let imports = imports
            .into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .collect();
        Ok(Exchange { imports, exports })
    }
}

impl Context {
    /// The distribution plan, once the first loop has distributed the mesh (distributed
    /// backend only).
    pub fn plan_report(&self) -> Option<&PlanReport> {
        match &self.backend {
            Backend::Distributed(rt) => rt.report.as_ref(),
            _ => None,
        }
    }

    /// Partitions the mesh and localises every map and dat on this rank; the setup time
    /// counts from `start` (before the locality renumbering). With
    /// [`DistConfig::scatter_from`], only that rank holds the mesh: it partitions it and sends
    /// every other rank its part.
    ///
    /// Transactional: the local maps, dats, sizes and layouts are built beside the
    /// declarations and replace them only once every step that can fail has succeeded, so an
    /// error leaves the declarations as they were (in the locality order, which
    /// [`prepare`](Context::prepare) then undoes).
    pub(crate) fn distribute(&mut self, start: Instant) -> Result<()> {
        let t0 = Instant::now();
        let Backend::Distributed(rt) = &mut self.backend else {
            return Ok(());
        };
        let (nparts, rank) = (rt.world_size(), rt.rank());
        if let Some((r, step)) = rt.failed {
            return Err(UnstructuredError::PeerFailed {
                rank: r,
                step: step.into(),
            });
        }
        let root = rt.config.scatter_from;
        if let Some(r) = root.filter(|&r| r >= nparts) {
            return Err(UnstructuredError::InvalidDeclaration {
                name: "DistConfig::scatter_from".into(),
                detail: format!("rank {r} of a run on {nparts} ranks"),
            });
        }
        let holds_mesh = root.is_none_or(|r| r == rank);
        let owned = holds_mesh.then(|| {
            ownership::owners(
                &self.sets,
                &self.maps,
                &self.dats,
                rt.config.partitioner,
                rt.config.coordinates.as_deref(),
                nparts,
            )
        });
        let partition_seconds = t0.elapsed().as_secs_f64();
        // Every rank checks that all ranks hold the same declarations (with a scatter, the
        // same shapes) and computed the same partition (else the halo lists below would not
        // match: ranks would index elements their peers never sent), and that no rank failed
        // to partition.
        let decl = match root {
            None => declarations_fingerprint(&self.sets, &self.maps, &self.dats, &self.globals),
            Some(r) => shape_fingerprint(&self.sets, &self.maps, &self.dats, &self.globals, r),
        };
        let mine = match (&owned, root) {
            (Some(Err(_)), _) => vec![0; 3],
            (Some(Ok((owners, _, _))), None) => {
                vec![1, decl as i64, partition_fingerprint(owners) as i64]
            }
            _ => vec![1, decl as i64, 0],
        };
        let all = rt.comm.all_gather(mine).map_err(|e| rt.comm_err(e))?;
        let owned = owned.transpose()?;
        if let Some(failed) = all.chunks(3).position(|c| c[0] == 0) {
            return Err(UnstructuredError::PeerFailed {
                rank: failed,
                step: "partition".into(),
            });
        }
        for (k, what) in [(1, "declarations"), (2, "partition")] {
            let ranks: Vec<usize> = (0..nparts).filter(|&r| all[3 * r + k] != all[k]).collect();
            if !ranks.is_empty() {
                return Err(UnstructuredError::DistributionMismatch { what, ranks });
            }
        }
        // The layouts, owners and import/export lists below use the declared numbers (the
        // local elements keep the locality order).
        let nsets = self.sets.len();
        let mesh = Mesh {
            sets: &self.sets,
            maps: &self.maps,
            dats: &self.dats,
            order: self.order.as_deref(),
        };
        // What replaces the declarations once nothing can fail any more: each map's local
        // rows, each dat's local values, each set's global size.
        let part = match owned {
            Some((owners, primary, edge_cut)) => {
                let sent = match root {
                    Some(root) => rt.send_parts(root, &mesh, &owners, primary, edge_cut),
                    None => Ok(()),
                };
                sent.map(|()| mesh.own_part(rank, &owners, primary, edge_cut))
            }
            None => {
                let root = root.expect("only a scatter leaves a rank without the mesh");
                rt.receive_part(root, &mesh)
            }
        };
        let part = match root {
            Some(root) => rt.agree_on_scatter(root, part, nsets)?,
            None => part?,
        };
        let Part {
            layouts,
            halo_owners,
            primary,
            edge_cut,
            map_values,
            dat_values,
            sizes,
        } = part;
        let mut exchanges = Vec::with_capacity(nsets);
        for (l, o) in layouts.iter().zip(&halo_owners) {
            exchanges.push(rt.exchange_lists(l, o)?);
        }
        let mine: Vec<i64> = layouts
            .iter()
            .flat_map(|l| [l.owned, l.exec - l.owned, l.global.len() - l.exec])
            .map(|v| v as i64)
            .collect();
        let all = rt.comm.all_gather(mine).map_err(|e| rt.comm_err(e))?;
        let per = 3 * nsets;
        let col = |s: usize, k: usize| {
            (0..nparts)
                .map(|r| all[r * per + 3 * s + k] as usize)
                .collect()
        };
        let setup_seconds = start.elapsed().as_secs_f64();
        // The timings of the rank that partitioned (rank 0, or the root of a scatter).
        let times = rt
            .comm
            .broadcast(vec![partition_seconds, setup_seconds], root.unwrap_or(0))
            .map_err(|e| rt.comm_err(e))?;
        // Nothing fails from here on: the local mesh replaces the declarations. Global numbers
        // are the declared ones again (layouts, owners, import and export lists), while local
        // elements keep the locality order.
        self.order = None;
        for (m, v) in self.maps.iter_mut().zip(map_values) {
            m.values = v;
        }
        for (d, v) in self.dats.iter_mut().zip(dat_values) {
            d.data = v;
            // Every rank's values came from the global values, so every halo is current.
            d.dirty = false;
        }
        for ((s, l), size) in self.sets.iter_mut().zip(&layouts).zip(sizes) {
            s.size = size;
            s.owned = l.owned;
            s.exec = l.exec;
            s.local = l.global.len();
        }
        rt.report = Some(PlanReport {
            ranks: nparts,
            partitioner: rt.config.partitioner.name().to_string(),
            primary: primary.map(|p| self.sets[p].name.clone()),
            edge_cut,
            partition_seconds: times[0],
            setup_seconds: times[1],
            sets: self
                .sets
                .iter()
                .enumerate()
                .map(|(s, d)| SetPlan {
                    name: d.name.clone(),
                    owned: col(s, 0),
                    exec_halo: col(s, 1),
                    nonexec_halo: col(s, 2),
                })
                .collect(),
        });
        rt.layout = Some(Layout {
            sets: layouts,
            exchanges,
        });
        Ok(())
    }
}

/// The most elements of one scatter message: a receiving rank grows each buffer message by
/// message, so a count the root announces allocates nothing until the data arrives.
const SCATTER_CHUNK: usize = 1 << 16;

/// The global declarations a distribution reads (in the locality order when `order` is set:
/// `order[set][new] = declared number`).
struct Mesh<'a> {
    sets: &'a [SetDecl],
    maps: &'a [MapDecl],
    dats: &'a [DatDecl],
    order: Option<&'a [Vec<u32>]>,
}

/// One rank's part of the mesh: what replaces the declarations once nothing can fail any more.
struct Part {
    /// Per set: global numbers of the local elements (declared numbering), owned and executed
    /// counts.
    layouts: Vec<SetLayout>,
    /// Per set: the owner of each halo element.
    halo_owners: Vec<Vec<u32>>,
    primary: Option<usize>,
    edge_cut: usize,
    /// Each map's local rows.
    map_values: Vec<Vec<u32>>,
    /// Each dat's local values.
    dat_values: Vec<Storage>,
    /// Each set's global size.
    sizes: Vec<usize>,
}

impl Mesh<'_> {
    /// The declared number of (renumbered) element `g` of set `s`.
    fn declared(&self, s: usize, g: u32) -> u32 {
        self.order.map_or(g, |o| o[s][g as usize])
    }

    /// The part of `rank` under the ownership `owners`.
    fn own_part(
        &self,
        rank: usize,
        owners: &[Vec<u32>],
        primary: Option<usize>,
        edge_cut: usize,
    ) -> Part {
        let mut ls = layout(self.maps, owners, rank as u32);
        let g2l: Vec<Vec<u32>> = ls
            .iter()
            .zip(self.sets)
            .map(|(l, s)| global_to_local(s.size, l))
            .collect();
        let map_values: Vec<Vec<u32>> = self
            .maps
            .iter()
            .map(|m| localise_map(m, &ls[m.from], &g2l[m.to]))
            .collect();
        drop(g2l);
        let dat_values: Vec<Storage> = self
            .dats
            .iter()
            .map(|d| pick_storage(&d.data, &ls[d.set].global, d.dim))
            .collect();
        let halo_owners: Vec<Vec<u32>> = ls
            .iter()
            .zip(owners)
            .map(|(l, o)| l.global[l.owned..].iter().map(|&g| o[g as usize]).collect())
            .collect();
        for (s, l) in ls.iter_mut().enumerate() {
            l.global.iter_mut().for_each(|g| *g = self.declared(s, *g));
        }
        Part {
            layouts: ls,
            halo_owners,
            primary,
            edge_cut,
            map_values,
            dat_values,
            sizes: self.sets.iter().map(|s| s.size).collect(),
        }
    }
}

impl Runtime {
    /// Sends `v` to `dst` in messages of at most [`SCATTER_CHUNK`] elements (one message,
    /// possibly empty, if it is no longer).
    fn send_chunked<T: Element>(&self, v: Vec<T>, dst: usize) -> Result<()> {
        if v.len() <= SCATTER_CHUNK {
            return self.comm.send(v, dst).map_err(|e| self.comm_err(e));
        }
        for c in v.chunks(SCATTER_CHUNK) {
            self.comm
                .send(c.to_vec(), dst)
                .map_err(|e| self.comm_err(e))?;
        }
        Ok(())
    }

    /// Receives the `n` elements that the scatter root sent with
    /// [`send_chunked`](Self::send_chunked), message by message: the buffer grows only as
    /// data arrives, so an announced `n` allocates nothing by itself. A message of another
    /// length than announced is [`UnstructuredError::ScatterInconsistent`].
    fn recv_chunked<T: Element>(&self, root: usize, n: usize) -> Result<Vec<T>> {
        let mut out: Vec<T> = Vec::new();
        loop {
            let k = (n - out.len()).min(SCATTER_CHUNK);
            let v = self.comm.recv::<T>(root, k).map_err(|e| match e {
                CollectiveError::Mismatch { .. } => UnstructuredError::ScatterInconsistent {
                    root,
                    rank: self.rank(),
                    detail: format!("a message of another length than announced ({e})"),
                },
                e => self.comm_err(e),
            })?;
            if v.len() != k {
                return Err(UnstructuredError::ScatterInconsistent {
                    root,
                    rank: self.rank(),
                    detail: format!("a message of {} elements for {k}", v.len()),
                });
            }
            if v.len() == n {
                return Ok(v);
            }
            out.extend_from_slice(&v);
            if out.len() == n {
                return Ok(out);
            }
        }
    }

    /// The root of a scatter: broadcasts the sizes and the plan's summary, then sends every
    /// other rank its part (the global numbers of its elements and the owners of its halo, its
    /// rows of every map in local numbering, its values of every dat), each vector in messages
    /// of at most [`SCATTER_CHUNK`] elements.
    ///
    /// If a part cannot be sent (a lost peer, a timeout), the root aborts its communicator
    /// before returning the error: it then counts as lost for every peer, so the ranks
    /// waiting for (the rest of) their parts get a typed error at once instead of blocking
    /// until `op_timeout` (the root's streams are out of step, and the runtime refuses to
    /// distribute again, so its communicator has nothing left to do).
    fn send_parts(
        &self,
        root: usize,
        mesh: &Mesh<'_>,
        owners: &[Vec<u32>],
        primary: Option<usize>,
        edge_cut: usize,
    ) -> Result<()> {
        let mut summary = vec![primary.map_or(-1, |p| p as i64), edge_cut as i64];
        summary.extend(mesh.sets.iter().map(|s| s.size as i64));
        self.comm
            .broadcast(summary, root)
            .map_err(|e| self.comm_err(e))?;
        for r in (0..self.world_size()).filter(|&r| r != root) {
            if let Err(e) = self.send_part(r, mesh, owners) {
                self.comm
                    .abort(&format!("scatter root {root}: rank {r}'s part: {e}"));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Sends rank `r` its part of the mesh (see [`send_parts`](Self::send_parts)).
    fn send_part(&self, r: usize, mesh: &Mesh<'_>, owners: &[Vec<u32>]) -> Result<()> {
        let ls = layout(mesh.maps, owners, r as u32);
        let g2l: Vec<Vec<u32>> = ls
            .iter()
            .zip(mesh.sets)
            .map(|(l, s)| global_to_local(s.size, l))
            .collect();
        self.send_chunked(
            ls.iter()
                .flat_map(|l| [l.global.len(), l.owned, l.exec])
                .map(|v| v as i64)
                .collect(),
            r,
        )?;
        #[cfg(test)]
        if tests::FAIL_PART_OF.with(|f| f.get()) == Some(r) {
            return Err(UnstructuredError::PeerFailed {
                rank: r,
                step: "scatter (injected)".into(),
            });
        }
        for (s, l) in ls.iter().enumerate() {
            let ids = l.global.iter().map(|&g| i64::from(mesh.declared(s, g)));
            let halo_owners = l.global[l.owned..]
                .iter()
                .map(|&g| i64::from(owners[s][g as usize]));
            self.send_chunked(ids.chain(halo_owners).collect(), r)?;
        }
        for m in mesh.maps {
            let v = localise_map(m, &ls[m.from], &g2l[m.to]);
            self.send_chunked(v.into_iter().map(i64::from).collect(), r)?;
        }
        for d in mesh.dats {
            match pick_storage(&d.data, &ls[d.set].global, d.dim) {
                Storage::F64(v) => self.send_chunked(v, r),
                Storage::I64(v) => self.send_chunked(v, r),
            }?;
        }
        Ok(())
    }

    /// A rank without the mesh: the sizes and the plan's summary, then its part, from `root`.
    /// Everything from the root is range-checked before it indexes anything (the element loops
    /// index through these layouts and maps unchecked), and every buffer grows only as the
    /// root's messages arrive ([`recv_chunked`](Self::recv_chunked)).
    fn receive_part(&self, root: usize, mesh: &Mesh<'_>) -> Result<Part> {
        let (nsets, rank, ranks) = (mesh.sets.len(), self.rank(), self.world_size() as i64);
        let summary = self
            .comm
            .broadcast(vec![0i64; 2 + nsets], root)
            .map_err(|e| self.comm_err(e))?;
        let bad = |detail: String| UnstructuredError::ScatterInconsistent { root, rank, detail };
        if !(-1..nsets as i64).contains(&summary[0]) || summary[1] < 0 {
            return Err(bad(format!(
                "primary set {} of {nsets} sets, edge cut {}",
                summary[0], summary[1]
            )));
        }
        let head = self.recv_chunked::<i64>(root, 3 * nsets)?;
        let mut ls = Vec::with_capacity(nsets);
        let mut halo_owners = Vec::with_capacity(nsets);
        let mut sizes = Vec::with_capacity(nsets);
        for s in 0..nsets {
            let size = summary[2 + s];
            let (len, owned, exec) = (head[3 * s], head[3 * s + 1], head[3 * s + 2]);
            let consistent = (0..i64::from(u32::MAX)).contains(&size)
                && 0 <= owned
                && owned <= exec
                && exec <= len
                && len <= size;
            if !consistent {
                return Err(bad(format!(
                    "set {s}: size {size}, {len} local elements, {owned} owned, {exec} executed"
                )));
            }
            let (len, owned, exec) = (len as usize, owned as usize, exec as usize);
            sizes.push(size as usize);
            let v = self.recv_chunked::<i64>(root, 2 * len - owned)?;
            if v[..len].iter().any(|&g| !(0..size).contains(&g))
                || v[len..].iter().any(|&p| !(0..ranks).contains(&p))
            {
                return Err(bad(format!(
                    "set {s}: element ids or halo owners out of range"
                )));
            }
            // Nothing per global element (only this rank's part): duplicates by sorting.
            let mut ids = v[..len].to_vec();
            ids.sort_unstable();
            if ids.windows(2).any(|w| w[0] == w[1]) || v[len..].contains(&(rank as i64)) {
                return Err(bad(format!(
                    "set {s}: an element listed twice, or in the halo and owned by this rank"
                )));
            }
            halo_owners.push(v[len..].iter().map(|&p| p as u32).collect::<Vec<u32>>());
            ls.push(SetLayout {
                global: v[..len].iter().map(|&g| g as u32).collect(),
                owned,
                exec,
            });
        }
        let mut map_values = Vec::with_capacity(mesh.maps.len());
        for (i, m) in mesh.maps.iter().enumerate() {
            let to = ls[m.to].global.len() as i64;
            let v = self.recv_chunked::<i64>(root, ls[m.from].exec * m.arity)?;
            if v.iter().any(|&t| !(0..to).contains(&t)) {
                return Err(bad(format!(
                    "map {i}: entries outside the target's {to} local elements"
                )));
            }
            map_values.push(v.into_iter().map(|t| t as u32).collect());
        }
        let mut dat_values = Vec::with_capacity(mesh.dats.len());
        for d in mesh.dats {
            let n = ls[d.set].global.len() * d.dim;
            dat_values.push(match d.data {
                Storage::F64(_) => Storage::F64(self.recv_chunked(root, n)?),
                Storage::I64(_) => Storage::I64(self.recv_chunked(root, n)?),
            });
        }
        Ok(Part {
            layouts: ls,
            halo_owners,
            primary: usize::try_from(summary[0]).ok(),
            edge_cut: summary[1] as usize,
            map_values,
            dat_values,
            sizes,
        })
    }

    /// After a scatter, every rank (the root too) tells the others whether its part arrived
    /// whole and how many elements of each set it owns, so that a rank's failure is every
    /// rank's, at once, instead of a timeout in the next exchange: the rank that failed returns
    /// its own error, the others [`UnstructuredError::PeerFailed`] (step `scatter`). Every
    /// rank also checks that the ranks own exactly the root's announced size of each set
    /// together (else [`UnstructuredError::ScatterInconsistent`], on every rank), which bounds
    /// what a size allocates (`gather` allocates whole dats) by elements actually received.
    ///
    /// After a failure the point-to-point streams from the root are out of step (the root
    /// sent messages that a failed rank never took), so this runtime refuses to distribute
    /// again ([`Runtime::failed`]).
    fn agree_on_scatter(&mut self, root: usize, part: Result<Part>, nsets: usize) -> Result<Part> {
        if let Err(UnstructuredError::Comm {
            source: CollectiveError::Timeout { .. },
            ..
        }) = &part
        {
            // The others are not waiting in the same step: telling them would time out again.
            self.failed = Some((self.rank(), "scatter"));
            return part;
        }
        let mut mine = vec![i64::from(part.is_err())];
        match &part {
            Ok(p) => mine.extend(p.layouts.iter().map(|l| l.owned as i64)),
            Err(_) => mine.resize(1 + nsets, 0),
        }
        let all = self.comm.all_gather(mine);
        let part = match (part, all) {
            (Err(e), _) => {
                self.failed = Some((self.rank(), "scatter"));
                return Err(e);
            }
            (Ok(_), Err(e)) => {
                // The round itself failed (e.g. a root that failed partway aborted its
                // communicator): no later distribution may run over it.
                self.failed = Some((root, "scatter"));
                return Err(self.comm_err(e));
            }
            (Ok(p), Ok(all)) => {
                if let Some(r) = all.chunks(1 + nsets).position(|c| c[0] != 0) {
                    self.failed = Some((r, "scatter"));
                    return Err(UnstructuredError::PeerFailed {
                        rank: r,
                        step: "scatter".into(),
                    });
                }
                for (s, &size) in p.sizes.iter().enumerate() {
                    let owned: i64 = all.chunks(1 + nsets).map(|c| c[1 + s]).sum();
                    if owned != size as i64 {
                        return Err(UnstructuredError::ScatterInconsistent {
                            root,
                            rank: self.rank(),
                            detail: format!(
                                "set {s}: the ranks own {owned} elements together, the root announced {size}"
                            ),
                        });
                    }
                }
                p
            }
        };
        Ok(part)
    }
}

/// FNV-1a over 32-bit words: a cheap fingerprint, the same on every platform.
fn fnv(h: u64, words: impl IntoIterator<Item = u32>) -> u64 {
    words.into_iter().fold(h, |h, w| {
        (h ^ u64::from(w)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// Fingerprint of a name (its length, then its bytes).
fn name_words(name: &str) -> impl Iterator<Item = u32> + '_ {
    std::iter::once(name.len() as u32).chain(name.bytes().map(u32::from))
}

/// Fingerprint of each dat's name, set, dimension and element type, then (with `values`) of
/// its values' bits; and of each global's name, length and type.
fn dats_fingerprint(h: u64, dats: &[DatDecl], globals: &[GlobalDecl], values: bool) -> u64 {
    let h = fnv(h, [dats.len() as u32, globals.len() as u32]);
    let h = dats.iter().fold(h, |h, d| {
        let ty = matches!(d.data, Storage::F64(_)) as u32;
        let h = fnv(
            fnv(h, name_words(&d.name)),
            [d.set as u32, d.dim as u32, ty],
        );
        if !values {
            return h;
        }
        let bits = |b: u64| [b as u32, (b >> 32) as u32];
        match &d.data {
            Storage::F64(v) => fnv(h, v.iter().flat_map(|x| bits(x.to_bits()))),
            Storage::I64(v) => fnv(h, v.iter().flat_map(|&x| bits(x as u64))),
        }
    });
    globals.iter().fold(h, |h, g| {
        let ty = matches!(g.data, Storage::F64(_)) as u32;
        fnv(fnv(h, name_words(&g.name)), [g.data.len() as u32, ty])
    })
}

/// Fingerprint of the global declarations: set sizes, maps (with their values), dats (with
/// their values) and the globals' shapes. Ranks that declared different programs, or
/// different meshes or initial values, would otherwise exchange halos that do not fit.
fn declarations_fingerprint(
    sets: &[SetDecl],
    maps: &[MapDecl],
    dats: &[DatDecl],
    globals: &[GlobalDecl],
) -> u64 {
    let h = fnv(FNV_OFFSET, sets.iter().map(|s| s.size as u32));
    let h = maps.iter().fold(h, |h, m| {
        let h = fnv(h, [m.from as u32, m.to as u32, m.arity as u32]);
        fnv(h, m.values.iter().copied())
    });
    dats_fingerprint(h, dats, globals, true)
}

/// Fingerprint of what a scatter needs every rank to agree on: the root, and the shapes of
/// the declarations (which sets the maps join with which arity, each dat's name, set,
/// dimension and type, the globals' shapes); sizes and values come from the root.
fn shape_fingerprint(
    sets: &[SetDecl],
    maps: &[MapDecl],
    dats: &[DatDecl],
    globals: &[GlobalDecl],
    root: usize,
) -> u64 {
    let h = fnv(FNV_OFFSET, [root as u32, sets.len() as u32]);
    let h = maps.iter().fold(h, |h, m| {
        fnv(h, [m.from as u32, m.to as u32, m.arity as u32])
    });
    dats_fingerprint(h, dats, globals, false)
}

/// Fingerprint of the owner of every element of every set.
fn partition_fingerprint(owners: &[Vec<u32>]) -> u64 {
    owners.iter().fold(FNV_OFFSET, |h, o| {
        fnv(fnv(h, [o.len() as u32]), o.iter().copied())
    })
}

#[cfg(test)]
mod tests;
