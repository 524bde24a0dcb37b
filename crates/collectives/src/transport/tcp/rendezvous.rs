//! Rendezvous through rank 0: address exchange and two connections per pair of ranks, one per
//! direction (see the [module docs](super)).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::{PeerStreams, TcpTransport};
use super::TcpConfig;
use crate::engine::Engine;
use crate::{CollectiveError, Communicator, Result};

const MAGIC: u32 = 0x5044_5331; // "PDS1"

fn rdv(cfg: &TcpConfig, what: impl std::fmt::Display) -> CollectiveError {
    CollectiveError::Rendezvous(format!("rank {}: {what}", cfg.rank))
}

pub(super) fn join_with(cfg: &TcpConfig, listener: Option<TcpListener>) -> Result<Communicator> {
    let deadline = Instant::now() + cfg.rendezvous_timeout;
    let (n, me) = (cfg.world_size, cfg.rank);
    // Per peer, the first connection (opened by the higher rank of the pair; rank 0's are the
    // rendezvous connections) and the second (opened by the lower rank).
    let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut second: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let table = if me == 0 {
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
        table
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
            streams[j] = Some(dial(cfg, j, addr, deadline)?);
        }
        // `own` takes the first connections of the higher ranks and the second ones of the
        // lower ranks, in any order: the rank in the hello tells which.
        for _ in 1..n {
            let mut s = accept(&own, deadline)
                .map_err(|e| rdv(cfg, format!("waiting for the other ranks: {e}")))?;
            let (rank, size, _) =
                read_hello(&mut s).map_err(|e| rdv(cfg, format!("bad hello: {e}")))?;
            let into = if rank < me { &mut second } else { &mut streams };
            if size != n || rank == me || rank >= n || into[rank].is_some() {
                return Err(rdv(
                    cfg,
                    format!("unexpected connection from rank {rank} of {size}"),
                ));
            }
            into[rank] = Some(s);
        }
        table
    };
    // Second connections: the lower rank of each pair dials the higher one's listener.
    for (j, addr) in table.iter().enumerate().skip(me + 1) {
        second[j] = Some(dial(cfg, j, addr, deadline)?);
    }
    // Each rank writes on the connection it opened and reads from the one its peer opened:
    // the first connection was opened by the higher rank of the pair, the second by the lower.
    let peers = streams
        .into_iter()
        .zip(second)
        .enumerate()
        .map(|(j, pair)| match pair {
            _ if j == me => Ok(None),
            (Some(first), Some(second)) if j < me => Ok(Some(PeerStreams {
                outgoing: first,
                incoming: second,
            })),
            (Some(first), Some(second)) => Ok(Some(PeerStreams {
                outgoing: second,
                incoming: first,
            })),
            _ => Err(rdv(cfg, format!("no connections to rank {j}"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let transport = TcpTransport::start(me, peers).map_err(|e| rdv(cfg, e))?;
    Ok(Communicator::world(Engine::start(
        Arc::new(transport),
        cfg.engine.clone(),
    )?))
}

/// Opens a connection to rank `j` at `addr` and introduces this rank on it.
fn dial(cfg: &TcpConfig, j: usize, addr: &str, deadline: Instant) -> Result<TcpStream> {
    let mut s = connect(addr, deadline)
        .map_err(|e| rdv(cfg, format!("connecting to rank {j} at {addr}: {e}")))?;
    write_hello(&mut s, cfg.rank, cfg.world_size, "").map_err(|e| rdv(cfg, e))?;
    Ok(s)
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
                // The hello must come within 10 s, and within the rendezvous' deadline.
                let left = deadline.saturating_duration_since(Instant::now());
                let wait = left.clamp(Duration::from_millis(1), Duration::from_secs(10));
                s.set_read_timeout(Some(wait))?;
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
