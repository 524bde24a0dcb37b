//! The Rust half of `scripts/compare-spmm`: times every pardis kernel and sprs on a list of
//! matrices (files or generator specs), measures the STREAM triad bandwidth, and prints one
//! JSON object per line. With `--dump DIR` it also writes each matrix as raw CSR arrays
//! (`NAME.indptr.u32`, `NAME.indices.u32`, `NAME.data.f64` or `.f32`) so that the Python half
//! times SciPy and MKL on exactly the same matrices.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example spmm_compare -- \
//!     --threads 2 --k 64 --reps 5 [--precision f64] [--dump DIR] MATRIX...
//! ```
//! MATRIX is a path (`.mtx`, `.mtx.gz`, `.smtx`) or a generator spec (`kron:18`, `stencil27:64`,
//! `arrow:46500:1`, ...; see `sparse_kernels::gen::from_spec`).

use rayon::prelude::*;
use sparse_kernels::{
    gen, io, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, RowStats, Scalar, SpmmPlan,
};
use std::path::Path;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// Median wall time of `reps` runs after one warm-up, in seconds.
fn median_time(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let t: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64()
        })
        .collect();
    common::median(t)
}

/// STREAM triad `a = b + s·c` over 3 × 64 MiB arrays, parallel; bytes moved / best time.
fn stream_triad_gbs() -> f64 {
    let n = 8 << 20;
    let (b, c) = (vec![1.0f64; n], vec![2.0f64; n]);
    let mut a = vec![0.0f64; n];
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        let s = Instant::now();
        a.par_chunks_mut(1 << 16)
            .enumerate()
            .for_each(|(i, chunk)| {
                let o = i << 16;
                for (j, x) in chunk.iter_mut().enumerate() {
                    *x = b[o + j] + 3.0 * c[o + j];
                }
            });
        best = best.min(s.elapsed().as_secs_f64());
    }
    std::hint::black_box(&a);
    3.0 * 8.0 * n as f64 / best / 1e9
}

fn load<T: Scalar>(spec: &str) -> (String, CsrMatrix<T, u32>) {
    let path = Path::new(spec);
    if path.exists() {
        let name = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace(".gz", "");
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|p| p.to_string_lossy().to_string());
        let name = match parent {
            Some(p) if spec.contains("dlmc") => format!("{p}/{name}"),
            _ => name,
        };
        (
            name,
            io::read_matrix(path, 1).unwrap_or_else(|e| panic!("{spec}: {e}")),
        )
    } else {
        (
            spec.to_string(),
            gen::from_spec(spec, 1).unwrap_or_else(|e| panic!("{e}")),
        )
    }
}

fn dump<T: Scalar>(dir: &Path, name: &str, a: &CsrMatrix<T, u32>) -> String {
    let stem = name.replace(['/', ':', '.'], "_");
    let write_u32 = |ext: &str, v: &[u32]| {
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(dir.join(format!("{stem}.{ext}")), bytes).expect("write dump");
    };
    write_u32("indptr.u32", a.offsets());
    write_u32("indices.u32", a.indices());
    let data: Vec<u8> = a
        .values()
        .iter()
        .flat_map(|v| v.to_f64().to_le_bytes())
        .collect();
    std::fs::write(dir.join(format!("{stem}.data.f64")), data).expect("write dump");
    stem
}

fn run_matrix<T: Scalar + sprs::MulAcc>(o: &common::Args, spec: &str) {
    let (name, a) = load::<T>(spec);
    let stats = RowStats::of(&a);
    let stem = o
        .extra
        .get("dump")
        .map(|d| dump(Path::new(d), &name, &a))
        .unwrap_or_default();
    let sprs_a: sprs::CsMatI<T, u32> = a.clone().into();
    for &k in &o.ks {
        let b = gen::dense::<T>(a.ncols(), k, 7);
        let mut c = vec![T::ZERO; a.nrows() * k];
        let bref = DenseRef::contiguous(&b, a.ncols(), k);
        let mut times = Vec::new();
        for kernel in Kernel::ALL {
            let reps = if kernel == Kernel::Reference {
                1
            } else {
                o.reps
            };
            let t = if kernel == Kernel::Lssm {
                let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
                median_time(reps, || {
                    plan.execute(
                        &a,
                        bref,
                        DenseMut::contiguous(&mut c, a.nrows(), k),
                        sparse_kernels::Par::Current,
                    )
                    .expect("run")
                })
            } else {
                median_time(reps, || {
                    kernel
                        .run(
                            &a,
                            bref,
                            DenseMut::contiguous(&mut c, a.nrows(), k),
                            sparse_kernels::Par::Current,
                        )
                        .expect("run")
                })
            };
            times.push(format!("\"{}\": {t:e}", kernel.name()));
        }
        let plan_time = median_time(o.reps, || {
            std::hint::black_box(SpmmPlan::new(&a, k, &LssmConfig::default()));
        });
        let b_nd = ndarray::ArrayView2::from_shape((a.ncols(), k), &b[..]).expect("shape");
        let mut c_nd = ndarray::Array2::<T>::from_elem((a.nrows(), k), T::ZERO);
        let t_sprs = median_time(o.reps.min(3), || {
            c_nd.fill(T::ZERO);
            sprs::prod::csr_mulacc_dense_rowmaj(sprs_a.view(), b_nd, c_nd.view_mut());
        });
        let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
        println!(
            "{{\"matrix\": \"{name}\", \"dump\": \"{stem}\", \"class\": \"{}\", \"rows\": {}, \"cols\": {}, \"nnz\": {}, \
             \"cv\": {:.3}, \"max_row\": {}, \"k\": {k}, \"precision\": \"{}\", \"block\": {}, \"tasks\": {}, \
             \"long_rows\": {}, \"plan_s\": {plan_time:e}, \"sprs\": {t_sprs:e}, {}}}",
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
}

fn main() {
    let o = common::parse(&[64], 5, &["dump"], &[]);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(o.threads)
        .build()
        .expect("thread pool");
    pool.install(|| {
        println!(
            "{{\"stream_triad_gbs\": {:.3}, \"threads\": {}}}",
            stream_triad_gbs(),
            o.threads
        );
        for m in &o.matrices {
            if o.f32 {
                run_matrix::<f32>(&o, m);
            } else {
                run_matrix::<f64>(&o, m);
            }
        }
    });
}
