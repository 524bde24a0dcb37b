//! MPI columns of `scripts/compare-collectives`: all-reduce busbw (nccl-tests definitions) of
//! pardis over the MPI transport next to the MPI library's own `MPI_Allreduce` (through rsmpi),
//! on the ranks of an MPI job. Rank 0 prints one line per size.
//!
//! `mpirun -n 4 target/release/examples/compare_collectives_mpi [MAX_BYTES] [IDLE_SPINS]
//! [MAX_IDLE_SLEEP_US] [RING_PIECE_BYTES] [CALLER_DRIVES]` (the next two tune the receiver
//! thread, see `MpiConfig`; the last two set `Config::ring_piece_bytes` and
//! `Config::caller_drives` (0 or 1)).
//! (build with `cargo build --release -p collectives-bench --features mpi --example compare_collectives_mpi`).
//!
//! `... compare_collectives_mpi --samples MIN_BYTES MAX_BYTES REPS [RD_BYTES PACKED_BYTES
//! [BUSY_POLL_US [RECEIVER_DEFERS [PIECE_LIMIT_BYTES [PIECE_BYTES [STAND_ASIDE_US]]]]]]` (they
//! set `Config::recursive_doubling_bytes`, `MpiConfig::packed_frame_bytes`, `Config::busy_poll`,
//! `MpiConfig::receiver_defers`, `Config::small_piece_limit_bytes`,
//! `Config::small_piece_bytes` and `MpiConfig::stand_aside_sleep`; `0 0 0 0 0` is the code
//! before issue 31): the protocol of
//! `benches/c/mpi_allreduce.c` (for `scripts/compare-collectives-mpi`): per size (`MIN_BYTES`, doubling up to `MAX_BYTES`)
//! `clamp(64 MiB / bytes, 20, 2000)` calls of warm-up, then REPS samples of (barrier; that many
//! calls), each sample the slowest rank's; rank 0 prints `bytes ranks median_us min_us max_us`
//! (µs per call) for pardis-mpi (lines `pardis ...`), then for `MPI_Allreduce` called through
//! rsmpi in this same process (`inproc ...`: MPI initialised with `MPI_THREAD_MULTIPLE`, next to
//! pardis's receiver thread).
//!
//! Every size's pardis all-reduce is also checked once against the serial reference sum (rank-
//! dependent integers, exact in f32): a wrong result ends the job with a message and exit code
//! 4 instead of a figure. Bad arguments (non-numbers, a size below 4 bytes, `MAX < MIN`, no
//! repetitions) end it with a message and exit code 2.

use std::time::Instant;

use collectives::bus_factor;
use collectives::mpi::rsmpi::collective::{CommunicatorCollectives as _, SystemOperation};
use collectives::mpi::rsmpi::topology::SimpleCommunicator;
use collectives::mpi::{MpiConfig, MpiJob};
use collectives::OpKind;
use collectives_bench::bench_communicator;

/// The slowest rank's time, seconds.
fn slowest(world: &SimpleCommunicator, secs: f64) -> f64 {
    let mut max = 0.0f64;
    world.all_reduce_into(&secs, &mut max, SystemOperation::max());
    max
}

/// Seconds per `MPI_Allreduce` of `bytes` bytes of f32 (sum) on this rank.
fn mpi_allreduce(world: &SimpleCommunicator, bytes: usize, iters: usize, warmup: usize) -> f64 {
    let send = vec![1.0f32; bytes / 4];
    let mut recv = vec![0.0f32; bytes / 4];
    for _ in 0..warmup {
        world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
    }
    world.barrier();
    let start = Instant::now();
    for _ in 0..iters {
        world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
    }
    start.elapsed().as_secs_f64()
}

/// Median, min and max of `samples` (sorted in place).
fn spread(samples: &mut [f64]) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        samples[samples.len() / 2],
        samples[0],
        samples[samples.len() - 1],
    )
}

/// Ends the job with `message` and exit code `code` (every rank that sees the problem
/// prints it; `mpirun` ends the others).
fn fail(code: i32, message: &str) -> ! {
    eprintln!("compare_collectives_mpi: {message}");
    std::process::exit(code)
}

/// The arguments as numbers, or a clear message and exit code 2.
fn numbers(args: impl Iterator<Item = String>) -> Vec<usize> {
    args.map(|s| {
        s.parse()
            .unwrap_or_else(|_| fail(2, &format!("argument {s:?} is not a non-negative integer")))
    })
    .collect()
}

/// Checks one pardis all-reduce of `bytes` bytes (f32 sum) against the serial reference:
/// rank `r` contributes `(r + 1) * (i % 7 + 1)` at element `i`, so every element of the sum is
/// an integer below 2^24, exact in f32. Exits with code 4 on a wrong result.
fn check_sum(comm: &collectives::Communicator, bytes: usize) -> collectives::Result<()> {
    let (n, me) = (comm.world_size(), comm.rank());
    let count = bytes / 4;
    let pattern = |i: usize| (i % 7 + 1) as f32;
    let mine: Vec<f32> = (0..count).map(|i| (me + 1) as f32 * pattern(i)).collect();
    let got = comm.all_reduce(mine, collectives::ReduceOp::Sum)?;
    let ranks_sum = (n * (n + 1) / 2) as f32;
    let wrong = (got.len() != count)
        .then_some(count)
        .or_else(|| (0..count).find(|&i| got[i] != ranks_sum * pattern(i)));
    if let Some(i) = wrong {
        fail(
            4,
            &format!(
                "rank {me}: pardis all-reduce of {bytes} bytes on {n} ranks differs from the \
                 reference sum at element {i} (got {:?}, want {})",
                got.get(i),
                ranks_sum * pattern(i)
            ),
        );
    }
    Ok(())
}

