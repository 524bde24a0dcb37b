//! The symbolic phase of LSSM: block size, row classification, task list, scratch size.

use super::split::{split_long_rows, units};
use super::sweep::{band_rows, grid_stride, sweep_tasks};
use super::task::{PlanStep, Segment, Task};
use crate::kernels::{micro, shift_pairs::ShiftPairs, SERIAL_WORK};
use crate::stats::{sampled_rows, MatrixClass, RowStats};
use crate::{CsrMatrix, Scalar, SpIndex};
use std::ops::Range;

/// How the automatic block size (nonzeros per task) is chosen from the row profile and K:
/// `work / K` nonzeros, clamped to `[min, max]`, lowered to `nnz / min_tasks` so that there are
/// enough tasks to balance, and on regular matrices raised to the longest row (when that is at
/// most 4× larger) so that no row is split for nothing ([`BlockSizing::block_size`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockSizing {
    /// Target multiply-adds (`nnz · K`) per task. Default 2¹⁶.
    pub work: usize,
    /// Smallest automatic block (nonzeros per task; at least 1). Default 32.
    pub min: usize,
    /// Largest automatic block (nonzeros per task). Default 8192.
    pub max: usize,
    /// The automatic block is small enough to give at least this many tasks (for load balance
    /// on any core count; it does not depend on the thread count, so neither does the result).
    /// Default 128.
    pub min_tasks: usize,
}

impl Default for BlockSizing {
    fn default() -> Self {
        Self {
            work: 1 << 16,
            min: 32,
            max: 8192,
            min_tasks: 128,
        }
    }
}

impl BlockSizing {
    /// The block size (nonzeros per task, at least 1) for a row profile and K.
    pub fn block_size(&self, stats: &RowStats, k: usize) -> usize {
        let min = self.min.max(1);
        let by_work = (self.work / k.max(1)).clamp(min, self.max.max(min));
        let by_balance = (stats.nnz / self.min_tasks.max(1)).max(min);
        let block = by_work.min(by_balance);
        if stats.class() == MatrixClass::Regular && stats.max <= 4 * block {
            block.max(stats.max)
        } else {
            block
        }
    }
}

