//! The register-tiled micro-kernel shared by every parallel kernel.
//!
//! For one row (or row segment) of A it computes `out[0..K] = Σ_e a_e · B[col_e, 0..K]`.
//!
//! * **Register tile of C.** K is walked in tiles of `T::TILE` columns (256 bytes: 8 AVX2
//!   registers) whose accumulators stay in registers while the nonzeros stream past — the
//!   "local memory" tile of C in the LSSM paper — then tiles of half, a quarter and an eighth of
//!   that width (down to one register) and a scalar tail. The loops have compile-time trip
//!   counts over fixed-size arrays, so LLVM emits packed instructions; [`pulp::Arch::dispatch`]
//!   compiles them once per CPU level (AVX2+FMA "x86-v3" or the SSE2 baseline) and picks at run
//!   time. On CPUs with AVX-512 (x86-64-v4, detected at run time; [`crate::set_simd_limit`]
//!   caps it) the same code is compiled with AVX-512 enabled and tiles twice as
//!   wide (512 bytes: 8 registers), so a row of B of K = 64 `f64` is taken in one pass instead
//!   of two; the bits are the same (a column's operations do not depend on its tile). pulp
//!   0.21 offers its AVX-512 level only on nightly Rust, hence this one `#[target_feature]`
//!   function of our own.
//! * **Chunks of nonzeros.** A row longer than one chunk (long-row segments) is taken in
//!   chunks small enough that their rows of B (`chunk · K` elements, [`CHUNK_BYTES`]) stay in
//!   L1 while every tile over K passes over them, so each row of B is read from memory once;
//!   each chunk's partial sums are added to the K-vector of C (in L1). Where the plan expects
//!   the rows of B to come from memory at random it takes chunks of two such groups
//!   (`Options::chunk_bytes`): each tile pass then has twice as many rows of B in flight, and
//!   its sums are still taken group by group ([`chunk_and_group`]), so the bits do not depend
//!   on the chunk (nor on the machine whose cache chose it). Rows of at most one
//!   chunk — almost every row of a sparse matrix — take one pass of the tiles. The chunk length
//!   comes from the plan's full K (`Options::chunk_k`) and the scalar tail does the same
//!   operations as a tile column, so a K-panelled plan gives the bits of the unpanelled one.
//!   The segments of one long-row task are taken chunk by chunk across them
//!   ([`segments_into`]): in a column-aligned group of long rows the first row's chunk brings
//!   its rows of B into L1 for the other rows' chunks.
//! * **Prefetch** (opt-in, see [`crate::LssmConfig::prefetch`]): while a chunk is
//!   multiplied, the rows of B of the next `prefetch_distance` nonzeros (default: one chunk)
//!   are prefetched into L1; a watermark carried
//!   from row to row of a task makes every nonzero's row of B prefetched once (before, each short
//!   row prefetched the whole next chunk, re-issuing most prefetches of the row before it).
//! * **Lead rows** ([`Options::lead_prefetch`], the plan's choice where B is larger than the
//!   last-level cache and read in order): the row loop prefetches the row of B of each row's
//!   last entry [`LEAD_AHEAD`] rows ahead — in grids and banded matrices the one row of B no
//!   earlier row read, which the hardware prefetchers do not bring in time.
//! * **Short rows cost little besides their nonzeros.** A call over a run of rows reads the
//!   run's row offsets as one slice (their bounds checked once for the run, not twice per row),
//!   and a K that is a multiple of the widest tile (K = 64 `f64`) skips the narrower tiles'
//!   checks. C is not prefetched (a former prefetch of the row of C four rows ahead cost up to
//!   7 % on matrices of short rows and gained 1–3 % only on arrow matrices; MKL's executor does
//!   not prefetch C either; benches/README.md, sparse, "Native MKL, session of 2026-12-06").
//! * **Two rows at a time where one is not enough.** Rows whose successor is the same row
//!   shifted by one column (grids, bands) are computed with it, one load of B for both
//!   ([`super::shift_pairs`]); at a K of one narrow tile (64 or 128 bytes) two consecutive
//!   short rows share one interleaved loop, twice the independent chains
//!   ([`super::narrow_pairs`]). Each row keeps its own order of operations: same bits.
//! * **Write C once.** Every K-vector of C is written once by its tiles, never zeroed first;
//!   with `stream` (the plan's choice: by default when C is larger than the last-level
//!   cache), a tile that is whole 64-byte lines at a line boundary is written
//!   with non-temporal stores, straight from its registers, which skip reading the destination
//!   lines into the cache first. The stores are as wide as the registers of the level the
//!   code runs on (32 bytes on AVX2, 64 on AVX-512): 16-byte ones made LLVM build the whole tile
//!   from 16-byte vectors.
//! * **No bounds checks in the hot loop.** The entry points take a validated [`CsrMatrix`]
//!   (every column index `< ncols`) and assert `B.rows == A.ncols` once; the loads of B are then
//!   unchecked (see the `SAFETY` comments).
//! * **Fused multiply-add** on every SIMD level that has it (not on pulp's scalar fallback).
//!   The generated code was checked with `objdump -d` (release `spmm_compare` example): the
//!   x86-v3 instance of the `f64` tile loop is, per nonzero, the index load, one `imul`, one
//!   `vbroadcastsd` and 8 × `vfmadd231pd mem, ymm, ymm` (12 instructions for 32 multiply-adds,
//!   against 20 with separate `vmulpd` + `vaddpd`), with no compare/branch besides the loop's.
//!   The loop waits for memory, not for arithmetic, so both forms ran at about the same
//!   speed; the fused form leaves more room in the reorder window. The AVX-512 instance of the
//!   512-byte `f64` tile is, per nonzero, the index load, `imul`, `vbroadcastsd zmm` and
//!   8 × `vfmadd231pd mem, zmm, zmm`, mostly faster than AVX2 (measurements: benches/README.md,
//!   sparse, "Measurements behind code defaults").

