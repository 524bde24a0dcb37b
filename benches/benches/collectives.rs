//! Criterion benchmarks: collectives (issue #7). All-reduce over the local and TCP transports at
//! several sizes and rank counts, the preemptive engine against ordered mode when all ranks
//! submit in the same order, ring against zero-copy shared-memory all-reduce on local ranks, and
//! broadcast by binomial tree against the pipelined chain.
//! Bandwidth comparisons with memcpy / loopback TCP / MPI are in `scripts/compare-collectives`.
#![allow(missing_docs)]

use std::time::Duration;

use collectives_bench::{run_bench, BenchConfig, BenchTransport};
use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use pardis::collectives::{AllReduceAlgorithm, BroadcastAlgorithm, Config, Mode, OpKind};

fn time_op(
    op: OpKind,
    transport: BenchTransport,
    ranks: usize,
    bytes: usize,
    engine: Config,
    iters: u64,
) -> Duration {
    let cfg = BenchConfig::new(transport, ranks, op, bytes, iters as usize, engine);
    run_bench(&cfg).expect("benchmark run").time * iters as u32
}

fn time(transport: BenchTransport, ranks: usize, bytes: usize, mode: Mode, iters: u64) -> Duration {
    time_op(
        OpKind::AllReduce,
        transport,
        ranks,
        bytes,
        Config::with_mode(mode),
        iters,
    )
}

/// A benchmark group `collectives/<name>` with short sampling (each sample runs whole jobs).
fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut g = c.benchmark_group(format!("collectives/{name}"));
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    g
}

fn all_reduce(c: &mut Criterion) {
    for (name, transport, sizes) in [
        (
            "all_reduce_local",
            BenchTransport::Local,
            &[1usize << 10, 64 << 10, 1 << 20, 16 << 20][..],
        ),
        (
            "all_reduce_tcp",
            BenchTransport::Tcp,
            &[1 << 10, 1 << 20][..],
        ),
    ] {
        let mut g = group(c, name);
        for ranks in [2, 4] {
            for &bytes in sizes {
                g.throughput(Throughput::Bytes(bytes as u64));
                g.bench_with_input(
                    BenchmarkId::new(format!("{ranks}ranks"), bytes),
                    &bytes,
                    |b, &bytes| {
                        b.iter_custom(|iters| {
                            time(transport, ranks, bytes, Mode::Preemptive, iters)
                        })
                    },
                );
            }
        }
        g.finish();
    }
}

/// `op` on 4 local ranks at each size under each labelled engine setting.
fn engine_variants(
    c: &mut Criterion,
    name: &str,
    op: OpKind,
    sizes: &[usize],
    variants: &[(&str, Config)],
) {
    let mut g = group(c, name);
    for &bytes in sizes {
        g.throughput(Throughput::Bytes(bytes as u64));
        for (label, engine) in variants {
            g.bench_with_input(BenchmarkId::new(*label, bytes), &bytes, |b, &bytes| {
                b.iter_custom(|iters| {
                    time_op(op, BenchTransport::Local, 4, bytes, engine.clone(), iters)
                })
            });
        }
    }
    g.finish();
}

fn preemptive_vs_ordered(c: &mut Criterion) {
    let variants = [
        ("Preemptive", Config::with_mode(Mode::Preemptive)),
        ("Ordered", Config::with_mode(Mode::Ordered)),
    ];
    let sizes = [1usize << 10, 1 << 20];
    engine_variants(c, "mode_same_order", OpKind::AllReduce, &sizes, &variants);
}

/// Local all-reduce: ring through mailboxes vs the zero-copy shared-memory algorithm.
fn all_reduce_algorithms(c: &mut Criterion) {
    let ring = Config {
        all_reduce: AllReduceAlgorithm::Ring,
        ..Config::default()
    };
    let shared_memory = Config {
        all_reduce: AllReduceAlgorithm::SharedMemory,
        ..ring.clone()
    };
    engine_variants(
        c,
        "all_reduce_algorithm_4ranks",
        OpKind::AllReduce,
        &[1 << 20, 16 << 20],
        &[("Ring", ring), ("SharedMemory", shared_memory)],
    );
}

fn broadcast(c: &mut Criterion) {
    let with = |broadcast| Config {
        broadcast,
        ..Config::default()
    };
    let variants = [
        ("Binomial", with(BroadcastAlgorithm::Binomial)),
        ("Pipelined", with(BroadcastAlgorithm::Pipelined)),
    ];
    let sizes = [1usize << 20, 16 << 20];
    engine_variants(c, "broadcast_4ranks", OpKind::Broadcast, &sizes, &variants);
}

criterion_group!(
    benches,
    all_reduce,
    all_reduce_algorithms,
    preemptive_vs_ordered,
    broadcast
);
criterion_main!(benches);
