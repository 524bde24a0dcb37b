//! The connections of one rank: per peer, a connection this rank writes on (frames written
//! straight from the sender's buffer with one vectored write) and one it reads from, with a
//! reader thread that sorts frames into the per-collective mailboxes.
//!
//! **One connection per direction.** Each connection carries data one way only (the other way
//! only its acknowledgements): a socket written and read at once by two threads serialises
//! them on its lock — on loopback a 2-rank ring all-reduce, whose one pair of ranks sends both
//! ways at once, took 13–18 % more CPU per 4 MiB all-reduce over one socket per pair than over
//! one per direction, and a 1 KiB one 1.6–1.7× the time in most runs on the AMD EPYC VM
//! (benches/README.md, collectives).

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::dtype::AlignedBuf;
use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::{BufPool, Inbox, Route};
use crate::posts::SCRATCH_BYTES;
use crate::transport::Transport;
use crate::{CollectiveError, Result};

/// The two connections between this rank and one peer.
#[derive(Debug)]
pub(super) struct PeerStreams {
    /// Frames to the peer.
    pub(super) outgoing: TcpStream,
    /// Frames from the peer.
    pub(super) incoming: TcpStream,
}

/// The connection frames to one peer go out on: writes take `lock` (one frame at a time), a
/// shutdown does not (a write blocked on a peer that stopped reading holds the lock for good).
#[derive(Debug)]
struct Outgoing {
    stream: Arc<TcpStream>,
    lock: Mutex<()>,
}

/// One rank's connections.
#[derive(Debug)]
pub(super) struct TcpTransport {
    rank: usize,
    writers: Vec<Option<Outgoing>>,
    /// The incoming connections (shared with their reader threads), to shut them down.
    incoming: Vec<Option<Arc<TcpStream>>>,
    lost: Arc<Vec<AtomicBool>>,
    inbox: Arc<Inbox>,
}

impl TcpTransport {
    /// Takes over the connections and starts a reader thread per incoming one. If that fails
    /// part-way, every connection is shut down before the error returns, so that no peer waits
    /// for good on a rank that never started (readers already running see end of stream).
    pub(super) fn start(rank: usize, peers: Vec<Option<PeerStreams>>) -> std::io::Result<Self> {
        let n = peers.len();
        let mut writers = Vec::with_capacity(n);
        let mut incoming = Vec::with_capacity(n);
        for streams in peers {
            let (w, r) = match streams {
                Some(p) => (
                    Some(Outgoing {
                        stream: Arc::new(p.outgoing),
                        lock: Mutex::new(()),
                    }),
                    Some(Arc::new(p.incoming)),
                ),
                None => (None, None),
            };
            writers.push(w);
            incoming.push(r);
        }
        let transport = Self {
            rank,
            writers,
            incoming,
            lost: Arc::new((0..n).map(|_| AtomicBool::new(false)).collect()),
            inbox: Arc::new(Inbox::default()),
        };
        if let Err(e) = transport.start_readers() {
            transport.shut_down_all();
            return Err(e);
        }
        Ok(transport)
    }

    /// Socket settings for every connection, then one reader thread per incoming connection.
    fn start_readers(&self) -> std::io::Result<()> {
        let pairs = || self.writers.iter().zip(&self.incoming).enumerate();
        for (_, (w, r)) in pairs() {
            for s in w.iter().map(|w| &w.stream).chain(r) {
                s.set_nodelay(true)?;
                s.set_read_timeout(None)?;
            }
        }
        for (peer, (w, r)) in pairs() {
            let (Some(w), Some(r)) = (w, r) else {
                continue;
            };
            let (reader, partner) = (r.clone(), w.stream.clone());
            let (lost, inbox) = (self.lost.clone(), self.inbox.clone());
            std::thread::Builder::new()
                .name(format!("pardis-tcp-{}<-{peer}", self.rank))
                .spawn(move || read_frames(reader, &partner, peer, &lost, &inbox))?;
        }
        Ok(())
    }

    /// Shuts every connection down both ways (no lock taken).
    fn shut_down_all(&self) {
        for w in self.writers.iter().flatten() {
            let _ = w.stream.shutdown(Shutdown::Both);
        }
        for r in self.incoming.iter().flatten() {
            let _ = r.shutdown(Shutdown::Both);
        }
    }
}