use super::narrow_pairs::{is_narrow, narrow_pair};
use super::prefetch_and_stream::{fence_streams, prefetch_rows, vector_bytes, write};
use super::shift_pairs::{is_shift, pair_tiles, pair_width};
use crate::dense::{DenseMut, DenseRef};
use crate::{CsrMatrix, Scalar, SpIndex};
use pulp::{Simd, WithSimd};
use std::ops::Range;

/// Memory policies of the micro-kernel.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// Prefetch the rows of B of the next chunk of nonzeros.
    pub(crate) prefetch: bool,
    /// Write whole rows of C with non-temporal (streaming) stores, which skip the read for
    /// ownership of the destination lines: for a C too large to stay in cache anyway.
    pub(crate) stream: bool,
    /// The K that sets the chunk length of long rows ([`chunk_len`]); 0: the width of the
    /// output. A K-panelled plan passes its full K, so that every panel cuts the rows at the
    /// same nonzeros and gives the bits of the unpanelled computation.
    pub(crate) chunk_k: usize,
    /// Bytes of B rows one chunk of nonzeros may touch ([`chunk_len`]); 0: [`CHUNK_BYTES`].
    pub(crate) chunk_bytes: usize,
    /// With `prefetch`: how many nonzeros past the end of the chunk being multiplied the rows
    /// of B are prefetched; 0: one chunk ([`chunk_len`]).
    pub(crate) prefetch_distance: usize,
    /// Compute a row and the next together where the next is the row shifted by one column
    /// ([`super::shift_pairs`]; same bits), without prefetching, for rows of at most one
    /// group and a K that is a whole number of pair tiles.
    pub(crate) shift_pairs: bool,
    /// Compute two consecutive rows of at most one group in one interleaved loop where K is one
    /// narrow tile, 64 or 128 bytes ([`super::narrow_pairs`]; same bits), without prefetching.
    pub(crate) narrow_pairs: bool,
    /// Prefetch the row of B of each row's last entry [`LEAD_AHEAD`] rows ahead (its *lead*
    /// row), without `prefetch`: with sorted columns the largest, in banded matrices and grids
    /// the one row of B the rows before it did not read.
    pub(crate) lead_prefetch: bool,
}

/// Rows ahead of the row being multiplied whose lead rows of B are prefetched
/// ([`Options::lead_prefetch`]; one more past the second row of a pair).
pub(crate) const LEAD_AHEAD: usize = 2;

/// How a tile computes and writes its K-vector piece: with fused multiply-adds or not (only
/// where the SIMD level has them), on top of what is there or not, streaming or not.
#[derive(Clone, Copy)]
pub(super) struct Store {
    pub(super) fma: bool,
    pub(super) accumulate: bool,
    pub(super) stream: bool,
    /// Nonzeros summed from zero before their sum is added to the K-vector (0: all of them):
    /// the grouping of the sums, fixed by K and `T` ([`chunk_and_group`]), so that the result
    /// does not depend on how many nonzeros a pass covers.
    pub(super) group: usize,
    /// The widest streaming store the SIMD level the code runs on has ([`vector_bytes`]).
    pub(super) vector_bytes: usize,
}

/// Bytes of B rows one chunk of nonzeros may touch (half of a 32 KiB L1, leaving room for C).
/// For K = 64 `f64` a chunk is 32 nonzeros, so the rows of most sparse matrices are one chunk.
pub(crate) const CHUNK_BYTES: usize = 16 << 10;

/// Nonzeros per chunk for `k` columns of `T` when a chunk's rows of B may take `bytes` (0:
/// [`CHUNK_BYTES`]): `bytes / (K · size)`, clamped to `4..=64`.
#[inline(always)]
pub(super) fn chunk_len<T>(k: usize, bytes: usize) -> usize {
    let bytes = if bytes == 0 { CHUNK_BYTES } else { bytes };
    (bytes / (k * std::mem::size_of::<T>()).max(1)).clamp(4, 64)
}

/// The nonzeros a pass of the tiles covers (`options.chunk_bytes` of rows of B, at least one
/// group and a whole number of groups) and the group their sums are taken in ([`CHUNK_BYTES`]
/// of rows of B, whatever the chunk), for C rows of `k` columns (the plan's full K where it
/// is K-panelled, `options.chunk_k`).
#[inline(always)]
pub(super) fn chunk_and_group<T>(options: Options, k: usize) -> (usize, usize) {
    let k = match options.chunk_k {
        0 => k,
        full => full,
    };
    let group = chunk_len::<T>(k, CHUNK_BYTES);
    let chunk = chunk_len::<T>(k, options.chunk_bytes).max(group) / group * group;
    (chunk, group)
}

