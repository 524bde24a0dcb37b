//! The Rust half of `scripts/compare-spmm`: times every pardis kernel and sprs (all but the
//! serial reference in alternated rounds, so that their ratios are paired) on a list of
//! matrices (files or generator specs), measures the STREAM triad bandwidth, and prints one
//! JSON object per line. The first line also has the peak FMA throughput of the thread pool
//! (register-resident, at the SIMD level the kernels use), the last-level cache size the system
//! reports, the capacity random row gathers really get (`gather_cache_bytes`, measured) and the
//! fastest rate of random 512-byte row gathers from memory (`random_gather_gbs`); each
//! matrix line the rows of B a row-order gather reads from memory through an LRU cache of the
//! measured size (`b_miss_rows`; `b_random_miss_rows` of them not next to a row just read), the K-panel width `SpmmPlan::auto_k_panel` suggests for that cache
//! and, when it is below K, paired times of the default plan and of the plan with those panels
//! (`lssm_paired`, `lssm_panelled`, alternated runs). With `--dump DIR` it also writes each matrix as raw CSR arrays
//! (`NAME.indptr.u32`, `NAME.indices.u32`, `NAME.data.f64` or `.f32`) so that the Python half
//! times SciPy and MKL on exactly the same matrices.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example spmm_compare -- \
//!     --threads 2 --k 64 --reps 5 [--precision f64] [--dump DIR] MATRIX...
//! ```
//! MATRIX is a path (`.mtx`, `.mtx.gz`, `.smtx`) or a generator spec (`kron:18`, `stencil27:64`,
//! `arrow:46500:1`, ...; see `sparse_kernels::gen::from_spec`). An argument that is neither a
//! readable matrix file nor a valid generator spec is reported on stderr and skipped (the other
//! matrices still run) and the exit code is 2. `--mkl PATH` (a
//! `libmkl_rt.so`) adds native MKL in paired blocks against LSSM (see `mkl_vs_lssm`);
//! `--mkl-no-inspector` skips MKL's hint and optimize (to measure what they buy).

use rayon::prelude::*;
use sparse_kernels::{
    gen, io, AlignedVec, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, PlanStep, RowPairs,
    RowStats, Scalar, SpmmPlan,
};
use std::path::Path;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;
#[path = "common/mkl.rs"]
mod mkl;

/// Seconds of timed runs a matrix gets at least (see the rounds in `run_matrix`).
const MIN_SECONDS: f64 = 0.5;
/// Most rounds per matrix.
const MAX_ROUNDS: usize = 201;
/// Untimed work before each block of the paired native-MKL comparison (see `mkl_vs_lssm`).
const WARM_UP_SECONDS: f64 = 0.1;
/// Idle time before each block of the native-MKL comparison and after its last: MKL's OpenMP
/// threads keep spinning for `KMP_BLOCKTIME` (200 ms by default) after each call, and a block
/// of LSSM that starts within that time shares the cores with them (on 2 vCPUs, a 0.043 ms
/// LSSM run took 0.067 ms; with `KMP_BLOCKTIME=0`, 0.036 ms — but MKL itself then 1.5× slower,
/// so MKL keeps its default, as its users run it, and the blocks wait it out).
const SPIN_OFF: std::time::Duration = std::time::Duration::from_millis(300);

/// STREAM triad `a = b + s·c` over 3 × 64 MiB arrays, parallel.
struct Triad {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
}

impl Triad {
    fn new() -> Self {
        let n = 8 << 20;
        Self {
            a: vec![0.0; n],
            b: vec![1.0; n],
            c: vec![2.0; n],
        }
    }

    /// GB/s of one pass (bytes moved / time).
    fn sample(&mut self) -> f64 {
        let (b, c) = (&self.b, &self.c);
        let s = Instant::now();
        self.a
            .par_chunks_mut(1 << 16)
            .enumerate()
            .for_each(|(i, chunk)| {
                let o = i << 16;
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x = b[o + j] + 3.0 * c[o + j];
                }
            });
        let t = s.elapsed().as_secs_f64();
        std::hint::black_box(&self.a);
        3.0 * 8.0 * self.a.len() as f64 / t / 1e9
    }
}

