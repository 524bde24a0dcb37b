//! Command-line handling shared by the benchmark examples `spmm_compare` and `spmm_sweep`.

use std::collections::HashMap;

/// `--threads N --k K1,K2 --reps N --precision f32|f64`, the example's own options, and the
/// matrices (paths or generator specs).
pub(crate) struct Args {
    pub(crate) threads: usize,
    pub(crate) ks: Vec<usize>,
    pub(crate) reps: usize,
    pub(crate) f32: bool,
    /// The example's own options: `--name value`, or `--name` → `""` for switches.
    pub(crate) extra: HashMap<String, String>,
    pub(crate) matrices: Vec<String>,
}

/// A bad command line: what is wrong, and the example's options.
#[derive(Debug, thiserror::Error)]
#[error("{0}\nusage: [--threads N] [--k K1,K2,..] [--reps N] [--precision f32|f64] [the example's options] MATRIX...")]
pub(crate) struct ArgError(String);

impl ArgError {
    /// An error about the command line, worded by the example.
    #[allow(dead_code)] // not every example checks its own options
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

/// Prints `error: {e}` to stderr and exits with status 2: the examples' answer to bad input
/// (a command line, a matrix that cannot be loaded), instead of a panic.
pub(crate) fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("error: {e}");
    std::process::exit(2)
}

impl Args {
    /// The rayon pool of `--threads` threads every example runs its kernels in (exits with a
    /// message when the threads cannot be started).
    pub(crate) fn pool(&self) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(self.threads)
            .build()
            .unwrap_or_else(|e| fail(format!("starting {} threads: {e}", self.threads)))
    }

    /// `threads N, R rounds, load …` (the load average from `/proc/loadavg`, empty elsewhere).
    #[allow(dead_code)] // not every example prints it
    pub(crate) fn header(&self) -> String {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        format!(
            "threads {}, {} rounds, load {}",
            self.threads,
            self.reps,
            load.trim()
        )
    }
}

/// Most threads, K and rounds the examples accept (a typo, not a measurement, beyond them).
const MAX_THREADS: usize = 4096;
const MAX_K: usize = 1 << 16;
const MAX_REPS: usize = 1 << 20;

/// Parses the process arguments; `valued` and `switches` name the example's own options. Bad
/// input (an unknown option, a missing or malformed value, no matrix) is reported on stderr
/// with the usage line, and the process exits with status 2.
#[allow(dead_code)] // gather_rate takes no matrix and calls `try_parse`
pub(crate) fn parse(ks: &[usize], reps: usize, valued: &[&str], switches: &[&str]) -> Args {
    let o = try_parse(std::env::args().skip(1), ks, reps, valued, switches);
    match o {
        Ok(o) if o.matrices.is_empty() => fail(ArgError(
            "no MATRIX: give a file (.mtx, .mtx.gz, .smtx) or a generator spec (kron:18, \
             stencil27:64, ...)"
                .into(),
        )),
        Ok(o) => o,
        Err(e) => fail(e),
    }
}

