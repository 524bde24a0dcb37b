//! Criterion benchmarks of sparse-kernels SpMM (`C = A · B`, A sparse CSR, B and C dense):
//! the shared SuiteSparse and DLMC matrices, a 3-D 27-point stencil with 262,144 rows,
//! Graph500 Kronecker graphs of scale 18 and 20, and an arrow matrix, for K in
//! {16, 32, 64, 128, 256}, every parallel kernel (row, merge, rode, lssm, pairs).
//!
//! Throughput is reported as criterion "elements/s" = FLOP/s with 2·nnz·K flops per product.
//! The effective bandwidth is FLOP/s × (bytes / flop); the bytes per flop of each matrix and K
//! (minimal traffic: A, B and C once) are printed on stderr when its group starts.
//!
//! `cargo bench -p pardis-benches --bench sparse [-- FILTER]`; `PARDIS_BENCH_THREADS` sets the
//! thread count (default: all cores); `PARDIS_DATA` points at the data sets.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pardis::sparse::{
    gen, io, AlignedVec, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par, RowPairs, SpmmPlan,
};
use pardis_benches::{bench_pool, data_file};
use std::time::Duration;

const KS: [usize; 5] = [16, 32, 64, 128, 256];

fn bench_matrix(c: &mut Criterion, label: &str, a: &CsrMatrix<f64, u32>) {
    let pool = bench_pool();
    let mut group = c.benchmark_group(format!("spmm/{label}"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for k in KS {
        let b = gen::dense::<f64>(a.ncols(), k, 7);
        let b = DenseRef::contiguous(&b, a.ncols(), k);
        let mut out = AlignedVec::<f64>::zeroed(a.nrows() * k);
        let flops = 2 * a.nnz() * k;
        let bytes = a.nnz() * 12 + (a.nrows() + 1) * 4 + (a.nrows() + a.ncols()) * k * 8;
        eprintln!(
            "{label} K={k}: {:.3} bytes/flop",
            bytes as f64 / flops as f64
        );
        group.throughput(Throughput::Elements(flops as u64));
        let plan = SpmmPlan::new(a, k, &LssmConfig::default());
        // Row pairs' repacked copy of A is built here, outside the timing, like the plan.
        let pairs = RowPairs::new(a, k);
        for kernel in [
            Kernel::RowParallel,
            Kernel::MergePath,
            Kernel::RodeLike,
            Kernel::Lssm,
            Kernel::RowPairs,
        ] {
            group.bench_function(BenchmarkId::new(kernel.name(), k), |bench| {
                bench.iter(|| {
                    pool.install(|| {
                        let c = DenseMut::contiguous(&mut out, a.nrows(), k);
                        match kernel {
                            Kernel::Lssm => plan.execute(a, b, c, Par::Current),
                            Kernel::RowPairs => pairs.execute(b, c, Par::Current),
                            other => other.run(a, b, c, Par::Current),
                        }
                        .expect("spmm")
                    })
                });
            });
        }
    }
    group.finish();
}

fn shared_files(c: &mut Criterion) {
    let files = [
        "suitesparse/arrow.mtx",
        "suitesparse/Franz6_id1959_aug.mtx",
        "suitesparse/bcsstk13.mtx",
        "suitesparse/pushpull.mtx",
        "suitesparse/cryg2500.mtx",
        "suitesparse/zenios.mtx",
        "suitesparse/olm1000.mtx",
        "suitesparse/jagmesh7.mtx",
        "suitesparse/n1024-l1.mtx",
        "suitesparse/sparse-images-1024_subset.mtx",
        "dlmc/transformer/magnitude_pruning/0.7/body_decoder_layer_0_ffn_conv1_fully_connected.smtx",
        "dlmc/transformer/magnitude_pruning/0.9/body_decoder_layer_0_ffn_conv2_fully_connected.smtx",
        "dlmc/rn50/magnitude_pruning/0.8/bottleneck_3_block_group3_1_1.smtx",
    ];
    for rel in files {
        let Some(path) = data_file(&format!("matrices/{rel}")) else {
            continue;
        };
        let a: CsrMatrix<f64, u32> = io::read_matrix(&path, 1).expect("readable matrix");
        let label = rel
            .rsplit('/')
            .next()
            .unwrap_or(rel)
            .trim_end_matches(".mtx")
            .trim_end_matches(".smtx");
        bench_matrix(c, label, &a);
    }
}

fn generated(c: &mut Criterion) {
    for spec in ["stencil27:64", "kron:18", "kron:20", "arrow:200000:4"] {
        let a: CsrMatrix<f64, u32> = gen::from_spec(spec, 1).expect("valid spec");
        bench_matrix(c, &spec.replace(':', "-"), &a);
    }
}

criterion_group!(benches, shared_files, generated);
criterion_main!(benches);