/// The STREAM triad's best of 10 passes, GB/s.
fn stream_triad_gbs() -> f64 {
    let mut triad = Triad::new();
    (0..10).map(|_| triad.sample()).fold(0.0, f64::max)
}

/// Register-resident fused multiply-adds at the SIMD level pulp dispatches to:
/// `CHAINS` independent accumulator vectors (enough to cover the FMA latency on every pipe),
/// `iters` rounds. Returns a checksum (keeps the work alive) and the lanes per vector.
struct PeakFma {
    iters: usize,
    f32: bool,
}

const CHAINS: usize = 12;

impl pulp::WithSimd for PeakFma {
    type Output = (f64, usize);
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> (f64, usize) {
        if self.f32 {
            let (x, y) = (simd.splat_f32s(0.999_99), simd.splat_f32s(1e-6));
            let mut acc = [simd.splat_f32s(1.0); CHAINS];
            for _ in 0..self.iters {
                for a in acc.iter_mut() {
                    *a = simd.mul_add_f32s(*a, x, y);
                }
            }
            let sum: f32 = acc.iter().map(|&a| simd.reduce_sum_f32s(a)).sum();
            (f64::from(sum), std::mem::size_of::<S::f32s>() / 4)
        } else {
            let (x, y) = (simd.splat_f64s(0.999_999), simd.splat_f64s(1e-7));
            let mut acc = [simd.splat_f64s(1.0); CHAINS];
            for _ in 0..self.iters {
                for a in acc.iter_mut() {
                    *a = simd.mul_add_f64s(*a, x, y);
                }
            }
            let sum: f64 = acc.iter().map(|&a| simd.reduce_sum_f64s(a)).sum();
            (sum, std::mem::size_of::<S::f64s>() / 8)
        }
    }
}

/// [`PeakFma`] at the AVX-512 level the kernels run on where the CPU has it, with intrinsics
/// (pulp 0.21 offers AVX-512 on nightly only): 12 `vfmadd213p? zmm` per round.
///
/// # Safety
/// The CPU has AVX-512F, AVX-512VL, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn peak_fma_avx512(iters: usize, f32: bool) -> (f64, usize) {
    use std::arch::x86_64::{
        _mm512_fmadd_pd, _mm512_fmadd_ps, _mm512_reduce_add_pd, _mm512_reduce_add_ps,
        _mm512_set1_pd, _mm512_set1_ps,
    };
    if f32 {
        let (x, y) = (_mm512_set1_ps(0.999_99), _mm512_set1_ps(1e-6));
        let mut acc = [_mm512_set1_ps(1.0); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        let sum: f64 = acc
            .iter()
            .map(|&a| f64::from(_mm512_reduce_add_ps(a)))
            .sum();
        (sum, 16)
    } else {
        let (x, y) = (_mm512_set1_pd(0.999_999), _mm512_set1_pd(1e-7));
        let mut acc = [_mm512_set1_pd(1.0); CHAINS];
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm512_fmadd_pd(*a, x, y);
            }
        }
        (acc.iter().map(|&a| _mm512_reduce_add_pd(a)).sum(), 8)
    }
}

/// [`PeakFma`] at the SIMD level the kernels run on: AVX-512 where `avx512_in_use`, else
/// pulp's.
fn peak_fma_run(iters: usize, f32: bool) -> (f64, usize) {
    #[cfg(target_arch = "x86_64")]
    if sparse_kernels::avx512_in_use() {
        // SAFETY: `avx512_in_use` detected the features `peak_fma_avx512` is compiled for.
        return unsafe { peak_fma_avx512(iters, f32) };
    }
    pulp::Arch::new().dispatch(PeakFma { iters, f32 })
}

/// Peak FMA throughput (GFLOP/s, 2 flops per lane) of every thread of the current pool at
/// once, best of 15 runs (about 7 ms each); and the lanes per vector of the SIMD level the
/// kernels run on.
fn peak_fma_gflops(f32: bool) -> (f64, usize) {
    let iters = 4_000_000;
    let mut best = f64::INFINITY;
    let mut lanes = 1;
    for _ in 0..15 {
        let s = Instant::now();
        let out = rayon::broadcast(|_| peak_fma_run(iters, f32));
        best = best.min(s.elapsed().as_secs_f64());
        lanes = std::hint::black_box(out)[0].1;
    }
    let flops = 2.0 * (iters * CHAINS * lanes * rayon::current_num_threads()) as f64;
    (flops / best / 1e9, lanes)
}