/// Settings of an LSSM plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LssmConfig {
    /// Nonzeros per task (the paper's block size). `None` (the default) picks it with
    /// [`LssmConfig::block_sizing`].
    pub block_nnz: Option<usize>,
    /// How the automatic block size is chosen when `block_nnz` is `None`. Default
    /// [`BlockSizing::default`] (what [`SpmmPlan::auto_block_size`] uses).
    pub block_sizing: BlockSizing,
    /// Long rows are split together in groups of this many consecutive long rows (when the
    /// columns are sorted; 0 counts as 1): a task takes the same range of columns of every row
    /// of its group, so each row of B it needs is read from memory once and reused from cache
    /// by the group's other rows (several dense rows, as in arrow matrices or the hubs of a
    /// power-law graph, read B once instead of once per row). Default 8.
    pub long_row_group: usize,
    /// Work (`nnz · K` multiply-adds) below which the plan runs serially (on the calling
    /// thread; without long rows as one micro-kernel pass over all rows, like the serial
    /// baselines). Default 2¹⁴ (as [`BaselineConfig::serial_work`](crate::BaselineConfig)).
    pub serial_work: usize,
    /// Software-prefetch the rows of B that the next chunk of nonzeros needs, to hide the
    /// latency of random row gathers. `None` (the default) does not prefetch: in paired runs the
    /// plan without prefetching was as fast or faster on power-law graphs, and prefetching cost
    /// up to 2× where the rows of B are in cache or read in order (stencils, arrow;
    /// benches/README.md, sparse, "Measurements behind code defaults"). `Some(true)` prefetches.
    pub prefetch: Option<bool>,
    /// Write the rows of C with non-temporal (streaming) stores, which do not first read the
    /// destination lines into the cache (a register tile is streamed when it is whole 64-byte
    /// lines at a line boundary, else stored as usual). `None` (the default) streams when C
    /// is larger than the last-level cache ([`SpmmPlan::auto_streaming_stores`] with
    /// [`last_level_cache_bytes`]), where it would not stay anyway: on the AMD EPYC VM
    /// 0.99–1.41× there (1.10–1.41× on the arrows, `stencil27:64` and a diagonal matrix,
    /// 0.99–1.06× on the others measured), against 0.97× where C fits the cache — and C is
    /// then out of the cache for whatever reads it next (benches/README.md, sparse, "Streaming
    /// stores of C without the round trip through the stack"). `Some(_)` decides.
    pub streaming_stores: Option<bool>,
    /// Bytes of rows of B one chunk of a row's nonzeros may touch: a row longer than a chunk
    /// is multiplied chunk by chunk, every tile pass over K going over one chunk before the
    /// next. `None` (the default): [`SpmmPlan::auto_chunk_bytes`] — 32 KiB where the rows of B
    /// come from memory at random (B larger than the last-level cache and
    /// [`SpmmPlan::column_locality`] below 0.5: more rows of B in flight per pass), else 16 KiB
    /// (a chunk's rows of B stay in L1 for the next tile pass). `Some(b)` decides (rounded
    /// down to a multiple of 16 KiB's worth of nonzeros, at least one, at most 64 nonzeros;
    /// `Some(0)` counts as `None`). The sums are always taken in groups of 16 KiB's worth, so
    /// the result has the same bits whatever the chunk size, and so on every machine.
    pub chunk_bytes: Option<usize>,
    /// With prefetching: how many nonzeros past the end of the chunk being multiplied the rows
    /// of B are prefetched. 0 (the default): one chunk of nonzeros
    /// ([`LssmConfig::chunk_bytes`] `/ (K · size)`: 32 for K = 64 `f64` with 16 KiB chunks).
    pub prefetch_distance: usize,
    /// Multiply-adds (`nnz · K`) per chunk of rows, for a row of mean length, when the plan has
    /// no long rows and runs with the row-parallel schedule (a chunk of the longest rows is kept
    /// under 16× this; the rows per chunk are rounded up to an even number, so that no chunk
    /// splits a shift pair); at run time no chunk takes more than an eighth of one thread's
    /// share of the rows, so that every thread has chunks to balance with. Default 2¹⁸ (about
    /// 150 rows of a 27-point stencil at K = 64): every chunk is one call of the micro-kernel,
    /// whose per-call costs then stay out of the loop over the rows (benches/README.md, sparse,
    /// "Measurements behind code defaults").
    pub row_chunk_work: usize,
    /// Columns of B and C per K-panel: `Some(p)` with `0 < p < K` makes the numeric phase pack
    /// one panel of `p` columns of B at a time into a contiguous, line-aligned buffer and make
    /// one pass over A per panel, so that the rows a pass gathers come from a part of B that
    /// can stay in the last-level cache ([`SpmmPlan::auto_k_panel`] sizes `p` for a cache).
    /// `None` (the default), `Some(0)` or `Some(p >= K)`: one pass over the whole K. The result
    /// has the same bits either way. Off by default because it did not pay on the 2-core test
    /// machine (paired runs on `kron:18`, `rmat:18:16`, `uniform:262144:16` at K = 64, `f64`,
    /// panels of 8 and 16 columns: 0.7–1.2× the unpanelled time, no consistent gain; see the
    /// crate README).
    pub k_panel: Option<usize>,
    /// Rows per band of a sweep: in a grid-like matrix (rows reading the rows of B near their
    /// own, one period before and one after: 3D stencils and meshes numbered plane by plane)
    /// without long rows, the workers take each plane's rows band by band, plane after plane
    /// ([`SpmmPlan::sweep`]), so that the rows of B a step reads are in cache from the steps
    /// before. `None` (the default): the widest band whose three pieces of rows of B (the band
    /// and the reach on each side, in the plane and the planes before and after) fit two
    /// per-core caches ([`per_core_cache_bytes`]), rounded down to whole grid lines, and no
    /// sweep where three planes of B already fit them or the grid has fewer than three planes;
    /// `Some(0)`: no sweep; `Some(w)`: bands of `w` rows wherever the matrix has a period. The
    /// order does not change the result. On the AMD EPYC VM, `stencil27:64` at K = 64 `f64`
    /// (bands of 512 rows): 1.18–1.19× the row order, paired, and 1.25× at K = 128 (with the
    /// shift pairs and the wide streaming stores; 1.07–1.11× before them: benches/README.md,
    /// sparse, "Sweeps").
    pub sweep_rows: Option<usize>,
    /// Compute a row and the next together where the next is the row shifted by one column
    /// (the neighbouring points of a grid line, the rows of a banded matrix): one load of a row
    /// of B serves both rows where the first row's columns run on, and each row keeps its own
    /// order of operations, so the bits are those of one row at a time. Rows of up to 16 KiB's
    /// worth of nonzeros, without prefetching, when K is a whole number of the pair tile (half
    /// the widest tile: 16 `f64` or 32 `f32` on AVX2). `None` (the default): where at least a
    /// quarter of the rows pair up, the pairs save at least a quarter of their loads of B and
    /// their rows have at least 8 entries on average (grids of 27-point stencils, banded
    /// matrices; not 5-point stencils, whose pairs of short rows were slower where B came from
    /// memory); `Some(_)` decides. On the AMD EPYC VM, paired: `stencil27:64` 1.10×,
    /// `stencil27:48` 1.11×, `stencil27:16` 1.22×, `n1024-l1` 1.09× (benches/README.md, sparse,
    /// "Shift pairs").
    pub shift_pairs: Option<bool>,
    /// Where K is one narrow tile (64 or 128 bytes of a row of C: K = 8 or 16 `f64`, 16 or 32
    /// `f32`), compute two consecutive rows of at most one group of sums in one interleaved
    /// loop (same bits as one row at a time): twice the independent multiply-add chains and
    /// loads of B in flight. `None` (default): on. On the AMD EPYC VM at K = 16, paired:
    /// 1.32–1.57× on one thread and 1.21–1.54× on two for the small SuiteSparse matrices
    /// (benches/README.md, sparse, "Narrow pairs").
    pub narrow_pairs: Option<bool>,
    /// Prefetch, two rows ahead, the row of B of each row's last entry (its *lead* row: with
    /// sorted columns the largest, and in banded matrices and grids numbered plane by plane the
    /// one row of B the rows before it did not read, which would otherwise come from memory
    /// while the core waits). Not with [`LssmConfig::prefetch`], which prefetches every row of
    /// B of the next chunk. `None` (the default): where B is larger than the last-level cache
    /// and its rows are read in order ([`SpmmPlan::column_locality`] at least 0.5); `Some(_)`
    /// decides. The result does not change. On an AMD EPYC (Zen 4) VM at K = 64 `f64`, paired:
    /// `stencil27:64` 1.20–1.25×, `banded:262144:13` 1.22×, `stencil27:48` 1.10×,
    /// `arrow:200000:4` 1.07×; forced on where the rule leaves it off 0.96–1.02×
    /// (benches/README.md, sparse, "Lead rows").
    pub lead_prefetch: Option<bool>,
}