/// B with its leading dimension; every column index given to the functions below is
/// `< rows`, where `rows` satisfies `(rows - 1) * ld + k <= data.len()` (the invariant of
/// [`DenseRef`]) and `k <= ld` is the length of every output vector.
#[derive(Clone, Copy)]
pub(super) struct Dense<'a, T> {
    pub(super) data: &'a [T],
    pub(super) ld: usize,
}

/// Accumulates one tile of `N` columns starting at `k0`: `out[k0..k0 + N] (+)= Σ v · B[c, ..]`.
///
/// # Safety
/// Every `c` in `cols` is a row of `b` (see [`Dense`]) and `k0 + N <= out.len() <= ld`.
#[inline(always)]
unsafe fn tile<T: Scalar, I: SpIndex, const N: usize>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    k0: usize,
    out: &mut [T],
    store: Store,
) {
    let mut acc = [T::ZERO; N];
    for (&c, &v) in cols.iter().zip(vals) {
        // SAFETY: `c < rows` and `k0 + N <= k <= ld`, so `c * ld + k0 + N <= (rows - 1) * ld
        // + k <= data.len()` (caller's contract); `[T; N]` has the alignment of `T`.
        let brow = unsafe { &*b.data.as_ptr().add(c.idx() * b.ld + k0).cast::<[T; N]>() };
        for j in 0..N {
            acc[j] = if store.fma {
                v.mul_add(brow[j], acc[j])
            } else {
                acc[j] + v * brow[j]
            };
        }
    }
    let o: &mut [T; N] = (&mut out[k0..k0 + N]).try_into().expect("tile in bounds");
    if store.accumulate {
        // Read into a local first: added straight from `o`, the loop was versioned against
        // `o` aliasing `acc` on the AVX-512 tiles, which kept `acc` on the stack.
        let before: [T; N] = *o;
        for j in 0..N {
            acc[j] += before[j];
        }
    }
    if store.stream {
        write(o, acc, true, store.vector_bytes);
    } else {
        *o = acc;
    }
}

/// [`tile`] over the groups of `store.group` nonzeros of `cols`, one after the other, each
/// summed from zero and added to the K-vector: the sums of one pass over a chunk of several
/// groups are those of a pass per group.
///
/// # Safety
/// As [`tile`].
#[inline(always)]
unsafe fn tile_groups<T: Scalar, I: SpIndex, const N: usize>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    k0: usize,
    out: &mut [T],
    store: Store,
) {
    let mut s = 0;
    while s < cols.len() {
        let e = (s + store.group).min(cols.len());
        let piece = Store {
            accumulate: store.accumulate || s > 0,
            stream: store.stream && e == cols.len(),
            ..store
        };
        // SAFETY: caller's contract, for a part of `cols`.
        unsafe { tile::<T, I, N>(&cols[s..e], &vals[s..e], b, k0, out, piece) };
        s = e;
    }
}

/// [`tile`] over all of `cols`, or with `GROUPED` over its groups ([`tile_groups`]).
///
/// # Safety
/// As [`tile`].
#[inline(always)]
unsafe fn tile_in<T: Scalar, I: SpIndex, const N: usize, const GROUPED: bool>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    k0: usize,
    out: &mut [T],
    store: Store,
) {
    // SAFETY: caller's contract.
    unsafe {
        if GROUPED {
            tile_groups::<T, I, N>(cols, vals, b, k0, out, store)
        } else {
            tile::<T, I, N>(cols, vals, b, k0, out, store)
        }
    }
}

/// One tile of `$n` columns at `$k0` if it fits in `$k`, advancing `$k0`.
macro_rules! tail_tile {
    ($n:ident, $k:ident, $k0:ident, $cols:ident, $vals:ident, $b:ident, $out:ident, $acc:ident) => {
        if $k0 + $n <= $k {
            // SAFETY: forwarded contract of `tiles`; `k0 + n <= k` checked just above.
            unsafe { tile_in::<T, I, $n, GROUPED>($cols, $vals, $b, $k0, $out, $acc) };
            $k0 += $n;
        }
    };
}

/// Full tiles of `W` columns, then one tile each of `H`, `Q`, `E` columns where they fit, then
/// a scalar tail shorter than `E`; returns after the full tiles when they cover K.
///
/// # Safety
/// As [`tile`] with `out.len()` for `k0 + N`.
#[inline(always)]
unsafe fn tiles<
    T: Scalar,
    I: SpIndex,
    const W: usize,
    const H: usize,
    const Q: usize,
    const E: usize,
>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    out: &mut [T],
    store: Store,
) {
    // SAFETY: caller's contract.
    unsafe {
        if store.group != 0 && cols.len() > store.group {
            tiles_in::<T, I, W, H, Q, E, true>(cols, vals, b, out, store)
        } else {
            tiles_in::<T, I, W, H, Q, E, false>(cols, vals, b, out, store)
        }
    }
}

