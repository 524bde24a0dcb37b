//! The steps of a loop that differ between shared-memory and distributed runs: distributing
//! the mesh, checking exclusive indirect writes on every rank, halo exchanges, reductions.

use super::context::{Backend, Context};
use super::decl::Access;
use super::error::{Result, UnstructuredError};
use super::run::Shape;
use super::scalar::Scalar;
use super::stats::LoopStats;

impl Context {
    /// Before the first loop: freezes the declarations; on threaded and distributed runs,
    /// renumbers the mesh for locality; on a distributed run, then partitions the mesh and
    /// localises every map and dat (each rank's owned elements keep the locality order).
    pub(crate) fn prepare(&mut self) -> Result<()> {
        if self.frozen {
            return Ok(());
        }
        let t = std::time::Instant::now();
        if !matches!(self.backend, Backend::Sequential) {
            self.renumber();
        }
        // All or nothing: a failed distribution leaves the declarations as declared (it
        // changes nothing itself, and the renumbering is undone), so that the next loop,
        // after any further declarations, starts from the declared mesh again.
        #[cfg(feature = "distributed")]
        if let Backend::Distributed(_) = self.backend {
            if let Err(e) = self.distribute(t) {
                self.undo_renumber();
                return Err(e);
            }
        }
        let _ = t;
        self.frozen = true;
        Ok(())
    }

    /// Rejects an indirect `Write`/`ReadWrite` whose map sends two executed iterations to one
    /// element (checked once per map slot; on distributed runs every rank agrees).
    pub(crate) fn check_exclusive(&mut self, name: &str, n: usize, shape: &Shape) -> Result<()> {
        for &(_, dat, map, slot) in &shape.indirect_exclusive {
            // Only a clean verdict is reused: a collision is found again (same cost as the
            // first time, on every rank alike) so that every such loop is refused.
            if self.injective.get(&(map, slot)) == Some(&true) {
                continue;
            }
            // `(second, first, target)` in declared numbering; the lowest over all ranks.
            let hit = self.find_collision(map, slot, n);
            let hit = self.agree_on(hit, "indirect write check")?;
            self.injective.insert((map, slot), hit.is_none());
            if let Some((b, a, t)) = hit {
                let m = &self.maps[map];
                return Err(UnstructuredError::ConflictingIndirectWrite {
                    loop_name: name.to_string(),
                    dat: self.dats[dat].name.clone(),
                    map: m.name.clone(),
                    slot,
                    first: a,
                    second: b,
                    target: t,
                });
            }
        }
        Ok(())
    }

    /// Global number of local element `e` of `set`.
    pub(crate) fn global_id(&self, set: usize, e: usize) -> usize {
        match &self.backend {
            #[cfg(feature = "distributed")]
            Backend::Distributed(rt) => self.declared_id(set, rt.global_id(set, e)),
            _ => self.declared_id(set, e),
        }
    }

    /// The declared number of element `e` of `set` in the (renumbered) global numbering.
    fn declared_id(&self, set: usize, e: usize) -> usize {
        self.order.as_ref().map_or(e, |o| o[set][e] as usize)
    }

    /// On distributed runs, makes every rank fail if one found a collision.
    fn agree_on(
        &self,
        hit: Option<(usize, usize, usize)>,
        step: &str,
    ) -> Result<Option<(usize, usize, usize)>> {
        match &self.backend {
            #[cfg(feature = "distributed")]
            Backend::Distributed(rt) => rt.agree(hit, step),
            _ => {
                let _ = step;
                Ok(hit)
            }
        }
    }

    /// Exchanges the halos of those `dats` that are dirty (distributed runs only).
    #[cfg_attr(
        not(feature = "distributed"),
        allow(clippy::extra_unused_type_parameters)
    )]
    pub(crate) fn exchange_halos<T: Scalar>(
        &mut self,
        dats: &[usize],
        stats: &mut LoopStats,
    ) -> Result<()> {
        match &mut self.backend {
            #[cfg(feature = "distributed")]
            Backend::Distributed(rt) => {
                for &d in dats {
                    let dat = &mut self.dats[d];
                    if !dat.dirty {
                        stats.skipped_exchanges += 1;
                        continue;
                    }
                    let values = T::slice_mut(&mut dat.data).expect("type checked in validate");
                    stats.halo_bytes += rt.exchange(dat.set, dat.dim, values)?;
                    stats.exchanges += 1;
                    dat.dirty = false;
                }
                Ok(())
            }
            _ => {
                let _ = (dats, stats);
                Ok(())
            }
        }
    }

    /// Combines reduction accumulators over the ranks (distributed runs only).
    pub(crate) fn all_reduce_acc<T: Scalar>(&self, acc: Vec<T>, ops: &[Access]) -> Result<Vec<T>> {
        match &self.backend {
            #[cfg(feature = "distributed")]
            Backend::Distributed(rt) => rt.all_reduce(acc, ops),
            _ => {
                let _ = ops;
                Ok(acc)
            }
        }
    }
}
