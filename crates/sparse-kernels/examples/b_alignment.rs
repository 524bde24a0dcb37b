//! Paired study of where B starts relative to a cache line: the default LSSM plan on three
//! copies of the same B — on a line boundary ([`AlignedVec`]), 16 bytes past one (where the
//! system allocator puts a large `Vec<f64>`) and 32 bytes past one — in alternated rounds in
//! one process. Prints each copy's median time and the median over rounds of its time divided
//! by the line-aligned copy's time in the same round (> 1: slower than aligned). Every copy's
//! result is checked to be bit-identical to the aligned one's.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example b_alignment -- \
//!     [--threads 2] [--k 64] [--reps 21] MATRIX...
//! ```
//! MATRIX is a path or a generator spec (`stencil27:64`, `kron:18`).

use sparse_kernels::{io, AlignedVec, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// A copy of `src` starting `offset` bytes past a line boundary (a multiple of 8).
fn at_offset(src: &[f64], offset: usize) -> (AlignedVec<f64>, usize) {
    let skip = offset / 8;
    let mut buf = AlignedVec::<f64>::zeroed(src.len() + skip);
    buf[skip..].copy_from_slice(src);
    (buf, skip)
}

fn main() {
    let o = common::parse(&[64], 21, &[], &[]);
    let pool = o.pool();
    println!("{}", o.header());
    for spec in &o.matrices {
        let a: CsrMatrix<f64, u32> = io::read_or_generate(spec, 1)
            .unwrap_or_else(|e| common::fail(format!("matrix `{spec}`: {e}")));
        for &k in &o.ks {
            let (m, n) = (a.nrows(), a.ncols());
            let b = sparse_kernels::gen::dense::<f64>(n, k, 7);
            let copies: Vec<(AlignedVec<f64>, usize, usize)> = [0, 16, 32]
                .into_iter()
                .map(|off| {
                    let (buf, skip) = at_offset(&b, off);
                    (buf, skip, off)
                })
                .collect();
            let plan = SpmmPlan::new(&a, k, &LssmConfig::default());
            let mut outs: Vec<AlignedVec<f64>> = (0..copies.len())
                .map(|_| AlignedVec::zeroed(m * k))
                .collect();
            let flops = 2.0 * a.nnz() as f64 * k as f64;
            let per_sample = ((2e8 / flops.max(1.0)) as usize).max(1);
            let mut times = vec![Vec::new(); copies.len()];
            pool.install(|| {
                for _ in 0..=o.reps {
                    for (i, (buf, skip, _)) in copies.iter().enumerate() {
                        let bref = DenseRef::contiguous(&buf[*skip..*skip + n * k], n, k);
                        let start = Instant::now();
                        for _ in 0..per_sample {
                            let c = DenseMut::contiguous(&mut outs[i], m, k);
                            plan.execute(&a, bref, c, Par::Current).expect("spmm");
                        }
                        times[i].push(start.elapsed().as_secs_f64() / per_sample as f64);
                    }
                }
            });
            assert!(
                outs.iter().all(|c| c[..] == outs[0][..]),
                "the offset of B changed the result"
            );
            println!("{spec} K={k} nnz {}", a.nnz());
            for (i, (_, _, off)) in copies.iter().enumerate() {
                // Round 0 is a warm-up.
                let ratio: Vec<f64> = times[i][1..]
                    .iter()
                    .zip(&times[0][1..])
                    .map(|(t, t0)| t / t0)
                    .collect();
                println!(
                    "  B at line + {off:>2} bytes: median {:8.3} ms, time / aligned time {:.2}",
                    bench_timing::median(times[i][1..].to_vec()) * 1e3,
                    bench_timing::median(ratio)
                );
            }
        }
    }
}
