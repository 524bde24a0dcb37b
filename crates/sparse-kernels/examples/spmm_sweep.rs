//! A K sweep of the SpMM kernels against sprs, robust to a shared (noisy) machine: every round
//! runs each kernel once, interleaved, and the report gives the fastest and the median time,
//! GFLOP/s (2·nnz·K) and effective GB/s (A, B and C moved once) of the fastest run, and the
//! median over rounds of each kernel's time divided by LSSM's *in the same round* (paired
//! ratios cancel most of the load drift). Before every run a 64 MiB buffer is written, so each
//! kernel starts with cold caches instead of inheriting B from the one before it. This is the standalone counterpart of the criterion
//! bench `benches/benches/sparse.rs`.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example spmm_sweep -- \
//!     [--threads 2] [--k 16,32,64,128,256] [--reps 7] [--precision f64] [--cpu] MATRIX...
//! ```
//! MATRIX is a path (`.mtx`, `.mtx.gz`, `.smtx`) or a generator spec (`kron:18`,
//! `stencil27:64`, `arrow:200000:4`, ...). `--threads 1` times the serial paths; with `--cpu` it
//! reports the thread's CPU time instead of wall time (steadier on a shared machine).

use sparse_kernels::{
    io, spmm_reference, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par, RowStats, Scalar,
    SpmmPlan,
};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

use bench_timing::median;

/// The timed contenders: LSSM with a prebuilt plan, the other pardis kernels, serial sprs.
/// `lssm-pf` / `lssm-nt`: LSSM with the opposite of the automatic prefetch / streaming-store
/// choice.
const NAMES: [&str; 7] = ["lssm", "lssm-pf", "lssm-nt", "row", "merge", "rode", "sprs"];

/// Seconds this thread has run on a CPU (Linux `/proc/thread-self/schedstat`), `None` elsewhere.
fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? * 1e-9)
}

/// Wall seconds of `f`, or with `cpu` (serial runs on a loaded machine) the CPU seconds of the
/// calling thread, which do not count the time other processes hold the core.
fn seconds(cpu: bool, f: impl FnOnce() -> sparse_kernels::Result<()>) -> Result<f64, String> {
    // Wake the pool's workers first (after a serial run they may be asleep).
    rayon::broadcast(|_| ());
    let (s, c) = (Instant::now(), thread_cpu_seconds().filter(|_| cpu));
    f().map_err(|e| e.to_string())?;
    Ok(match (c, thread_cpu_seconds()) {
        (Some(c0), Some(c1)) => c1 - c0,
        _ => s.elapsed().as_secs_f64(),
    })
}

/// Bytes written between two timed runs, more than the last-level cache (32 MiB on the test
/// machine), so that no kernel finds B or C left in cache by the one before it.
const FLUSH_BYTES: usize = 64 << 20;

fn flush_caches(buf: &mut [u8]) {
    for (i, x) in buf.iter_mut().step_by(64).enumerate() {
        *x = x.wrapping_add(i as u8);
    }
    std::hint::black_box(buf);
}

