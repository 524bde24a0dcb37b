//! The main use of the crate: one sparse matrix (a graph's adjacency, a pruned weight) multiplied
//! by many dense matrices, as in GNN training. The LSSM plan is built once (symbolic phase) and
//! executed for every B (numeric phase); each result is checked against the reference.
//!
//! `cargo run --release -p sparse-kernels --example gnn_layer -- [SCALE] [K] [THREADS]`

use sparse_kernels::{
    gen, max_relative_error, spmm_reference, AlignedVec, DenseMut, DenseRef, LssmConfig, Par,
    RowStats, SpmmPlan,
};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let scale = args.next().transpose()?.unwrap_or(14) as u32;
    let k = args.next().transpose()?.unwrap_or(64);
    let threads = args.next().transpose()?.unwrap_or(0);

    // Through the spec parser: a scale beyond the generator's limits is an error, not a panic.
    let a = gen::from_spec::<f32, u32>(&format!("kron:{scale}"), 1)?;
    let stats = RowStats::of(&a);
    println!(
        "Kronecker scale {scale}: {} rows, {} nonzeros, mean {:.1}, cv {:.2}, longest row {} ({})",
        a.nrows(),
        a.nnz(),
        stats.mean,
        stats.cv,
        stats.max,
        stats.class()
    );
    let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
    println!(
        "plan: block {} nonzeros, {} long rows in {} segments, {} short rows, {} tasks, scratch {} floats",
        plan.block_nnz(), plan.num_long_rows(), plan.num_segments(), plan.num_short_rows(), plan.num_tasks(),
        plan.scratch_len()
    );
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let mut features = gen::dense::<f32>(a.ncols(), k, 0);
    for layer in 0..3 {
        let mut out = AlignedVec::<f32>::zeroed(a.nrows() * k);
        let b = DenseRef::contiguous(&features, a.ncols(), k);
        let start = Instant::now();
        pool.install(|| {
            plan.execute(
                &a,
                b,
                DenseMut::contiguous(&mut out, a.nrows(), k),
                Par::Current,
            )
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let mut expected = vec![0.0f32; a.nrows() * k];
        spmm_reference(&a, b, DenseMut::contiguous(&mut expected, a.nrows(), k));
        let err = max_relative_error(
            DenseRef::contiguous(&out, a.nrows(), k),
            DenseRef::contiguous(&expected, a.nrows(), k),
        );
        println!(
            "layer {layer}: {:.2} ms, {:.2} GFLOP/s, relative error vs reference {err:.1e}",
            seconds * 1e3,
            2.0 * a.nnz() as f64 * k as f64 / seconds / 1e9
        );
        // A toy activation keeps the values bounded for the next layer.
        let scale = out.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
        out.iter_mut().for_each(|v| *v = (*v / scale).max(0.0));
        features = out;
    }
    Ok(())
}