/// [`tiles`] with every tile over all of `cols`, or with `GROUPED` over its groups: each tile
/// pass goes over the whole chunk (more rows of B in flight), the sums taken group by group.
///
/// # Safety
/// As [`tiles`].
#[inline(always)]
unsafe fn tiles_in<
    T: Scalar,
    I: SpIndex,
    const W: usize,
    const H: usize,
    const Q: usize,
    const E: usize,
    const GROUPED: bool,
>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    out: &mut [T],
    store: Store,
) {
    let k = out.len();
    let mut k0 = 0;
    while k0 + W <= k {
        // SAFETY: caller's contract, `k0 + W <= k`.
        unsafe { tile_in::<T, I, W, GROUPED>(cols, vals, b, k0, out, store) };
        k0 += W;
    }
    if k0 == k {
        // K a multiple of the widest tile (K = 64 `f64` on AVX2 and AVX-512): no tail.
        return;
    }
    tail_tile!(H, k, k0, cols, vals, b, out, store);
    tail_tile!(Q, k, k0, cols, vals, b, out, store);
    tail_tile!(E, k, k0, cols, vals, b, out, store);
    // The same operations, in the same order, as a column of a tile: so a column gives the
    // same bits whether it falls in a tile or in the tail (K-panels move the tile boundaries).
    let group = if store.group == 0 {
        cols.len().max(1)
    } else {
        store.group
    };
    for (j, o) in out.iter_mut().enumerate().skip(k0) {
        let mut s = 0;
        loop {
            let e = (s + group).min(cols.len());
            let mut acc = T::ZERO;
            for (&c, &v) in cols[s..e].iter().zip(&vals[s..e]) {
                // SAFETY: `j < k`, caller's contract as in `tile`.
                let x = unsafe { *b.data.get_unchecked(c.idx() * b.ld + j) };
                acc = if store.fma {
                    v.mul_add(x, acc)
                } else {
                    acc + v * x
                };
            }
            if store.accumulate || s > 0 {
                acc += *o;
            }
            *o = acc;
            if e == cols.len() {
                break;
            }
            s = e;
        }
    }
}

/// [`tiles`] with the widths of `T`: 256, 128, 64 and 32 bytes (8 to 1 AVX2 registers), or with
/// `WIDE` 512, 256, 128 and 64 bytes (8 to 1 AVX-512 registers): a whole row of B of K = 64
/// `f64` in one pass.
///
/// # Safety
/// As [`tiles`].
#[inline(always)]
pub(super) unsafe fn all_tiles<T: Scalar, I: SpIndex, const WIDE: bool>(
    cols: &[I],
    vals: &[T],
    b: Dense<'_, T>,
    out: &mut [T],
    store: Store,
) {
    // SAFETY: caller's contract.
    unsafe {
        match (WIDE, T::TILE == 64) {
            (false, true) => tiles::<T, I, 64, 32, 16, 8>(cols, vals, b, out, store),
            (false, false) => tiles::<T, I, 32, 16, 8, 4>(cols, vals, b, out, store),
            (true, true) => tiles::<T, I, 128, 64, 32, 16>(cols, vals, b, out, store),
            (true, false) => tiles::<T, I, 64, 32, 16, 8>(cols, vals, b, out, store),
        }
    }
}

/// How far ahead the rows of B are prefetched: nonzeros `done..` have not been prefetched yet,
/// and nothing at or beyond `end` is (0: no prefetching). Carried from row to row within a task,
/// so that every row of B is prefetched once per nonzero, not once per row that looks ahead.
pub(super) struct Prefetch {
    pub(super) done: usize,
    pub(super) end: usize,
    /// Nonzeros per chunk ([`chunk_len`] of the plan's K).
    pub(super) chunk: usize,
    /// Nonzeros past the end of the current chunk that are prefetched.
    pub(super) distance: usize,
}

/// `out = vals[nz] · B[cols[nz], ..]` in chunks of `pf.chunk` nonzeros, prefetching the rows of B
/// of the next chunk (as `pf` allows), with fused multiply-adds when `mode.fma`, the last chunk
/// writing `out` with streaming stores when `mode.stream` (`mode.accumulate` is ignored);
/// `out.len()` is K (or the width of a K-panel).
///
/// # Safety
/// Every index in `cols` is a row of `b` (see [`Dense`]), `out.len() <= b.ld`,
/// `nz.end, pf.end <= cols.len() == vals.len()`.
#[inline(always)]
pub(super) unsafe fn segment<T: Scalar, I: SpIndex, const WIDE: bool>(
    cols: &[I],
    vals: &[T],
    nz: Range<usize>,
    pf: &mut Prefetch,
    b: Dense<'_, T>,
    out: &mut [T],
    mode: Store,
) {
    let k = out.len();
    if nz.is_empty() {
        out.fill(T::ZERO);
        return;
    }
    let chunk = pf.chunk;
    let mut s = nz.start;
    while s < nz.end {
        let e = (s + chunk).min(nz.end);
        let ahead = (e + pf.distance).min(pf.end);
        let from = pf.done.max(e);
        if ahead > from {
            prefetch_rows(&cols[from..ahead], b.data, b.ld, k);
            pf.done = ahead;
        }
        let (c, v) = (&cols[s..e], &vals[s..e]);
        let store = Store {
            accumulate: s > nz.start,
            stream: mode.stream && e == nz.end,
            ..mode
        };
        // SAFETY: caller's contract.
        unsafe { all_tiles::<T, I, WIDE>(c, v, b, out, store) };
        s = e;
    }
}

