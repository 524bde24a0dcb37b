//! Resource bounds (issue 30): chaos and benchmark parameters that would spawn threads or
//! allocate without bound are typed errors before anything runs.

use std::time::Duration;

use collectives::{CollectiveError, Config, OpKind};
use collectives_bench::chaos::{run_chaos, ChaosConfig, MAX_CHAOS_COLLECTIVES};
use collectives_bench::{run_bench, BenchConfig, BenchTransport, MAX_BENCH_BYTES};

#[test]
fn chaos_and_bench_bounds_are_typed_errors_before_anything_runs() {
    let invalid = |r: Result<(), CollectiveError>, what: &str| match r {
        Err(CollectiveError::InvalidInput(m)) => m,
        other => panic!("{what}: expected InvalidInput, got {other:?}"),
    };
    // Chaos: collectives, elements (memory), ranks, zero timeouts.
    let chaos = |f: &dyn Fn(&mut ChaosConfig)| {
        let mut c = ChaosConfig::default();
        f(&mut c);
        run_chaos(&c).map(drop)
    };
    invalid(chaos(&|c| c.collectives = 0), "0 collectives");
    invalid(
        chaos(&|c| c.collectives = MAX_CHAOS_COLLECTIVES + 1),
        "too many collectives",
    );
    invalid(chaos(&|c| c.collectives = 100_000), "--collectives 100000");
    let m = invalid(chaos(&|c| c.elements = 4_000_000_000), "--elements 4e9");
    assert!(m.contains("GiB"), "{m}");
    invalid(chaos(&|c| c.elements = usize::MAX), "usize::MAX elements");
    invalid(chaos(&|c| c.ranks = 0), "0 ranks");
    invalid(chaos(&|c| c.ranks = usize::MAX), "usize::MAX ranks");
    invalid(
        chaos(&|c| c.engine.deadlock_timeout = Duration::ZERO),
        "zero deadlock timeout",
    );
    // The bounds themselves are accepted.
    let edge = ChaosConfig {
        collectives: MAX_CHAOS_COLLECTIVES,
        elements: 1,
        ranks: 2,
        ..ChaosConfig::default()
    };
    edge.validate().unwrap();

    // Benchmarks: sizes (0 and 1 TiB), ranks, iterations.
    let bench = |ranks: usize, bytes: usize, iters: usize| {
        let cfg = BenchConfig::new(
            BenchTransport::Local,
            ranks,
            OpKind::AllReduce,
            bytes,
            iters,
            Config::default(),
        );
        run_bench(&cfg).map(drop)
    };
    invalid(bench(2, 0, 5), "--sizes 0");
    let m = invalid(bench(2, 1 << 40, 5), "--sizes 1T");
    assert!(m.contains("GiB"), "{m}");
    invalid(bench(2, usize::MAX, 5), "usize::MAX bytes");
    invalid(bench(0, 1024, 5), "0 ranks");
    invalid(bench(usize::MAX, 1024, 5), "usize::MAX ranks");
    invalid(bench(2, 1024, 0), "0 iterations");
    assert!(BenchConfig::new(
        BenchTransport::Local,
        2,
        OpKind::AllReduce,
        (MAX_BENCH_BYTES / 2) as usize,
        1,
        Config::default()
    )
    .validate()
    .is_ok());
}
