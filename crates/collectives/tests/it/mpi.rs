//! MPI transport (feature `mpi`): the test relaunches this test binary under
//! `mpirun --oversubscribe -n 2/3/4` and checks every rank's report. Each rank runs the main
//! collectives against the serial reference, compares pardis's all-reduce with MPI's own
//! `MPI_Allreduce`, runs the chaos-order workload through the preemptive engine, and finally
//! aborts the last rank, which every other rank must see as `PeerLost`.
//!
//! Run by hand: `mpirun --oversubscribe -n 4 <test binary> --exact mpi::mpi_child --ignored
//! --nocapture` with `PARDIS_TEST_MPI=1` in the environment (`-x PARDIS_TEST_MPI=1`).

use std::time::{Duration, Instant};

use collectives::mpi::rsmpi::collective::{CommunicatorCollectives as _, SystemOperation};
use collectives::mpi::{MpiConfig, MpiJob};
use collectives::{bf16, AllReduceAlgorithm, BroadcastAlgorithm, CollectiveError, ReduceOp};
use collectives_bench::chaos::{chaos_rank, ChaosConfig};
use collectives_bench::mpirun::{inside_mpi_job, run_test_under_mpirun};

use crate::correctness::check_all;

/// Set (through `mpirun -x`) in the ranks started by [`collectives_over_mpi`].
const CHILD: &str = "PARDIS_TEST_MPI";