/// Writes `header` then `data` with as few system calls as the socket allows.
fn write_frame(mut s: &TcpStream, header: &[u8], data: &[u8]) -> std::io::Result<()> {
    let total = header.len() + data.len();
    let mut done = 0;
    while done < total {
        let r = if done < header.len() {
            s.write_vectored(&[IoSlice::new(&header[done..]), IoSlice::new(data)])
        } else {
            s.write(&data[done - header.len()..])
        };
        match r {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bytes a reader thread reads ahead per system call (see [`FrameReader`]).
const READ_AHEAD_BYTES: usize = 16 << 10;

/// The read side of a connection with a small read-ahead buffer: one `read` system call
/// usually brings a small frame's header and payload together (and often the next frame),
/// where reading exactly the header and then exactly the payload took two; reads of at least
/// the buffer's size go straight into their destination once the buffered bytes are used up.
struct FrameReader {
    s: Arc<TcpStream>,
    buf: Box<[u8]>,
    at: usize,
    end: usize,
}

impl FrameReader {
    fn new(s: Arc<TcpStream>) -> Self {
        Self {
            s,
            buf: vec![0; READ_AHEAD_BYTES].into_boxed_slice(),
            at: 0,
            end: 0,
        }
    }

    /// Fills `out` with the next `out.len()` bytes of the stream (`UnexpectedEof` at its end).
    fn read_exact(&mut self, out: &mut [u8]) -> std::io::Result<()> {
        let mut done = 0;
        loop {
            let n = (self.end - self.at).min(out.len() - done);
            crate::copy::copy_slice(&mut out[done..done + n], &self.buf[self.at..self.at + n]);
            self.at += n;
            done += n;
            if done == out.len() {
                return Ok(());
            }
            if out.len() - done >= self.buf.len() {
                return (&*self.s).read_exact(&mut out[done..]);
            }
            let k = loop {
                match (&*self.s).read(&mut self.buf) {
                    Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(k) => break k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            (self.at, self.end) = (0, k);
        }
    }
}

/// Bytes a reader holds for a payload no receive is posted for before those bytes arrive:
/// larger payloads grow (doubling) as they arrive, so a corrupt or hostile length field
/// allocates at most twice the bytes the peer actually sent, plus this.
const UNEXPECTED_CHUNK_BYTES: usize = 16 << 20;

/// Reads a payload of `len` bytes the frame header announced into a pooled buffer that grows
/// with the bytes received (see [`UNEXPECTED_CHUNK_BYTES`]).
fn read_payload(s: &mut FrameReader, pool: &BufPool, len: usize) -> std::io::Result<AlignedBuf> {
    let mut buf = pool.take(len.min(UNEXPECTED_CHUNK_BYTES));
    let mut done = 0;
    loop {
        let have = buf.len_bytes();
        s.read_exact(&mut buf.as_bytes_mut()[done..have])?;
        done = have;
        if done == len {
            return Ok(buf);
        }
        // Growing keeps the bytes read so far.
        buf.set_len_bytes(len.min(have.saturating_mul(2)));
    }
}

/// Reader thread: until the connection ends, reads each frame's payload straight into its
/// collective's working buffer where a receive slot is posted for it
/// ([direct receive](crate::direct)), else into a pooled buffer sorted into its mailbox.
/// Leaving for anything but the peer's end of stream (a corrupt frame, a read error), it shuts
/// both connections with the peer down both ways (`partner`: the outgoing one), so that the
/// peer sees end of stream on its reads, and errors instead of blocking for good in a write once
/// the socket buffers fill.
fn read_frames(
    s: Arc<TcpStream>,
    partner: &TcpStream,
    peer: usize,
    lost: &[AtomicBool],
    inbox: &Inbox,
) {
    let mut s = FrameReader::new(s);
    let mut header = [0u8; HEADER_BYTES];
    let mut scratch = vec![0u64; SCRATCH_BYTES / 8];
    let eof = |e: &std::io::Error| e.kind() == std::io::ErrorKind::UnexpectedEof;
    let ended = loop {
        if let Err(e) = s.read_exact(&mut header) {
            break eof(&e);
        }
        let Ok((mut frame, len)) = Frame::decode_header(&header) else {
            break false;
        };
        frame.src = peer;
        let mailbox = match inbox.route(&frame, len) {
            Route::Slot(mailbox, target) => {
                let ok = target.receive(|b| s.read_exact(b), &mut scratch).is_ok();
                mailbox.complete(target.slot, ok);
                if !ok {
                    break false;
                }
                inbox.wake();
                continue;
            }
            Route::Queue(mailbox) => mailbox,
        };
        match read_payload(&mut s, inbox.pool(), len) {
            Ok(payload) => frame.payload = payload,
            Err(e) => break eof(&e),
        }
        inbox.deliver_to(mailbox, frame);
    };
    if !ended {
        let _ = s.s.shutdown(Shutdown::Both);
        let _ = partner.shutdown(Shutdown::Both);
    }
    lost[peer].store(true, Ordering::SeqCst);
    inbox.wake_always();
}

impl Transport for TcpTransport {
    fn world_rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.writers.len()
    }

    fn send(&self, dst: usize, mut frame: Frame) -> Result<()> {
        let payload = std::mem::take(&mut frame.payload);
        let r = self.send_slice(dst, frame, payload.as_bytes());
        self.inbox.pool().give(payload);
        r
    }

    /// Header and payload in one vectored write, straight from `data` (no staging copy).
    fn send_slice(&self, dst: usize, head: Frame, data: &[u8]) -> Result<()> {
        let w = self.writers[dst].as_ref().expect("no connection to self");
        let header = head.encode_header_for(data.len());
        let r = {
            let _one_frame_at_a_time = w.lock.lock().expect("writer poisoned");
            write_frame(&w.stream, &header, data)
        };
        r.map_err(|e| {
            self.lost[dst].store(true, Ordering::SeqCst);
            CollectiveError::io(format!("sending to rank {dst}"), e)
        })
    }

    fn direct_receive(&self) -> bool {
        true
    }

    fn halving_doubling_bytes(&self) -> usize {
        crate::config::DEFAULT_TCP_HALVING_DOUBLING_BYTES
    }

    fn is_lost(&self, rank: usize) -> bool {
        self.lost[rank].load(Ordering::SeqCst)
    }

    fn mark_self_lost(&self) {
        self.shut_down_all();
    }

    fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        // Half-close: peers read our last frames, then end of stream.
        for w in self.writers.iter().flatten() {
            let _ = w.stream.shutdown(Shutdown::Write);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use std::net::TcpListener;

    /// Frames of every size around the buffer's, split at odd points by the writer, come out
    /// of the reader byte for byte.
    #[test]
    fn frame_reader_returns_the_stream_in_any_pieces() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let sizes = [
            0usize,
            1,
            56,
            1000,
            READ_AHEAD_BYTES - 1,
            READ_AHEAD_BYTES,
            READ_AHEAD_BYTES + 7,
            3 * READ_AHEAD_BYTES + 5,
            100,
        ];
        let stream: Vec<u8> = (0..sizes.iter().sum::<usize>())
            .map(|i| (i * 7 + i / 251) as u8)
            .collect();
        let sent = stream.clone();
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            for chunk in sent.chunks(4093) {
                s.write_all(chunk).unwrap();
            }
        });
        let (s, _) = listener.accept().unwrap();
        let mut r = FrameReader::new(Arc::new(s));
        let mut at = 0;
        for n in sizes {
            let mut out = vec![0u8; n];
            r.read_exact(&mut out).unwrap();
            assert_eq!(out, stream[at..at + n], "piece of {n} at {at}");
            at += n;
        }
        writer.join().unwrap();
        let mut one = [0u8; 1];
        assert_eq!(
            r.read_exact(&mut one).unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }

    /// A payload length of a tebibyte that never arrives ends in an error after the bytes
    /// that did, without allocating by the announced length (which would abort the test);
    /// payloads larger than the first chunk arrive whole.
    #[test]
    fn payloads_grow_with_the_bytes_received_not_the_announced_length() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let big = UNEXPECTED_CHUNK_BYTES * 2 + 12_345;
        let data: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&sent).unwrap();
            s.write_all(&[7u8; 1000]).unwrap();
        });
        let (s, _) = listener.accept().unwrap();
        let mut r = FrameReader::new(Arc::new(s));
        let pool = BufPool::default();
        let whole = read_payload(&mut r, &pool, big).unwrap();
        assert!(whole.as_bytes() == &data[..]);
        let lie = read_payload(&mut r, &pool, 1 << 40).unwrap_err();
        assert_eq!(lie.kind(), std::io::ErrorKind::UnexpectedEof);
        writer.join().unwrap();
    }

    /// A connected pair of loopback sockets.
    fn socket_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (b, _) = listener.accept().unwrap();
        (a, b)
    }

    /// A peer that sends a corrupt frame has both its connections shut down: it reads end of
    /// stream on the one it reads from (instead of waiting for good), and its writes on the
    /// other fail (instead of blocking once the buffers fill); it counts as lost.
    #[test]
    fn a_corrupt_frame_closes_both_connections() {
        let (mut peer_out, incoming) = socket_pair();
        let (outgoing, mut peer_in) = socket_pair();
        // The writer's handle stays open, as in a transport: only a shutdown ends the stream
        // for the peer, not the reader's handles closing.
        let _writer = outgoing.try_clone().unwrap();
        let inbox = Inbox::default();
        let lost = [AtomicBool::new(false)];
        // The transport's handle on the incoming connection stays open too.
        let incoming = Arc::new(incoming);
        let held = incoming.clone();
        peer_out
            .set_write_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| read_frames(incoming, &outgoing, 0, &lost, &inbox));
            // Kind 0xFF: no frame kind.
            peer_out.write_all(&[0xFF; HEADER_BYTES]).unwrap();
            // Without the shutdown this read blocks (and times out: an error, not `Ok(0)`).
            peer_in
                .set_read_timeout(Some(std::time::Duration::from_secs(10)))
                .unwrap();
            let mut one = [0u8; 1];
            assert_eq!(peer_in.read(&mut one).unwrap(), 0);
        });
        assert!(lost[0].load(Ordering::SeqCst));
        // The incoming connection is closed for reading: the peer's writes fail within a few
        // buffers' worth (the first may still be accepted by its socket).
        let chunk = vec![0u8; 1 << 16];
        let error = (0..1024).find_map(|_| peer_out.write_all(&chunk).err());
        let kind = error.map(|e| e.kind());
        assert!(
            kind.is_some_and(|k| k != ErrorKind::WouldBlock && k != ErrorKind::TimedOut),
            "the peer's writes into the closed connection did not fail: {kind:?}"
        );
        drop(held);
    }

    /// `mark_self_lost` (a panicking rank, `abort`) shuts the connections down while a write to
    /// a peer that stopped reading holds the write lock: it returns at once and the write
    /// fails. (It used to take the write lock first and wait for good.)
    #[test]
    fn shutting_down_does_not_wait_for_a_blocked_write() {
        use crate::frame::{Fingerprint, FrameKind, MailboxKey};
        use std::time::Duration;

        let (outgoing, peer_in) = socket_pair();
        let peer_in = Mutex::new(Some(peer_in));
        let (_peer_out, incoming) = socket_pair();
        let peers = vec![None, Some(PeerStreams { outgoing, incoming })];
        let t = TcpTransport::start(0, peers).unwrap();
        let head = Frame {
            kind: FrameKind::Data,
            src: 0,
            key: MailboxKey { comm: 1, seq: 0 },
            fp: Fingerprint::default(),
            aux: 0,
            payload: AlignedBuf::default(),
        };
        // Far more than the socket buffers hold: the peer never reads, so the write blocks.
        let big = vec![0u8; 256 << 20];
        std::thread::scope(|scope| {
            let sending = scope.spawn(|| t.send_slice(1, head, &big));
            let w = t.writers[1].as_ref().unwrap();
            while w.lock.try_lock().is_ok() && !sending.is_finished() {
                std::thread::yield_now();
            }
            let (done, shut) = std::sync::mpsc::channel();
            let t = &t;
            scope.spawn(move || {
                t.mark_self_lost();
                let _ = done.send(());
            });
            if shut.recv_timeout(Duration::from_secs(30)).is_err() {
                // Unblock the write (and so the shutdown) before failing, not to hang: the
                // peer closing with unread data resets the connection.
                drop(peer_in.lock().unwrap().take());
                panic!("mark_self_lost waited for the blocked write");
            }
            assert!(sending.join().unwrap().is_err());
        });
    }
}
