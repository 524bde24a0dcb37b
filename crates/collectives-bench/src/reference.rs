//! Physical-limit references for the benchmarks: memcpy bandwidth and loopback-TCP throughput,
//! each measured alone (one thread, one stream) and with the concurrency of an `n`-rank
//! collective (`n` threads copying at once; `n` sockets in a ring, all streaming at once).
//!
//! **Why the concurrent figures are the like-for-like limits.** nccl-tests' busbw of a ring
//! all-reduce is the rate at which *every* rank moves data over its own link, all ranks at
//! once (each sends `2(n−1)/n · S` bytes in the time `t`). On one host the "links" of `n` ranks
//! share the cores and the memory bus: `n` copying threads on 2 cores each get about
//! `2/n` of a core when `n > 2`, and `n` loopback streams share the same two cores for their
//! sender and receiver copies. So the busbw of an ideal ring whose links are memcpy (or
//! loopback sockets) is the *per-thread* (per-stream) rate with `n` of them running at once,
//! which is what [`memcpy_bandwidth_concurrent`] and [`loopback_ring_bandwidth`] return. The
//! single-thread / single-stream figures ([`memcpy_bandwidth`], [`loopback_bandwidth`]) are
//! the limit of one rank alone and overstate what `n` ranks on fewer cores can share.
//!
//! Every sample is long enough to be timed reliably (tens of MiB per thread), buffers are
//! touched and one untimed sample warms caches and page tables; [`Rate`] keeps the best and the
//! median of the samples so that the spread on a shared machine is visible.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use collectives::__private::copy_slice;
use collectives::{CollectiveError, Result};

/// Bytes each thread copies per timed memcpy sample (at least one copy).
const MEMCPY_SAMPLE_BYTES: usize = 64 << 20;
/// Bytes each stream moves per timed loopback sample: `bytes` clamped to this range (a stream's
/// rate does not depend on the total beyond a few writes).
const LOOPBACK_SAMPLE_BYTES: std::ops::RangeInclusive<usize> = (32 << 20)..=(64 << 20);
/// Largest single write of the loopback reference (pardis writes ring pieces of 1 MiB).
const LOOPBACK_WRITE_BYTES: usize = 4 << 20;
/// Read buffer of the loopback reference.
const LOOPBACK_READ_BYTES: usize = 1 << 20;

/// A rate measured over several samples, in GB/s (10^9 bytes per second) per thread or stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Fastest sample.
    pub best: f64,
    /// Median sample.
    pub median: f64,
    /// Slowest sample.
    pub worst: f64,
}

impl Rate {
    /// Rate of `bytes` moved in each of `times`; `None` when there is no sample.
    pub(super) fn from_times(bytes: usize, times: &[Duration]) -> Option<Self> {
        let mut r: Vec<f64> = times
            .iter()
            .map(|t| bytes as f64 / t.as_secs_f64().max(1e-12) / 1e9)
            .collect();
        r.sort_by(f64::total_cmp);
        Some(Self {
            best: *r.last()?,
            median: bench_timing::quantile(&r, 0.5),
            worst: r[0],
        })
    }
}

/// Runs `work(thread)` on `threads` threads, all starting each sample together, and returns
/// the wall time of each of `samples` timed samples (one untimed sample first): from the first
/// thread's start to the last thread's end, each taken by the working threads themselves (a
/// timing thread could be descheduled past the start on an oversubscribed machine).
pub(super) fn timed_samples<F>(threads: usize, samples: usize, work: F) -> Vec<Duration>
where
    F: Fn(usize) + Sync,
{
    let barrier = Barrier::new(threads);
    let spans: Vec<Mutex<Vec<(Instant, Instant)>>> =
        (0..threads).map(|_| Mutex::new(Vec::new())).collect();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, work, spans) = (&barrier, &work, &spans);
            s.spawn(move || {
                for _ in 0..=samples {
                    barrier.wait();
                    let start = Instant::now();
                    work(t);
                    let span = (start, Instant::now());
                    spans[t]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(span);
                    barrier.wait();
                }
            });
        }
    });
    let spans: Vec<Vec<(Instant, Instant)>> = spans
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();
    wall_times(&spans)
}

/// Wall time of every sample but the first (untimed) one, from `spans[thread][sample]` =
/// (start, end) as each thread saw it: from the earliest start to the latest end.
pub(super) fn wall_times(spans: &[Vec<(Instant, Instant)>]) -> Vec<Duration> {
    let samples = spans.iter().map(Vec::len).min().unwrap_or(0);
    (1..samples)
        .map(|i| {
            let start = spans.iter().map(|v| v[i].0).min().expect("threads >= 1");
            let end = spans.iter().map(|v| v[i].1).max().expect("threads >= 1");
            end - start
        })
        .collect()
}

