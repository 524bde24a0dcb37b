//! The speed of light of a ring all-reduce over loopback TCP: the same pipelined ring as the
//! TCP transport's (reduce-scatter then all-gather, every step cut into 1 MiB pieces, the
//! reducing receives through a 64 KiB scratch, the copying ones straight into the message)
//! written directly on raw sockets, with no engine, framing, mailboxes or fault handling.
//!
//! Each rank has a writer thread (to the next rank) and a reader thread (from the previous
//! one); the writer sends a piece as soon as the reader has received the piece it depends on.
//! Its busbw is what any ring all-reduce can reach on this machine's loopback: the socket
//! copies of [`loopback_ring_bandwidth`](super::loopback_ring_bandwidth) plus the work every
//! all-reduce must add (reducing half the traffic, reading and writing a message that lives in
//! memory, waiting for the data a piece depends on). A transport's ratio to it is its own
//! overhead; its ratio to the raw socket ring is the algorithm's.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::reference::timed_samples;
use super::sampled::all_reduces_per_sample;
use super::Rate;
use collectives::__private::part;
use collectives::{CollectiveError, Result, DEFAULT_RING_PIECE_BYTES};

/// Scratch of the reducing receives (as the TCP transport's direct receives).
const SCRATCH_FLOATS: usize = (64 << 10) / 4;

/// busbw (GB/s, nccl-tests definition) of an `n`-rank ring all-reduce of `bytes` bytes of f32
/// (sum) over loopback sockets with nothing but the algorithm (no engine, framing or mailboxes):
/// `samples` timed samples of at least 32 MiB per link each, after one untimed sample. Needs
/// `n >= 2` and `bytes >= 4 n`.
pub fn loopback_ring_all_reduce(bytes: usize, n: usize, samples: usize) -> Result<Rate> {
    let (iters, link_bytes) = all_reduces_per_sample(bytes, n);
    let (times, _) = run(bytes / 4, n, samples.max(1), iters, |_, _| 1.0)?;
    let moved = (link_bytes * iters as f64).round() as usize;
    Ok(Rate::from_times(moved, &times).expect("samples >= 1"))
}

