//! TCP transport: ranks in separate processes (or hosts), one connection per pair of ranks.
//!
//! **Rendezvous.** Rank 0 listens on the master address. Every other rank binds its own
//! listener, connects to rank 0 and sends its rank, the world size and its listener's address;
//! rank 0 answers with the table of all addresses. Rank `i` then connects to every rank
//! `0 < j < i` and accepts from every `j > i`, so each pair shares exactly one connection
//! (the rendezvous connection doubles as the 0–`i` connection).
//!
//! **Per-collective flow control.** One reader thread per connection reads frames as soon as
//! they arrive and sorts them into per-collective mailboxes; it never stops reading because one
//! collective's data is unread, so a preempted collective cannot block the socket for the
//! others (a shared socket that blocks on unread data would bring the deadlock back). Memory is
//! bounded per collective by its schedule: a collective sends step `k + 1` to a peer only after
//! receiving step `k`, so at most one message per peer and collective is in flight.
//!
//! **Faults.** End of stream or an error on a connection marks that peer lost; collectives
//! waiting on it fail with [`PeerLost`](crate::CollectiveError::PeerLost) at once.
//!
//! **Configuration.** [`join`] takes an explicit [`TcpConfig`]; [`TcpConfig::from_lookup`] builds
//! one from any key-value source and is pure. [`from_env`] (also `collectives::from_env`) is
//! the one function of this crate that reads environment variables, and only when the
//! application calls it — the launch contract, like `MPI_Init` reading what `mpirun` set:
//!
//! | variable | meaning |
//! |---|---|
//! | `PARDIS_RANK` | this process's rank, `0..PARDIS_WORLD_SIZE` |
//! | `PARDIS_WORLD_SIZE` | number of ranks |
//! | `PARDIS_MASTER_ADDR` | `host:port` where rank 0 listens (e.g. `127.0.0.1:29500`) |
//!
//! Engine settings are not read from the environment: `from_env` uses [`Config::default`];
//! use `join(&TcpConfig { engine, ..TcpConfig::from_lookup(..)? })` for others.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Transport;
use crate::engine::Engine;
use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::Inbox;
use crate::{CollectiveError, Communicator, Config, Result};

/// Environment variable with this process's rank.
pub const ENV_RANK: &str = "PARDIS_RANK";
/// Environment variable with the number of ranks.
pub const ENV_WORLD_SIZE: &str = "PARDIS_WORLD_SIZE";
/// Environment variable with rank 0's `host:port`.
pub const ENV_MASTER_ADDR: &str = "PARDIS_MASTER_ADDR";
/// Default [`TcpConfig::rendezvous_timeout`]: 30 s.
pub const DEFAULT_RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(30);

const MAGIC: u32 = 0x5044_5331; // "PDS1"

/// How to join a TCP job.
#[derive(Debug, Clone)]
pub struct TcpConfig {
    /// This process's rank.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
    /// `host:port` where rank 0 listens.
    pub master_addr: String,
    /// How long to keep trying to reach rank 0 and the other ranks. Default: 30 s.
    pub rendezvous_timeout: Duration,
    /// Engine settings.
    pub engine: Config,
}

impl TcpConfig {
    /// Settings for `rank` of `world_size` with rank 0 at `master_addr`, defaults otherwise.
    pub fn new(rank: usize, world_size: usize, master_addr: impl Into<String>) -> Self {
        Self {
            rank,
            world_size,
            master_addr: master_addr.into(),
            rendezvous_timeout: DEFAULT_RENDEZVOUS_TIMEOUT,
            engine: Config::default(),
        }
    }