/// The cache capacity random row gathers really get (bytes): every thread of the current pool
/// sums random 512-byte rows of a line-aligned buffer of 1, 2, 4, … 64 MiB; the answer is the
/// largest size (from 1 MiB up, without a gap) gathered at least at the geometric mean of the
/// 1 MiB and 64 MiB rates (see `examples/gather_rate.rs`; on a VM sharing its L3 with other
/// tenants this is well below the size the L3 reports).
fn effective_cache_bytes() -> usize {
    const ROW: usize = 64;
    let mut buf = AlignedVec::<f64>::zeroed((64 << 20) / 8);
    buf.fill(1.0);
    let rate = |bytes: usize| {
        let part = &buf[..bytes / 8];
        let run = || {
            let start = Instant::now();
            let sums = rayon::broadcast(|ctx| {
                let seed = 0x9E37_79B9_7F4A_7C15u64 ^ (ctx.index() as u64 + 1);
                common::gather_random_rows(part, ROW, 1 << 19, seed)
            });
            std::hint::black_box(sums);
            start.elapsed().as_secs_f64()
        };
        run();
        1.0 / run().min(run())
    };
    // Halfway (geometrically) between the in-cache rate and the memory rate: the knee is
    // gradual (4–16 MiB here), and "half the 1 MiB rate" flipped between 4 and 16 MiB.
    let sizes: Vec<usize> = (0..7).map(|i| (1usize << 20) << i).collect();
    let rates: Vec<f64> = sizes.iter().map(|&b| rate(b)).collect();
    let threshold = (rates[0] * rates[rates.len() - 1]).sqrt();
    sizes
        .iter()
        .zip(&rates)
        .take_while(|(_, &r)| r >= threshold)
        .last()
        .map_or(1 << 20, |(&b, _)| b)
}

/// The fastest random row gathers this machine gives all threads of the current pool
/// together (GB/s): 512-byte rows picked at random from a line-aligned 128 MiB buffer on the
/// same pages as the harness's B (ordinary ones), with a software prefetch of the row 8, 16 or
/// 32 gathers ahead or none, the best of them (`examples/gather_rate.rs`). The rows of B that
/// miss the cache cannot arrive faster than this, whatever the kernel; the script turns it into
/// a ceiling of the gather roof.
fn random_gather_gbs() -> f64 {
    const ROW: usize = 64;
    const GATHERS: usize = 1 << 18;
    let mut buf = AlignedVec::<f64>::zeroed((128 << 20) / 8);
    buf.fill(1.0);
    let mut best = f64::INFINITY;
    for ahead in [0, 8, 16, 32] {
        for _ in 0..3 {
            let start = Instant::now();
            let sums = rayon::broadcast(|ctx| {
                let seed = 0x9E37_79B9_7F4A_7C15u64 ^ (ctx.index() as u64 + 1);
                match ahead {
                    0 => common::gather_random_rows(&buf, ROW, GATHERS, seed),
                    d => common::gather_random_rows_prefetched(&buf, ROW, GATHERS, seed, d),
                }
            });
            std::hint::black_box(sums);
            best = best.min(start.elapsed().as_secs_f64());
        }
    }
    (GATHERS * ROW * 8 * rayon::current_num_threads()) as f64 / best / 1e9
}

