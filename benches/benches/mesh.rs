//! Criterion benchmarks: unstructured-mesh programs (issue #26). Time per Airfoil iteration on
//! a generated mesh, sequential, threaded (2 threads) and distributed on 2 and 4 ranks over the
//! local and TCP transports. Each sample runs `iters` iterations; distributed samples subtract
//! the setup (partition, layouts, import/export lists), which the plan reports, and threaded
//! samples theirs (locality renumbering, colourings: `RunStats::setup_nanos`).
//! `PARDIS_MESH_CELLS` sets the mesh size (default 20 000; OP2's standard mesh has ~720 000).
//! The same loops in plain C (`benches/c/airfoil.c`, -O3, built by the build script when a C
//! compiler exists) are timed as `c-O3`, and before the criterion groups a paired comparison
//! prints pardis sequential / C (and threaded / sequential) with the load average, on the
//! generated (shuffled) numbering and on the same mesh in locality order
//! (`Grid::locality_ordered`).
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use bench_timing::median;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pardis::collectives::{run_local_with, tcp::run_tcp_local, Config, Result as CommResult};
use pardis::plan::unstructured::apps::{airfoil, qinf, AirfoilConfig};
use pardis::plan::unstructured::{Backend, Context, DistConfig, Grid};
use pardis_benches::airfoil_c;

fn cfg(iters: u64) -> AirfoilConfig {
    AirfoilConfig {
        iterations: iters as usize,
        report_every: 0,
    }
}

