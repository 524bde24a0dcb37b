//! How fast this CPU multiplies and adds when every multiply-add reads its operand from L1, as
//! a row-wise SpMM must (each nonzero `a` of a row of A multiplies one row of B: one load of B
//! per multiply-add, no reuse in registers): the compute ceiling of any such kernel, beside
//! the register-only peak that `spmm_compare`'s roofline uses. Every thread of the pool runs
//! each loop shape on its own data (B of `--b-rows` rows of 64 `f64`, 32 KiB at most so that
//! it stays in L1; rows of `--per-row` nonzeros with pseudo-random columns), and the example
//! prints the best of `--reps` rounds in GFLOP/s of all threads together and as a fraction of
//! the register peak. AVX2 + FMA (x86-64) only; elsewhere it says so and exits.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example fma_ceiling -- [--threads 2] [--reps 7] \
//!     [--b-rows 32] [--per-row 27]
//! ```
//!
//! The loop shapes: `register` (12 independent accumulators, no loads: the peak), `fixed
//! 8x2` (the B operand from L1 at addresses known without an index: the ideal load-fed loop),
//! `indexed 8x2` (LSSM's AVX2 shape for K = 64 `f64`: per nonzero, the column index, a
//! broadcast of the value and 8 multiply-adds with a B operand, twice over K), `indexed
//! 12+4` (12 accumulators, then 4), `indexed 4x4` (4 accumulators, four passes) and `shared
//! 2-row 4x4` (two rows with the same columns share every load of B: the best case of
//! register blocking over rows, 2 multiply-adds per load) and `split 2-row 4x4` (two rows
//! that share two thirds of their columns, as a 27-point stencil's neighbours do: the shared
//! entries with one load for both rows, then each row's own third; three branch-free loops),
//! also with 6 accumulators per row (`6+6+4`: passes of 24, 24 and 16 columns; 15 of the 16
//! AVX2 registers).

#[path = "common/mod.rs"]
mod common;

#[cfg(target_arch = "x86_64")]
mod loops {
    use std::arch::x86_64::{
        __m256d, _mm256_add_pd, _mm256_broadcast_sd, _mm256_fmadd_pd, _mm256_load_pd,
        _mm256_set1_pd, _mm256_setzero_pd, _mm256_store_pd,
    };

    /// One thread's inputs: a line-aligned B of `b_rows` × 64 `f64`, the column of every
    /// nonzero (`< b_rows`), its value, and C (a row of 64 per row of A).
    pub(crate) struct Data {
        pub(crate) b: sparse_kernels::AlignedVec<f64>,
        pub(crate) cols: Vec<u32>,
        pub(crate) vals: Vec<f64>,
        pub(crate) c: sparse_kernels::AlignedVec<f64>,
        pub(crate) per_row: usize,
    }

    pub(crate) const K: usize = 64;

    impl Data {
        pub(crate) fn new(b_rows: usize, rows: usize, per_row: usize, seed: u64) -> Self {
            let mut b = sparse_kernels::AlignedVec::<f64>::zeroed(b_rows * K);
            for (i, x) in b.iter_mut().enumerate() {
                *x = 1e-3 * (i % 97) as f64;
            }
            let mut s = seed | 1;
            let mut next = || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let cols = (0..rows * per_row)
                .map(|_| (next() % b_rows as u64) as u32)
                .collect();
            let vals = (0..rows * per_row)
                .map(|i| 1.0 + 1e-7 * (i % 13) as f64)
                .collect();
            // Written once here, so that no round pays for first touches of C's pages.
            let mut c = sparse_kernels::AlignedVec::zeroed(rows * K);
            c.fill(1.0);
            Self {
                b,
                cols,
                vals,
                c,
                per_row,
            }
        }

        pub(crate) fn rows(&self) -> usize {
            self.cols.len() / self.per_row
        }
    }

