//! Every collective × dtype × reduce op × size × world size on the local transport against a
//! serial reference.

use collectives::{
    bf16, run_local, run_local_with, AllReduceAlgorithm, BroadcastAlgorithm, Communicator, Config,
    Element, ReduceOp,
};
use std::time::Duration;

use crate::with_timeout;

/// Builds test values of each dtype from small integers (so float sums and products are exact
/// whatever the reduction order).
pub(crate) trait Small: Element {
    /// Largest factor in product inputs (products of up to 8 of them must stay exact).
    const MAX_FACTOR: i64 = 3;
    fn small(v: i64) -> Self;
}
macro_rules! small {
    ($($t:ty),*) => {$(
        impl Small for $t {
            fn small(v: i64) -> Self {
                v as $t
            }
        }
    )*};
}
small!(f32, f64, i32, i64, u8);

/// bf16 has 8 significant bits: sums of up to 8 values below 17 are exact, products of powers
/// of two too.
impl Small for bf16 {
    const MAX_FACTOR: i64 = 2;
    fn small(v: i64) -> Self {
        bf16::from_f32(v as f32)
    }
}
/// Input of `rank` for reduce op `op`: small values; factors in {1, 2, 3} for products.
pub(crate) fn input<T: Small>(rank: usize, len: usize, op: ReduceOp, salt: usize) -> Vec<T> {
    (0..len)
        .map(|i| {
            let h = (rank * 7919 + i * 104_729 + salt * 31) % 97;
            let v = match op {
                ReduceOp::Prod => (h as i64 % T::MAX_FACTOR) + 1,
                _ => (h % 17) as i64,
            };
            T::small(v)
        })
        .collect()
}

fn reference<T: Small>(n: usize, len: usize, op: ReduceOp, salt: usize) -> Vec<T> {
    let mut acc = input::<T>(0, len, op, salt);
    for r in 1..n {
        for (a, b) in acc.iter_mut().zip(input::<T>(r, len, op, salt)) {
            *a = T::combine(op, *a, b);
        }
    }
    acc
}

/// Runs every collective once at `len` elements on `comm`, checking against the reference.
pub(crate) fn check_all<T: Small>(comm: &Communicator, len: usize) {
    let (n, me) = (comm.world_size(), comm.rank());
    let ctx = |what: &str, op: ReduceOp| {
        format!("{what} {} n={n} len={len} op={op:?} rank {me}", T::DTYPE)
    };
    for (salt, op) in ReduceOp::ALL.into_iter().enumerate() {
        let want = reference::<T>(n, len, op, salt);
        for algo in [
            AllReduceAlgorithm::Auto,
            AllReduceAlgorithm::Ring,
            AllReduceAlgorithm::HalvingDoubling,
            AllReduceAlgorithm::RecursiveDoubling,
            AllReduceAlgorithm::SharedMemory,
        ] {
            let got = comm
                .iall_reduce_with(input::<T>(me, len, op, salt), op, algo)
                .unwrap()
                .wait()
                .unwrap();
            assert_eq!(got, want, "{} {algo:?}", ctx("all-reduce", op));
        }
        let root = (salt + 1) % n;
        let got = comm
            .reduce(input::<T>(me, len, op, salt), op, root)
            .unwrap();
        assert_eq!(
            got,
            if me == root { want.clone() } else { Vec::new() },
            "{}",
            ctx("reduce", op)
        );
        let want_rs = reference::<T>(n, len * n, op, salt);
        let got = comm
            .reduce_scatter(input::<T>(me, len * n, op, salt), op)
            .unwrap();
        assert_eq!(
            got,
            want_rs[me * len..(me + 1) * len],
            "{}",
            ctx("reduce-scatter", op)
        );
    }
    let op = ReduceOp::Sum;
    let got = comm.all_gather(input::<T>(me, len, op, 9)).unwrap();
    let want: Vec<T> = (0..n).flat_map(|r| input::<T>(r, len, op, 9)).collect();
    assert_eq!(got, want, "{}", ctx("all-gather", op));
    for (root, algo) in [
        (0, BroadcastAlgorithm::Auto),
        (n - 1, BroadcastAlgorithm::Binomial),
        (n / 2, BroadcastAlgorithm::Pipelined),
    ] {
        let data = if me == root {
            input::<T>(root, len, op, 5)
        } else {
            vec![T::ZERO; len]
        };
        assert_eq!(
            comm.ibroadcast_with(data, root, algo)
                .unwrap()
                .wait()
                .unwrap(),
            input::<T>(root, len, op, 5),
            "{} {algo:?} root {root}",
            ctx("broadcast", op)
        );
    }
    let got = comm.all_to_all(input::<T>(me, len * n, op, 3)).unwrap();
    let want: Vec<T> = (0..n)
        .flat_map(|r| input::<T>(r, len * n, op, 3)[me * len..(me + 1) * len].to_vec())
        .collect();
    assert_eq!(got, want, "{}", ctx("all-to-all", op));
    comm.barrier().unwrap();
    if n > 1 {
        let h = comm
            .isend(input::<T>(me, len, op, 1), (me + 1) % n)
            .unwrap();
        let got = comm.recv::<T>((me + n - 1) % n, len).unwrap();
        h.wait().unwrap();
        assert_eq!(
            got,
            input::<T>((me + n - 1) % n, len, op, 1),
            "{}",
            ctx("send/recv", op)
        );
    }
}