/// Bounds of the MPI settings are checked before MPI is initialised (a typed error; nothing
/// starts), so this runs in the ordinary test process.
#[test]
fn mpi_config_bounds_are_typed_errors() {
    use collectives::mpi::{MAX_IDLE_SLEEP, MIN_IDLE_SLEEP};
    for (what, cfg) in [
        (
            "max_idle_sleep",
            MpiConfig {
                max_idle_sleep: Duration::ZERO,
                ..MpiConfig::default()
            },
        ),
        (
            "max_idle_sleep",
            MpiConfig {
                max_idle_sleep: MIN_IDLE_SLEEP - Duration::from_nanos(1),
                ..MpiConfig::default()
            },
        ),
        (
            "max_idle_sleep",
            MpiConfig {
                max_idle_sleep: MAX_IDLE_SLEEP + Duration::from_nanos(1),
                ..MpiConfig::default()
            },
        ),
        (
            "stand_aside_sleep",
            MpiConfig {
                stand_aside_sleep: Duration::ZERO,
                ..MpiConfig::default()
            },
        ),
        (
            "stand_aside_sleep",
            MpiConfig {
                stand_aside_sleep: MAX_IDLE_SLEEP + Duration::from_nanos(1),
                ..MpiConfig::default()
            },
        ),
        (
            "packed_frame_bytes",
            MpiConfig {
                packed_frame_bytes: collectives::mpi::MAX_PACKED_FRAME_BYTES + 1,
                ..MpiConfig::default()
            },
        ),
        ("busy_poll", {
            let mut c = MpiConfig::default();
            c.engine.busy_poll = Duration::from_secs(1);
            c
        }),
    ] {
        match MpiJob::init(&cfg) {
            Err(CollectiveError::InvalidInput(m)) => assert!(m.contains(what), "{m}"),
            Err(other) => panic!("{what}: expected InvalidInput, got {other}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    }
    for ok in [MIN_IDLE_SLEEP, MAX_IDLE_SLEEP] {
        let cfg = MpiConfig {
            max_idle_sleep: ok,
            stand_aside_sleep: ok,
            ..MpiConfig::default()
        };
        assert!(cfg.validate().is_ok());
    }
}

#[test]
fn collectives_over_mpi() {
    if inside_mpi_job() {
        println!("already inside an MPI job: run mpi::mpi_child instead");
        return;
    }
    for n in [2, 3, 4] {
        let start = Instant::now();
        let lines = run_mpi(n, Duration::from_secs(120));
        let has = |l: String| lines.contains(&l);
        let ok = (0..n).all(|r| has(format!("RANK {r} OK")))
            && (0..n - 1).all(|r| has(format!("RANK {r} PEERLOST")));
        assert!(ok, "{n} MPI ranks reported {lines:#?}");
        println!("{n} MPI ranks: {:.1} s", start.elapsed().as_secs_f64());
    }
}

/// Runs `mpi_child` on `n` MPI ranks; returns the `RANK ...` lines (kills the job after `limit`).
fn run_mpi(n: usize, limit: Duration) -> Vec<String> {
    run_test_under_mpirun(n, "mpi::mpi_child", CHILD, limit)
}

/// Body of each MPI rank; does nothing when run as an ordinary (ignored) test.
#[test]
#[ignore = "run under mpirun by collectives_over_mpi"]
fn mpi_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let job = MpiJob::init(&MpiConfig::default()).unwrap();
    let comm = job.world();
    let (n, me) = (comm.world_size(), comm.rank());
    // 2049, 3001 and 5000 f32 (8, 12 and 20 KiB): halving-doubling's halves go in eager
    // pieces (`Config::small_piece_bytes`), of two, three and five.
    for len in [0, 1, 13, 1009, 2049, 3001, 5000] {
        check_all::<f32>(comm, len);
    }
    check_all::<f64>(comm, 7);
    check_all::<i64>(comm, 5);
    check_all::<u8>(comm, 3);
    check_all::<bf16>(comm, 11);

    // A blocking call runs its collective inline on an idle rank for at most the busy-poll
    // window, then hands it to the engine: a rank that starts late makes the others hand over
    // (the result is the same either way), and two threads calling at once (the second finds
    // the queue taken or a submission pending) both finish. Every path is counted once.
    let other = comm.split(0, me as i64).unwrap();
    let before = comm.engine_stats();
    // Collectives that every rank calls at once: on a rank whose peers are running, some
    // finish inline (checked below when there are no more ranks than cores).
    const ON_TIME: u64 = 20;
    for _ in 0..ON_TIME {
        let sum = comm.all_reduce(vec![1i64; 16], ReduceOp::Sum).unwrap();
        assert!(sum.iter().all(|&x| x == n as i64), "rank {me}: {sum:?}");
    }
    // Every rank agrees on whether each of its ranks saw what it should (a collective, so
    // that retries stay in step): on a loaded machine a single try may miss the timing.
    let all_agree = |ok: bool| comm.all_reduce(vec![i64::from(ok)], ReduceOp::Min).unwrap()[0] == 1;
    let mut agreements = 0;
    let sum = comm
        .all_reduce(vec![me as f32 + 1.0; 64], ReduceOp::Sum)
        .unwrap();
    let want = (1..=n).sum::<usize>() as f32;
    assert!(
        sum.iter().all(|&x| x == want),
        "rank {me}: inline all-reduce gave {:?}",
        &sum[..4]
    );
    // Rank 0 comes 5 ms late: the others' 20 µs window passes and they hand over. (With more
    // ranks than cores a rank may itself come late and find rank 0's frame waiting: no
    // hand-over is expected then.)
    let cores = online_cpus();
    let mut late_tries = 0;
    loop {
        late_tries += 1;
        let handed = comm.engine_stats().handed_over;
        if me == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let sum = comm
            .all_reduce(vec![me as f32 + 1.0; 64], ReduceOp::Sum)
            .unwrap();
        assert!(
            sum.iter().all(|&x| x == want),
            "rank {me}: all-reduce with a late rank gave {:?}",
            &sum[..4]
        );
        agreements += 1;
        if all_agree(me == 0 || n > cores || comm.engine_stats().handed_over > handed) {
            break;
        }
        assert!(
            late_tries < 20,
            "rank {me}: no hand-over in 20 waits for a late rank"
        );
    }
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            (0..200)
                .map(|_| other.all_reduce(vec![1i64; 8], ReduceOp::Sum).unwrap()[0])
                .collect::<Vec<_>>()
        });
        for _ in 0..200 {
            assert_eq!(
                comm.all_reduce(vec![2i64; 8], ReduceOp::Sum).unwrap()[0],
                2 * n as i64
            );
        }
        assert!(t.join().unwrap().iter().all(|&x| x == n as i64));
    });
    let after = comm.engine_stats();
    assert_eq!(
        (
            after.submitted - before.submitted,
            after.completed - before.completed
        ),
        (
            401 + late_tries + agreements + ON_TIME,
            401 + late_tries + agreements + ON_TIME
        ),
        "rank {me}: inline and handed-over collectives counted once each"
    );
    // With more ranks than cores a rank is always descheduled somewhere, and a rank may wait
    // past every busy-poll window: then handing over is right, and nothing need finish inline.
    // Otherwise some blocking collectives finish inline, with the awaited frame taken on
    // arrival from the landing buffer (the sums above are checked either way); on a loaded
    // machine it may take more of them (each agreement is one more).
    if n <= cores {
        let seen = || {
            let s = comm.engine_stats();
            s.inline > before.inline && s.taken_on_arrival > before.taken_on_arrival
        };
        let mut tries = 0;
        while !all_agree(seen()) {
            tries += 1;
            assert!(
                tries < 1000,
                "rank {me}: no blocking collective finished inline with its frame taken on \
                 arrival in 1000 tries ({n} ranks, {cores} cores)"
            );
        }
    }

    // Recursive doubling sends the whole buffer in one frame: the largest payload that goes
    // out packed (it must fit the receivers' landing buffer, header included: one byte below
    // `MAX_PACKED_FRAME_BYTES`) and the smallest that goes as header and payload.
    let packed_max = collectives::mpi::MAX_PACKED_FRAME_BYTES - 1;
    for len in [packed_max, packed_max + 1] {
        let mine: Vec<u8> = (0..len).map(|i| (i % 7 + me) as u8).collect();
        let ours = comm
            .iall_reduce_with(mine, ReduceOp::Sum, AllReduceAlgorithm::RecursiveDoubling)
            .unwrap()
            .wait()
            .unwrap();
        let want = |i: usize| (0..n).map(|r| (i % 7 + r) as u8).sum::<u8>();
        assert!(
            ours.iter().enumerate().all(|(i, &x)| x == want(i)),
            "rank {me}: recursive doubling of {len} bytes differs from the reference"
        );
    }

    // Large messages (rendezvous protocol), both all-reduce algorithms, against MPI_Allreduce.
    let len = (1 << 20) + 3;
    let mine: Vec<i64> = (0..len as i64).map(|i| i % 1000 + me as i64).collect();
    let mut theirs = vec![0i64; len];
    job.mpi_world()
        .all_reduce_into(&mine[..], &mut theirs[..], SystemOperation::sum());
    for algo in [
        AllReduceAlgorithm::Ring,
        AllReduceAlgorithm::HalvingDoubling,
        AllReduceAlgorithm::RecursiveDoubling,
    ] {
        let (ours, stats) = comm
            .iall_reduce_with(mine.clone(), ReduceOp::Sum, algo)
            .unwrap()
            .wait_with_stats();
        assert!(
            ours.unwrap() == theirs,
            "rank {me}: {algo:?} differs from MPI_Allreduce"
        );
        // Over MPI every frame goes through the mailbox (direct receive measured no faster
        // there): no slot is posted, so none is filled.
        assert_eq!(
            stats.direct_receives, 0,
            "rank {me}: {algo:?} received directly over MPI"
        );
    }
    let want: Vec<f32> = (0..len).map(|i| i as f32).collect();
    let data = if me == n - 1 {
        want.clone()
    } else {
        vec![0.0; len]
    };
    let got = comm
        .ibroadcast_with(data, n - 1, BroadcastAlgorithm::Pipelined)
        .unwrap()
        .wait()
        .unwrap();
    assert!(got == want, "rank {me}: pipelined broadcast");

    // The chaos-order workload through the preemptive engine over MPI.
    for seed in 0..4 {
        let cfg = ChaosConfig {
            collectives: 6,
            elements: 4096,
            seed,
            ..ChaosConfig::default()
        };
        let r = chaos_rank(&cfg, comm).unwrap();
        assert!(
            r.first_error.is_none(),
            "rank {me} seed {seed}: {:?}",
            r.first_error
        );
        assert_eq!(r.correct, 6, "rank {me} seed {seed}");
    }
    // Disagreeing roots (rank 0 names root 1, the others root 0): Mismatch on every rank,
    // never Ok with a wrong result (the agreement rounds woven into rooted collectives).
    let root = usize::from(me == 0);
    match comm.reduce(vec![1.0f64; 64], ReduceOp::Sum, root) {
        Err(CollectiveError::Mismatch { detail, .. }) if detail.contains("root") => {}
        other => panic!("rank {me}: reduce with disagreeing roots gave {other:?}"),
    }
    // A root out of range on rank 0 only: InvalidInput there, a root Mismatch on the others,
    // promptly (the refused collective's notice) rather than after op_timeout (60 s).
    let start = Instant::now();
    let root = if me == 0 { n } else { 0 };
    match (me, comm.reduce(vec![1.0f64; 64], ReduceOp::Sum, root)) {
        (0, Err(CollectiveError::InvalidInput(m))) if m.contains("out of range") => {}
        (1.., Err(CollectiveError::Mismatch { detail, .. })) if detail.contains("root") => {}
        (_, other) => panic!("rank {me}: reduce with root {root} gave {other:?}"),
    }
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "rank {me}: out-of-range root took {:?}",
        start.elapsed()
    );
    comm.barrier().unwrap();

    // Sends that finished are released (buffer back to the pool, request freed) once the rank
    // goes idle, not only when the next operation's sends reach the send path's batch: a few
    // small sends, then nothing.
    if me == 0 {
        let sends: Vec<_> = (1..n)
            .flat_map(|dst| (0..3).map(move |i| (dst, i)))
            .map(|(dst, i)| comm.isend(vec![i as u8; 100], dst).unwrap())
            .collect();
        for h in sends {
            h.wait().unwrap();
        }
    } else {
        for i in 0..3u8 {
            assert_eq!(comm.recv::<u8>(0, 100).unwrap(), vec![i; 100]);
        }
    }
    let start = Instant::now();
    while comm.engine_stats().pending_sends > 0 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        comm.engine_stats().pending_sends,
        0,
        "rank {me}: sends never reaped"
    );
    comm.barrier().unwrap();
    println!("RANK {me} OK");

    // The last rank aborts: the others get PeerLost (goodbye messages), not a hang — with
    // payloads sent straight from the collective's buffer (1 MiB) and with staged ones. The
    // lost rank named is the aborted one or, from 3 ranks on, possibly a survivor that already
    // failed and left while this rank was still sending to it (a ring neighbour of the aborted
    // rank fails at once and shuts down).
    if me == n - 1 {
        comm.abort("aborted on purpose");
    } else {
        for len in [1 << 18, 4096] {
            match comm.all_reduce(vec![1.0f32; len], ReduceOp::Sum) {
                Err(CollectiveError::PeerLost { rank, .. }) if rank != me => {}
                other => panic!("rank {me}, {len} floats: expected PeerLost, got {other:?}"),
            }
        }
        println!("RANK {me} PEERLOST");
    }
}

/// CPUs online on this machine (`/sys/devices/system/cpu/online`, e.g. `0-1` or `0-3,6`), not
/// this process's affinity: `mpirun` binds each rank to one core, where
/// `available_parallelism` says 1 (the fallback where the file cannot be read).
fn online_cpus() -> usize {
    let count = |list: &str| -> Option<usize> {
        list.trim()
            .split(',')
            .map(|part| match part.split_once('-') {
                Some((a, b)) => (b.parse::<usize>().ok()? + 1).checked_sub(a.parse().ok()?),
                None => part.parse::<usize>().ok().map(|_| 1),
            })
            .sum()
    };
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|l| count(&l))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |c| c.get()))
}
