//! The connections of one rank: a writer per peer (frames written straight from the sender's
//! buffer with one vectored write), a reader thread per peer that sorts frames into the
//! per-collective mailboxes.

use std::io::{IoSlice, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::Inbox;
use crate::posts::SCRATCH_BYTES;
use crate::transport::Transport;
use crate::{CollectiveError, Result};

/// One rank's connections.
#[derive(Debug)]
pub(super) struct TcpTransport {
    rank: usize,
    writers: Vec<Option<Mutex<TcpStream>>>,
    lost: Arc<Vec<AtomicBool>>,
    inbox: Arc<Inbox>,
}

impl TcpTransport {
    pub(super) fn start(rank: usize, streams: Vec<Option<TcpStream>>) -> std::io::Result<Self> {
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

/// Writes `header` then `data` with as few system calls as the socket allows.
fn write_frame(s: &mut TcpStream, header: &[u8], data: &[u8]) -> std::io::Result<()> {
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

/// Reader thread: until the connection ends, reads each frame's payload straight into its
/// collective's working buffer where a receive slot is posted for it
/// ([direct receive](crate::direct)), else into a pooled buffer sorted into its mailbox.
fn read_frames(mut s: TcpStream, peer: usize, lost: &[AtomicBool], inbox: &Inbox) {
    let mut header = [0u8; HEADER_BYTES];
    let mut scratch = vec![0u64; SCRATCH_BYTES / 8];
    loop {
        if s.read_exact(&mut header).is_err() {
            break;
        }
        let Ok((mut frame, len)) = Frame::decode_header(&header) else {
            break;
        };
        frame.src = peer;
        if let Some((mailbox, target)) = inbox.route(&frame, len) {
            let ok = target.receive(|b| s.read_exact(b), &mut scratch).is_ok();
            mailbox.complete(target.slot, ok);
            if !ok {
                break;
            }
            inbox.wake();
            continue;
        }
        let mut payload = inbox.pool().take(len);
        if s.read_exact(payload.as_bytes_mut()).is_err() {
            break;
        }
        frame.payload = payload;
        inbox.deliver(frame);
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
        let r = write_frame(&mut w.lock().expect("writer poisoned"), &header, data);
        r.map_err(|e| {
            self.lost[dst].store(true, Ordering::SeqCst);
            CollectiveError::io(format!("sending to rank {dst}"), e)
        })
    }

    fn direct_receive(&self) -> bool {
        true
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