/// A task for the SIMD dispatcher: rows `first..first + c.rows()` of A into the rows of `c`,
/// or (with `nz`) one range of nonzeros of a single row into the first row of `c`.
struct Job<'a, 'c, T, I> {
    a: &'a CsrMatrix<T, I>,
    first: usize,
    nz: Option<Range<usize>>,
    options: Options,
    b: DenseRef<'a, T>,
    c: DenseMut<'c, T>,
}

/// A kernel body that [`dispatch`] compiles once per SIMD level.
pub(super) trait SimdJob {
    /// The body, compiled for the SIMD level of the function it is inlined into; `WIDE` for
    /// the AVX-512 tile widths ([`all_tiles`]), `fma` where the level has fused multiply-adds.
    fn run<const WIDE: bool>(self, fma: bool);
    /// Bytes of a row of C the job's tiles cover (K times the element size). At most
    /// [`crate::simd::AVX2_ROW_BYTES`], [`dispatch`] runs the job on the AVX2 tiles even where
    /// AVX-512 is in use. Default `usize::MAX`: the widest tiles (`RowPairs`, whose narrow
    /// rows were not measured on both paths).
    fn row_bytes(&self) -> usize {
        usize::MAX
    }
}

/// A [`SimdJob`] for pulp's dispatcher.
struct OnLevel<J>(J);

impl<J: SimdJob> WithSimd for OnLevel<J> {
    type Output = ();
    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        // Every SIMD level pulp dispatches to (x86-64-v3, NEON) has FMA; the scalar fallback
        // does not, and there `mul_add` would be a library call.
        self.0.run::<false>(!S::IS_SCALAR);
    }
}

impl<T: Scalar, I: SpIndex> SimdJob for Job<'_, '_, T, I> {
    fn row_bytes(&self) -> usize {
        self.c.cols() * std::mem::size_of::<T>()
    }
    #[inline(always)]
    fn run<const WIDE: bool>(self, fma: bool) {
        let Self {
            a,
            first,
            nz,
            options,
            b,
            mut c,
        } = self;
        let (cols, vals) = (a.indices(), a.values());
        let dense = Dense {
            data: b.data(),
            ld: b.ld(),
        };
        let end = match &nz {
            _ if !options.prefetch => 0,
            Some(nz) => nz.end,
            None => a.offsets()[first + c.rows()].idx(),
        };
        let (chunk, group) = chunk_and_group::<T>(options, c.cols());
        let mut pf = Prefetch {
            done: 0,
            end,
            chunk,
            distance: match options.prefetch_distance {
                0 => chunk,
                d => d,
            },
        };
        let plain = Store {
            fma,
            accumulate: false,
            stream: false,
            group,
            vector_bytes: vector_bytes::<WIDE>(fma),
        };
        let rows = Store {
            stream: options.stream,
            ..plain
        };
        // The contract of `segment` and `all_tiles` holds in every call below: the entry points
        // checked `b.rows() == a.ncols()` and `c.cols() == b.cols() <= b.ld()`; a validated CSR
        // has every column index `< ncols` and offsets within `cols.len()`; `nz` and `end` are
        // ranges of its nonzeros (checked by `segment_into`, or row offsets).
        match nz {
            // SAFETY: see above.
            Some(nz) => unsafe {
                segment::<T, I, WIDE>(cols, vals, nz, &mut pf, dense, c.row_mut(0), plain)
            },
            None => {
                // Row `i` of `c` is row `first + i` of A; `offsets` holds the bounds of them all
                // (the offsets are bounds-checked once here; each row's slices still are).
                let offsets = &a.offsets()[first..=first + c.rows()];
                let k = c.cols();
                let pairs = options.shift_pairs
                    && !options.prefetch
                    && k > 0
                    && k.is_multiple_of(pair_width::<T, WIDE>());
                let narrow = options.narrow_pairs && !options.prefetch && is_narrow::<T>(k);
                let rows_of_c = c.rows();
                let lead = options.lead_prefetch && !options.prefetch;
                // Rows before `led` have had their lead rows of B prefetched.
                let mut led = 0;
                let mut outs = c.rows_mut();
                let mut i = 0;
                while let Some(out) = outs.next() {
                    if lead {
                        // Up to the row after this one too: a pair takes two rows a step.
                        while led < rows_of_c.min(i + 2 + LEAD_AHEAD) {
                            let end = offsets[led + 1].idx();
                            if end > offsets[led].idx() {
                                prefetch_rows(&cols[end - 1..end], dense.data, dense.ld, k);
                            }
                            led += 1;
                        }
                    }
                    let r = offsets[i].idx()..offsets[i + 1].idx();
                    if pairs && r.len() <= group && i + 1 < rows_of_c {
                        let r2 = offsets[i + 1].idx()..offsets[i + 2].idx();
                        if is_shift(&cols[r.clone()], &cols[r2.clone()]) {
                            let out2 = outs.next().expect("row i + 1 of C");
                            let (v1, v2) = (&vals[r.clone()], &vals[r2]);
                            // SAFETY: as above; the second row's columns are the first's plus
                            // one (`is_shift`), so they are rows of B too, and both rows have
                            // `k` columns, a multiple of the pair tile.
                            unsafe {
                                pair_tiles::<T, I, WIDE>(&cols[r], v1, v2, dense, out, out2, rows)
                            };
                            i += 2;
                            continue;
                        }
                    }
                    if narrow && r.len() <= group && i + 1 < rows_of_c {
                        let r2 = offsets[i + 1].idx()..offsets[i + 2].idx();
                        if r2.len() <= group {
                            let out2 = outs.next().expect("row i + 1 of C");
                            // SAFETY: as above; both rows have `k` columns, a narrow tile.
                            unsafe {
                                narrow_pair::<T, I>(
                                    &cols[r.clone()],
                                    &vals[r],
                                    &cols[r2.clone()],
                                    &vals[r2],
                                    dense,
                                    out,
                                    out2,
                                    rows,
                                )
                            };
                            i += 2;
                            continue;
                        }
                    }
                    i += 1;
                    if options.prefetch || r.len() > chunk {
                        // SAFETY: see above.
                        unsafe { segment::<T, I, WIDE>(cols, vals, r, &mut pf, dense, out, rows) };
                    } else {
                        // A row of at most one chunk: one pass of the tiles over it.
                        // SAFETY: see above.
                        unsafe {
                            all_tiles::<T, I, WIDE>(&cols[r.clone()], &vals[r], dense, out, rows)
                        };
                    }
                }
                if options.stream {
                    fence_streams();
                }
            }
        }
    }
}

