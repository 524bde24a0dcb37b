//! The speed of light of a ring all-reduce over loopback TCP: the same pipelined ring as the
//! TCP transport's (reduce-scatter then all-gather, every step cut into 1 MiB pieces, the
//! reducing receives through a 64 KiB scratch, the copying ones straight into the message)
//! written directly on raw sockets, with no engine, framing, mailboxes or fault handling.
//!
//! Each rank has a writer thread (to the next rank) and a reader thread (from the previous
//! one); the writer sends a piece as soon as the reader has received the piece it depends on.
//! [`loopback_halving_doubling_all_reduce`] is the same for the transport's halving-doubling
//! (power-of-two worlds: recursive halving then recursive doubling, each step a swap with one
//! partner, whole steps, no pieces): the speed of light of the algorithm `Auto` runs on 4, 8,
//! … TCP ranks below [`collectives::DEFAULT_TCP_HALVING_DOUBLING_BYTES`].
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
    rate(Algo::Ring, bytes, n, samples)
}

/// As [`loopback_ring_all_reduce`] for halving-doubling (the same bytes per rank as the ring,
/// so the same busbw definition). Needs `n` a power of two, at least 2.
pub fn loopback_halving_doubling_all_reduce(
    bytes: usize,
    n: usize,
    samples: usize,
) -> Result<Rate> {
    rate(Algo::HalvingDoubling, bytes, n, samples)
}

fn rate(algo: Algo, bytes: usize, n: usize, samples: usize) -> Result<Rate> {
    let (iters, link_bytes) = all_reduces_per_sample(bytes, n);
    let (times, _) = run(algo, bytes / 4, n, samples.max(1), iters, |_, _| 1.0)?;
    let moved = (link_bytes * iters as f64).round() as usize;
    Ok(Rate::from_times(moved, &times).expect("samples >= 1"))
}

/// The all-reduce algorithm of a reference run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    /// The pipelined ring: send to the next rank, receive from the previous one.
    Ring,
    /// Recursive halving then recursive doubling: each step a swap with `me ^ d`.
    HalvingDoubling,
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

/// Halving-doubling's step `u` on rank `me` of `n` (a power of two, `log2 n` halving steps
/// then as many doubling steps): the partner, the element range sent to it, the one received
/// from it, and whether the receive reduces (the same ranges as the transport's schedule).
fn halving_doubling_step(
    n: usize,
    me: usize,
    count: usize,
    u: usize,
) -> (usize, Range<usize>, Range<usize>, bool) {
    let levels = n.trailing_zeros() as usize;
    let span = |lo: usize, hi: usize| part(count, n, lo).start..part(count, n, hi - 1).end;
    if u < levels {
        let (mut lo, mut hi) = (0, n);
        let mut d = n / 2;
        for _ in 0..u {
            let mid = (lo + hi) / 2;
            (lo, hi) = if me & d == 0 { (lo, mid) } else { (mid, hi) };
            d /= 2;
        }
        let mid = (lo + hi) / 2;
        let ((klo, khi), (glo, ghi)) = if me & d == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        (me ^ d, span(glo, ghi), span(klo, khi), true)
    } else {
        let d = 1 << (u - levels);
        let (lo, peer_lo) = (me & !(d - 1), (me ^ d) & !(d - 1));
        (me ^ d, span(lo, lo + d), span(peer_lo, peer_lo + d), false)
    }
}