/// The `--samples MIN MAX REPS` mode (see the module docs).
fn samples_mode(args: &[usize]) -> collectives::Result<()> {
    let (head, knobs) = args.split_at(args.len().min(3));
    let &[min, max, reps] = head else {
        fail(
            2,
            "usage: --samples MIN_BYTES MAX_BYTES REPS [RD_BYTES PACKED_BYTES [BUSY_POLL_US \
             [RECEIVER_DEFERS [PIECE_LIMIT_BYTES [PIECE_BYTES [STAND_ASIDE_US]]]]]]",
        );
    };
    if min < 4 {
        fail(
            2,
            &format!(
                "MIN_BYTES is {min}: sizes start at 4 bytes (one f32; 0 has no time per byte)"
            ),
        );
    }
    if max < min {
        fail(2, &format!("MAX_BYTES {max} is below MIN_BYTES {min}"));
    }
    if reps == 0 {
        fail(2, "REPS is 0: at least one sample per size");
    }
    let mut cfg = MpiConfig::default();
    if let [rd, packed, rest @ ..] = knobs {
        cfg.engine.recursive_doubling_bytes = *rd;
        cfg.packed_frame_bytes = *packed;
        if let [spin_us, more @ ..] = rest {
            cfg.engine.busy_poll = std::time::Duration::from_micros(*spin_us as u64);
            if let [defers, more @ ..] = more {
                cfg.receiver_defers = *defers != 0;
                if let [limit, more @ ..] = more {
                    cfg.engine.small_piece_limit_bytes = *limit;
                    if let [piece, more @ ..] = more {
                        cfg.engine.small_piece_bytes = *piece;
                        if let [aside_us, ..] = more {
                            cfg.stand_aside_sleep =
                                std::time::Duration::from_micros(*aside_us as u64);
                        }
                    }
                }
            }
        }
    }
    let job = MpiJob::init(&cfg)?;
    let (comm, world) = (job.world(), job.mpi_world());
    let n = comm.world_size();
    let mut rows = Vec::new();
    let mut bytes = min;
    while bytes <= max {
        let iters = ((64 << 20) / bytes).clamp(20, 2000);
        bench_communicator(comm, OpKind::AllReduce, bytes, iters, 0)?;
        let mut ours = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = bench_communicator(comm, OpKind::AllReduce, bytes, iters, 0)?;
            ours.push(slowest(&world, t.as_secs_f64()) / iters as f64 * 1e6);
        }
        mpi_allreduce(&world, bytes, iters, 0);
        let mut theirs = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t = mpi_allreduce(&world, bytes, iters, 0);
            theirs.push(slowest(&world, t) / iters as f64 * 1e6);
        }
        check_sum(comm, bytes)?;
        rows.push((bytes, spread(&mut ours), spread(&mut theirs)));
        bytes = bytes.saturating_mul(2);
    }
    if comm.rank() == 0 {
        for (name, pick) in [("pardis", 0), ("inproc", 1)] {
            for (bytes, a, b) in &rows {
                let (med, lo, hi) = if pick == 0 { a } else { b };
                println!("{name} {bytes} {n} {med:.3} {lo:.3} {hi:.3}");
            }
        }
    }
    Ok(())
}

fn main() -> collectives::Result<()> {
    if std::env::args().nth(1).as_deref() == Some("--samples") {
        return samples_mode(&numbers(std::env::args().skip(2)));
    }
    let args = numbers(std::env::args().skip(1));
    let max = args.first().copied().unwrap_or(256 << 20);
    if max < 1 << 10 {
        fail(
            2,
            &format!("MAX_BYTES is {max}: the sizes start at 1024 bytes"),
        );
    }
    let mut cfg = MpiConfig::default();
    if let Some(&spins) = args.get(1) {
        cfg.idle_spins = spins as u32;
    }
    if let Some(&us) = args.get(2) {
        cfg.max_idle_sleep = std::time::Duration::from_micros(us as u64);
    }
    if let Some(&piece) = args.get(3) {
        cfg.engine.ring_piece_bytes = piece;
    }
    if let Some(&drives) = args.get(4) {
        cfg.engine.caller_drives = drives != 0;
    }
    let job = MpiJob::init(&cfg)?;
    let (comm, world) = (job.world(), job.mpi_world());
    let n = comm.world_size();
    let factor = bus_factor(OpKind::AllReduce, n);
    if comm.rank() == 0 {
        println!(
            "{:>10} {:>5} {:>12} {:>12} {:>9}",
            "bytes", "ranks", "pardis-mpi", "MPI_Allreduce", "pardis/mpi"
        );
    }
    let mut bytes = 1 << 10;
    while bytes <= max {
        let iters = ((256 << 20) / bytes).clamp(3, 1000);
        let warmup = (iters / 10).max(1);
        let ours = bench_communicator(comm, OpKind::AllReduce, bytes, iters, warmup)?;
        let ours = slowest(&world, ours.as_secs_f64()) / iters as f64;
        let theirs = slowest(&world, mpi_allreduce(&world, bytes, iters, warmup)) / iters as f64;
        check_sum(comm, bytes)?;
        let busbw = |secs: f64| bytes as f64 / secs.max(1e-12) / 1e9 * factor;
        if comm.rank() == 0 {
            println!(
                "{bytes:>10} {n:>5} {:>12.3} {:>12.3} {:>8.0}%",
                busbw(ours),
                busbw(theirs),
                100.0 * theirs / ours
            );
        }
        bytes = bytes.saturating_mul(4);
    }
    Ok(())
}