/// Runs `job` on the widest SIMD level this CPU has and [`crate::set_simd_limit`] allows:
/// AVX-512 with the 512-byte tiles (for rows of C wider than [`crate::simd::AVX2_ROW_BYTES`]),
/// else the level [`pulp::Arch`] picks (x86-64-v3, NEON or scalar). The bits are the same on
/// every level.
pub(super) fn dispatch<J: SimdJob>(job: J) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::avx512_in_use() && job.row_bytes() > crate::simd::AVX2_ROW_BYTES {
        // SAFETY: `avx512_in_use` detected the features `run_v4` is compiled for.
        unsafe { run_v4(job) };
        return;
    }
    pulp::Arch::new().dispatch(OnLevel(job));
}

/// [`SimdJob::run`] compiled for AVX-512 with the 512-byte tiles.
///
/// # Safety
/// The CPU has AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn run_v4<J: SimdJob>(job: J) {
    job.run::<true>(true);
}

/// The contract every entry point asserts before the unchecked loads: `B` is `A.ncols × K`.
#[track_caller]
pub(crate) fn check_b<T: Scalar, I: SpIndex>(a: &CsrMatrix<T, I>, b: &DenseRef<'_, T>, k: usize) {
    let (rows, cols) = (b.rows(), b.cols());
    assert_eq!(
        rows,
        a.ncols(),
        "B has {rows} rows, A has {} columns",
        a.ncols()
    );
    assert_eq!(k, cols, "C has {k} columns, B has {cols}");
}

/// Computes rows `first..first + c.rows()` of `A·B` into `c`, overwriting it.
#[track_caller]
pub(crate) fn rows_into<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    first: usize,
    b: DenseRef<'_, T>,
    c: DenseMut<'_, T>,
    options: Options,
) {
    check_b(a, &b, c.cols());
    assert!(first + c.rows() <= a.nrows(), "rows beyond A");
    dispatch(Job {
        a,
        first,
        nz: None,
        options,
        b,
        c,
    });
}

/// Computes `out = Σ_{e ∈ nz} A.values[e] · B[A.indices[e], ..]` for a range of nonzeros (a
/// row segment).
#[track_caller]
pub(crate) fn segment_into<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    nz: Range<usize>,
    b: DenseRef<'_, T>,
    out: &mut [T],
    options: Options,
) {
    let k = out.len();
    check_b(a, &b, k);
    assert!(nz.start <= nz.end && nz.end <= a.nnz(), "nonzeros beyond A");
    dispatch(Job {
        a,
        first: 0,
        nz: Some(nz),
        options,
        b,
        c: DenseMut::contiguous(out, 1, k),
    });
}

/// Computes `out = Σ_{e ∈ nz} A.values[e] · B[A.indices[e], ..]` for each `(nz, out)` of a
/// long-row task, chunk by chunk across them: the first chunk of every segment, then the
/// second, … In a column-aligned group the segments' chunks read the same rows of B, which
/// the first chunk brings into L1 for the others. Each segment's chunks are added in their
/// order, so the bits are those of [`segment_into`] on each. With `options.prefetch`, one
/// segment after the other (the prefetch runs ahead within a segment).
#[track_caller]
pub(crate) fn segments_into<T: Scalar, I: SpIndex>(
    a: &CsrMatrix<T, I>,
    segments: Vec<(Range<usize>, &mut [T])>,
    b: DenseRef<'_, T>,
    options: Options,
) {
    if options.prefetch {
        for (nz, out) in segments {
            segment_into(a, nz, b, out, options);
        }
        return;
    }
    for (nz, out) in &segments {
        check_b(a, &b, out.len());
        assert!(nz.start <= nz.end && nz.end <= a.nnz(), "nonzeros beyond A");
    }
    dispatch(GroupJob {
        a,
        segments,
        options,
        b,
    });
}