/// A rank's message, shared by its writer (reads) and reader (writes) thread.
struct Message {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: the writer and reader of a rank touch disjoint pieces at any time (the ring's
// dependencies, enforced through `Progress` and the peers; see `run`), and the vector behind
// `ptr` outlives every thread that uses it.
unsafe impl Sync for Message {}

/// Units (pieces of ring steps) the reader of a rank has received, counted over all
/// all-reduces; `usize::MAX` once its connection failed.
#[derive(Default)]
struct Progress {
    done: Mutex<usize>,
    moved: Condvar,
}

impl Progress {
    fn add(&self, k: usize) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        *d = d.saturating_add(k);
        self.moved.notify_all();
    }
    /// Waits until `need` units are done; false when the reader failed.
    fn wait(&self, need: usize) -> bool {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while *d < need {
            d = self.moved.wait(d).unwrap_or_else(|e| e.into_inner());
        }
        *d != usize::MAX
    }
}

/// The ring's unit `u = step * pieces + piece` on rank `me`: the element range it sends and
/// the one it receives, and whether the receive reduces.
fn unit(
    n: usize,
    me: usize,
    count: usize,
    pieces: usize,
    u: usize,
) -> (Range<usize>, Range<usize>, bool) {
    let (s, j) = (u / pieces, u % pieces);
    let (send_c, recv_c, reduce) = if s < n - 1 {
        ((me + 2 * n - s - 1) % n, (me + 2 * n - s - 2) % n, true)
    } else {
        let s = s - (n - 1);
        ((me + 2 * n - s) % n, (me + 2 * n - s - 1) % n, false)
    };
    let piece = |c: usize| {
        let chunk = part(count, n, c);
        let p = part(chunk.len(), pieces, j);
        chunk.start + p.start..chunk.start + p.end
    };
    (piece(send_c), piece(recv_c), reduce)
}

/// Runs `1 + samples` samples of `iters` all-reduces of `count` f32 per rank starting from
/// `init(rank, i)` (values carry over between all-reduces); returns the timed samples' wall
/// times and the ranks' messages at the end.
fn run(
    count: usize,
    n: usize,
    samples: usize,
    iters: usize,
    init: impl Fn(usize, usize) -> f32,
) -> Result<(Vec<Duration>, Vec<Vec<f32>>)> {
    if n < 2 || count < n {
        return Err(CollectiveError::InvalidInput(
            "the ring all-reduce reference needs 2+ ranks and an element per rank".into(),
        ));
    }
    let io = |e| CollectiveError::io("loopback ring all-reduce reference", e);
    let (mut outs, mut ins) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").map_err(io)?;
        let out = TcpStream::connect(l.local_addr().map_err(io)?).map_err(io)?;
        let (inp, _) = l.accept().map_err(io)?;
        out.set_nodelay(true).map_err(io)?;
        outs.push(Mutex::new(out));
        ins.push(Mutex::new(inp));
    }
    let mut data: Vec<Vec<f32>> = (0..n)
        .map(|r| (0..count).map(|i| init(r, i)).collect())
        .collect();
    let messages: Vec<Message> = data
        .iter_mut()
        .map(|v| Message {
            ptr: v.as_mut_ptr(),
            len: v.len(),
        })
        .collect();
    let pieces = (count * 4 / n).div_ceil(DEFAULT_RING_PIECE_BYTES).max(1);
    let progress: Vec<Progress> = (0..n).map(|_| Progress::default()).collect();
    let written: Vec<Progress> = (0..n).map(|_| Progress::default()).collect();
    // All-reduces started by each writer and reader thread (over all samples).
    let started: Vec<Mutex<usize>> = (0..2 * n).map(|_| Mutex::new(0)).collect();
    let failed: Mutex<Option<std::io::Error>> = Mutex::new(None);
    let fail = |e: std::io::Error| {
        failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert(e);
    };
    let times = timed_samples(2 * n, samples, |t| {
        let (me, writer) = (t % n, t < n);
        let rank = RankRing {
            msg: &messages[me],
            progress: &progress[me],
            written: &written[me],
            geometry: (n, me, count, pieces),
        };
        let mut first = started[t].lock().unwrap_or_else(|e| e.into_inner());
        let r = if writer {
            let mut s = outs[me].lock().unwrap_or_else(|e| e.into_inner());
            let r = write_all_reduces(&mut s, &rank, *first..*first + iters);
            if r.is_err() {
                written[me].add(usize::MAX);
            }
            r
        } else {
            let mut s = ins[(me + n - 1) % n]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let r = read_all_reduces(&mut s, &rank, *first..*first + iters);
            if r.is_err() {
                progress[me].add(usize::MAX);
                let _ = s.shutdown(Shutdown::Both);
            }
            r
        };
        *first += iters;
        if let Err(e) = r {
            let _ = outs[me].lock().map(|s| s.shutdown(Shutdown::Both));
            fail(e);
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(io(e));
    }
    drop(messages);
    Ok((times, data))
}

/// Ring geometry: ranks, this rank, elements, pieces per step.
type Geometry = (usize, usize, usize, usize);

/// What the writer and the reader thread of one rank share.
#[derive(Clone, Copy)]
struct RankRing<'a> {
    msg: &'a Message,
    /// Units the reader received.
    progress: &'a Progress,
    /// All-reduces the writer finished.
    written: &'a Progress,
    geometry: Geometry,
}

impl RankRing<'_> {
    /// Units (pieces of ring steps) per all-reduce.
    fn units(&self) -> usize {
        let (n, _, _, pieces) = self.geometry;
        2 * (n - 1) * pieces
    }

    /// [`unit`] `u` of this rank.
    fn unit(&self, u: usize) -> (Range<usize>, Range<usize>, bool) {
        let (n, me, count, pieces) = self.geometry;
        unit(n, me, count, pieces, u)
    }
}