    /// Reads [`ENV_RANK`], [`ENV_WORLD_SIZE`] and [`ENV_MASTER_ADDR`] through `lookup` (pure:
    /// pass `|k| std::env::var(k).ok()` to read the environment, or a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let get = |k: &str| {
            lookup(k).ok_or_else(|| CollectiveError::Rendezvous(format!("{k} is not set")))
        };
        let num = |k: &str| -> Result<usize> {
            get(k)?
                .trim()
                .parse()
                .map_err(|_| CollectiveError::Rendezvous(format!("{k} is not a number")))
        };
        let cfg = Self::new(num(ENV_RANK)?, num(ENV_WORLD_SIZE)?, get(ENV_MASTER_ADDR)?);
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(CollectiveError::Rendezvous(format!(
                "rank {} is out of range for world size {}",
                self.rank, self.world_size
            )));
        }
        Ok(())
    }
}

/// Joins the TCP job described by the environment variables [`ENV_RANK`],
/// [`ENV_WORLD_SIZE`] and [`ENV_MASTER_ADDR`], with the default engine [`Config`]. This is the
/// crate's only reader of the environment, and it reads only when called (see the
/// [module docs](self)); it blocks until all ranks have joined or
/// [`DEFAULT_RENDEZVOUS_TIMEOUT`] passed.
///
/// ```no_run
/// // Started as `PARDIS_RANK=r PARDIS_WORLD_SIZE=n PARDIS_MASTER_ADDR=host:29500 ./app`.
/// let comm = collectives::from_env()?;
/// let total = comm.all_reduce(vec![1i64], collectives::ReduceOp::Sum)?;
/// assert_eq!(total[0] as usize, comm.world_size());
/// # Ok::<(), collectives::CollectiveError>(())
/// ```
pub fn from_env() -> Result<Communicator> {
    join(&TcpConfig::from_lookup(|k| std::env::var(k).ok())?)
}

/// Joins a TCP job; returns the world communicator once all ranks are connected.
pub fn join(cfg: &TcpConfig) -> Result<Communicator> {
    cfg.validate()?;
    let listener =
        if cfg.rank == 0 {
            Some(TcpListener::bind(&cfg.master_addr).map_err(|e| {
                CollectiveError::io(format!("rank 0: binding {}", cfg.master_addr), e)
            })?)
        } else {
            None
        };
    join_with(cfg, listener)
}

/// Runs `f` on `n` ranks that are threads of this process but talk over loopback TCP (for
/// benchmarks and tests of the transport without spawning processes).
pub fn run_tcp_local<R, F>(config: &Config, n: usize, f: F) -> Vec<Result<R>>
where
    R: Send,
    F: Fn(Communicator) -> R + Send + Sync,
{
    let listener = match TcpListener::bind("127.0.0.1:0") {
        Ok(l) => l,
        Err(e) => {
            return (0..n)
                .map(|_| {
                    Err(CollectiveError::io(
                        "binding a loopback port",
                        std::io::Error::new(e.kind(), e.to_string()),
                    ))
                })
                .collect()
        }
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut listener = Some(listener);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..n)
            .map(|rank| {
                let cfg = TcpConfig {
                    engine: config.clone(),
                    ..TcpConfig::new(rank, n, addr.clone())
                };
                let l = if rank == 0 { listener.take() } else { None };
                let f = &f;
                s.spawn(move || join_with(&cfg, l).map(f))
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .map(|(rank, t)| {
                t.join().unwrap_or_else(|_| {
                    Err(CollectiveError::RankPanicked {
                        rank,
                        message: "panicked".into(),
                    })
                })
            })
            .collect()
    })
}

fn rdv(cfg: &TcpConfig, what: impl std::fmt::Display) -> CollectiveError {
    CollectiveError::Rendezvous(format!("rank {}: {what}", cfg.rank))
}