fn sweep<T: Small>(sizes: &[usize]) {
    for n in [1, 2, 3, 4, 8] {
        let sizes = sizes.to_vec();
        run_local(n, move |comm| {
            for &len in &sizes {
                check_all::<T>(&comm, len);
            }
        })
        .unwrap();
    }
}

/// 0, 1 and primes that no world size divides.
const SMALL_SIZES: [usize; 5] = [0, 1, 7, 13, 1009];

/// One test per dtype: every op × size × world size.
macro_rules! sweep_tests {
    ($($name:ident: $t:ty),*) => {$(
        #[test]
        fn $name() {
            with_timeout(Duration::from_secs(60), || sweep::<$t>(&SMALL_SIZES));
        }
    )*};
}
sweep_tests!(
    every_op_dtype_size_world_f32: f32,
    every_op_dtype_size_world_f64: f64,
    every_op_dtype_size_world_i32: i32,
    every_op_dtype_size_world_i64: i64,
    every_op_dtype_size_world_u8: u8,
    every_op_dtype_size_world_bf16: bf16
);

/// The recursive algorithms of power-of-two worlds (halving-doubling all-reduce, recursive-
/// halving reduce-scatter, recursive-doubling all-gather): forced on every size on the local
/// transport (`halving_doubling_bytes`), and as `Auto` runs them over TCP on 4 ranks (below
/// 4 MiB), every collective against the serial reference.
#[test]
fn recursive_algorithms_on_power_of_two_worlds() {
    with_timeout(Duration::from_secs(120), || {
        let forced = Config {
            halving_doubling_bytes: Some(usize::MAX),
            ..Config::default()
        };
        for n in [2, 3, 4, 8] {
            for r in run_local_with(&forced, n, |comm| {
                for len in [0, 1, 7, 1009, 20_000] {
                    check_all::<f32>(&comm, len);
                    check_all::<i64>(&comm, len);
                }
            }) {
                r.unwrap();
            }
        }
        for r in collectives::tcp::run_tcp_local(&Config::default(), 4, |comm| {
            for len in [13, 20_000] {
                check_all::<f32>(&comm, len);
            }
        }) {
            r.unwrap();
        }
    });
}

/// The algorithm `Auto` picks, as each collective's `OpStats` report it: the recursive ones on
/// 4 TCP ranks below 4 MiB, the ring on 3 TCP ranks, at 4 MiB, and on the local transport's
/// 4 ranks (which take shared memory from 4 MiB).
#[test]
fn auto_picks_the_recursive_algorithms_on_power_of_two_tcp_worlds() {
    with_timeout(Duration::from_secs(120), || {
        let picks = |comm: &Communicator, floats: usize| {
            let n = comm.world_size();
            let f = |v: Vec<f32>| {
                comm.iall_reduce(v, ReduceOp::Sum)
                    .unwrap()
                    .wait_with_stats()
            };
            let (r, ar) = f(vec![1.0; floats]);
            r.unwrap();
            let (r, rs) = comm
                .ireduce_scatter(vec![1.0f32; floats / n * n], ReduceOp::Sum)
                .unwrap()
                .wait_with_stats();
            r.unwrap();
            let (r, ag) = comm
                .iall_gather(vec![1.0f32; floats / n])
                .unwrap()
                .wait_with_stats();
            r.unwrap();
            [ar.algorithm, rs.algorithm, ag.algorithm]
        };
        let recursive = [
            "halving-doubling",
            "recursive-halving",
            "recursive-doubling",
        ];
        let ring = ["ring"; 3];
        let tcp = |n: usize, floats: usize| {
            collectives::tcp::run_tcp_local(&Config::default(), n, move |comm| picks(&comm, floats))
                .into_iter()
                .map(|r| r.unwrap())
                .collect::<Vec<_>>()
        };
        assert!(tcp(4, 256 << 10).iter().all(|p| *p == recursive));
        assert!(tcp(4, 1 << 20).iter().all(|p| *p == ring), "4 MiB");
        assert!(tcp(3, 256 << 10).iter().all(|p| *p == ring), "3 ranks");
        for p in run_local_with(&Config::default(), 4, |comm| picks(&comm, 256 << 10)) {
            assert_eq!(p.unwrap(), ring, "local");
        }
    });
}