/// Runs `1 + samples` samples of `iters` all-reduces (`algo`) of `count` f32 per rank starting
/// from `init(rank, i)` (values carry over between all-reduces); returns the timed samples'
/// wall times and the ranks' messages at the end.
fn run(
    algo: Algo,
    count: usize,
    n: usize,
    samples: usize,
    iters: usize,
    init: impl Fn(usize, usize) -> f32,
) -> Result<(Vec<Duration>, Vec<Vec<f32>>)> {
    if n < 2 || count < n || (algo == Algo::HalvingDoubling && !n.is_power_of_two()) {
        return Err(CollectiveError::InvalidInput(
            "the all-reduce references need 2+ ranks (a power of two for halving-doubling) and \
             an element per rank"
                .into(),
        ));
    }
    let io = |e| CollectiveError::io("loopback all-reduce reference", e);
    // One connection per direction of every pair of ranks that exchange data.
    let links: Vec<(usize, usize)> = match algo {
        Algo::Ring => (0..n).map(|i| (i, (i + 1) % n)).collect(),
        Algo::HalvingDoubling => (0..n)
            .flat_map(|i| (0..n.trailing_zeros()).map(move |b| (i, i ^ (1 << b))))
            .collect(),
    };
    let (mut outs, mut ins) = (
        Vec::with_capacity(links.len()),
        Vec::with_capacity(links.len()),
    );
    for _ in &links {
        let l = TcpListener::bind("127.0.0.1:0").map_err(io)?;
        let out = TcpStream::connect(l.local_addr().map_err(io)?).map_err(io)?;
        let (inp, _) = l.accept().map_err(io)?;
        out.set_nodelay(true).map_err(io)?;
        outs.push(Mutex::new(out));
        ins.push(Mutex::new(inp));
    }
    let link = |from: usize, to: usize| {
        links
            .iter()
            .position(|&l| l == (from, to))
            .expect("a link for every exchange")
    };
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
    let pieces = match algo {
        Algo::Ring => (count * 4 / n).div_ceil(DEFAULT_RING_PIECE_BYTES).max(1),
        Algo::HalvingDoubling => 1,
    };
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
    // Shuts every connection of rank `me` down, so that its peers' blocked calls return.
    let shut_rank = |me: usize| {
        for (k, &(from, to)) in links.iter().enumerate() {
            if from == me {
                let _ = outs[k].lock().map(|s| s.shutdown(Shutdown::Both));
            }
            if to == me {
                let _ = ins[k].lock().map(|s| s.shutdown(Shutdown::Both));
            }
        }
    };
    let times = timed_samples(2 * n, samples, |t| {
        let (me, writer) = (t % n, t < n);
        let rank = RankState {
            msg: &messages[me],
            progress: &progress[me],
            written: &written[me],
            geometry: (algo, n, me, count, pieces),
        };
        let mut first = started[t].lock().unwrap_or_else(|e| e.into_inner());
        let all_reduces = *first..*first + iters;
        let r = if writer {
            let out = |peer: usize| &outs[link(me, peer)];
            let r = write_all_reduces(out, &rank, all_reduces);
            if r.is_err() {
                written[me].add(usize::MAX);
            }
            r
        } else {
            let inp = |peer: usize| &ins[link(peer, me)];
            let r = read_all_reduces(inp, &rank, all_reduces);
            if r.is_err() {
                progress[me].add(usize::MAX);
            }
            r
        };
        *first += iters;
        if let Err(e) = r {
            shut_rank(me);
            fail(e);
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(io(e));
    }
    drop(messages);
    Ok((times, data))
}

/// Geometry: algorithm, ranks, this rank, elements, pieces per ring step (1 for
/// halving-doubling).
type Geometry = (Algo, usize, usize, usize, usize);

/// What the writer and the reader thread of one rank share.
#[derive(Clone, Copy)]
struct RankState<'a> {
    msg: &'a Message,
    /// Units the reader received.
    progress: &'a Progress,
    /// All-reduces the writer finished.
    written: &'a Progress,
    geometry: Geometry,
}

/// One unit of a rank's all-reduce: the rank it sends to and the elements it sends, the rank
/// it receives from and the elements it receives, and whether the receive reduces.
struct Unit {
    to: usize,
    send: Range<usize>,
    from: usize,
    recv: Range<usize>,
    reduce: bool,
}

impl RankState<'_> {
    /// Units per all-reduce: pieces of ring steps, or halving-doubling's steps.
    fn units(&self) -> usize {
        let (algo, n, _, _, pieces) = self.geometry;
        match algo {
            Algo::Ring => 2 * (n - 1) * pieces,
            Algo::HalvingDoubling => 2 * n.trailing_zeros() as usize,
        }
    }

    /// Unit `u` of this rank.
    fn unit(&self, u: usize) -> Unit {
        let (algo, n, me, count, pieces) = self.geometry;
        match algo {
            Algo::Ring => {
                let (send, recv, reduce) = unit(n, me, count, pieces, u);
                Unit {
                    to: (me + 1) % n,
                    send,
                    from: (me + n - 1) % n,
                    recv,
                    reduce,
                }
            }
            Algo::HalvingDoubling => {
                let (peer, send, recv, reduce) = halving_doubling_step(n, me, count, u);
                Unit {
                    to: peer,
                    send,
                    from: peer,
                    recv,
                    reduce,
                }
            }
        }
    }
}