/// The size of the largest CPU cache (bytes): on Linux the largest
/// `/sys/devices/system/cpu/cpu0/cache/index*/size`, else 32 MiB. Read once.
pub fn last_level_cache_bytes() -> usize {
    static CACHE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CACHE.get_or_init(|| {
        (0..8)
            .filter_map(|i| {
                let path = format!("/sys/devices/system/cpu/cpu0/cache/index{i}/size");
                parse_cache_size(&std::fs::read_to_string(path).ok()?)
            })
            .max()
            .unwrap_or(DEFAULT_CACHE_BYTES)
    })
}

/// The size of the largest CPU cache that one core has to itself (bytes): on Linux the largest
/// data or unified `/sys/devices/system/cpu/cpu0/cache/index*` shared by no other core (its
/// `shared_cpu_list` is one CPU or cpu0's hardware threads, `topology/thread_siblings_list`:
/// the L2 on most x86 CPUs), else 1 MiB. Read once.
pub fn per_core_cache_bytes() -> usize {
    static CACHE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CACHE.get_or_init(|| {
        let cpu = "/sys/devices/system/cpu/cpu0";
        let siblings = std::fs::read_to_string(format!("{cpu}/topology/thread_siblings_list"));
        let siblings = siblings.as_deref().map(str::trim).unwrap_or("0");
        (0..8)
            .filter_map(|i| {
                let dir = format!("{cpu}/cache/index{i}");
                let shared = std::fs::read_to_string(format!("{dir}/shared_cpu_list")).ok()?;
                let shared = shared.trim();
                let own = shared == siblings || shared.parse::<usize>().is_ok();
                let kind = std::fs::read_to_string(format!("{dir}/type")).ok()?;
                let size = parse_cache_size(&std::fs::read_to_string(format!("{dir}/size")).ok()?)?;
                (own && kind.trim() != "Instruction").then_some(size)
            })
            .max()
            .unwrap_or(1 << 20)
    })
}

