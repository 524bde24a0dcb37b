//! Paired study of LSSM settings (and the other kernels) on one matrix at a time: every round
//! runs each variant once, in turn, on the same B and C, so load drift hits all of them alike.
//! Prints, per variant, the median and the minimum milliseconds and the median over rounds of
//! `first variant's time / this variant's time` in the same round (> 1: faster than the first).
//! Each result is checked against the reference once.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example lssm_variants -- \
//!     [--threads 2] [--k 64] [--reps 9] [--flush] [--align-c] [--c-offset BYTES] [--huge-b] \
//!     [--slab BY] [--variants lssm,lssm:stream,lssm:chunk=1048576,merge,pairs] MATRIX...
//! ```
//! A variant is a kernel name (`lssm`, `row`, `merge`, `rode`, `pairs`, `reference`, or
//! `sprs`; `pairs`' [`RowPairs`] is built before the rounds, like LSSM's plan), and for
//! `lssm` settings after a colon, separated by `+`: `stream` / `nostream` (streaming stores of
//! C), `pf` / `nopf` (prefetching B), `pfd=N` (prefetch distance in nonzeros), `chunk=N`
//! (`row_chunk_work`), `cb=BYTES` (`chunk_bytes`), `block=N`, `panel=N`, `serial=N`
//! (`serial_work`), `sweep=N` (`sweep_rows`: rows per band, 0 for none), `shift` / `noshift`
//! (`shift_pairs`), `narrow` / `nonarrow` (`narrow_pairs`), `lead` / `nolead`
//! (`lead_prefetch`). Any variant with `@avx2` appended
//! runs with the SIMD level capped at AVX2 (`sparse_kernels::set_simd_limit`), e.g.
//! `lssm,lssm@avx2` pairs the AVX-512 path with the AVX2 one on a CPU that has both. `--flush`
//! writes 64 MiB
//! between runs (cold caches); `--align-c` puts C at a 64-byte boundary (a `Vec` of a large size usually starts
//! 16 bytes past a page); `--c-offset BYTES` puts C that many bytes (mod 4 KiB) past B's
//! offset in its page, to see whether stores to C that alias loads of B 4 KiB apart cost anything; `--huge-b` copies B (line-aligned) onto transparent huge pages
//! (`sparse_kernels::zeroed_on_huge_pages`), to see what address translation costs; `--slab BY`
//! reorders the rows of an `N × N × N` grid matrix (`stencil27:N`) in slabs of `BY` grid lines
//! swept plane by plane first (what locality is worth on a stencil; other matrices are left
//! as they are). MATRIX is a path or a generator spec (`stencil27:64`, `kron:18`).

use sparse_kernels::{
    io, set_simd_limit, spmm_reference, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par,
    RowPairs, SimdLimit, SpmmPlan,
};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// An LSSM configuration from `lssm:stream+chunk=N`; `None` for a setting it does not know or
/// a malformed value (`block=0` included: the block size must be positive).
fn lssm_config(settings: &str) -> Option<LssmConfig> {
    let mut c = LssmConfig::default();
    for s in settings.split('+').filter(|s| !s.is_empty()) {
        let (key, value) = s.split_once('=').unwrap_or((s, ""));
        let num = || value.parse::<usize>().ok();
        match key {
            "stream" => c.streaming_stores = Some(true),
            "nostream" => c.streaming_stores = Some(false),
            "pf" => c.prefetch = Some(true),
            "nopf" => c.prefetch = Some(false),
            "pfd" => c.prefetch_distance = num()?,
            "chunk" => c.row_chunk_work = num()?,
            "cb" => c.chunk_bytes = Some(num().filter(|&b| b > 0)?),
            "block" => c.block_nnz = Some(num().filter(|&b| b > 0)?),
            "panel" => c.k_panel = Some(num()?),
            "serial" => c.serial_work = num()?,
            "sweep" => c.sweep_rows = Some(num()?),
            "shift" => c.shift_pairs = Some(true),
            "noshift" => c.shift_pairs = Some(false),
            "narrow" => c.narrow_pairs = Some(true),
            "nonarrow" => c.narrow_pairs = Some(false),
            "lead" => c.lead_prefetch = Some(true),
            "nolead" => c.lead_prefetch = Some(false),
            _ => return None,
        }
    }
    Some(c)
}

/// One timed contender.
enum Contender {
    Plan(Box<SpmmPlan>),
    /// `pairs`: the repacked copy is built before the rounds, like a plan.
    Pairs(Box<RowPairs<f64, u32>>),
    Kernel(Kernel),
    Sprs,
}

