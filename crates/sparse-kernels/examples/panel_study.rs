//! Paired study of K-panel widths for LSSM: for each matrix, plans that differ only in
//! `LssmConfig::k_panel` (0 = not panelled, then the given widths) run in alternated rounds on
//! the same B and C. Prints, per width, the median and the minimum milliseconds with
//! `whole / panelled` for each (> 1: panels faster; on a loaded machine the minimum is the
//! least disturbed run), and the width `SpmmPlan::auto_k_panel` suggests for this cache.
//! With `--hugepages` (Linux) every width also runs, in the same rounds, on a copy of B
//! allocated on transparent huge pages (`sparse_kernels::zeroed_on_huge_pages`), to see how
//! much of the cost of random gathers is address translation.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example panel_study -- \
//!     --threads 2 --k 64 --reps 5 [--panels 8,16,32] [--hugepages] kron:18 uniform:262144:16
//! ```

use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

fn main() {
    let o = common::parse(&[64], 5, &["panels"], &["hugepages"]);
    let widths: Vec<usize> = o
        .extra
        .get("panels")
        .map_or("8,16,32", String::as_str)
        .split(',')
        .map(|w| {
            w.parse().unwrap_or_else(|_| {
                common::fail(common::ArgError::new(format!(
                    "--panels takes widths like 8,16, not `{w}`"
                )))
            })
        })
        .collect();
    let pool = o.pool();
    pool.install(|| {
        for spec in &o.matrices {
            let a: CsrMatrix<f64, u32> = gen::from_spec(spec, 1)
                .unwrap_or_else(|e| common::fail(format!("`{spec}` is not a generator spec: {e}")));
            for &k in &o.ks {
                let b = gen::dense::<f64>(a.ncols(), k, 7);
                let huge = o.extra.contains_key("hugepages").then(|| {
                    let mut v = sparse_kernels::zeroed_on_huge_pages::<f64>(b.len());
                    v.copy_from_slice(&b);
                    v
                });
                let mut c = vec![0.0f64; a.nrows() * k];
                let suggested = SpmmPlan::auto_k_panel::<f64>(
                    a.ncols(),
                    k,
                    SpmmPlan::column_locality(&a),
                    sparse_kernels::last_level_cache_bytes(),
                );
                // (label, plan, B): every width on the ordinary B, then on the huge-page B.
                let mut plans: Vec<(String, SpmmPlan, &[f64])> = Vec::new();
                for (tag, data) in [("", Some(&b[..])), ("-huge", huge.as_deref())] {
                    let Some(data) = data else { continue };
                    for w in std::iter::once(0).chain(widths.iter().copied()) {
                        let config = LssmConfig {
                            k_panel: Some(w),
                            ..LssmConfig::default()
                        };
                        plans.push((format!("p{w}{tag}"), SpmmPlan::new(&a, k, &config), data));
                    }
                }
                let mut times = vec![Vec::new(); plans.len()];
                for round in 0..=o.reps {
                    for (t, (_, plan, data)) in times.iter_mut().zip(&plans) {
                        let s = Instant::now();
                        plan.execute(
                            &a,
                            DenseRef::contiguous(data, a.ncols(), k),
                            DenseMut::contiguous(&mut c, a.nrows(), k),
                            Par::Current,
                        )
                        .expect("run");
                        if round > 0 {
                            t.push(s.elapsed().as_secs_f64());
                        }
                    }
                }
                let best: Vec<f64> = times
                    .iter()
                    .map(|t| t.iter().copied().fold(f64::INFINITY, f64::min))
                    .collect();
                let med: Vec<f64> = times.into_iter().map(bench_timing::median).collect();
                let cells: Vec<String> = plans
                    .iter()
                    .zip(med.iter().zip(&best))
                    .map(|((label, _, _), (t, m))| {
                        format!(
                            "{label} {:.1} ms ({:.2}; min {:.1} ms, {:.2})",
                            t * 1e3,
                            med[0] / t,
                            m * 1e3,
                            best[0] / m
                        )
                    })
                    .collect();
                println!(
                    "{spec} K={k} suggested panel {suggested}: {}",
                    cells.join(" | ")
                );
            }
        }
    });
}