/// Bandwidth of `copy_slice` (the collectives' message copy) between two `bytes`-sized buffers on
/// one thread, GB/s (`iters` copies after one untimed copy into touched buffers). The two
/// buffers are allocated one after the other, which on AMD puts a plain `memcpy` from about
/// 2 KiB up to the L2 size on its slow `rep movsb` path (collectives' `copy` module); `copy_slice` steps
/// around it, so the figure is the machine's copy rate.
pub fn memcpy_bandwidth(bytes: usize, iters: usize) -> f64 {
    let src = vec![1u8; bytes.max(1)];
    let mut dst = vec![2u8; bytes.max(1)];
    dst.copy_from_slice(&src);
    let start = Instant::now();
    for _ in 0..iters.max(1) {
        copy_slice(&mut dst, std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    bytes as f64 * iters.max(1) as f64 / start.elapsed().as_secs_f64().max(1e-12) / 1e9
}

/// Per-thread `copy_slice` (the collectives' message copy) bandwidth while `threads` threads copy `bytes`-sized buffers
/// (each its own pair) at the same time: the busbw of an ideal `threads`-rank ring whose links
/// are memcpy (see the [crate docs](crate)). `samples` timed samples of at
/// least 64 MiB per thread each.
pub fn memcpy_bandwidth_concurrent(bytes: usize, threads: usize, samples: usize) -> Rate {
    let (bytes, threads, samples) = (bytes.max(1), threads.max(1), samples.max(1));
    let reps = (MEMCPY_SAMPLE_BYTES / bytes).clamp(1, 1 << 16);
    let bufs: Vec<Mutex<(Vec<u8>, Vec<u8>)>> = (0..threads)
        .map(|_| Mutex::new((vec![1u8; bytes], vec![2u8; bytes])))
        .collect();
    let times = timed_samples(threads, samples, |t| {
        let mut guard = bufs[t].lock().unwrap_or_else(|e| e.into_inner());
        let (src, dst) = &mut *guard;
        for _ in 0..reps {
            copy_slice(dst, std::hint::black_box(src));
            std::hint::black_box(&mut *dst);
        }
    });
    Rate::from_times(bytes * reps, &times).expect("at least one sample")
}

/// Throughput of one loopback TCP stream moving `bytes` `iters` times, GB/s (the limit of a
/// single pair of ranks; see [`loopback_ring_bandwidth`] for `n` ranks).
pub fn loopback_bandwidth(bytes: usize, iters: usize) -> Result<f64> {
    let io = |e| CollectiveError::io("loopback baseline", e);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let total = bytes * iters.max(1);
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; LOOPBACK_READ_BYTES];
        let mut left = total;
        while left > 0 {
            let k = s.read(&mut buf[..left.min(LOOPBACK_READ_BYTES)])?;
            if k == 0 {
                break;
            }
            left -= k;
        }
        s.write_all(&[1])
    });
    let mut s = TcpStream::connect(addr).map_err(io)?;
    s.set_nodelay(true).map_err(io)?;
    let data = vec![1u8; bytes];
    let start = Instant::now();
    for _ in 0..iters.max(1) {
        s.write_all(&data).map_err(io)?;
    }
    let mut ack = [0u8];
    s.read_exact(&mut ack).map_err(io)?;
    let secs = start.elapsed().as_secs_f64();
    reader
        .join()
        .map_err(|_| CollectiveError::InvalidInput("loopback reader panicked".into()))?
        .map_err(io)?;
    Ok(total as f64 / secs.max(1e-12) / 1e9)
}

/// Per-stream throughput of `n` loopback TCP connections in a ring (rank `i` sends to
/// `i + 1 mod n`, one writer and one reader thread per rank, like the TCP transport), all
/// streaming at once in writes of `min(bytes, 4 MiB)`: the busbw of an ideal `n`-rank ring
/// all-reduce over loopback (see the [crate docs](crate)). `samples` timed
/// samples of 32–64 MiB per stream each. Needs `n >= 2`.
pub fn loopback_ring_bandwidth(bytes: usize, n: usize, samples: usize) -> Result<Rate> {
    loopback_ring(bytes, n, samples, false)
}

/// Like [`loopback_ring_bandwidth`], but every stream sends from its own `bytes`-long buffer
/// and receives into another, walking through them (wrapping around) instead of reusing one
/// cache-resident write buffer and one 1 MiB read buffer: the ring of an ideal all-reduce whose
/// message lives in memory like the real one's (from tens of MiB on, the kernel's copies then
/// read and write DRAM rather than cache).
pub fn loopback_ring_bandwidth_in_memory(bytes: usize, n: usize, samples: usize) -> Result<Rate> {
    loopback_ring(bytes, n, samples, true)
}

