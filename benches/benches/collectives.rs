//! Criterion benchmarks: collectives (issue #7). All-reduce over the local and TCP transports at
//! several sizes and rank counts, and the preemptive engine against ordered mode when all ranks
//! submit in the same order. Bandwidth comparisons with memcpy / loopback TCP are in
//! `scripts/compare-collectives`.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pardis::collectives::bench::{run_bench, BenchConfig, BenchTransport};
use pardis::collectives::{Config, Mode, OpKind};

fn time(transport: BenchTransport, ranks: usize, bytes: usize, mode: Mode, iters: u64) -> Duration {
    let cfg = BenchConfig::new(
        transport,
        ranks,
        OpKind::AllReduce,
        bytes,
        iters as usize,
        Config::with_mode(mode),
    );
    run_bench(&cfg).expect("benchmark run").time * iters as u32
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
        let mut g = c.benchmark_group(format!("collectives/{name}"));
        g.sample_size(10)
            .measurement_time(Duration::from_secs(2))
            .warm_up_time(Duration::from_millis(300));
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

fn preemptive_vs_ordered(c: &mut Criterion) {
    let mut g = c.benchmark_group("collectives/mode_same_order");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));
    for bytes in [1usize << 10, 1 << 20] {
        g.throughput(Throughput::Bytes(bytes as u64));
        for mode in [Mode::Preemptive, Mode::Ordered] {
            g.bench_with_input(
                BenchmarkId::new(format!("{mode:?}"), bytes),
                &bytes,
                |b, &bytes| {
                    b.iter_custom(|iters| time(BenchTransport::Local, 4, bytes, mode, iters))
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, all_reduce, preemptive_vs_ordered);
criterion_main!(benches);