/// The job of [`segments_into`].
struct GroupJob<'a, 'c, T, I> {
    a: &'a CsrMatrix<T, I>,
    segments: Vec<(Range<usize>, &'c mut [T])>,
    options: Options,
    b: DenseRef<'a, T>,
}

impl<T: Scalar, I: SpIndex> SimdJob for GroupJob<'_, '_, T, I> {
    fn row_bytes(&self) -> usize {
        self.segments
            .first()
            .map_or(usize::MAX, |(_, out)| std::mem::size_of_val(*out))
    }
    #[inline(always)]
    fn run<const WIDE: bool>(self, fma: bool) {
        let Self {
            a,
            mut segments,
            options,
            b,
        } = self;
        let (cols, vals) = (a.indices(), a.values());
        let dense = Dense {
            data: b.data(),
            ld: b.ld(),
        };
        let Some(k) = segments.first().map(|(_, out)| out.len()) else {
            return;
        };
        let (chunk, group) = chunk_and_group::<T>(options, k);
        let longest = segments.iter().map(|(nz, _)| nz.len()).max().unwrap_or(0);
        for (nz, out) in &mut segments {
            if nz.start == nz.end {
                out.fill(T::ZERO);
            }
        }
        let mut at = 0;
        while at < longest {
            for (nz, out) in &mut segments {
                let s = nz.start + at;
                if s >= nz.end {
                    continue;
                }
                let e = (s + chunk).min(nz.end);
                let store = Store {
                    fma,
                    accumulate: at > 0,
                    stream: false,
                    group,
                    vector_bytes: vector_bytes::<WIDE>(fma),
                };
                // SAFETY: `segments_into` checked `b.rows() == a.ncols()` and
                // `out.len() == b.cols() <= b.ld()` for every segment, and `nz` within A's
                // nonzeros; a validated CSR has every column index `< ncols`.
                unsafe { all_tiles::<T, I, WIDE>(&cols[s..e], &vals[s..e], dense, out, store) };
            }
            at += chunk;
        }
    }
}

/// `out += x`, elementwise (the deterministic combination step of split rows).
pub(crate) fn add_into<T: Scalar>(out: &mut [T], x: &[T]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o += v;
    }
}

/// For tests: the SIMD path a job runs on.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
pub(super) enum Level {
    /// The level pulp picks (AVX2 + FMA here, or the baseline).
    Pulp,
    /// The AVX-512 path with its 512-byte tiles.
    Avx512,
}

#[cfg(test)]
impl Level {
    /// Runs `job` on this path.
    ///
    /// # Panics
    /// On `Avx512` where the CPU has no AVX-512.
    pub(super) fn run<J: SimdJob>(self, job: J) {
        match self {
            Level::Pulp => pulp::Arch::new().dispatch(OnLevel(job)),
            Level::Avx512 => {
                assert!(crate::simd::cpu_has_avx512(), "no AVX-512 on this CPU");
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the CPU has AVX-512 (asserted just above), what `run_v4` needs.
                unsafe {
                    run_v4(job)
                };
            }
        }
    }
}

/// For tests: `product` computed on both paths where the CPU has AVX-512 must give the same
/// bits (a column's operations do not depend on the tile it falls in).
#[cfg(test)]
pub(super) fn assert_levels_agree<T: Scalar>(what: &str, product: impl Fn(Level) -> Vec<T>) {
    if !crate::simd::cpu_has_avx512() {
        return;
    }
    let (narrow, wide) = (product(Level::Pulp), product(Level::Avx512));
    assert!(
        same_bits_as(&narrow, &wide),
        "{what}: the AVX-512 and AVX2 paths differ"
    );
}

/// For tests: whether `x` and `y` hold the same bits, element by element.
#[cfg(test)]
pub(super) fn same_bits_as<T: Scalar>(x: &[T], y: &[T]) -> bool {
    x.len() == y.len()
        && x.iter()
            .zip(y)
            .all(|(p, q)| p.to_f64().to_bits() == q.to_f64().to_bits())
}