/// Rows of B (of `row_bytes` each) read from memory when the nonzeros of `a` gather them
/// through a 16-way set-associative LRU cache of `cache` bytes ([`common::RowCache`]), in the
/// order of the LSSM plan's steps ([`SpmmPlan::steps`]: its tasks in order — a sweep's bands
/// plane after plane, the long rows' segments where their units run them —, or row order).
/// Serial order: the 2 workers of the parallel run share the cache, so the real count is
/// somewhat higher. This is the traffic of the row-wise gather when B does not fit in cache.
///
/// Returns the misses and, of them, those at random: a missed row whose neighbour before it in
/// memory (row `c - 1`) is not in the cache either. The others continue a run of rows just read
/// (a stencil's next plane), which the hardware prefetchers stream at about the triad rate; the
/// random ones come at most at [`random_gather_gbs`].
fn gather_miss_rows<T: Scalar>(
    a: &CsrMatrix<T, u32>,
    plan: &SpmmPlan,
    row_bytes: usize,
    cache: usize,
) -> (u64, u64) {
    let mut cache = common::RowCache::new(cache, row_bytes);
    let (mut misses, mut random) = (0u64, 0u64);
    let cols = a.indices();
    for step in plan.steps() {
        let nz = match step {
            PlanStep::Rows(rows) if rows.is_empty() => continue,
            PlanStep::Rows(rows) => a.row_range(rows.start).start..a.row_range(rows.end - 1).end,
            PlanStep::Segment { nz, .. } => nz,
        };
        for &c in &cols[nz] {
            if cache.access(c) {
                misses += 1;
                random += u64::from(c == 0 || !cache.contains(c - 1));
            }
        }
    }
    (misses, random)
}

/// The matrix behind a command-line argument: a file (Matrix Market, see `io::read_matrix`)
/// or a generator spec (`gen::from_spec`); the error says which and why.
fn load<T: Scalar>(spec: &str) -> Result<(String, CsrMatrix<T, u32>), String> {
    let path = Path::new(spec);
    if path.exists() {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().replace(".gz", ""))
            .unwrap_or_else(|| spec.to_string());
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|p| p.to_string_lossy().to_string());
        let name = match parent {
            Some(p) if spec.contains("dlmc") => format!("{p}/{name}"),
            _ => name,
        };
        let a = io::read_matrix(path, 1).map_err(|e| format!("reading {spec}: {e}"))?;
        Ok((name, a))
    } else {
        let a = gen::from_spec(spec, 1)
            .map_err(|e| format!("not a file, and not a generator spec: {e}"))?;
        Ok((spec.to_string(), a))
    }
}

fn dump<T: Scalar>(dir: &Path, name: &str, a: &CsrMatrix<T, u32>) -> Result<String, String> {
    let stem = name.replace(['/', ':', '.'], "_");
    let write = |ext: &str, bytes: Vec<u8>| {
        let path = dir.join(format!("{stem}.{ext}"));
        std::fs::write(&path, bytes).map_err(|e| format!("--dump: writing {}: {e}", path.display()))
    };
    let write_u32 =
        |ext: &str, v: &[u32]| write(ext, v.iter().flat_map(|x| x.to_le_bytes()).collect());
    write_u32("indptr.u32", a.offsets())?;
    write_u32("indices.u32", a.indices())?;
    let data: Vec<u8> = a
        .values()
        .iter()
        .flat_map(|v| v.to_f64().to_le_bytes())
        .collect();
    write("data.f64", data)?;
    Ok(stem)
}