/// `512K`, `8M` or a byte count, as sysfs writes cache sizes.
fn parse_cache_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (num, unit) = text.split_at(text.trim_end_matches(char::is_alphabetic).len());
    let scale = match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        "" => 1,
        _ => return None,
    };
    num.parse::<usize>().ok().map(|n| n * scale)
}

/// The last-level cache size assumed where it cannot be read.
const DEFAULT_CACHE_BYTES: usize = 32 << 20;

/// Default [`LssmConfig::row_chunk_work`].
const ROW_CHUNK_WORK: usize = 1 << 18;

impl Default for LssmConfig {
    fn default() -> Self {
        Self {
            block_nnz: None,
            block_sizing: BlockSizing::default(),
            long_row_group: 8,
            serial_work: SERIAL_WORK,
            prefetch: None,
            streaming_stores: None,
            chunk_bytes: None,
            prefetch_distance: 0,
            row_chunk_work: ROW_CHUNK_WORK,
            k_panel: None,
            sweep_rows: None,
            shift_pairs: None,
            narrow_pairs: None,
            lead_prefetch: None,
        }
    }
}

/// A reusable LSSM execution plan for one sparsity pattern and one K (the symbolic phase).
#[derive(Debug, Clone)]
pub struct SpmmPlan {
    pub(crate) shape: (usize, usize, usize),
    pub(crate) k: usize,
    pub(crate) block: usize,
    pub(crate) stats: RowStats,
    pub(crate) tasks: Vec<Task>,
    /// Consecutive tasks run by one worker, in order: runs of short rows, then at most one
    /// long-row task, the one whose columns those rows read through the diagonal.
    pub(crate) units: Vec<Range<usize>>,
    pub(crate) segments: Vec<Segment>,
    /// Long rows (ascending) and the scratch slots of their later segments, in order.
    pub(crate) long_rows: Vec<(usize, Range<usize>)>,
    pub(crate) slots: usize,
    pub(crate) serial: bool,
    /// Rows per chunk of the row-parallel schedule (plans without long rows).
    pub(crate) row_chunk: usize,
    /// Columns per K-panel (`k` when not panelled).
    pub(crate) k_panel: usize,
    /// The period and band width of a sweep (then `tasks` are the bands of the planes, not in
    /// row order, and the units their runs of planes).
    pub(crate) sweep: Option<(usize, usize)>,
    pub(crate) options: micro::Options,
}

impl SpmmPlan {
    /// The automatic block size (nonzeros per task) for a row profile and K with the default
    /// [`BlockSizing`]: 2¹⁶ / K nonzeros (a task of about 2¹⁶ multiply-adds), clamped to
    /// `[32, 8192]`, lowered to `nnz / 128` so that there are enough tasks to balance, and on
    /// regular matrices raised to the longest row (when that is at most 4× larger) so that no
    /// row is split for nothing.
    pub fn auto_block_size(stats: &RowStats, k: usize) -> usize {
        BlockSizing::default().block_size(stats, k)
    }

    /// A K-panel width for `LssmConfig::k_panel`, for a matrix with `ncols` columns, `k` columns
    /// of `T` and a last-level cache of `cache` bytes (for example
    /// [`last_level_cache_bytes`]): `k` (no panels) unless B is larger than half the cache and
    /// its rows are gathered at random (`locality < 0.5`, see [`SpmmPlan::column_locality`]; in
    /// matrices with a structured diagonal the caches already serve B); then the widest multiple
    /// of a 64-byte line whose panel of B (`ncols · width` elements) fits in half the cache, and
    /// `k` when not even one line per row fits.
    ///
    /// Pass the cache the gathers really get, which on a shared machine can be well below the
    /// nominal last-level cache (`examples/gather_rate.rs`; benches/README.md, sparse,
    /// "Measurements behind code defaults").
    pub fn auto_k_panel<T>(ncols: usize, k: usize, locality: f64, cache: usize) -> usize {
        let size = std::mem::size_of::<T>().max(1);
        let line = (64 / size).max(1);
        let budget = cache / 2;
        if ncols.saturating_mul(k).saturating_mul(size) <= budget || locality >= 0.5 {
            return k;
        }
        let width = budget / ncols.max(1) / size / line * line;
        if width == 0 || width >= k {
            k
        } else {
            width
        }
    }