/// [`parse`] over any argument list, returning the error instead of exiting (no MATRIX is not
/// an error here: for the examples that take none).
pub(crate) fn try_parse(
    args: impl IntoIterator<Item = String>,
    ks: &[usize],
    reps: usize,
    valued: &[&str],
    switches: &[&str],
) -> Result<Args, ArgError> {
    let mut o = Args {
        threads: 2,
        ks: ks.to_vec(),
        reps,
        f32: false,
        extra: HashMap::new(),
        matrices: Vec::new(),
    };
    let number = |opt: &str, v: &str, max: usize| -> Result<usize, ArgError> {
        match v.parse::<usize>() {
            Ok(x) if (1..=max).contains(&x) => Ok(x),
            _ => Err(ArgError(format!(
                "{opt} takes a whole number from 1 to {max}, not `{v}`"
            ))),
        }
    };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .ok_or_else(|| ArgError(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--threads" => o.threads = number("--threads", &value()?, MAX_THREADS)?,
            "--k" => {
                o.ks = value()?
                    .split(',')
                    .map(|k| number("--k", k, MAX_K))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => o.reps = number("--reps", &value()?, MAX_REPS)?,
            "--precision" => {
                o.f32 = match value()?.as_str() {
                    "f32" => true,
                    "f64" => false,
                    p => return Err(ArgError(format!("--precision f32 or f64, not `{p}`"))),
                }
            }
            s if valued.contains(&s.trim_start_matches('-')) && s.starts_with("--") => {
                let v = value()?;
                o.extra.insert(s.trim_start_matches('-').to_string(), v);
            }
            s if switches.contains(&s.trim_start_matches('-')) && s.starts_with("--") => {
                o.extra
                    .insert(s.trim_start_matches('-').to_string(), String::new());
            }
            s if s.starts_with("--") => {
                let own: Vec<String> = valued
                    .iter()
                    .map(|v| format!("--{v} VALUE"))
                    .chain(switches.iter().map(|s| format!("--{s}")))
                    .collect();
                return Err(ArgError(format!(
                    "unknown option `{s}` (this example's own: {})",
                    if own.is_empty() {
                        "none".to_string()
                    } else {
                        own.join(", ")
                    }
                )));
            }
            _ => o.matrices.push(a),
        }
    }
    Ok(o)
}

/// Sums `count` rows of `k` (at most 64) elements of `b`, each picked at random by an
/// `xorshift64` stream seeded with `seed` (not 0): the memory behaviour of SpMM's gathers of B
/// on a power-law A. Returns the sum, to keep the work alive.
#[allow(dead_code)] // used by gather_rate and spmm_compare only
pub(crate) fn gather_random_rows(b: &[f64], k: usize, count: usize, seed: u64) -> f64 {
    let rows = (b.len() / k.max(1)) as u64;
    let mut acc = [0.0f64; 64];
    let mut s = seed;
    for _ in 0..count {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let r = (s % rows) as usize * k;
        for (a, x) in acc.iter_mut().zip(&b[r..r + k]) {
            *a += x;
        }
    }
    acc.iter().sum()
}

/// [`gather_random_rows`] with every line of the row `ahead` gathers in front
/// prefetched into L1 (a second `xorshift64` stream started `ahead` steps ahead): the same rows
/// in the same order, the same sum.
#[allow(dead_code)] // used by gather_rate and spmm_compare only
pub(crate) fn gather_random_rows_prefetched(
    b: &[f64],
    k: usize,
    count: usize,
    seed: u64,
    ahead: usize,
) -> f64 {
    let rows = (b.len() / k.max(1)) as u64;
    let step = |s: &mut u64| {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s % rows) as usize * k
    };
    let mut front = seed;
    for _ in 0..ahead {
        step(&mut front);
    }
    let mut acc = [0.0f64; 64];
    let mut s = seed;
    for _ in 0..count {
        let p = step(&mut front);
        #[cfg(target_arch = "x86_64")]
        for line in (0..k).step_by(8) {
            // SAFETY: a prefetch is only a hint and never faults; `p + line < b.len()` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    b.as_ptr().wrapping_add(p + line).cast::<i8>(),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = p;
        let r = step(&mut s);
        for (a, x) in acc.iter_mut().zip(&b[r..r + k]) {
            *a += x;
        }
    }
    acc.iter().sum()
}

/// A 16-way set-associative LRU cache of whole rows of B, for counting the rows a gather reads
/// from memory: `bytes` of capacity in rows of `row_bytes`. Rows go to sets by a multiplicative
/// hash, so that neighbouring rows of B land in different sets.
#[allow(dead_code)] // used by spmm_compare and row_order_study only
pub(crate) struct RowCache {
    sets: usize,
    tags: Vec<u32>,
}

#[allow(dead_code)]
impl RowCache {
    const WAYS: usize = 16;

    /// An empty cache of `bytes` bytes holding rows of `row_bytes` bytes.
    pub(crate) fn new(bytes: usize, row_bytes: usize) -> Self {
        let sets = (bytes / row_bytes.max(1) / Self::WAYS).max(1);
        Self {
            sets,
            tags: vec![u32::MAX; sets * Self::WAYS],
        }
    }

    /// Whether row `row` is in the cache (without reading it: the LRU order stays).
    pub(crate) fn contains(&self, row: u32) -> bool {
        let set = self.set(row);
        self.tags[set * Self::WAYS..(set + 1) * Self::WAYS].contains(&row)
    }

    fn set(&self, row: u32) -> usize {
        ((u64::from(row).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize) % self.sets
    }

    /// Reads row `row`; `true` if it was not in the cache (a miss: read from memory).
    pub(crate) fn access(&mut self, row: u32) -> bool {
        let set = self.set(row);
        let ways = &mut self.tags[set * Self::WAYS..(set + 1) * Self::WAYS];
        let (at, miss) = match ways.iter().position(|&t| t == row) {
            Some(at) => (at, false),
            None => (Self::WAYS - 1, true),
        };
        ways[..=at].rotate_right(1);
        ways[0] = row;
        miss
    }
}

/// A set-associative LRU cache of 64-byte lines indexed by address bits, as a core's L1 is: the
/// model behind the row-order study's L1 column, where rows of B whose addresses are a multiple
/// of the way size apart compete for one set however much of the cache is free.
pub(crate) struct LineCache {
    sets: usize,
    ways: usize,
    tags: Vec<u64>,
}

#[allow(dead_code)]
impl LineCache {
    /// An empty cache of `bytes` bytes in sets of `ways` lines.
    pub(crate) fn new(bytes: usize, ways: usize) -> Self {
        let ways = ways.max(1);
        let sets = (bytes / 64 / ways).max(1);
        Self {
            sets,
            ways,
            tags: vec![u64::MAX; sets * ways],
        }
    }

    /// Reads line `line` (address / 64); `true` on a miss.
    pub(crate) fn access(&mut self, line: u64) -> bool {
        let set = (line % self.sets as u64) as usize;
        let ways = &mut self.tags[set * self.ways..(set + 1) * self.ways];
        let (at, miss) = match ways.iter().position(|&t| t == line) {
            Some(at) => (at, false),
            None => (ways.len() - 1, true),
        };
        ways[..=at].rotate_right(1);
        ways[0] = line;
        miss
    }
}

/// `a` with its rows in `order` (a permutation of the rows): C's rows can be computed in any
/// order, so the row-order studies time LSSM on the reordered matrix.
#[allow(dead_code)] // used by row_order_study and lssm_variants only
pub(crate) fn permuted(
    a: &sparse_kernels::CsrMatrix<f64, u32>,
    order: &[usize],
) -> sparse_kernels::CsrMatrix<f64, u32> {
    let mut offsets = Vec::with_capacity(order.len() + 1);
    offsets.push(0u32);
    let (mut indices, mut values) = (Vec::with_capacity(a.nnz()), Vec::with_capacity(a.nnz()));
    for &r in order {
        let (c, v) = a.row(r);
        indices.extend_from_slice(c);
        values.extend_from_slice(v);
        offsets.push(
            u32::try_from(indices.len())
                .unwrap_or_else(|_| fail("the row-order studies take < 2^32 nonzeros")),
        );
    }
    sparse_kernels::CsrMatrix::try_new(a.nrows(), a.ncols(), offsets, indices, values)
        .unwrap_or_else(|e| fail(format!("reordering the rows: {e}")))
}

/// For a square matrix of `N³` rows (a grid matrix such as `stencil27:N`, row `(z·N + y)·N +
/// x`): its rows in tiles of `bx × by` grid points, each tile swept plane by plane (sorted by
/// `(y / by, x / bx, z, y % by, x % bx)`), so that the three planes of a tile a stencil row
/// reads stay in cache from one plane to the next; `bx ≥ N` gives slabs of `by` lines. `None`
/// for any other shape. It knows the geometry: a study of what locality is worth, not a
/// general reordering.
#[allow(dead_code)] // used by row_order_study and lssm_variants only
pub(crate) fn grid_tile_order<T: sparse_kernels::Scalar>(
    a: &sparse_kernels::CsrMatrix<T, u32>,
    bx: usize,
    by: usize,
) -> Option<Vec<usize>> {
    if bx == 0 || by == 0 {
        return None;
    }
    grid_order(a, |x, y, z| [y / by, x / bx, z, y % by, x % bx])
}

/// For a square matrix of `N³` rows (row `(z·N + y)·N + x`), its rows sorted by `key(x, y,
/// z)`; `None` for any other shape.
#[allow(dead_code)] // used by row_order_study and lssm_variants only
pub(crate) fn grid_order<T: sparse_kernels::Scalar, K: Ord>(
    a: &sparse_kernels::CsrMatrix<T, u32>,
    key: impl Fn(usize, usize, usize) -> K,
) -> Option<Vec<usize>> {
    let rows = a.nrows();
    let n = (rows as f64).cbrt().round() as usize;
    if rows != a.ncols() || n == 0 || n * n * n != rows {
        return None;
    }
    let mut order: Vec<usize> = (0..rows).collect();
    order.sort_by_key(|&i| key(i % n, (i / n) % n, i / (n * n)));
    Some(order)
}