/// The writer of a rank: its all-reduces numbered `all_reduces`; each unit's piece is sent once
/// the reader has received the unit it depends on (the previous step's same piece; for step 0,
/// the whole previous all-reduce). Counts the all-reduces it finished in `written`.
fn write_all_reduces(
    s: &mut TcpStream,
    rank: &RankRing<'_>,
    all_reduces: Range<usize>,
) -> std::io::Result<()> {
    let (units, pieces) = (rank.units(), rank.geometry.3);
    for k in all_reduces {
        for u in 0..units {
            let need = if u < pieces {
                k * units
            } else {
                k * units + u - pieces + 1
            };
            if !rank.progress.wait(need) {
                return Err(std::io::ErrorKind::BrokenPipe.into());
            }
            let (send, _, _) = rank.unit(u);
            let msg = rank.msg;
            debug_assert!(send.end <= msg.len);
            // SAFETY: `send` lies in the message; the reader wrote it before `need` units were
            // done and writes it again only after a peer received it from this socket (the
            // ring's anti-dependency), so nothing writes it during this read.
            let bytes = unsafe {
                std::slice::from_raw_parts(msg.ptr.add(send.start).cast::<u8>(), send.len() * 4)
            };
            s.write_all(bytes)?;
        }
        rank.written.add(1);
    }
    Ok(())
}

/// The reader of a rank: the receives of its all-reduces numbered `all_reduces` in unit order
/// (each started once the writer finished the one before, as a blocking all-reduce would),
/// reducing through a scratch in the reduce-scatter and copying straight into the message in
/// the all-gather.
fn read_all_reduces(
    s: &mut TcpStream,
    rank: &RankRing<'_>,
    all_reduces: Range<usize>,
) -> std::io::Result<()> {
    let mut scratch = vec![0f32; SCRATCH_FLOATS];
    let (msg, progress, written) = (rank.msg, rank.progress, rank.written);
    for k in all_reduces {
        if !written.wait(k) {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        for u in 0..rank.units() {
            let (_, recv, reduce) = rank.unit(u);
            debug_assert!(recv.end <= msg.len);
            // SAFETY: `recv` lies in the message. The writer finished the previous all-reduce,
            // reads this region next only after this unit is counted done (its send depends on
            // it), and its earlier read of it in this all-reduce returned before this data was
            // sent: the piece came around the ring from that send (n - 1 steps back).
            let dst =
                unsafe { std::slice::from_raw_parts_mut(msg.ptr.add(recv.start), recv.len()) };
            if reduce {
                for d in dst.chunks_mut(SCRATCH_FLOATS) {
                    let sc = &mut scratch[..d.len()];
                    s.read_exact(bytemuck_f32(sc))?;
                    d.iter_mut().zip(sc.iter()).for_each(|(a, b)| *a += *b);
                }
            } else {
                s.read_exact(bytemuck_f32(dst))?;
            }
            progress.add(1);
        }
    }
    Ok(())
}

/// `f32`s as bytes.
fn bytemuck_f32(v: &mut [f32]) -> &mut [u8] {
    // SAFETY: any bytes are a valid f32 and u8 has alignment 1; same memory, same lifetime.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 4) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_ring_computes_the_all_reduce() {
        for (n, count) in [(2, 10), (3, 1001), (4, (9 << 20) / 4 + 5)] {
            let init = |r: usize, i: usize| ((r * 7 + i) % 13) as f32;
            let (_, out) = run(count, n, 0, 2, init).expect("ring");
            for (r, v) in out.iter().enumerate() {
                for (i, &x) in v.iter().enumerate() {
                    let once: f32 = (0..n).map(|q| init(q, i)).sum();
                    assert_eq!(x, once * n as f32, "rank {r} element {i}");
                }
            }
        }
        assert!(loopback_ring_all_reduce(64, 1, 1).is_err());
        let r = loopback_ring_all_reduce(1 << 20, 2, 2).expect("rate");
        assert!(r.worst > 0.0 && r.worst <= r.best);
    }
}