fn join_with(cfg: &TcpConfig, listener: Option<TcpListener>) -> Result<Communicator> {
    let deadline = Instant::now() + cfg.rendezvous_timeout;
    let (n, me) = (cfg.world_size, cfg.rank);
    let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    if me == 0 {
        let listener = listener.ok_or_else(|| rdv(cfg, "rank 0 needs a listener"))?;
        let mut table = vec![String::new(); n];
        table[0] = cfg.master_addr.clone();
        for _ in 1..n {
            let mut s = accept(&listener, deadline).map_err(|e| {
                rdv(
                    cfg,
                    format!("waiting for ranks at {}: {e}", cfg.master_addr),
                )
            })?;
            let (rank, size, addr) =
                read_hello(&mut s).map_err(|e| rdv(cfg, format!("bad hello: {e}")))?;
            if size != n || rank == 0 || rank >= n || streams[rank].is_some() {
                return Err(rdv(
                    cfg,
                    format!("peer claims rank {rank} of {size}, expected a new rank of {n}"),
                ));
            }
            table[rank] = addr;
            streams[rank] = Some(s);
        }
        for s in streams.iter_mut().flatten() {
            write_table(s, &table)
                .map_err(|e| rdv(cfg, format!("sending the address table: {e}")))?;
        }
    } else {
        let mut s0 = connect(&cfg.master_addr, deadline).map_err(|e| {
            rdv(
                cfg,
                format!("could not reach rank 0 at {}: {e}", cfg.master_addr),
            )
        })?;
        let ip = s0.local_addr().map_err(|e| rdv(cfg, e))?.ip();
        let own = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| rdv(cfg, format!("binding a listener: {e}")))?;
        let own_addr = own.local_addr().map_err(|e| rdv(cfg, e))?.to_string();
        write_hello(&mut s0, me, n, &own_addr)
            .map_err(|e| rdv(cfg, format!("hello to rank 0: {e}")))?;
        s0.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ))
        .ok();
        let table = read_table(&mut s0, n)
            .map_err(|e| rdv(cfg, format!("reading the address table: {e}")))?;
        streams[0] = Some(s0);
        for (j, addr) in table.iter().enumerate().take(me).skip(1) {
            let mut s = connect(addr, deadline)
                .map_err(|e| rdv(cfg, format!("connecting to rank {j} at {addr}: {e}")))?;
            write_hello(&mut s, me, n, "").map_err(|e| rdv(cfg, e))?;
            streams[j] = Some(s);
        }
        for _ in me + 1..n {
            let mut s = accept(&own, deadline)
                .map_err(|e| rdv(cfg, format!("waiting for higher ranks: {e}")))?;
            let (rank, _, _) =
                read_hello(&mut s).map_err(|e| rdv(cfg, format!("bad hello: {e}")))?;
            if rank <= me || rank >= n || streams[rank].is_some() {
                return Err(rdv(cfg, format!("unexpected connection from rank {rank}")));
            }
            streams[rank] = Some(s);
        }
    }
    let transport = TcpTransport::start(me, streams).map_err(|e| rdv(cfg, e))?;
    Ok(Communicator::world(Engine::start(
        Arc::new(transport),
        cfg.engine.clone(),
    )))
}

fn connect(addr: &str, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        let attempt = addr.to_socket_addrs().and_then(|mut a| {
            let a = a.next().ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address")
            })?;
            TcpStream::connect_timeout(&a, Duration::from_secs(1))
        });
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn accept(listener: &TcpListener, deadline: Instant) -> std::io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "rendezvous timed out",
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
}

fn write_hello(s: &mut TcpStream, rank: usize, size: usize, addr: &str) -> std::io::Result<()> {
    let mut b = Vec::new();
    b.extend_from_slice(&MAGIC.to_le_bytes());
    b.extend_from_slice(&(rank as u32).to_le_bytes());
    b.extend_from_slice(&(size as u32).to_le_bytes());
    write_str(&mut b, addr);
    s.write_all(&b)
}

fn read_hello(s: &mut TcpStream) -> std::io::Result<(usize, usize, String)> {
    if read_u32(s)? != MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not a pardis peer (bad magic)",
        ));
    }
    Ok((read_u32(s)? as usize, read_u32(s)? as usize, read_str(s)?))
}

