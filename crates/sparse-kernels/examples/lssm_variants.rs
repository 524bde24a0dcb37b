//! Paired study of LSSM settings (and the other kernels) on one matrix at a time: every round
//! runs each variant once, in turn, on the same B and C, so load drift hits all of them alike.
//! Prints, per variant, the median and the minimum milliseconds and the median over rounds of
//! `first variant's time / this variant's time` in the same round (> 1: faster than the first).
//! Each result is checked against the reference once.
//!
//! ```text
//! cargo run --release -p sparse-kernels --example lssm_variants -- \
//!     [--threads 2] [--k 64] [--reps 9] [--flush] [--align-c] \
//!     [--variants lssm,lssm:stream,lssm:chunk=1048576,merge] MATRIX...
//! ```
//! A variant is a kernel name (`lssm`, `row`, `merge`, `rode`, `reference`, or `sprs`), and for
//! `lssm` settings after a colon, separated by `+`: `stream` / `nostream` (streaming stores of
//! C), `pf` / `nopf` (prefetching B), `pfd=N` (prefetch distance in nonzeros), `chunk=N`
//! (`row_chunk_work`), `block=N`, `panel=N`, `serial=N` (`serial_work`). Any variant with `@avx2` appended runs with the
//! SIMD level capped at AVX2 (`sparse_kernels::set_simd_limit`), e.g. `lssm,lssm@avx2`
//! pairs the AVX-512 path with the AVX2 one on a CPU that has both. `--flush` writes 64 MiB
//! between runs (cold caches); `--align-c` puts C at a 64-byte boundary (a `Vec` of a large size usually starts
//! 16 bytes past a page). MATRIX is a path or a generator spec (`stencil27:64`, `kron:18`).

use sparse_kernels::{
    io, set_simd_limit, spmm_reference, CsrMatrix, DenseMut, DenseRef, Kernel, LssmConfig, Par,
    SimdLimit, SpmmPlan,
};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;

/// An LSSM configuration from `lssm:stream+chunk=N`; `None` for a setting it does not know.
fn lssm_config(settings: &str) -> Option<LssmConfig> {
    let mut c = LssmConfig::default();
    for s in settings.split('+').filter(|s| !s.is_empty()) {
        let (key, value) = s.split_once('=').unwrap_or((s, ""));
        let num = || value.parse::<usize>().ok();
        match key {
            "stream" => c.streaming_stores = true,
            "nostream" => c.streaming_stores = false,
            "pf" => c.prefetch = Some(true),
            "nopf" => c.prefetch = Some(false),
            "pfd" => c.prefetch_distance = num()?,
            "chunk" => c.row_chunk_work = num()?,
            "block" => c.block_nnz = Some(num()?),
            "panel" => c.k_panel = Some(num()?),
            "serial" => c.serial_work = num()?,
            _ => return None,
        }
    }
    Some(c)
}

/// One timed contender.
enum Contender {
    Plan(Box<SpmmPlan>),
    Kernel(Kernel),
    Sprs,
}

fn main() {
    let o = common::parse(&[64], 9, &["variants"], &["flush", "align-c"]);
    let names: Vec<String> = o
        .extra
        .get("variants")
        .map_or("lssm,merge", String::as_str)
        .split(',')
        .map(str::to_string)
        .collect();
    let pool = o.pool();
    println!("{}, flush {}", o.header(), o.extra.contains_key("flush"));
    pool.install(|| {
        for spec in &o.matrices {
            let a: CsrMatrix<f64, u32> =
                io::read_or_generate(spec, 1).unwrap_or_else(|e| panic!("{e}"));
            let sprs_a: sprs::CsMatI<f64, u32> = a.clone().into();
            for &k in &o.ks {
                run(&o, spec, &a, &sprs_a, k, &names);
            }
        }
    });
}

fn run(
    o: &common::Args,
    spec: &str,
    a: &CsrMatrix<f64, u32>,
    sprs_a: &sprs::CsMatI<f64, u32>,
    k: usize,
    names: &[String],
) {
    let (m, n) = (a.nrows(), a.ncols());
    let b = sparse_kernels::gen::dense::<f64>(n, k, 7);
    let bref = DenseRef::contiguous(&b, n, k);
    // C at a 64-byte boundary (`--align-c`) or where the allocator puts it.
    let mut c_buf = vec![0.0f64; m * k + 8];
    let skip = if o.extra.contains_key("align-c") {
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
            let name = name.trim_end_matches("@avx2");
            let (kernel, settings) = name.split_once(':').unwrap_or((name, ""));
            match kernel {
                "sprs" => Contender::Sprs,
                "lssm" => {
                    let config = lssm_config(settings)
                        .unwrap_or_else(|| panic!("unknown LSSM setting in `{name}`"));
                    Contender::Plan(Box::new(SpmmPlan::new(a, k, &config)))
                }
                other => Contender::Kernel(
                    Kernel::from_name(other).unwrap_or_else(|| panic!("unknown kernel `{other}`")),
                ),
            }
        })
        .collect();
    let b_nd = ndarray::ArrayView2::from_shape((n, k), &b[..]).expect("shape");
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
                Contender::Plan(plan) => plan.execute(a, bref, cm, Par::Current).expect("run"),
                Contender::Kernel(kernel) => kernel.run(a, bref, cm, Par::Current).expect("run"),
                Contender::Sprs => {
                    c_nd.fill(0.0);
                    sprs::prod::csr_mulacc_dense_rowmaj(sprs_a.view(), b_nd, c_nd.view_mut());
                }
            }
            let t = s.elapsed().as_secs_f64();
            if round == 0 && !matches!(contender, Contender::Sprs) {
                let err = sparse_kernels::max_relative_error(
                    DenseRef::contiguous(c, m, k),
                    DenseRef::contiguous(&expected, m, k),
                );
                assert!(
                    err < 1e-10,
                    "{} differs from the reference: {err}",
                    names[i]
                );
            }
            if round > 0 {
                times[i].push(t);
            }
        }
    }
    println!(
        "{spec} K={k} nnz {} (C at line offset {} B)",
        a.nnz(),
        c.as_ptr() as usize % 64
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
}