    /// The chunk size of [`LssmConfig::chunk_bytes`] for a B of `ncols` rows of `k` columns of
    /// `T`, a matrix of [`SpmmPlan::column_locality`] `locality` and a last-level cache of
    /// `cache` bytes: 32 KiB when B is larger than the cache and the columns of neighbouring
    /// rows are mostly far apart (`locality < 0.5`), so that the rows of B come from memory at
    /// random and a pass over a longer chunk keeps more of them in flight; else 16 KiB, whose
    /// rows of B stay in L1 between the tile passes over K. On the AMD EPYC VM (2 threads,
    /// alternated in one process; benches/README.md, sparse, "Units"), 32 KiB against 16:
    /// `kron:18` 1.00× at K = 64 and 1.05–1.06× at K = 128, `rmat:18:16` 1.00–1.04× and 1.04×,
    /// `uniform:262144:16` unchanged; where the rows of B are in cache or read in order,
    /// 1–3 % slower (`bcsstk13`, `pushpull`, the arrow at K = 64) and 3–4 % on `stencil27:64`
    /// at K = 128 (those last figures with the sums grouped by chunk, before the fixed groups).
    ///
    /// # Examples
    /// ```
    /// use sparse_kernels::SpmmPlan;
    /// // A B of 262144 rows of 64 `f64` (128 MiB), gathered at random: longer chunks.
    /// assert_eq!(SpmmPlan::auto_chunk_bytes::<f64>(262_144, 64, 0.1, 32 << 20), 32 << 10);
    /// // The same B read in order (a stencil), or a B that fits the cache: L1-sized chunks.
    /// assert_eq!(SpmmPlan::auto_chunk_bytes::<f64>(262_144, 64, 0.9, 32 << 20), 16 << 10);
    /// assert_eq!(SpmmPlan::auto_chunk_bytes::<f64>(20_000, 64, 0.1, 32 << 20), 16 << 10);
    /// ```
    pub fn auto_chunk_bytes<T>(ncols: usize, k: usize, locality: f64, cache: usize) -> usize {
        let b_bytes = ncols
            .saturating_mul(k)
            .saturating_mul(std::mem::size_of::<T>());
        if b_bytes > cache && locality < 0.5 {
            2 * micro::CHUNK_BYTES
        } else {
            micro::CHUNK_BYTES
        }
    }

    /// Whether to write C with streaming stores ([`LssmConfig::streaming_stores`]) for `rows`
    /// rows of `k` columns of `T` and a last-level cache of `cache` bytes: when C is larger than
    /// the cache, so that it would not stay there anyway. The plan applies this rule with
    /// [`last_level_cache_bytes`] unless the configuration decides.
    ///
    /// # Examples
    /// ```
    /// use sparse_kernels::SpmmPlan;
    /// // A C of 200000 × 64 `f64` (102 MB) does not fit a 32 MiB cache; one of 2000 rows does.
    /// assert!(SpmmPlan::auto_streaming_stores::<f64>(200_000, 64, 32 << 20));
    /// assert!(!SpmmPlan::auto_streaming_stores::<f64>(2_000, 64, 32 << 20));
    /// ```
    pub fn auto_streaming_stores<T>(rows: usize, k: usize, cache: usize) -> bool {
        rows.saturating_mul(k)
            .saturating_mul(std::mem::size_of::<T>())
            > cache
    }