/// Native MKL against LSSM on one matrix and K: MKL's inspector (create + hint + optimize) is
/// timed once per handle, outside the SpMM times; then three pairs of blocks, LSSM's block
/// first in the first and third pair and MKL's in the second (each block after a 0.3 s pause,
/// `SPIN_OFF`, so that MKL's OpenMP workers have stopped spinning, and 0.1 s of untimed
/// warm-up runs; each library at least reps/3 runs and 0.1 s per block; one more pause after
/// the last block). Until 2026-12-07 the pause came only after each pair, so the first block
/// (after MKL's inspector) and LSSM's block after MKL's ran beside MKL's spinning workers.
/// Returns the JSON fields:
/// medians of both, MKL's inspector time, MKL's largest deviation from LSSM's C (relative to
/// max |C|), or the reason it was skipped.
fn mkl_vs_lssm<T: Scalar>(
    mkl: &mkl::Mkl,
    o: &common::Args,
    a: &CsrMatrix<T, u32>,
    plan: &SpmmPlan,
    b: &[T],
    k: usize,
) -> String {
    // `--mkl-no-inspector`: no hint, no optimize (a study of what MKL's inspector buys).
    let calls = if o.extra.contains_key("mkl-no-inspector") {
        0
    } else {
        1000
    };
    let inspector: Vec<f64> = (0..3)
        .map(|_| mkl::MklMatrix::new(mkl, a, k, calls).map(|m| m.inspector_s))
        .collect::<Result<_, _>>()
        .unwrap_or_default();
    let handle = match mkl::MklMatrix::new(mkl, a, k, calls) {
        Ok(h) => h,
        Err(e) => return format!("\"mkl_native_skipped\": \"{e}\""),
    };
    let bref = DenseRef::contiguous(b, a.ncols(), k);
    let mut c_lssm = AlignedVec::<T>::zeroed(a.nrows() * k);
    let mut c_mkl = AlignedVec::<T>::zeroed(a.nrows() * k);
    let lssm = |c: &mut [T]| {
        rayon::broadcast(|_| ());
        let start = Instant::now();
        plan.execute(
            a,
            bref,
            DenseMut::contiguous(c, a.nrows(), k),
            sparse_kernels::Par::Current,
        )
        .expect("run");
        start.elapsed().as_secs_f64()
    };
    let mkl_run = |c: &mut [T]| {
        let start = Instant::now();
        handle.mm(b, c).expect("mkl_sparse_?_mm");
        start.elapsed().as_secs_f64()
    };
    let per_block = o.reps.div_ceil(3).max(1);
    let (mut t_lssm, mut t_mkl) = (Vec::new(), Vec::new());
    for block in 0..3 {
        // LSSM first in the first and last pair of blocks, MKL first in the middle one.
        let order = if block == 1 { [1, 0] } else { [0, 1] };
        for which in order {
            // Neither library's block runs beside the other's spinning threads (`SPIN_OFF`).
            std::thread::sleep(SPIN_OFF);
            let run = |c: &mut [T]| if which == 0 { lssm(c) } else { mkl_run(c) };
            let (c, times) = if which == 0 {
                (&mut c_lssm, &mut t_lssm)
            } else {
                (&mut c_mkl, &mut t_mkl)
            };
            // Warm up for WARM_UP_SECONDS, untimed: after the pause above the vCPUs are idle,
            // and on a VM the first tens of milliseconds of work after idling run up to 2×
            // slower (a fixed number of warm-up runs left the small matrices' first library of
            // each pair in that spell and the second one not).
            let warm = Instant::now();
            while warm.elapsed().as_secs_f64() < WARM_UP_SECONDS {
                run(c);
            }
            let (mut n, mut timed) = (0, 0.0);
            while n < per_block || (timed < MIN_SECONDS / 5.0 && n < MAX_ROUNDS / 3) {
                let t = run(c);
                times.push(t);
                timed += t;
                n += 1;
            }
        }
    }
    // Nor the next matrix's rounds.
    std::thread::sleep(SPIN_OFF);
    let scale = c_lssm
        .iter()
        .map(|x| x.to_f64().abs())
        .fold(1e-300, f64::max);
    let err = c_lssm
        .iter()
        .zip(c_mkl.iter())
        .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
        .fold(0.0, f64::max)
        / scale;
    let inspector = if inspector.is_empty() {
        handle.inspector_s
    } else {
        bench_timing::median(inspector)
    };
    format!(
        "\"mkl_native\": {:e}, \"lssm_vs_mkl\": {:e}, \"mkl_inspector_s\": {inspector:e}, \
         \"mkl_rel_err\": {err:e}",
        bench_timing::median(t_mkl),
        bench_timing::median(t_lssm)
    )
}