/// For tests: rows `first..` of `A · B` through [`rows_into`] with `with` and with `without`
/// (C starting at 7 each time) must give the same bits.
#[cfg(test)]
pub(super) fn assert_rows_agree<T: Scalar>(
    a: &CsrMatrix<T, u32>,
    b: &[T],
    k: usize,
    first: usize,
    (with, without): (Options, Options),
    what: &str,
) {
    let product = |options| {
        let rows = a.nrows() - first;
        let mut c = vec![T::from_f64(7.0); rows * k];
        let b = DenseRef::new(b, a.ncols(), k, k);
        rows_into(a, first, b, DenseMut::new(&mut c, rows, k, k), options);
        c
    };
    assert!(same_bits_as(&product(with), &product(without)), "{what}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records whether [`dispatch`] ran it on the AVX-512 tiles.
    struct Probe<'a> {
        row_bytes: usize,
        wide: &'a std::cell::Cell<Option<bool>>,
    }

    impl SimdJob for Probe<'_> {
        fn row_bytes(&self) -> usize {
            self.row_bytes
        }
        fn run<const WIDE: bool>(self, _fma: bool) {
            self.wide.set(Some(WIDE));
        }
    }

    #[test]
    fn narrow_rows_never_run_on_the_avx512_tiles() {
        let wide = std::cell::Cell::new(None);
        for row_bytes in [8, 32, crate::simd::AVX2_ROW_BYTES] {
            dispatch(Probe {
                row_bytes,
                wide: &wide,
            });
            assert_eq!(wide.take(), Some(false), "{row_bytes} bytes");
        }
        // Wider rows take the AVX-512 tiles where the CPU has them (unless another test has
        // just capped the level, which only ever makes this `false`).
        dispatch(Probe {
            row_bytes: 512,
            wide: &wide,
        });
        assert!(wide.take().is_some());
    }
    use crate::gen;

    /// Every row of `a · b` through the given path, the long rows also as two segments added.
    fn product<T: Scalar>(
        a: &CsrMatrix<T, u32>,
        b: &[T],
        k: usize,
        options: Options,
        level: Level,
    ) -> Vec<T> {
        let (m, n) = (a.nrows(), a.ncols());
        let mut c = vec![T::ZERO; m * k];
        level.run(Job {
            a,
            first: 0,
            nz: None,
            options,
            b: DenseRef::new(b, n, k, k),
            c: DenseMut::new(&mut c, m, k, k),
        });
        let mut seg = vec![T::ZERO; k];
        for i in 0..m {
            let r = a.row_range(i);
            level.run(Job {
                a,
                first: 0,
                nz: Some(r.start..r.start + r.len() / 2),
                options,
                b: DenseRef::new(b, n, k, k),
                c: DenseMut::contiguous(&mut seg, 1, k),
            });
            c.extend_from_slice(&seg);
        }
        c
    }

    /// The AVX-512 path (512-byte tiles) gives the bits of the pulp-dispatched path (256-byte
    /// tiles) for every K, with and without prefetching, streaming stores, shift and narrow
    /// pairs: a column's operations do not depend on the tile it falls in.
    fn same_bits<T: Scalar>() {
        if !crate::simd::cpu_has_avx512() {
            eprintln!("skipped: this CPU has no AVX-512");
            return;
        }
        // Three rows of 700 nonzeros (many chunks, for `segment`), the others of 4; and a
        // stencil, whose grid lines are shift pairs.
        let arrow: CsrMatrix<T, u32> = gen::arrow(700, 3, 5);
        let grid: CsrMatrix<T, u32> = gen::stencil_3d_27pt(7);
        for a in [&arrow, &grid] {
            for k in [1, 3, 8, 16, 17, 32, 64, 100, 129, 256] {
                let b = gen::dense::<T>(a.ncols(), k, 11);
                for (prefetch, stream, shift_pairs, narrow_pairs, lead_prefetch) in [
                    (false, false, false, false, false),
                    (true, false, false, false, false),
                    (false, true, false, false, false),
                    (false, false, true, false, false),
                    (false, true, true, false, false),
                    (false, false, false, true, false),
                    (false, true, true, true, false),
                    (false, true, true, true, true),
                ] {
                    let options = Options {
                        prefetch,
                        stream,
                        shift_pairs,
                        narrow_pairs,
                        lead_prefetch,
                        ..Options::default()
                    };
                    let what = format!("{} K = {k}, {options:?}", T::NAME);
                    assert_levels_agree(&what, |level| product(a, &b, k, options, level));
                }
            }
        }
    }

    /// The segments of a task taken chunk by chunk across them give the bits of one segment
    /// at a time, for segments of different lengths (an empty one included).
    fn group_bits<T: Scalar>() {
        let a: CsrMatrix<T, u32> = gen::arrow(700, 3, 5);
        let ranges = |i: usize| {
            let r = a.row_range(i);
            [
                r.start..r.start + 300,
                r.start + 300..r.end,
                r.start..r.start,
            ]
        };
        let all: Vec<Range<usize>> = (0..3).flat_map(ranges).collect();
        for k in [1, 3, 17, 64, 100] {
            let b = gen::dense::<T>(a.ncols(), k, 11);
            let b = DenseRef::new(&b, a.ncols(), k, k);
            let mut one = vec![T::from_f64(7.0); all.len() * k];
            for (nz, out) in all.iter().zip(one.chunks_mut(k)) {
                segment_into(&a, nz.clone(), b, out, Options::default());
            }
            let mut group = vec![T::from_f64(7.0); all.len() * k];
            let segments = all.iter().cloned().zip(group.chunks_mut(k)).collect();
            segments_into(&a, segments, b, Options::default());
            assert!(
                same_bits_as(&one, &group),
                "{} K = {k}: the group differs",
                T::NAME
            );
        }
    }

    #[test]
    fn segments_taken_together_give_the_bits_of_one_at_a_time() {
        group_bits::<f64>();
        group_bits::<f32>();
    }

    #[test]
    fn avx512_path_gives_the_bits_of_the_avx2_path_f64() {
        same_bits::<f64>();
    }

    #[test]
    fn avx512_path_gives_the_bits_of_the_avx2_path_f32() {
        same_bits::<f32>();
    }
}