fn distributed(grid: &Grid, ranks: usize, tcp: bool, iters: u64) -> Duration {
    let body = |comm| {
        let mut ctx = Context::new(Backend::distributed(comm, DistConfig::default()));
        let t = Instant::now();
        airfoil(&mut ctx, grid, &cfg(iters)).expect("airfoil");
        let setup = ctx.plan_report().map_or(0.0, |r| r.setup_seconds);
        t.elapsed().saturating_sub(Duration::from_secs_f64(setup))
    };
    let outs: Vec<CommResult<Duration>> = if tcp {
        run_tcp_local(&Config::default(), ranks, body)
    } else {
        run_local_with(&Config::default(), ranks, body)
    };
    outs.into_iter()
        .map(|o| o.expect("rank"))
        .max()
        .unwrap_or_default()
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// CPU seconds this process's threads have run so far (`/proc/self/task/*/schedstat`, ns), so
/// that ratios can be read apart from the time other processes take the cores; `None` off
/// Linux. Rayon's workers live for the whole bench, so their time is counted.
fn cpu_seconds() -> Option<f64> {
    let mut ns = 0u64;
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let s = std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok()?;
        ns += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(ns as f64 * 1e-9)
}

/// Runs `f`, returning its result, wall seconds and CPU seconds.
fn timed<R>(f: impl FnOnce() -> R) -> (R, f64, f64) {
    let (t, c) = (Instant::now(), cpu_seconds().unwrap_or(0.0));
    let r = f();
    let cpu = cpu_seconds().unwrap_or(0.0) - c;
    (r, t.elapsed().as_secs_f64(), cpu)
}

/// Paired rounds (C, sequential, threaded on 2 threads, in turn) of `iters` iterations; prints
/// the median ratios and checks that C computes what pardis computes.
fn compare(grid: &Grid, label: &str, pool: &rayon::ThreadPool, iters: usize, rounds: usize) {
    let load_before = load();
    let time_seq = || {
        timed(|| {
            airfoil(
                &mut Context::new(Backend::Sequential),
                grid,
                &cfg(iters as u64),
            )
            .expect("airfoil")
            .q
        })
    };
    // Threaded: the one-off setup (locality renumbering, colourings) is reported apart from
    // the wall-clock time (its CPU time stays in, as it cannot be told apart under load).
    let time_thr = || {
        pool.install(|| {
            let mut ctx = Context::new(Backend::Threads);
            let ((), t, cpu) =
                timed(|| drop(airfoil(&mut ctx, grid, &cfg(iters as u64)).expect("airfoil")));
            let setup = ctx.stats().setup_nanos as f64 * 1e-9;
            (t - setup, cpu, setup)
        })
    };
    let (mut seq, mut thr, mut c, mut setup) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut seq_cpu, mut thr_cpu, mut c_cpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut check = None;
    for _ in 0..rounds {
        if airfoil_c::available() {
            let (qc, t, cpu) =
                timed(|| airfoil_c::run(grid, qinf(), iters).expect("C reference").0);
            c.push(t);
            c_cpu.push(cpu);
            check.get_or_insert(qc);
        }
        let (q, s, cpu) = time_seq();
        seq.push(s);
        seq_cpu.push(cpu);
        let (t, cpu, su) = time_thr();
        thr.push(t);
        thr_cpu.push(cpu);
        setup.push(su);
        if let Some(qc) = &check {
            let scale = q.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            let diff = q
                .iter()
                .zip(qc)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(diff <= 1e-9 * scale, "C and pardis differ by {diff:e}");
        }
    }
    let name = format!("mesh/airfoil/{}/{label}", grid.ncell());
    let (s, t) = (median(seq), median(thr));
    println!(
        "{name}: {rounds} paired rounds of {iters} iterations, load {load_before} -> {}",
        load()
    );
    println!(
        "{name}: sequential {:.2} ms/iter, threads/2 {:.2} ms/iter (setup {:.3} s apart): \
         threaded speed-up {:.2}x",
        1e3 * s / iters as f64,
        1e3 * t / iters as f64,
        median(setup),
        s / t
    );
    let (sc, tc) = (median(seq_cpu), median(thr_cpu));
    println!(
        "{name}: CPU time: sequential {:.2} ms/iter, threads/2 {:.2} ms/iter (both threads, \
         setup included): threaded work / sequential = {:.2}",
        1e3 * sc / iters as f64,
        1e3 * tc / iters as f64,
        tc / sc
    );
    if !c_cpu.is_empty() {
        println!(
            "{name}: CPU time: C -O3 {:.2} ms/iter: pardis sequential / C = {:.2}",
            1e3 * median(c_cpu.clone()) / iters as f64,
            sc / median(c_cpu)
        );
    }
    if c.is_empty() {
        println!(
            "{name}: C reference skipped: not built (no C compiler found by the build script)"
        );
    } else {
        let c = median(c);
        println!(
            "{name}: C -O3 {:.2} ms/iter: pardis sequential / C = {:.2} (goal <= 1.5)",
            1e3 * c / iters as f64,
            s / c
        );
    }
}

fn bench(c: &mut Criterion) {
    let cells = std::env::var("PARDIS_MESH_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let grid = Grid::generate(cells, 1).expect("mesh");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    // About 0.2 s of C work per round on a quiet core whatever the mesh size
    // (`PARDIS_MESH_ITERS` overrides).
    let iters = std::env::var("PARDIS_MESH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or((4_000_000 / grid.ncell().max(1)).clamp(2, 2000));
    // The generated (shuffled) numbering, then the same mesh in the threaded backend's
    // locality order, so that sequential and C are also compared without the cache misses.
    compare(&grid, "shuffled", &pool, iters, 3);
    compare(
        &grid
            .locality_ordered()
            .expect("a generated grid is consistent"),
        "ordered",
        &pool,
        iters,
        3,
    );
    let mut g = c.benchmark_group(format!("mesh/airfoil/{}", grid.ncell()));
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("seq", |b| {
        b.iter_custom(|iters| {
            let mut ctx = Context::new(Backend::Sequential);
            let t = Instant::now();
            airfoil(&mut ctx, &grid, &cfg(iters)).expect("airfoil");
            t.elapsed()
        })
    });
    if airfoil_c::available() {
        g.bench_function("c-O3", |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                airfoil_c::run(&grid, qinf(), iters as usize).expect("C reference");
                t.elapsed()
            })
        });
    }
    g.bench_function("threads/2", |b| {
        b.iter_custom(|iters| {
            pool.install(|| {
                let mut ctx = Context::new(Backend::Threads);
                let t = Instant::now();
                airfoil(&mut ctx, &grid, &cfg(iters)).expect("airfoil");
                t.elapsed()
                    .saturating_sub(Duration::from_nanos(ctx.stats().setup_nanos))
            })
        })
    });
    for (transport, tcp) in [("local", false), ("tcp", true)] {
        for ranks in [2, 4] {
            g.bench_with_input(
                BenchmarkId::new(format!("dist/{transport}"), ranks),
                &ranks,
                |b, &ranks| b.iter_custom(|iters| distributed(&grid, ranks, tcp, iters)),
            );
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