fn run_matrix<T: Scalar + sprs::MulAcc>(
    o: &common::Args,
    spec: &str,
    gather_cache: usize,
    mkl: Option<&mkl::Mkl>,
) -> Result<(), String> {
    let (name, a) = load::<T>(spec)?;
    let stats = RowStats::of(&a);
    let stem = o
        .extra
        .get("dump")
        .map(|d| dump(Path::new(d), &name, &a))
        .transpose()?
        .unwrap_or_default();
    let sprs_a: sprs::CsMatI<T, u32> = a.clone().into();
    for &k in &o.ks {
        let b = gen::dense::<T>(a.ncols(), k, 7);
        let mut c = AlignedVec::<T>::zeroed(a.nrows() * k);
        let bref = DenseRef::contiguous(&b, a.ncols(), k);
        // The parallel kernels and sprs run in alternated, rotated rounds (one run of each per round,
        // after one warm-up run each), so that drift in the machine's state hits them alike and
        // their ratios are paired; the serial reference runs once. `None` is sprs, which adds
        // into C, so its C is zeroed inside its timed call; it gets the same line-aligned B
        // and C as the pardis kernels.
        let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
        // Row pairs' inspector (a repacked copy of A) runs outside the timing, like the plan.
        let pairs = RowPairs::new(&a, k);
        let b_nd = ndarray::ArrayView2::from_shape((a.ncols(), k), &b[..]).expect("shape");
        let mut run = |kernel: Option<Kernel>| {
            // Wake every worker of the pool first: after the serial sprs run they may be
            // asleep, and the kernel that runs next would pay for waking them.
            rayon::broadcast(|_| ());
            let start = Instant::now();
            match kernel {
                None => {
                    c.fill(T::ZERO);
                    let c_nd = ndarray::ArrayViewMut2::from_shape((a.nrows(), k), &mut c[..])
                        .expect("shape");
                    sprs::prod::csr_mulacc_dense_rowmaj(sprs_a.view(), b_nd, c_nd);
                }
                Some(kernel) => {
                    let c = DenseMut::contiguous(&mut c, a.nrows(), k);
                    match kernel {
                        Kernel::Lssm => plan.execute(&a, bref, c, sparse_kernels::Par::Current),
                        Kernel::RowPairs => pairs.execute(bref, c, sparse_kernels::Par::Current),
                        _ => kernel.run(&a, bref, c, sparse_kernels::Par::Current),
                    }
                    .expect("run");
                }
            }
            start.elapsed().as_secs_f64()
        };
        let contenders: Vec<Option<Kernel>> = Kernel::ALL
            .into_iter()
            .filter(|&k| k != Kernel::Reference)
            .map(Some)
            .chain([None])
            .collect();
        // At least `--reps` rounds, and more (up to MAX_ROUNDS) until MIN_SECONDS have been
        // timed, so that on small matrices the medians ride out the episodes (a vCPU taken
        // away for a few milliseconds) that would otherwise fall on most of 5 rounds.
        let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
        for kernel in &contenders {
            run(*kernel);
        }
        // Each round starts one contender later than the one before, so that no contender
        // always runs right after the same one (LSSM always came right after the serial sprs
        // run, which leaves one core idle and the caches full of its ordinary stores).
        // Where A, B and C exceed the last-level cache (the DRAM roofs apply), every round
        // also takes a STREAM triad pass, so that the roofs use the bandwidth of the same
        // minutes as the kernels' times (this VM's bandwidth moved by a third between runs);
        // the best pass, as STREAM reports and as the triad at the start is taken.
        let dram = (a.nnz() * (std::mem::size_of::<T>() + 4)
            + (a.nrows() + a.ncols()) * k * std::mem::size_of::<T>())
            > sparse_kernels::last_level_cache_bytes();
        let mut triad = dram.then(Triad::new);
        let mut triads = Vec::new();
        let mut timed = 0.0;
        let mut round = 0;
        while rounds[0].len() < o.reps.max(1)
            || (timed < MIN_SECONDS && rounds[0].len() < MAX_ROUNDS)
        {
            for i in (0..contenders.len()).map(|i| (i + round) % contenders.len()) {
                let time = run(contenders[i]);
                timed += time;
                rounds[i].push(time);
            }
            if let Some(t) = triad.as_mut() {
                triads.push(t.sample());
            }
            round += 1;
        }
        drop(triad);
        run(Some(Kernel::Reference));
        let mut times = vec![format!(
            "\"{}\": {:e}",
            Kernel::Reference.name(),
            run(Some(Kernel::Reference))
        )];
        for (kernel, t) in contenders.iter().zip(rounds) {
            let name = kernel.map_or("sprs", Kernel::name);
            times.push(format!("\"{name}\": {:e}", bench_timing::median(t)));
        }
        if !triads.is_empty() {
            times.push(format!(
                "\"round_triad_gbs\": {:.3}",
                triads.iter().copied().fold(0.0, f64::max)
            ));
        }
        let plan_time = bench_timing::median_secs(o.reps, || {
            std::hint::black_box(SpmmPlan::new(&a, k, &LssmConfig::default()));
        });
        // Paired with the default plan where a K-panel width is suggested for this machine's
        // last-level cache: the same plan with panels (alternated runs).
        let llc = sparse_kernels::last_level_cache_bytes();
        let locality = SpmmPlan::column_locality(&a);
        let panel = SpmmPlan::auto_k_panel::<T>(a.ncols(), k, locality, llc);
        if panel < k {
            let panelled = SpmmPlan::new(
                &a,
                k,
                &LssmConfig {
                    k_panel: Some(panel),
                    ..LssmConfig::default()
                },
            );
            let (mut t_whole, mut t_panel) = (Vec::new(), Vec::new());
            for _ in 0..o.reps {
                for (p, t) in [(&plan, &mut t_whole), (&panelled, &mut t_panel)] {
                    t.push(bench_timing::median_secs(1, || {
                        p.execute(
                            &a,
                            bref,
                            DenseMut::contiguous(&mut c, a.nrows(), k),
                            sparse_kernels::Par::Current,
                        )
                        .expect("run")
                    }));
                }
            }
            times.push(format!(
                "\"lssm_paired\": {:e}, \"lssm_panelled\": {:e}",
                bench_timing::median(t_whole),
                bench_timing::median(t_panel)
            ));
        }
        if let Some(mkl) = mkl {
            times.push(mkl_vs_lssm(mkl, o, &a, &plan, &b, k));
        }
        let row_bytes = k * std::mem::size_of::<T>();
        let (misses, random) = gather_miss_rows(&a, &plan, row_bytes, gather_cache);
        times.push(format!(
            "\"b_miss_rows\": {misses}, \"b_random_miss_rows\": {random}, \"k_panel\": {panel}"
        ));
        println!(
            "{{\"matrix\": \"{name}\", \"dump\": \"{stem}\", \"class\": \"{}\", \"rows\": {}, \"cols\": {}, \"nnz\": {}, \
             \"cv\": {:.3}, \"max_row\": {}, \"k\": {k}, \"precision\": \"{}\", \"block\": {}, \"tasks\": {}, \
             \"long_rows\": {}, \"plan_s\": {plan_time:e}, {}}}",
            stats.class(),
            a.nrows(),
            a.ncols(),
            a.nnz(),
            stats.cv,
            stats.max,
            T::NAME,
            plan.block_nnz(),
            plan.num_tasks(),
            plan.num_long_rows(),
            times.join(", ")
        );
    }
    Ok(())
}