/// What a variant name asks for, checked before any matrix is loaded.
enum Variant {
    Lssm(LssmConfig),
    Kernel(Kernel),
    Sprs,
}

/// Parses a variant name (`lssm:stream+chunk=N`, `merge`, `sprs`, with an optional `@avx2`).
fn variant(name: &str) -> Result<Variant, String> {
    let name = name.trim_end_matches("@avx2");
    let (kernel, settings) = name.split_once(':').unwrap_or((name, ""));
    match kernel {
        "sprs" if settings.is_empty() => Ok(Variant::Sprs),
        "lssm" => lssm_config(settings).map(Variant::Lssm).ok_or_else(|| {
            format!(
                "variant `{name}`: unknown or malformed LSSM setting (stream, nostream, pf, \
                 nopf, pfd=N, chunk=N, block=N ≥ 1, panel=N, serial=N, sweep=N, shift, noshift, \
                 narrow, nonarrow, lead, nolead, joined by +)"
            )
        }),
        other if settings.is_empty() => {
            Kernel::from_name(other)
                .map(Variant::Kernel)
                .ok_or_else(|| {
                    format!(
                        "variant `{name}`: unknown kernel `{other}` (lssm, row, merge, rode, \
                     pairs, reference, sprs)"
                    )
                })
        }
        _ => Err(format!("variant `{name}`: only lssm takes settings")),
    }
}

/// Bad arguments (options, variants) exit with status 2 and a message before anything runs; a
/// matrix that cannot be loaded or run is reported on stderr and skipped, and the exit
/// status is 2.
fn main() {
    let o = common::parse(
        &[64],
        9,
        &["variants", "c-offset", "slab"],
        &["flush", "align-c", "huge-b"],
    );
    let names: Vec<String> = o
        .extra
        .get("variants")
        .map_or("lssm,merge", String::as_str)
        .split(',')
        .map(str::to_string)
        .collect();
    for name in &names {
        if let Err(e) = variant(name) {
            common::fail(common::ArgError::new(e));
        }
    }
    let slab = o.extra.get("slab").map(|v| {
        v.parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| {
                common::fail(common::ArgError::new(format!(
                    "--slab takes a positive number of grid lines, not `{v}`"
                )))
            })
    });
    let pool = o.pool();
    println!("{}, flush {}", o.header(), o.extra.contains_key("flush"));
    let failed = pool.install(|| {
        let mut failed = 0;
        for spec in &o.matrices {
            let r = io::read_or_generate::<f64, u32>(spec, 1)
                .map_err(|e| e.to_string())
                .map(
                    |a| match slab.and_then(|by| common::grid_tile_order(&a, usize::MAX, by)) {
                        Some(order) => common::permuted(&a, &order),
                        None => a,
                    },
                )
                .and_then(|a| {
                    let sprs_a: sprs::CsMatI<f64, u32> = a.clone().into();
                    o.ks.iter()
                        .try_for_each(|&k| run(&o, spec, &a, &sprs_a, k, &names))
                });
            if let Err(e) = r {
                eprintln!("lssm_variants: matrix `{spec}`: {e}");
                failed += 1;
            }
        }
        failed
    });
    if failed > 0 {
        std::process::exit(2);
    }
}

