//! How fast rows of a dense B can be gathered at random, against the size of B: the memory
//! behaviour of SpMM on a power-law A (each nonzero reads one row of `K` elements of B). For
//! working sets from 1 MiB up, every thread of the pool sums rows of a line-aligned B picked
//! by its own pseudo-random stream (`--k` `f64` per row, 64 = 512 bytes), and the example
//! prints the median over `--reps` rounds of nanoseconds per row per thread and the GB/s of
//! all threads together. Where the rate falls off is the cache capacity the gathers really get
//! — on a VM that shares its last-level cache with other tenants, less than
//! `sparse_kernels::last_level_cache_bytes()` reports.
//!
//! `--prefetch D` adds a software prefetch of every line of the row `D` gathers ahead (a
//! second stream of the same generator, run `D` steps in front); `--huge` puts the buffer on
//! transparent huge pages (`sparse_kernels::zeroed_on_huge_pages`), so that a random row costs
//! no page walk beyond the 2 MiB pages'. Together they give the fastest random row gathers this
//! machine delivers, the rate a kernel's missed rows of B cannot exceed.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example gather_rate -- [--threads 1] [--k 64] [--reps 3] \
//!     [--prefetch D] [--huge]
//! ```

use rayon::prelude::*;
use sparse_kernels::AlignedVec;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// Row gathers timed per thread and size.
const GATHERS: usize = 1 << 22;

fn main() {
    let o = common::try_parse(std::env::args().skip(1), &[64], 3, &["prefetch"], &["huge"])
        .unwrap_or_else(|e| common::fail(e));
    let ahead = match o.extra.get("prefetch") {
        None => 0,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|d| (1..=1024).contains(d))
            .unwrap_or_else(|| {
                common::fail(common::ArgError::new(format!(
                    "--prefetch takes a distance from 1 to 1024 gathers (got `{v}`)"
                )))
            }),
    };
    let huge = o.extra.contains_key("huge");
    if let Some(m) = o.matrices.first() {
        common::fail(common::ArgError::new(format!(
            "gather_rate takes no MATRIX (got `{m}`)"
        )));
    }
    if o.ks.len() > 1 || o.ks[0] > 64 {
        common::fail(common::ArgError::new(format!(
            "gather_rate takes one K from 1 to 64 (got {:?})",
            o.ks
        )));
    }
    let k = o.ks[0];
    let pool = o.pool();
    let max_mib = 256;
    let len = (max_mib << 20) / 8;
    let (mut on_huge, mut aligned);
    let b: &mut [f64] = if huge {
        // One line more than needed, to start the rows on a 64-byte boundary.
        on_huge = sparse_kernels::zeroed_on_huge_pages::<f64>(len + 8);
        let skip = on_huge.as_ptr().align_offset(64).min(8);
        &mut on_huge[skip..skip + len]
    } else {
        aligned = AlignedVec::<f64>::zeroed(len);
        &mut aligned[..]
    };
    for (i, x) in b.iter_mut().enumerate() {
        *x = i as f64 * 1e-9;
    }
    println!(
        "{}, row of {k} f64 ({} bytes), {}, {}",
        o.header(),
        k * 8,
        if huge {
            "huge pages (advised)"
        } else {
            "4 KiB pages"
        },
        match ahead {
            0 => "no software prefetch".to_string(),
            d => format!("prefetch {d} rows ahead"),
        }
    );
    println!("  B MiB | ns/row/thread |  GB/s (all threads)");
    let mut mib = 1;
    while mib <= max_mib {
        let part = &b[..(mib << 20) / 8 / k * k];
        let mut times = Vec::new();
        let mut check = 0.0;
        for _ in 0..o.reps.max(1) {
            let start = Instant::now();
            check = pool.install(|| {
                (0..o.threads)
                    .into_par_iter()
                    .map(|t| {
                        let seed = 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1);
                        if ahead == 0 {
                            common::gather_random_rows(part, k, GATHERS, seed)
                        } else {
                            common::gather_random_rows_prefetched(part, k, GATHERS, seed, ahead)
                        }
                    })
                    .sum::<f64>()
            });
            times.push(start.elapsed().as_secs_f64());
        }
        let t = bench_timing::median(times);
        let rows = (GATHERS * o.threads) as f64;
        println!(
            "  {mib:5} | {:13.1} | {:19.1}   (checksum {check:.3e})",
            t / GATHERS as f64 * 1e9,
            rows * (k * 8) as f64 / t / 1e9
        );
        mib *= 2;
    }
}