fn loopback_ring(bytes: usize, n: usize, samples: usize, in_memory: bool) -> Result<Rate> {
    if n < 2 {
        return Err(CollectiveError::InvalidInput(
            "a loopback ring needs at least 2 ranks".into(),
        ));
    }
    let io = |e| CollectiveError::io("loopback ring baseline", e);
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io)?;
    let (mut outs, mut ins) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for l in &listeners {
        let out = TcpStream::connect(l.local_addr().map_err(io)?).map_err(io)?;
        let (inp, _) = l.accept().map_err(io)?;
        out.set_nodelay(true).map_err(io)?;
        inp.set_nodelay(true).map_err(io)?;
        outs.push(Mutex::new(out));
        ins.push(Mutex::new(inp));
    }
    let chunk = bytes.clamp(1, LOOPBACK_WRITE_BYTES);
    let sample = bytes.clamp(*LOOPBACK_SAMPLE_BYTES.start(), *LOOPBACK_SAMPLE_BYTES.end());
    let writes = sample.div_ceil(chunk);
    let total = writes * chunk;
    let failed: Mutex<Option<std::io::Error>> = Mutex::new(None);
    let fail = |e: std::io::Error| {
        let mut f = failed.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert(e);
    };
    let ok = || failed.lock().map(|f| f.is_none()).unwrap_or(false);
    let read_len = LOOPBACK_READ_BYTES.min(total);
    let buf_len = |t: usize| match (in_memory, t < n) {
        (true, _) => bytes.max(1),
        (false, true) => chunk,
        (false, false) => read_len,
    };
    let bufs: Vec<Mutex<Vec<u8>>> = (0..2 * n)
        .map(|t| Mutex::new(vec![1u8; buf_len(t)]))
        .collect();
    let times = timed_samples(2 * n, samples.max(1), |t| {
        if !ok() {
            return;
        }
        let mut buf = bufs[t].lock().unwrap_or_else(|e| e.into_inner());
        let (streams, i) = if t < n { (&outs, t) } else { (&ins, t - n) };
        let mut s = streams[i].lock().unwrap_or_else(|e| e.into_inner());
        // Walks the buffer in pieces of at most `piece`, wrapping around.
        let len = buf.len();
        let mut at = 0;
        let mut next = |piece: usize, left: usize| {
            if at == len {
                at = 0;
            }
            let k = piece.min(left).min(len - at);
            at += k;
            at - k..at
        };
        let r = if t < n {
            (0..writes).try_for_each(|_| {
                let mut left = chunk;
                while left > 0 {
                    let r = next(chunk, left);
                    left -= r.len();
                    s.write_all(&buf[r])?;
                }
                Ok(())
            })
        } else {
            let mut left = total;
            let mut r = Ok(());
            while left > 0 && r.is_ok() {
                let range = next(LOOPBACK_READ_BYTES, left);
                left -= range.len();
                r = s.read_exact(&mut buf[range]);
            }
            r
        };
        if let Err(e) = r {
            // The peer thread of this stream sees the end of stream instead of waiting.
            let _ = s.shutdown(std::net::Shutdown::Both);
            fail(e);
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(io(e));
    }
    Ok(Rate::from_times(total, &times).expect("at least one sample"))
}

/// Mean time of one loopback TCP round trip of `bytes` bytes between two threads of this
/// process (`TCP_NODELAY`, blocking sockets): one thread writes `bytes`, the other reads them
/// and writes them back, `iters` times after `iters / 10 + 1` untimed ones. The latency floor
/// of any exchange between two ranks over loopback TCP (a 2-rank all-reduce needs at least
/// one message each way).
pub fn loopback_round_trip(bytes: usize, iters: usize) -> Result<Duration> {
    let io = |what: &str, e: std::io::Error| CollectiveError::io(what.to_string(), e);
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| io("binding", e))?;
    let addr = listener.local_addr().map_err(|e| io("local address", e))?;
    let warmup = iters / 10 + 1;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut s, _) = listener.accept()?;
        s.set_nodelay(true)?;
        let mut buf = vec![0u8; bytes];
        for _ in 0..warmup + iters {
            s.read_exact(&mut buf)?;
            s.write_all(&buf)?;
        }
        Ok(())
    });
    let mut s = TcpStream::connect(addr).map_err(|e| io("connecting", e))?;
    s.set_nodelay(true).map_err(|e| io("TCP_NODELAY", e))?;
    let mut buf = vec![1u8; bytes];
    let mut start = Instant::now();
    for i in 0..warmup + iters {
        if i == warmup {
            start = Instant::now();
        }
        s.write_all(&buf).map_err(|e| io("writing", e))?;
        s.read_exact(&mut buf).map_err(|e| io("reading", e))?;
    }
    let elapsed = start.elapsed();
    echo.join()
        .map_err(|_| CollectiveError::Aborted("the echo thread panicked".into()))?
        .map_err(|e| io("echoing", e))?;
    Ok(elapsed / iters.max(1) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sane(r: Rate) -> bool {
        r.worst.is_finite() && r.worst > 0.0 && r.worst <= r.median && r.median <= r.best
    }

    #[test]
    fn memcpy_references_are_positive_and_ordered() {
        assert!(memcpy_bandwidth(4096, 3) > 0.0);
        assert!(sane(memcpy_bandwidth_concurrent(4096, 3, 3)));
        assert!(sane(memcpy_bandwidth_concurrent(0, 0, 0)));
    }

    #[test]
    fn loopback_ring_streams_everything_and_needs_two_ranks() {
        assert!(sane(loopback_ring_bandwidth(1 << 20, 3, 2).expect("ring")));
        assert!(loopback_bandwidth(1 << 16, 3).expect("stream") > 0.0);
        assert!(matches!(
            loopback_ring_bandwidth(1024, 1, 1),
            Err(CollectiveError::InvalidInput(_))
        ));
    }
}