    /// Builds the plan for `a` and dense operands with `k` columns.
    ///
    /// Complexity: `O(rows + tasks)`, plus binary searches for the column boundaries of the
    /// long-row groups (`O(log ncols · long_row_group · log row)` per long-row task), plus, for a
    /// matrix without long rows whose B exceeds two per-core caches, a few passes over the
    /// nonzeros of up to 4096 sampled rows (the sweep's period) and of up to 4096 more where B
    /// exceeds the last-level cache (the column locality).
    ///
    /// # Panics
    /// If `config.block_nnz` is `Some(0)`.
    pub fn new<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>, k: usize, config: &LssmConfig) -> Self {
        let stats = RowStats::of(a);
        let block = config
            .block_nnz
            .unwrap_or_else(|| config.block_sizing.block_size(&stats, k));
        assert!(block > 0, "the LSSM block size must be positive");
        // Rows of more than `block` nonzeros are long: split into tasks of about `block`
        // nonzeros; the short rows between them are merged into runs of about `block`, grouped
        // with the long-row tasks by position.
        let long: Vec<usize> = (0..a.nrows()).filter(|&i| a.row_nnz(i) > block).collect();
        let (long_tasks, segments, long_rows, slots) =
            split_long_rows(a, &long, block, config.long_row_group);
        // A sweep of a grid-like matrix without long rows; the sampled detection only where B
        // does not fit the cache the bands are sized for (or the configuration asks for bands).
        let row_bytes = k.saturating_mul(size_of::<T>());
        let sweep_cache = 2 * per_core_cache_bytes();
        let may_sweep = match config.sweep_rows {
            Some(0) => false,
            Some(_) => true,
            None => a.ncols().saturating_mul(row_bytes) > sweep_cache,
        };
        let sweep = if long.is_empty() && may_sweep {
            grid_stride(a).and_then(|stride| {
                let width = config
                    .sweep_rows
                    .or_else(|| band_rows(a.nrows(), stride, row_bytes, sweep_cache))?;
                Some((stride.period, width.clamp(1, stride.period)))
            })
        } else {
            None
        };
        let (tasks, units) = match sweep {
            Some((period, width)) => sweep_tasks(a.nrows(), period, width),
            None => units(a, &long, block, long_tasks, &segments),
        };
        let serial = a.nnz().saturating_mul(k) < config.serial_work || a.nrows() <= 1;
        // Rows per chunk from the mean row, but no chunk of the longest rows above 16× the
        // target work, so that a few long (not split) rows cannot unbalance the schedule; an
        // even number, so that no chunk boundary splits a shift pair (benches/README.md, sparse,
        // "Shift pairs split by the row chunks").
        let cost = |len: usize| (len + 1) * k.max(1);
        let row_chunk = (config.row_chunk_work / cost(stats.nnz / stats.rows.max(1)))
            .min(config.row_chunk_work.saturating_mul(16) / cost(stats.max))
            .max(1)
            .next_multiple_of(2);
        let k_panel = match config.k_panel {
            Some(p) if p > 0 && p < k => p,
            _ => k,
        };
        let cache = last_level_cache_bytes();
        let b_bytes = a.ncols().saturating_mul(k).saturating_mul(size_of::<T>());
        // The locality probe reads up to 4096 rows: only where B could miss.
        let locality = if b_bytes > cache {
            Self::column_locality(a)
        } else {
            1.0
        };
        Self {
            shape: (a.nrows(), a.ncols(), a.nnz()),
            k,
            block,
            stats,
            tasks,
            units,
            segments,
            long_rows,
            slots,
            serial,
            row_chunk,
            k_panel,
            sweep,
            options: micro::Options {
                prefetch: config.prefetch.unwrap_or(false),
                stream: config.streaming_stores.unwrap_or_else(|| {
                    Self::auto_streaming_stores::<T>(a.nrows(), k, last_level_cache_bytes())
                }),
                chunk_k: k,
                chunk_bytes: config
                    .chunk_bytes
                    .filter(|&b| b > 0)
                    .unwrap_or_else(|| Self::auto_chunk_bytes::<T>(a.ncols(), k, locality, cache)),
                prefetch_distance: config.prefetch_distance,
                shift_pairs: config
                    .shift_pairs
                    .unwrap_or_else(|| ShiftPairs::of(a).pay()),
                // The micro-kernel takes the pairs where the width it is given (K, or a panel's)
                // is narrow; a plan whose K-panel is not narrow has no use for them.
                narrow_pairs: config.narrow_pairs.unwrap_or(true)
                    && crate::kernels::narrow_pairs::is_narrow::<T>(k_panel),
                lead_prefetch: config
                    .lead_prefetch
                    .unwrap_or(b_bytes > cache && locality >= 0.5),
            },
        }
    }

    /// The fraction of nonzeros whose column is within 8 of a column of the previous row, over
    /// a sample of up to 4096 rows (1 when there are none): high when consecutive rows read
    /// nearby rows of B, which the hardware prefetcher and the caches serve, low for the random
    /// gathers of power-law graphs.
    pub fn column_locality<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>) -> f64 {
        let (mut near, mut total) = (0usize, 0usize);
        let mut prev: Vec<usize> = Vec::new();
        for i in sampled_rows(a.nrows(), 4096).filter(|&i| i > 0) {
            prev.clear();
            prev.extend(a.row(i - 1).0.iter().map(|c| c.idx()));
            prev.sort_unstable();
            for c in a.row(i).0.iter().map(|c| c.idx()) {
                let at = prev.partition_point(|&p| p + 8 < c);
                near += usize::from(prev.get(at).is_some_and(|&p| p <= c + 8));
                total += 1;
            }
        }
        if total == 0 {
            1.0
        } else {
            near as f64 / total as f64
        }
    }
    /// The sweep of the plan, if it has one ([`LssmConfig::sweep_rows`]): the period (rows from
    /// one plane of the grid to the next) and the rows per band.
    ///
    /// # Examples
    /// ```
    /// use sparse_kernels::{gen, LssmConfig, SpmmPlan};
    /// // A 24 × 24 × 24 grid: planes of 576 rows, here in bands of four grid lines.
    /// let a = gen::stencil_3d_27pt::<f64, u32>(24);
    /// let config = LssmConfig { sweep_rows: Some(96), ..LssmConfig::default() };
    /// assert_eq!(SpmmPlan::new(&a, 64, &config).sweep(), Some((576, 96)));
    /// // A power-law graph has no planes.
    /// let g = gen::kronecker::<f64, u32>(10, 1);
    /// assert_eq!(SpmmPlan::new(&g, 64, &config).sweep(), None);
    /// ```
    pub fn sweep(&self) -> Option<(usize, usize)> {
        self.sweep
    }

    /// Columns of B and C per K-panel (one pass over A per panel); `k()` when not panelled.
    pub fn k_panel(&self) -> usize {
        self.k_panel
    }
    /// Whether the numeric phase computes shift pairs together ([`LssmConfig::shift_pairs`]).
    pub fn shift_pairs(&self) -> bool {
        self.options.shift_pairs
    }
    /// Whether the numeric phase computes pairs of short rows together, K (or the K-panel)
    /// being one narrow tile ([`LssmConfig::narrow_pairs`]).
    pub fn narrow_pairs(&self) -> bool {
        self.options.narrow_pairs
    }

    /// Whether the numeric phase prefetches rows of B.
    pub fn prefetches(&self) -> bool {
        self.options.prefetch
    }
    /// Whether the numeric phase prefetches each row's lead row of B a few rows ahead
    /// ([`LssmConfig::lead_prefetch`]).
    pub fn lead_prefetch(&self) -> bool {
        self.options.lead_prefetch && !self.options.prefetch
    }
    /// Nonzeros per task.
    pub fn block_nnz(&self) -> usize {
        self.block
    }
    /// Number of columns of B and C this plan was built for.
    pub fn k(&self) -> usize {
        self.k
    }
    /// The row profile of the matrix.
    pub fn stats(&self) -> &RowStats {
        &self.stats
    }
    /// Number of tasks (merged short-row runs plus long-row segments).
    pub fn num_tasks(&self) -> usize {
        self.tasks.len()
    }
    /// Number of units: the groups of consecutive tasks one worker runs in a row (runs of short
    /// rows, then the long-row task whose rows of B they read; or, in a sweep, one band through
    /// consecutive planes). Used where the plan has long rows or a sweep; otherwise the numeric
    /// phase splits the rows of C as `spmm_row_parallel` does.
    pub fn num_units(&self) -> usize {
        self.units.len()
    }
    /// Number of long (split) rows.
    pub fn num_long_rows(&self) -> usize {
        self.long_rows.len()
    }
    /// Number of short (merged) rows.
    pub fn num_short_rows(&self) -> usize {
        self.shape.0 - self.long_rows.len()
    }
    /// Number of long-row segments (pieces of long rows, computed by the tasks that do not
    /// take whole rows).
    pub fn num_segments(&self) -> usize {
        self.segments.len()
    }
    /// Scratch elements the numeric phase allocates: one K-vector per long-row segment after
    /// the first.
    pub fn scratch_len(&self) -> usize {
        self.slots * self.k
    }
    /// Whether the numeric phase writes C with streaming stores.
    pub fn streams_c(&self) -> bool {
        self.options.stream
    }

    /// Bytes of rows of B per chunk of a long row's nonzeros ([`LssmConfig::chunk_bytes`]).
    pub fn chunk_bytes(&self) -> usize {
        self.options.chunk_bytes
    }
    /// Whether the numeric phase runs on the calling thread (too little work to split).
    pub fn is_serial(&self) -> bool {
        self.serial
    }

    /// The plan's work in the order one worker alone does it: its tasks in order (a unit is a
    /// run of consecutive tasks; a parallel run gives each worker a contiguous share of the
    /// units, run in this order), or all rows in order where the plan has neither long rows
    /// nor a sweep (and splits the rows of C as [`crate::spmm_row_parallel`] does). For cache
    /// studies: the order in which the rows of B are read (`examples/spmm_compare.rs` counts
    /// those an LRU cache misses).
    ///
    /// ```
    /// use sparse_kernels::{gen, LssmConfig, PlanStep, SpmmPlan};
    /// let a = gen::arrow::<f64, u32>(2000, 1, 1);
    /// let plan = SpmmPlan::new(&a, 64, &LssmConfig::default());
    /// // Every row of A exactly once, the long one in segments.
    /// let mut nonzeros = 0;
    /// for step in plan.steps() {
    ///     nonzeros += match step {
    ///         PlanStep::Rows(rows) => rows.map(|i| a.row_nnz(i)).sum::<usize>(),
    ///         PlanStep::Segment { nz, .. } => nz.len(),
    ///     };
    /// }
    /// assert_eq!(nonzeros, a.nnz());
    /// ```
    pub fn steps(&self) -> impl Iterator<Item = PlanStep> + '_ {
        let in_row_order = self.segments.is_empty() && self.sweep.is_none();
        let all_rows = in_row_order.then_some(PlanStep::Rows(0..self.shape.0));
        let tasks = self.tasks.iter().filter(move |_| !in_row_order);
        all_rows.into_iter().chain(tasks.flat_map(
            move |task| -> Box<dyn Iterator<Item = PlanStep> + '_> {
                match task {
                    Task::Rows(rows) => Box::new(std::iter::once(PlanStep::Rows(rows.clone()))),
                    Task::Segments(range) => Box::new(self.segments[range.clone()].iter().map(
                        |s| PlanStep::Segment {
                            row: self.long_rows[s.long].0,
                            nz: s.nz.clone(),
                        },
                    )),
                }
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;

    /// No chunk of the row-parallel schedule splits a shift pair: the rows per chunk are even,
    /// also where the work per chunk makes an odd count of them.
    #[test]
    fn row_chunks_hold_whole_pairs() {
        let a = gen::stencil_3d_27pt::<f64, u32>(12);
        let per_row = (a.nnz() / a.nrows() + 1) * 64;
        for rows in [1, 2, 9, 10] {
            let config = LssmConfig {
                row_chunk_work: rows * per_row,
                ..LssmConfig::default()
            };
            let plan = SpmmPlan::new(&a, 64, &config);
            assert_eq!(plan.row_chunk % 2, 0, "{rows} rows of work");
            assert!(
                plan.row_chunk >= rows && plan.row_chunk <= rows + 1,
                "{rows} rows of work"
            );
        }
    }

    /// At run time the chunks shrink to leave every thread eight of them, never below a pair
    /// of rows and never to an odd count; large matrices keep the plan's chunk.
    #[test]
    fn row_chunks_leave_every_thread_chunks_to_balance() {
        let a = gen::stencil_3d_27pt::<f64, u32>(12);
        let plan = SpmmPlan::new(&a, 64, &LssmConfig::default());
        let chunk = plan.row_chunk;
        assert!(
            chunk > 100 && chunk.is_multiple_of(2),
            "plan's chunk {chunk}"
        );
        assert_eq!(plan.row_chunk_for(1 << 20, 2), chunk);
        assert_eq!(plan.row_chunk_for(1728, 2), 108);
        assert_eq!(plan.row_chunk_for(1728, 3), 72);
        assert_eq!(plan.row_chunk_for(1000, 2), 64, "63 rounded up to even");
        assert_eq!(plan.row_chunk_for(10, 4), 2);
        assert_eq!(plan.row_chunk_for(0, 2), 2);
        assert_eq!(
            plan.row_chunk_for(1728, 0),
            chunk.min(216),
            "no threads: as one"
        );
    }
}