    /// `N` accumulators over columns `k0..k0 + 4N` of the rows of B of nonzeros `nz`, stored
    /// to `out`.
    ///
    /// # Safety
    /// AVX2 and FMA; every column in `d.cols[nz]` is a row of `d.b`; `k0 + 4N <= K`; `out`
    /// holds `4N` `f64` from a 32-byte boundary.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn tile<const N: usize>(d: &Data, nz: std::ops::Range<usize>, k0: usize, out: *mut f64) {
        let mut acc = [_mm256_setzero_pd(); N];
        for e in nz {
            // SAFETY: `e` is a nonzero of `d` (caller), the column a row of B, `k0 + 4N <= K`.
            unsafe {
                let br = d.b.as_ptr().add(*d.cols.get_unchecked(e) as usize * K + k0);
                let v = _mm256_broadcast_sd(d.vals.get_unchecked(e));
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_pd(v, _mm256_load_pd(br.add(4 * j)), *a);
                }
            }
        }
        for (j, a) in acc.iter().enumerate() {
            // SAFETY: caller: `out` holds `4N` aligned `f64`.
            unsafe { _mm256_store_pd(out.add(4 * j), *a) };
        }
    }

    /// SpMM over all rows with tiles of `A` then `B` accumulators (`4A + 4B` divides 64).
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn indexed<const A: usize, const B: usize>(d: &mut Data) {
        let c = d.c.as_mut_ptr();
        for r in 0..d.rows() {
            let nz = r * d.per_row..(r + 1) * d.per_row;
            let mut k0 = 0;
            while k0 < K {
                // SAFETY: columns come from `Data::new` (< b_rows); C's rows are 512 bytes
                // from a 64-byte boundary, and `k0 + 4A <= K`, `k0 + 4B <= K` by the loop.
                unsafe {
                    tile::<A>(d, nz.clone(), k0, c.add(r * K + k0));
                    k0 += 4 * A;
                    if B > 0 && k0 < K {
                        tile::<B>(d, nz.clone(), k0, c.add(r * K + k0));
                        k0 += 4 * B;
                    }
                }
            }
        }
    }

    /// Pairs of rows given the same columns (those of the first), sharing each load of B: 2
    /// multiply-adds per load, four passes of 4 accumulators per row.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn shared_two_rows(d: &mut Data) {
        let c = d.c.as_mut_ptr();
        for r in (0..d.rows() & !1).step_by(2) {
            for k0 in (0..K).step_by(16) {
                let mut x = [_mm256_setzero_pd(); 4];
                let mut y = [_mm256_setzero_pd(); 4];
                for e in r * d.per_row..(r + 1) * d.per_row {
                    // SAFETY: as in `tile`; `e + per_row` is a nonzero of row `r + 1`.
                    unsafe {
                        let br = d.b.as_ptr().add(*d.cols.get_unchecked(e) as usize * K + k0);
                        let v = _mm256_broadcast_sd(d.vals.get_unchecked(e));
                        let w = _mm256_broadcast_sd(d.vals.get_unchecked(e + d.per_row));
                        for j in 0..4 {
                            let b = _mm256_load_pd(br.add(4 * j));
                            x[j] = _mm256_fmadd_pd(v, b, x[j]);
                            y[j] = _mm256_fmadd_pd(w, b, y[j]);
                        }
                    }
                }
                for j in 0..4 {
                    // SAFETY: rows `r`, `r + 1` of C, columns `k0 + 4j..+4` < K, aligned.
                    unsafe {
                        _mm256_store_pd(c.add(r * K + k0 + 4 * j), x[j]);
                        _mm256_store_pd(c.add((r + 1) * K + k0 + 4 * j), y[j]);
                    }
                }
            }
        }
    }

    /// Pairs of rows as a stencil's neighbours are: the first two thirds of the entries are
    /// shared (one load of B, a multiply-add for each row), then each row's own third (one
    /// load, one multiply-add); three branch-free loops per pass, passes of `N` accumulators
    /// per row while they fit K, then passes of 4.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn split_two_rows<const N: usize>(d: &mut Data) {
        for r in (0..d.rows() & !1).step_by(2) {
            let mut k0 = 0;
            while k0 + 4 * N <= K {
                // SAFETY: `k0 + 4N <= K`; forwarded contract.
                unsafe { split_pass::<N>(d, r, k0) };
                k0 += 4 * N;
            }
            while k0 < K {
                // SAFETY: `K - k0` is a multiple of 16 for N = 4 and 6 (K = 64).
                unsafe { split_pass::<4>(d, r, k0) };
                k0 += 16;
            }
        }
    }

    /// One pass of [`split_two_rows`] over columns `k0..k0 + 4N` of rows `r`, `r + 1`.
    ///
    /// # Safety
    /// AVX2 and FMA; `k0 + 4N <= K`; `r + 1 < rows`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn split_pass<const N: usize>(d: &mut Data, r: usize, k0: usize) {
        let c = d.c.as_mut_ptr();
        let p = d.per_row;
        let shared = 2 * p / 3;
        let (f, s) = (r * p, (r + 1) * p);
        let mut x = [_mm256_setzero_pd(); N];
        let mut y = [_mm256_setzero_pd(); N];
        for e in 0..shared {
            // SAFETY: as in `tile`; `f + e`, `s + e` are nonzeros of rows `r`, `r + 1`.
            unsafe {
                let br =
                    d.b.as_ptr()
                        .add(*d.cols.get_unchecked(f + e) as usize * K + k0);
                let v = _mm256_broadcast_sd(d.vals.get_unchecked(f + e));
                let w = _mm256_broadcast_sd(d.vals.get_unchecked(s + e));
                for j in 0..N {
                    let b = _mm256_load_pd(br.add(4 * j));
                    x[j] = _mm256_fmadd_pd(v, b, x[j]);
                    y[j] = _mm256_fmadd_pd(w, b, y[j]);
                }
            }
        }
        for (base, acc) in [(f, &mut x), (s, &mut y)] {
            for e in base + shared..base + p {
                // SAFETY: as in `tile`.
                unsafe {
                    let br = d.b.as_ptr().add(*d.cols.get_unchecked(e) as usize * K + k0);
                    let v = _mm256_broadcast_sd(d.vals.get_unchecked(e));
                    for (j, a) in acc.iter_mut().enumerate() {
                        *a = _mm256_fmadd_pd(v, _mm256_load_pd(br.add(4 * j)), *a);
                    }
                }
            }
        }
        for j in 0..N {
            // SAFETY: rows `r`, `r + 1` of C, columns `k0 + 4j..+4` < K, aligned.
            unsafe {
                _mm256_store_pd(c.add(r * K + k0 + 4 * j), x[j]);
                _mm256_store_pd(c.add((r + 1) * K + k0 + 4 * j), y[j]);
            }
        }
    }

    /// As `indexed::<8, 0>` with the rows of B taken in turn from the first 8 (no index load,
    /// no address dependence): the ideal load-fed loop.
    ///
    /// # Safety
    /// AVX2 and FMA; B has at least 8 rows.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn fixed(d: &mut Data) {
        let c = d.c.as_mut_ptr();
        for r in 0..d.rows() {
            for k0 in [0, 32] {
                let mut acc = [_mm256_setzero_pd(); 8];
                for e in r * d.per_row..(r + 1) * d.per_row {
                    // SAFETY: row `e % 8 < 8 <= b_rows` of B, `k0 + 32 <= K`.
                    unsafe {
                        let br = d.b.as_ptr().add((e & 7) * K + k0);
                        let v = _mm256_broadcast_sd(d.vals.get_unchecked(e));
                        for (j, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_fmadd_pd(v, _mm256_load_pd(br.add(4 * j)), *a);
                        }
                    }
                }
                for (j, a) in acc.iter().enumerate() {
                    // SAFETY: row `r` of C, columns `k0 + 4j..+4 < K`, aligned.
                    unsafe { _mm256_store_pd(c.add(r * K + k0 + 4 * j), *a) };
                }
            }
        }
    }

    /// `iters` rounds of 12 independent register-only multiply-adds (distinct starting
    /// values, so that no two chains are the same computation); returns a checksum.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn register(iters: usize) -> f64 {
        let mut acc: [__m256d; 12] = std::array::from_fn(|j| _mm256_set1_pd(1.0 + j as f64));
        let (x, y) = (_mm256_set1_pd(0.999_999), _mm256_set1_pd(1e-7));
        for _ in 0..iters {
            for a in acc.iter_mut() {
                *a = _mm256_fmadd_pd(*a, x, y);
            }
        }
        let mut s = _mm256_setzero_pd();
        for a in acc {
            s = _mm256_add_pd(s, a);
        }
        let mut out = [0.0; 4];
        // SAFETY: `out` holds 4 `f64`; unaligned store.
        unsafe { std::arch::x86_64::_mm256_storeu_pd(out.as_mut_ptr(), s) };
        out.iter().sum()
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    use loops::{Data, K};
    use std::time::Instant;

    let o = common::try_parse(
        std::env::args().skip(1),
        &[64],
        7,
        &["b-rows", "per-row"],
        &[],
    )
    .unwrap_or_else(|e| common::fail(e));
    if let Some(m) = o.matrices.first() {
        common::fail(common::ArgError::new(format!(
            "fma_ceiling takes no MATRIX (got `{m}`)"
        )));
    }
    let num = |name: &str, default: usize, range: std::ops::RangeInclusive<usize>| {
        o.extra.get(name).map_or(Ok(default), |v| {
            v.parse::<usize>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    common::ArgError::new(format!(
                        "--{name} takes a number in {range:?} (got `{v}`)"
                    ))
                })
        })
    };
    if o.ks != [K] || o.f32 {
        common::fail(common::ArgError::new(
            "fma_ceiling measures K = 64 f64 only (no --k or --precision)",
        ));
    }
    let b_rows = num("b-rows", 32, 8..=64).unwrap_or_else(|e| common::fail(e));
    let per_row = num("per-row", 27, 1..=1024).unwrap_or_else(|e| common::fail(e));
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")) {
        println!("fma_ceiling: this CPU has no AVX2 + FMA; nothing to measure");
        return;
    }
    let pool = o.pool();
    // About 4 Mi multiply-adds per round and thread for the SpMM shapes (C: 2.5 MiB).
    // An even number of rows, so that the two-row shape computes every row the flops count.
    let rows = ((1 << 22) / (per_row * K) + 2) & !1;
    let flops_spmm = (2 * rows * per_row * K * o.threads) as f64;
    println!(
        "{}, B {b_rows} rows of {K} f64 ({} KiB, in L1), {per_row} nonzeros per row",
        o.header(),
        (b_rows * K * 8) >> 10
    );
    type Shape = (&'static str, unsafe fn(&mut Data));
    let shapes: [Shape; 7] = [
        ("fixed 8x2", loops::fixed),
        ("indexed 8x2", loops::indexed::<8, 0>),
        ("indexed 12+4", loops::indexed::<12, 4>),
        ("indexed 4x4", loops::indexed::<4, 0>),
        ("shared 2-row 4x4", loops::shared_two_rows),
        ("split 2-row 4x4", loops::split_two_rows::<4>),
        ("split 2-row 6+6+4", loops::split_two_rows::<6>),
    ];
    let iters = 4_000_000;
    let best = |run: &(dyn Fn() + Sync)| {
        (0..o.reps.max(1))
            .map(|_| {
                let t = Instant::now();
                pool.broadcast(|_| run());
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let peak_s = best(&|| {
        // SAFETY: AVX2 and FMA detected above.
        std::hint::black_box(unsafe { loops::register(iters) });
    });
    let peak = (2 * 4 * 12 * iters * o.threads) as f64 / peak_s / 1e9;
    println!("  {:<18} {:8.1} GFLOP/s  100 %", "register", peak);
    for (name, f) in shapes {
        // Three sets of inputs, allocated one after the other and all kept alive (so that each
        // lands elsewhere): where the buffers land decides whether the stores to C alias the
        // loads of B (4 KiB apart), which halved some shapes' rate in some runs; the best set
        // is the ceiling.
        let mut keep = Vec::new();
        let t = (0..3)
            .map(|set| {
                let data: Vec<std::sync::Mutex<Data>> = (0..o.threads)
                    .map(|t| {
                        std::sync::Mutex::new(Data::new(
                            b_rows,
                            rows,
                            per_row,
                            (t + 7 * set) as u64 + 7,
                        ))
                    })
                    .collect();
                let t = best(&|| {
                    let i = rayon::current_thread_index().unwrap_or(0);
                    let mut d = data[i].lock().unwrap_or_else(|e| e.into_inner());
                    // SAFETY: AVX2 and FMA detected above.
                    unsafe { f(&mut d) };
                    std::hint::black_box(&d.c);
                });
                keep.push(data);
                t
            })
            .fold(f64::INFINITY, f64::min);
        let g = flops_spmm / t / 1e9;
        println!("  {name:<18} {g:8.1} GFLOP/s  {:3.0} %", 100.0 * g / peak);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("fma_ceiling measures x86-64 AVX2 + FMA loops; nothing to measure on this CPU");
}
