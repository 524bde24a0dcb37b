//! Criterion benchmarks: unstructured-mesh programs (issue #26). Time per Airfoil iteration on
//! a generated mesh, sequential, threaded (2 threads) and distributed on 2 and 4 ranks over the
//! local and TCP transports. Each sample runs `iters` iterations; distributed samples subtract
//! the setup (partition, layouts, import/export lists), which the plan reports.
//! `PARDIS_MESH_CELLS` sets the mesh size (default 20 000; OP2's standard mesh has ~720 000).
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pardis::collectives::{run_local_with, tcp::run_tcp_local, Config, Result as CommResult};
use pardis::plan::unstructured::apps::{airfoil, AirfoilConfig};
use pardis::plan::unstructured::{Backend, Context, DistConfig, Grid};

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

fn bench(c: &mut Criterion) {
    let cells = std::env::var("PARDIS_MESH_CELLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let grid = Grid::generate(cells, 1).expect("mesh");
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
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("pool");
    g.bench_function("threads/2", |b| {
        b.iter_custom(|iters| {
            pool.install(|| {
                let mut ctx = Context::new(Backend::Threads);
                let t = Instant::now();
                airfoil(&mut ctx, &grid, &cfg(iters)).expect("airfoil");
                t.elapsed()
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
