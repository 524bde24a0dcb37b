//! Can the order in which the rows of A are computed make the gathers of B hit the cache?
//! For a matrix whose B is far larger than the cache (`kron:18`: 128 MiB of B at K = 64 `f64`),
//! the traffic of a row-wise SpMM is set by the rows of B that miss. This study computes the
//! rows in several orders — C's rows are written in place, so an order costs nothing at run
//! time once chosen — and prints, per order and cache size, the share of nonzeros whose row of
//! B misses a 16-way LRU cache of whole rows, the `bound` that traffic implies (minimal traffic
//! / gather traffic, as `scripts/compare-spmm` defines them: the most of the minimal-traffic
//! roof any row-wise kernel can reach at full bandwidth), and the LSSM time of the reordered
//! matrix, in paired rounds (`natural/this`: the median over rounds of the ratio in a round).
//!
//! Orders: `natural`; `bfs` (breadth-first over the rows as vertices from the densest row, a
//! Cuthill–McKee-like order); `min-column` (rows sorted by their smallest column);
//! `rarest-column` (rows sorted by their least-read column, so that rows sharing a rarely read
//! row of B run next to each other); and for a matrix of `N³` rows (`stencil27:N`) the grid
//! orders `slab4`, `slab8` (slabs of 4 or 8 grid lines swept plane by plane) and `tile32x8`,
//! `tile32x16` (tiles of 32 × 8 or 32 × 16 points swept plane by plane), and `band16`,
//! `band16y2`, `band16y4`, `ycol` (bands of 16 lines swept through the planes, x fastest or shift
//! pairs taken for 2 or 4 lines in turn; the grid by columns), which take the geometry from the
//! row count: what locality is worth on a stencil, not a general order. The `L1 lines` column
//! models a core's L1 (`common::LineCache`: 32 KiB, 8 ways, LRU, sets by address): on a grid
//! of 64-point lines every run of a stencil row lies a multiple of 4 KiB from the others.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example row_order_study -- \
//!     [--threads 2] [--k 64] [--reps 9] [--caches 2,8,32] kron:18 [MATRIX...]
//! ```

use sparse_kernels::{gen, io, CsrMatrix, DenseMut, DenseRef, LssmConfig, Par, SpmmPlan};
use std::collections::VecDeque;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// Nonzeros of `a`, taken row by row in `order`, whose row of B misses `cache`.
fn misses(a: &CsrMatrix<f64, u32>, order: &[usize], mut cache: common::RowCache) -> usize {
    order
        .iter()
        .flat_map(|&r| a.row(r).0)
        .filter(|&&c| cache.access(c))
        .count()
}

/// Lines of B per row of A that miss a 32 KiB 8-way LRU L1 of 64-byte lines (`common::LineCache`)
/// when the rows run in `order`, each summing its nonzeros in turn (every line of a nonzero's
/// row of B, B line-aligned): a model of the L1 reuse an order gives a one-row-at-a-time kernel.
fn l1_misses_per_row(a: &CsrMatrix<f64, u32>, order: &[usize], row_bytes: usize) -> f64 {
    let lines = (row_bytes / 64).max(1) as u64;
    let mut l1 = common::LineCache::new(32 << 10, 8);
    let mut missed = 0u64;
    for &r in order {
        for &c in a.row(r).0 {
            missed += (0..lines)
                .filter(|l| l1.access(u64::from(c) * lines + l))
                .count() as u64;
        }
    }
    missed as f64 / order.len().max(1) as f64
}

/// Breadth-first order of the rows, a row's neighbours being its columns (those `< nrows`),
/// each component started from its densest unvisited row.
fn bfs_order(a: &CsrMatrix<f64, u32>) -> Vec<usize> {
    let n = a.nrows();
    let mut seen = vec![false; n];
    let mut out = Vec::with_capacity(n);
    let mut by_nnz: Vec<usize> = (0..n).collect();
    by_nnz.sort_by_key(|&r| std::cmp::Reverse(a.row_nnz(r)));
    let mut queue = VecDeque::new();
    for &s in &by_nnz {
        if std::mem::replace(&mut seen[s], true) {
            continue;
        }
        queue.push_back(s);
        while let Some(v) = queue.pop_front() {
            out.push(v);
            for &c in a.row(v).0 {
                let c = c as usize;
                if c < n && !std::mem::replace(&mut seen[c], true) {
                    queue.push_back(c);
                }
            }
        }
    }
    out
}