/// Pipelined broadcast in many pieces (small piece size) at odd lengths, every root.
#[test]
fn pipelined_broadcast_many_pieces() {
    with_timeout(Duration::from_secs(60), || {
        let cfg = Config {
            pipeline_chunk_bytes: 1000,
            pipeline_threshold_bytes: 4000,
            ..Config::default()
        };
        for n in [2, 3, 5, 8] {
            for r in run_local_with(&cfg, n, |comm| {
                for root in 0..n {
                    for len in [999, 1 << 14, 100_003] {
                        let want: Vec<i32> = (0..len as i32).map(|i| i * 7 - root as i32).collect();
                        let data = if comm.rank() == root {
                            want.clone()
                        } else {
                            vec![0; len]
                        };
                        let (got, stats) = comm.ibroadcast(data, root).unwrap().wait_with_stats();
                        assert_eq!(got.unwrap(), want, "n={n} root={root} len={len}");
                        assert_eq!(stats.op, "broadcast");
                    }
                }
            }) {
                r.unwrap();
            }
        }
    });
}

/// bf16 sums are computed in f32 per element pair: random values in [-1, 1] all-reduced over
/// 4 ranks stay within bf16 rounding of the exact (f64) sum, for both algorithms.
#[test]
fn bf16_sum_accumulates_in_f32() {
    with_timeout(Duration::from_secs(30), || {
        let len = 4099;
        let value = |r: usize, i: usize| {
            let h = (r as u64 * 0x9e37_79b9 + i as u64 * 0x85eb_ca6b) % 2001;
            bf16::from_f32(h as f32 / 1000.0 - 1.0)
        };
        let n = 4;
        run_local(n, move |comm| {
            for algo in [
                AllReduceAlgorithm::Ring,
                AllReduceAlgorithm::HalvingDoubling,
                AllReduceAlgorithm::RecursiveDoubling,
                AllReduceAlgorithm::SharedMemory,
            ] {
                let mine = (0..len).map(|i| value(comm.rank(), i)).collect();
                let got = comm
                    .iall_reduce_with(mine, ReduceOp::Sum, algo)
                    .unwrap()
                    .wait()
                    .unwrap();
                for (i, g) in got.iter().enumerate() {
                    let terms: Vec<f64> = (0..n).map(|r| f64::from(value(r, i).to_f32())).collect();
                    let exact: f64 = terms.iter().sum();
                    let scale: f64 = terms.iter().map(|t| t.abs()).sum::<f64>().max(1e-3);
                    // n - 1 roundings to bf16, each at most half an ulp (2^-8 relative).
                    let tol = (n - 1) as f64 * scale * 2f64.powi(-8);
                    let err = (f64::from(g.to_f32()) - exact).abs();
                    assert!(err <= tol, "{algo:?} i={i}: {g} vs {exact} (tol {tol})");
                }
            }
        })
        .unwrap();
    });
}

/// 1 MiB all-reduces (both algorithms) for every dtype and world size.
#[test]
fn one_mebibyte_all_reduce() {
    fn run<T: Small>() {
        let len = (1 << 20) / std::mem::size_of::<T>();
        let inputs: Vec<Vec<T>> = (0..8)
            .map(|r| input::<T>(r, len, ReduceOp::Sum, 0))
            .collect();
        for n in [1, 2, 3, 4, 8] {
            let mut want = inputs[0].clone();
            for x in &inputs[1..n] {
                T::reduce_into(ReduceOp::Sum, &mut want, x);
            }
            let (inputs, want) = (&inputs, &want);
            run_local(n, move |comm| {
                for algo in [
                    AllReduceAlgorithm::Ring,
                    AllReduceAlgorithm::HalvingDoubling,
                    AllReduceAlgorithm::RecursiveDoubling,
                    AllReduceAlgorithm::SharedMemory,
                ] {
                    let data = inputs[comm.rank()].clone();
                    let got = comm
                        .iall_reduce_with(data, ReduceOp::Sum, algo)
                        .unwrap()
                        .wait()
                        .unwrap();
                    assert!(got == *want, "1 MiB {} {algo:?} n={n}", T::DTYPE);
                }
            })
            .unwrap();
        }
    }
    with_timeout(Duration::from_secs(60), || {
        run::<f32>();
        run::<f64>();
        run::<i32>();
        run::<i64>();
        run::<u8>();
        run::<bf16>();
    });
}