/// Sweeps K on one matrix; an error names what failed (the matrix cannot be loaded, a kernel
/// refused it, or a result differs from the reference).
fn run_matrix<T: Scalar + sprs::MulAcc>(o: &common::Args, spec: &str) -> Result<(), String> {
    let a: CsrMatrix<T, u32> = io::read_or_generate(spec, 1).map_err(|e| e.to_string())?;
    let stats = RowStats::of(&a);
    let sprs_a: sprs::CsMatI<T, u32> = a.clone().into();
    let cpu = o.extra.contains_key("cpu") && o.threads == 1;
    let par = if o.threads == 1 {
        Par::Seq
    } else {
        Par::Current
    };
    for &k in &o.ks {
        let b = sparse_kernels::gen::dense::<T>(a.ncols(), k, 7);
        let bref = DenseRef::contiguous(&b, a.ncols(), k);
        let (m, n) = (a.nrows(), a.ncols());
        let mut c = vec![T::ZERO; m * k];
        let mut expected = vec![T::ZERO; m * k];
        spmm_reference(&a, bref, DenseMut::contiguous(&mut expected, m, k));
        let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
        let variant = |prefetch, stream| {
            let config = LssmConfig {
                prefetch: Some(prefetch),
                streaming_stores: Some(stream),
                ..LssmConfig::default()
            };
            SpmmPlan::new(&a, k, &config)
        };
        let (pf, nt) = (plan.prefetches(), plan.streams_c());
        let (plan_pf, plan_nt) = (variant(!pf, nt), variant(pf, !nt));
        let b_nd = ndarray::ArrayView2::from_shape((n, k), &b[..]).expect("shape");
        let mut c_nd = ndarray::Array2::<T>::from_elem((m, k), T::ZERO);
        let mut times = vec![Vec::new(); NAMES.len()];
        let mut flush = vec![0u8; FLUSH_BYTES];
        for round in 0..=o.reps {
            for (i, name) in NAMES.iter().enumerate() {
                flush_caches(&mut flush);
                let cm = DenseMut::contiguous(&mut c, m, k);
                let t = match *name {
                    "lssm" => seconds(cpu, || plan.execute(&a, bref, cm, par)),
                    "lssm-pf" => seconds(cpu, || plan_pf.execute(&a, bref, cm, par)),
                    "lssm-nt" => seconds(cpu, || plan_nt.execute(&a, bref, cm, par)),
                    "sprs" => seconds(cpu, || {
                        c_nd.fill(T::ZERO);
                        sprs::prod::csr_mulacc_dense_rowmaj(sprs_a.view(), b_nd, c_nd.view_mut());
                        Ok(())
                    }),
                    other => {
                        let kernel = Kernel::from_name(other).expect("NAMES are kernel names");
                        seconds(cpu, || kernel.run(&a, bref, cm, par))
                    }
                }
                .map_err(|e| format!("{name}, K {k}: {e}"))?;
                if *name != "sprs" {
                    let err = sparse_kernels::max_relative_error(
                        DenseRef::contiguous(&c, m, k),
                        DenseRef::contiguous(&expected, m, k),
                    );
                    if err >= 1e-4 {
                        return Err(format!(
                            "{name}, K {k}: differs from the reference by {err:e} (relative)"
                        ));
                    }
                }
                if round > 0 {
                    times[i].push(t); // round 0 warms up
                }
            }
        }
        let es = std::mem::size_of::<T>() as f64;
        let bytes = a.nnz() as f64 * (es + 4.0) + (m + 1) as f64 * 4.0 + ((m + n) * k) as f64 * es;
        let flops = 2.0 * a.nnz() as f64 * k as f64;
        let best = times[0].iter().copied().fold(f64::INFINITY, f64::min);
        let ratios: Vec<String> = NAMES
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, name)| {
                let r = median(times[i].iter().zip(&times[0]).map(|(t, l)| t / l).collect());
                format!("{name}/lssm {r:5.2}")
            })
            .collect();
        println!(
            "{spec:>30} {:>10} K {k:3} {} nnz {:9} block {:5} pf {} nt {} | lssm min {:8.3} ms med {:8.3} ms {:6.2} GF/s {:6.2} GB/s | {}",
            stats.class().to_string(),
            T::NAME,
            a.nnz(),
            plan.block_nnz(),
            u8::from(pf),
            u8::from(nt),
            best * 1e3,
            median(times[0].clone()) * 1e3,
            flops / best / 1e9,
            bytes / best / 1e9,
            ratios.join(" "),
        );
    }
    Ok(())
}

/// Bad arguments exit with status 2 and a message; a matrix that cannot be loaded or run is
/// reported on stderr and skipped (the others still run), and the exit status is 2.
fn main() {
    let o = common::parse(&[16, 32, 64, 128, 256], 7, &[], &["cpu"]);
    let pool = o.pool();
    println!("{}", o.header());
    let failed = pool.install(|| {
        let mut failed = 0;
        for m in &o.matrices {
            let r = if o.f32 {
                run_matrix::<f32>(&o, m)
            } else {
                run_matrix::<f64>(&o, m)
            };
            if let Err(e) = r {
                eprintln!("spmm_sweep: matrix `{m}`: {e}");
                failed += 1;
            }
        }
        failed
    });
    if failed > 0 {
        std::process::exit(2);
    }
}