fn main() {
    let o = common::parse(&[64], 5, &["dump", "mkl"], &["mkl-no-inspector"]);
    let pool = o.pool();
    // Native MKL (`--mkl PATH/libmkl_rt.so.N`), skipped with a message when absent.
    let mkl = o
        .extra
        .get("mkl")
        .filter(|p| !p.is_empty())
        .and_then(|path| {
            mkl::Mkl::load(path, o.threads)
                .map_err(|e| eprintln!("native MKL skipped: {e}"))
                .ok()
        });
    let mkl_version = mkl
        .as_ref()
        .map_or("absent".to_string(), |m| m.version.clone());
    let failed = pool.install(|| {
        let (peak, lanes) = peak_fma_gflops(o.f32);
        let gather_cache = effective_cache_bytes();
        println!(
            "{{\"stream_triad_gbs\": {:.3}, \"threads\": {}, \"peak_gflops\": {peak:.2}, \
             \"fma_lanes\": {lanes}, \"llc_bytes\": {}, \"gather_cache_bytes\": {gather_cache}, \
             \"random_gather_gbs\": {:.3}, \"mkl_native_version\": \"{mkl_version}\"}}",
            stream_triad_gbs(),
            o.threads,
            sparse_kernels::last_level_cache_bytes(),
            random_gather_gbs()
        );
        // A matrix that cannot be loaded (unknown generator, missing or malformed file) is
        // reported and skipped; the others still run, and the exit code says that one failed.
        let mut failed = 0;
        for m in &o.matrices {
            let r = if o.f32 {
                run_matrix::<f32>(&o, m, gather_cache, mkl.as_ref())
            } else {
                run_matrix::<f64>(&o, m, gather_cache, mkl.as_ref())
            };
            if let Err(e) = r {
                eprintln!("spmm_compare: matrix `{m}`: {e}");
                failed += 1;
            }
        }
        failed
    });
    if failed > 0 {
        std::process::exit(2);
    }
}