fn run(
    o: &common::Args,
    spec: &str,
    a: &CsrMatrix<f64, u32>,
    sprs_a: &sprs::CsMatI<f64, u32>,
    k: usize,
    names: &[String],
) -> Result<(), String> {
    let (m, n) = (a.nrows(), a.ncols());
    let b_gen = sparse_kernels::gen::dense::<f64>(n, k, 7);
    // B line-aligned on transparent huge pages (`--huge-b`) or where `gen::dense` puts it.
    let mut b_huge: Vec<f64>;
    let b: &[f64] = if o.extra.contains_key("huge-b") {
        b_huge = sparse_kernels::zeroed_on_huge_pages::<f64>(n * k + 8);
        let skip = (64 - b_huge.as_ptr() as usize % 64) % 64 / 8;
        b_huge[skip..skip + n * k].copy_from_slice(&b_gen);
        &b_huge[skip..skip + n * k]
    } else {
        &b_gen
    };
    let bref = DenseRef::contiguous(b, n, k);
    // C at a chosen offset from B in their pages (`--c-offset`), at a 64-byte boundary
    // (`--align-c`), or where the allocator puts it.
    let mut c_buf = vec![0.0f64; m * k + 512];
    let skip = if let Some(off) = o.extra.get("c-offset") {
        let off: usize = off
            .parse()
            .map_err(|_| format!("--c-offset {off}: not a number"))?;
        let want = (b.as_ptr() as usize % 4096 + off % 4096) % 4096;
        (want + 4096 - c_buf.as_ptr() as usize % 4096) % 4096 / 8
    } else if o.extra.contains_key("align-c") {
        (64 - c_buf.as_ptr() as usize % 64) % 64 / 8
    } else {
        0
    };
    let c = &mut c_buf[skip..skip + m * k];
    let mut expected = vec![0.0f64; m * k];
    spmm_reference(a, bref, DenseMut::contiguous(&mut expected, m, k));
    let limits: Vec<SimdLimit> = names
        .iter()
        .map(|name| match name.ends_with("@avx2") {
            true => SimdLimit::Avx2,
            false => SimdLimit::Widest,
        })
        .collect();
    let contenders: Vec<Contender> = names
        .iter()
        .map(|name| {
            Ok(match variant(name)? {
                Variant::Sprs => Contender::Sprs,
                Variant::Lssm(config) => Contender::Plan(Box::new(SpmmPlan::new(a, k, &config))),
                Variant::Kernel(Kernel::RowPairs) => {
                    Contender::Pairs(Box::new(RowPairs::new(a, k)))
                }
                Variant::Kernel(kernel) => Contender::Kernel(kernel),
            })
        })
        .collect::<Result<_, String>>()?;
    let b_nd = ndarray::ArrayView2::from_shape((n, k), b).expect("shape");
    let mut c_nd = ndarray::Array2::<f64>::from_elem((m, k), 0.0);
    let flush_bytes = if o.extra.contains_key("flush") {
        64 << 20
    } else {
        0
    };
    let mut flush = vec![0u8; flush_bytes];
    let mut times = vec![Vec::new(); names.len()];
    for round in 0..=o.reps {
        for (i, contender) in contenders.iter().enumerate() {
            for (j, x) in flush.iter_mut().step_by(64).enumerate() {
                *x = x.wrapping_add(j as u8);
            }
            std::hint::black_box(&flush);
            let cm = DenseMut::contiguous(&mut *c, m, k);
            // Wake the pool's workers first: after a serial contender (sprs) they may be
            // asleep, and the next parallel contender would pay for waking them.
            rayon::broadcast(|_| ());
            set_simd_limit(limits[i]);
            let s = Instant::now();
            match contender {
                Contender::Plan(plan) => plan.execute(a, bref, cm, Par::Current),
                Contender::Pairs(pairs) => pairs.execute(bref, cm, Par::Current),
                Contender::Kernel(kernel) => kernel.run(a, bref, cm, Par::Current),
                Contender::Sprs => {
                    c_nd.fill(0.0);
                    sprs::prod::csr_mulacc_dense_rowmaj(sprs_a.view(), b_nd, c_nd.view_mut());
                    Ok(())
                }
            }
            .map_err(|e| format!("{}, K {k}: {e}", names[i]))?;
            let t = s.elapsed().as_secs_f64();
            if round == 0 && !matches!(contender, Contender::Sprs) {
                let err = sparse_kernels::max_relative_error(
                    DenseRef::contiguous(c, m, k),
                    DenseRef::contiguous(&expected, m, k),
                );
                if err >= 1e-10 {
                    return Err(format!(
                        "{}, K {k}: differs from the reference by {err:e} (relative)",
                        names[i]
                    ));
                }
            }
            if round > 0 {
                times[i].push(t);
            }
        }
    }
    println!(
        "{spec} K={k} nnz {} (C at line offset {} B, C - B = {} B mod 4 KiB)",
        a.nnz(),
        c.as_ptr() as usize % 64,
        (c.as_ptr() as usize + 4096 - b.as_ptr() as usize % 4096) % 4096
    );
    for (name, t) in names.iter().zip(&times) {
        let ratio = bench_timing::median(t.iter().zip(&times[0]).map(|(t, f)| f / t).collect());
        let min = t.iter().copied().fold(f64::INFINITY, f64::min);
        println!(
            "  {name:>32}: med {:8.3} ms  min {:8.3} ms  first/this {ratio:5.2}",
            bench_timing::median(t.clone()) * 1e3,
            min * 1e3
        );
    }
    Ok(())
}