/// The writer of a rank: its all-reduces numbered `all_reduces`; each unit is sent (on
/// `out(peer)`) once the reader has received the unit it depends on (the previous step's same
/// piece; for the first step, the whole previous all-reduce). Counts the all-reduces it
/// finished in `written`.
fn write_all_reduces<'s>(
    out: impl Fn(usize) -> &'s Mutex<TcpStream>,
    rank: &RankState<'_>,
    all_reduces: Range<usize>,
) -> std::io::Result<()> {
    let (units, pieces) = (rank.units(), rank.geometry.4);
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
            let Unit { to, send, .. } = rank.unit(u);
            let msg = rank.msg;
            debug_assert!(send.end <= msg.len);
            // SAFETY: `send` lies in the message; the reader wrote it before `need` units were
            // done and writes it again only after a peer received it from this socket (the
            // algorithm's anti-dependency: what this rank receives next was sent after the
            // peer had received this), so nothing writes it during this read.
            let bytes = unsafe {
                std::slice::from_raw_parts(msg.ptr.add(send.start).cast::<u8>(), send.len() * 4)
            };
            out(to)
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write_all(bytes)?;
        }
        rank.written.add(1);
    }
    Ok(())
}

/// The reader of a rank: the receives of its all-reduces numbered `all_reduces` in unit order
/// (each started once the writer finished the one before, as a blocking all-reduce would),
/// from `inp(peer)`, reducing through a scratch and copying straight into the message.
fn read_all_reduces<'s>(
    inp: impl Fn(usize) -> &'s Mutex<TcpStream>,
    rank: &RankState<'_>,
    all_reduces: Range<usize>,
) -> std::io::Result<()> {
    let mut scratch = vec![0f32; SCRATCH_FLOATS];
    let (msg, progress, written) = (rank.msg, rank.progress, rank.written);
    for k in all_reduces {
        if !written.wait(k) {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        for u in 0..rank.units() {
            let Unit {
                from, recv, reduce, ..
            } = rank.unit(u);
            debug_assert!(recv.end <= msg.len);
            // SAFETY: `recv` lies in the message. The writer finished the previous all-reduce,
            // reads this region next only after this unit is counted done (its send depends on
            // it), and its earlier read of it in this all-reduce returned before this data was
            // sent: the data was sent by a peer that had already received that read's bytes.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(msg.ptr.add(recv.start), recv.len()) };
            let mut s = inp(from).lock().unwrap_or_else(|e| e.into_inner());
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

    /// Two all-reduces of `algo` on each `(ranks, elements)` give every rank `ranks` times the
    /// sum of the inputs (exact in f32).
    fn check_sums(algo: Algo, cases: &[(usize, usize)]) {
        for &(n, count) in cases {
            let init = |r: usize, i: usize| ((r * 7 + i) % 13) as f32;
            let (_, out) = run(algo, count, n, 0, 2, init).expect("reference run");
            for (r, v) in out.iter().enumerate() {
                for (i, &x) in v.iter().enumerate() {
                    let once: f32 = (0..n).map(|q| init(q, i)).sum();
                    assert_eq!(x, once * n as f32, "{algo:?} n {n} rank {r} element {i}");
                }
            }
        }
    }

    #[test]
    fn reference_ring_computes_the_all_reduce() {
        check_sums(Algo::Ring, &[(2, 10), (3, 1001), (4, (9 << 20) / 4 + 5)]);
        assert!(loopback_ring_all_reduce(64, 1, 1).is_err());
        let r = loopback_ring_all_reduce(1 << 20, 2, 2).expect("rate");
        assert!(r.worst > 0.0 && r.worst <= r.best);
    }

    #[test]
    fn reference_halving_doubling_computes_the_all_reduce() {
        check_sums(
            Algo::HalvingDoubling,
            &[(2, 10), (4, 1001), (8, 8), (4, (9 << 20) / 4 + 5)],
        );
        assert!(loopback_halving_doubling_all_reduce(1 << 10, 3, 1).is_err());
        let r = loopback_halving_doubling_all_reduce(1 << 20, 4, 2).expect("rate");
        assert!(r.worst > 0.0 && r.worst <= r.best);
    }
}
