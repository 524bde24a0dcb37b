//! TCP transport: ranks as threads over loopback, ranks as separate processes (this test
//! binary re-spawned), a killed process, and rendezvous failures.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use collectives::tcp::{self, TcpConfig};
use collectives::{AllReduceAlgorithm, CollectiveError, Config, ReduceOp};

use crate::correctness::check_all;
use crate::with_timeout;

#[test]
fn collectives_over_loopback_threads() {
    with_timeout(Duration::from_secs(60), || {
        for n in [2, 3, 4] {
            let out = tcp::run_tcp_local(&Config::default(), n, |comm| {
                for len in [0, 1, 13, 1009] {
                    check_all::<f32>(&comm, len);
                }
                check_all::<i64>(&comm, 7);
                let big = vec![1u8; 1 << 20];
                let got = comm
                    .iall_reduce_with(big, ReduceOp::Sum, AllReduceAlgorithm::Ring)
                    .unwrap()
                    .wait()
                    .unwrap();
                assert!(got.iter().all(|&x| x as usize == n));
            });
            for o in out {
                o.unwrap();
            }
        }
    });
}

#[test]
fn rendezvous_failure_is_a_clear_error() {
    with_timeout(Duration::from_secs(20), || {
        let port = free_port();
        let cfg = TcpConfig {
            rendezvous_timeout: Duration::from_millis(300),
            ..TcpConfig::new(1, 2, format!("127.0.0.1:{port}"))
        };
        let e = tcp::join(&cfg).unwrap_err();
        assert!(
            matches!(&e, CollectiveError::Rendezvous(m) if m.contains("could not reach rank 0")),
            "{e}"
        );
        let e =
            TcpConfig::from_lookup(|k| (k == tcp::ENV_RANK).then(|| "0".to_string())).unwrap_err();
        assert!(e.to_string().contains(tcp::ENV_WORLD_SIZE), "{e}");
        let bad = |k: &str| {
            Some(
                if k == tcp::ENV_RANK {
                    "5"
                } else if k == tcp::ENV_WORLD_SIZE {
                    "2"
                } else {
                    "x:1"
                }
                .to_string(),
            )
        };
        assert!(TcpConfig::from_lookup(bad).is_err());
    });
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

const SCENARIO: &str = "PARDIS_TEST_SCENARIO";

/// Spawns `n` copies of this test binary running [`tcp_child_process`] as ranks.
fn spawn_ranks(n: usize, scenario: &str) -> Vec<Child> {
    let exe = std::env::current_exe().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    (0..n)
        .map(|r| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "tcp::tcp_child_process",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(SCENARIO, scenario)
                .env(tcp::ENV_RANK, r.to_string())
                .env(tcp::ENV_WORLD_SIZE, n.to_string())
                .env(tcp::ENV_MASTER_ADDR, &addr)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// Forwards the `RANK ...` lines of every child to one channel.
fn collect_lines(children: &mut [Child]) -> mpsc::Receiver<(usize, String)> {
    let (tx, rx) = mpsc::channel();
    for (r, c) in children.iter_mut().enumerate() {
        let out = c.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                // libtest prints the test name in front on the same line.
                if let Some(i) = line.find("RANK ") {
                    let _ = tx.send((r, line[i..].to_string()));
                }
            }
        });
    }
    rx
}

/// Waits for `want` lines (or fails after `limit`), killing the children either way.
fn expect_lines(
    children: &mut [Child],
    rx: &mpsc::Receiver<(usize, String)>,
    want: usize,
    limit: Duration,
) -> Vec<(usize, String)> {
    let end = Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < want {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(l) => got.push(l),
            Err(_) => break,
        }
    }
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert_eq!(got.len(), want, "children reported only {got:?}");
    got
}

#[test]
fn collectives_across_processes() {
    let mut children = spawn_ranks(3, "collectives");
    let rx = collect_lines(&mut children);
    let lines = expect_lines(&mut children, &rx, 3, Duration::from_secs(40));
    assert!(lines.iter().all(|(_, l)| l.ends_with("OK")), "{lines:?}");
}

#[test]
fn killed_process_gives_peer_lost() {
    let mut children = spawn_ranks(3, "kill");
    let rx = collect_lines(&mut children);
    let end = Instant::now() + Duration::from_secs(30);
    // Wait until rank 2 has passed the barrier, then kill it mid-job.
    loop {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok((2, l)) if l.contains("READY") => break,
            Ok(_) => {}
            Err(_) => {
                children.iter_mut().for_each(|c| drop(c.kill()));
                panic!("rank 2 never became ready");
            }
        }
    }
    children[2].kill().unwrap();
    let lines = expect_lines(&mut children, &rx, 2, Duration::from_secs(20));
    for (r, l) in &lines {
        assert!(*r < 2 && l.contains("PEERLOST 2"), "{lines:?}");
    }
}

/// Body of the child processes; does nothing when run as an ordinary (ignored) test.
#[test]
#[ignore = "run by the multi-process tests as a child"]
fn tcp_child_process() {
    let Ok(scenario) = std::env::var(SCENARIO) else {
        return;
    };
    let comm = tcp::from_env().unwrap();
    let me = comm.rank();
    match scenario.as_str() {
        "collectives" => {
            for len in [0, 1, 13, 1009] {
                check_all::<f64>(&comm, len);
            }
            check_all::<u8>(&comm, 5);
            let got = comm.all_reduce(vec![2i32; 1 << 18], ReduceOp::Sum).unwrap();
            assert!(got.iter().all(|&x| x == 2 * comm.world_size() as i32));
            println!("RANK {me} OK");
        }
        "kill" => {
            comm.barrier().unwrap();
            if me == 2 {
                println!("RANK {me} READY");
                std::thread::sleep(Duration::from_secs(60));
            }
            match comm.all_reduce(vec![1.0f32; 4096], ReduceOp::Sum) {
                Err(CollectiveError::PeerLost { rank, .. }) => {
                    println!("RANK {me} PEERLOST {rank}")
                }
                other => println!("RANK {me} UNEXPECTED {other:?}"),
            }
        }
        s => panic!("unknown scenario {s}"),
    }
}