fn write_table(s: &mut TcpStream, table: &[String]) -> std::io::Result<()> {
    let mut b = Vec::new();
    table.iter().for_each(|a| write_str(&mut b, a));
    s.write_all(&b)
}

fn read_table(s: &mut TcpStream, n: usize) -> std::io::Result<Vec<String>> {
    (0..n).map(|_| read_str(s)).collect()
}

fn write_str(b: &mut Vec<u8>, v: &str) {
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    b.extend_from_slice(v.as_bytes());
}

fn read_u32(s: &mut TcpStream) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn read_str(s: &mut TcpStream) -> std::io::Result<String> {
    let len = read_u32(s)? as usize;
    if len > 4096 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "address too long",
        ));
    }
    let mut b = vec![0u8; len];
    s.read_exact(&mut b)?;
    String::from_utf8(b)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "address is not UTF-8"))
}

/// One rank's connections.
#[derive(Debug)]
struct TcpTransport {
    rank: usize,
    writers: Vec<Option<Mutex<TcpStream>>>,
    lost: Arc<Vec<AtomicBool>>,
    inbox: Arc<Inbox>,
}

impl TcpTransport {
    fn start(rank: usize, streams: Vec<Option<TcpStream>>) -> std::io::Result<Self> {
        let n = streams.len();
        let lost: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(false)).collect());
        let inbox = Arc::new(Inbox::default());
        let mut writers = Vec::with_capacity(n);
        for (peer, s) in streams.into_iter().enumerate() {
            let Some(s) = s else {
                writers.push(None);
                continue;
            };
            s.set_nodelay(true)?;
            s.set_read_timeout(None)?;
            let reader = s.try_clone()?;
            let (lost, inbox) = (lost.clone(), inbox.clone());
            std::thread::Builder::new()
                .name(format!("pardis-tcp-{rank}<-{peer}"))
                .spawn(move || read_frames(reader, peer, &lost, &inbox))?;
            writers.push(Some(Mutex::new(s)));
        }
        Ok(Self {
            rank,
            writers,
            lost,
            inbox,
        })
    }
}

/// Reader thread: sorts incoming frames into mailboxes until the connection ends.
fn read_frames(mut s: TcpStream, peer: usize, lost: &[AtomicBool], inbox: &Inbox) {
    let mut header = [0u8; HEADER_BYTES];
    loop {
        if s.read_exact(&mut header).is_err() {
            break;
        }
        let Ok((mut frame, len)) = Frame::decode_header(&header) else {
            break;
        };
        frame.src = peer;
        let mut payload = inbox.pool().take(len);
        if s.read_exact(payload.as_bytes_mut()).is_err() {
            break;
        }
        frame.payload = payload;
        inbox.deliver(frame);
    }
    lost[peer].store(true, Ordering::SeqCst);
    inbox.wake();
}

impl Transport for TcpTransport {
    fn world_rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.writers.len()
    }

    fn send(&self, dst: usize, frame: Frame) -> Result<()> {
        let w = self.writers[dst].as_ref().expect("no connection to self");
        let header = frame.encode_header();
        let r = {
            let mut s = w.lock().expect("writer poisoned");
            s.write_all(&header)
                .and_then(|()| s.write_all(frame.payload.as_bytes()))
        };
        self.inbox.pool().give(frame.payload);
        r.map_err(|e| {
            self.lost[dst].store(true, Ordering::SeqCst);
            CollectiveError::io(format!("sending to rank {dst}"), e)
        })
    }

    fn is_lost(&self, rank: usize) -> bool {
        self.lost[rank].load(Ordering::SeqCst)
    }

    fn mark_self_lost(&self) {
        for w in self.writers.iter().flatten() {
            let _ = w.lock().map(|s| s.shutdown(Shutdown::Both));
        }
    }

    fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        // Half-close: peers read our last frames, then end of stream.
        for w in self.writers.iter().flatten() {
            let _ = w.lock().map(|s| s.shutdown(Shutdown::Write));
        }
    }
}
