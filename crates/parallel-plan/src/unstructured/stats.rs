//! Counters of a run: per loop, calls, elements executed, halo exchanges done and skipped,
//! wall-clock time.

use std::collections::BTreeMap;

/// Counters of one named loop (summed over its calls, on this rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LoopStats {
    /// Times the loop ran.
    pub calls: u64,
    /// Elements executed (owned, plus the exec halo on distributed runs of indirectly writing
    /// loops).
    pub elements: u64,
    /// Dat halos exchanged before the loop.
    pub exchanges: u64,
    /// Dat halos the loop reads that were clean, so not exchanged (dirty-bit skips).
    pub skipped_exchanges: u64,
    /// Bytes this rank sent in those exchanges.
    pub halo_bytes: u64,
    /// Colours run (threaded backend, loops that write through maps): one parallel
    /// iterator, so one wait for the slowest thread, each.
    pub colours: u64,
    /// Wall-clock nanoseconds spent in the loop on this rank (validation, halo exchanges, the
    /// elements, reductions), without the one-off setup counted in [`RunStats::setup_nanos`].
    pub nanos: u64,
}

impl LoopStats {
    fn add(&mut self, o: &LoopStats) {
        self.calls += o.calls;
        self.elements += o.elements;
        self.exchanges += o.exchanges;
        self.skipped_exchanges += o.skipped_exchanges;
        self.halo_bytes += o.halo_bytes;
        self.nanos += o.nanos;
        self.colours += o.colours;
    }
}

/// Counters of a run, per loop name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RunStats {
    /// Counters by loop name.
    pub loops: BTreeMap<String, LoopStats>,
    /// Wall-clock nanoseconds of one-off setup on this rank: the distribution of the mesh
    /// (distributed runs) or its locality renumbering (threaded runs) at the first loop, and
    /// the colourings of the threaded backend (one per loop shape).
    pub setup_nanos: u64,
}

impl RunStats {
    /// Sum over all loops.
    pub fn total(&self) -> LoopStats {
        let mut t = LoopStats::default();
        self.loops.values().for_each(|l| t.add(l));
        t
    }

    pub(crate) fn record(&mut self, name: &str, s: &LoopStats) {
        self.loops.entry(name.to_string()).or_default().add(s);
    }
}