/// The orders studied, by name.
fn orders(a: &CsrMatrix<f64, u32>) -> Vec<(&'static str, Vec<usize>)> {
    let natural: Vec<usize> = (0..a.nrows()).collect();
    let mut reads = vec![0usize; a.ncols()];
    for &c in a.indices() {
        reads[c as usize] += 1;
    }
    let mut min_column = natural.clone();
    min_column.sort_by_key(|&r| a.row(r).0.iter().min().copied().unwrap_or(u32::MAX));
    let mut rarest = natural.clone();
    rarest.sort_by_key(|&r| {
        a.row(r)
            .0
            .iter()
            .map(|&c| (reads[c as usize], c))
            .min()
            .map_or(u32::MAX, |(_, c)| c)
    });
    let mut v = vec![
        ("natural", natural),
        ("bfs", bfs_order(a)),
        ("min-column", min_column),
        ("rarest-column", rarest),
    ];
    // Tiles of a grid matrix's points swept plane by plane (only for `N × N × N` grids: they
    // take the geometry from the row count, so they bound what an order can do on stencils).
    for (name, bx, by) in [
        ("slab4", usize::MAX, 4),
        ("slab8", usize::MAX, 8),
        ("tile32x8", 32, 8),
        ("tile32x16", 32, 16),
    ] {
        if let Some(order) = common::grid_tile_order(a, bx, by) {
            v.push((name, order));
        }
    }
    // Row orders within the bands of a sweep (whole grid lines through consecutive planes, as
    // the plan sweeps a grid; bands of 16 lines here): x fastest (the plan's order), or shift
    // pairs of a grid line taken for 2 or 4 lines in turn before the next pair (`y2`, `y4`), so
    // that a row's rows of B were read one or two rows before instead of nine runs ago; and the
    // grid by columns (`ycol`: y fastest). Grid geometry from the row count, as above.
    type Key = fn(usize, usize, usize) -> [usize; 6];
    let bands: [(&'static str, Key); 4] = [
        ("band16", |x, y, z| [y / 16, z, y % 16, x, 0, 0]),
        ("band16y2", |x, y, z| {
            [y / 16, z, y % 16 / 2, x / 2, y % 2, x % 2]
        }),
        ("band16y4", |x, y, z| {
            [y / 16, z, y % 16 / 4, x / 2, y % 4, x % 2]
        }),
        ("ycol", |x, y, z| [z, x, y, 0, 0, 0]),
    ];
    for (name, key) in bands {
        if let Some(order) = common::grid_order(a, key) {
            v.push((name, order));
        }
    }
    v
}

fn main() {
    let o = common::parse(&[64], 9, &["caches"], &[]);
    let caches: Vec<usize> = o
        .extra
        .get("caches")
        .map_or("2,8,32", String::as_str)
        .split(',')
        .map(|m| match m.parse() {
            Ok(mib @ 1..=4096) => mib,
            _ => common::fail(common::ArgError::new(format!(
                "--caches takes sizes from 1 to 4096 MiB like 2,8,32, not `{m}`"
            ))),
        })
        .collect();
    let pool = o.pool();
    println!("{}", o.header());
    for spec in &o.matrices {
        let a: CsrMatrix<f64, u32> = io::read_or_generate(spec, 1)
            .unwrap_or_else(|e| common::fail(format!("matrix `{spec}`: {e}")));
        let (m, n, k) = (a.nrows(), a.ncols(), o.ks[0]);
        let row_bytes = k * 8;
        let a_bytes = a.nnz() * 12 + (m + 1) * 4;
        let c_bytes = m * row_bytes;
        let minimal = a_bytes + c_bytes + n * row_bytes;
        let b = gen::dense::<f64>(n, k, 7);
        let mut c = sparse_kernels::AlignedVec::<f64>::zeroed(m * k);
        // (reordered matrix, its plan, its times)
        let mut runs: Vec<(CsrMatrix<f64, u32>, SpmmPlan, Vec<f64>)> = Vec::new();
        let mut lines = Vec::new();
        for (name, order) in orders(&a) {
            let mut cells = Vec::new();
            for &mib in &caches {
                let miss = misses(&a, &order, common::RowCache::new(mib << 20, row_bytes));
                let bound = minimal as f64 / (a_bytes + c_bytes + miss * row_bytes) as f64;
                cells.push(format!(
                    "{:>9.1}% {:>5.0}%",
                    100.0 * miss as f64 / a.nnz().max(1) as f64,
                    100.0 * bound
                ));
            }
            cells.push(format!("{:>8.1}", l1_misses_per_row(&a, &order, row_bytes)));
            lines.push((name, cells.join(" | ")));
            let p = common::permuted(&a, &order);
            let plan = SpmmPlan::new(&p, k, &LssmConfig::default());
            runs.push((p, plan, Vec::new()));
        }
        pool.install(|| {
            // Round 0 warms up (first touch of C, pool start) and is not timed.
            for round in 0..=o.reps {
                for (p, plan, t) in &mut runs {
                    rayon::broadcast(|_| ());
                    let start = Instant::now();
                    plan.execute(
                        p,
                        DenseRef::new(&b, n, k, k),
                        DenseMut::new(&mut c, m, k, k),
                        Par::Current,
                    )
                    .expect("run");
                    if round > 0 {
                        t.push(start.elapsed().as_secs_f64() * 1e3);
                    }
                }
            }
        });
        let first = runs[0].2.clone();
        println!(
            "{spec} K={k} f64: nnz {}, B {} MiB, minimal traffic {} MB; per cache size: \
             nonzeros missing, bound;\n  L1 lines: lines of B per row missing an 8-way 32 KiB LRU L1",
            a.nnz(),
            (n * row_bytes) >> 20,
            minimal / 1_000_000
        );
        let head: Vec<String> = caches
            .iter()
            .map(|mib| format!("{:>6} MiB miss  bound", mib))
            .collect();
        println!(
            "{:>14} | {} | L1 lines | LSSM ms | natural/this",
            "order",
            head.join(" | ")
        );
        for ((name, cells), (_, _, t)) in lines.into_iter().zip(runs) {
            // Median over rounds of the paired ratio natural / this.
            let ratio = bench_timing::median(first.iter().zip(&t).map(|(f, x)| f / x).collect());
            let med = bench_timing::median(t);
            println!("{name:>14} | {cells} | {med:>7.2} | {ratio:>12.2}");
        }
    }
}
