//! The receiving side of the MPI transport: takes incoming frames (header, then payload) and
//! goodbyes, from the receiver thread or from the engine thread between rounds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::mpi::datatype::Equivalence as _;
use ::mpi::point_to_point::Source as _;
use ::mpi::topology::Communicator as _;

use super::{MpiConfig, SharedComm, TAG_FRAME, TAG_GOODBYE, TAG_HEADER, TAG_PAYLOAD, TAG_STOP};
use crate::dtype::AlignedBuf;
use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::Inbox;

/// What taking one incoming message did.
#[derive(PartialEq, Eq)]
pub(super) enum Took {
    Nothing,
    Message,
    Stop,
}

/// The receiving side: shared by the receiver thread and the engine thread (`progress`).
pub(super) struct Receiver {
    pub(super) comm: Arc<SharedComm>,
    pub(super) lost: Arc<Vec<AtomicBool>>,
    pub(super) inbox: Arc<Inbox>,
    /// Held from a header's probe to its payload's receive, so that two threads never split a
    /// header from its payload.
    pub(super) lock: Mutex<()>,
    /// The stop message was taken (by either thread): the receiver thread ends.
    pub(super) stopped: AtomicBool,
    /// Where messages land before they are routed (see [`Scratch`]).
    pub(super) scratch: Mutex<Scratch>,
}

/// The receiving side's own buffers, reused for every message (no pool round trip).
#[derive(Default)]
pub(super) struct Scratch {
    /// Where reducing steps receive a two-message frame's payload before reducing it into the
    /// collective's buffer ([direct receive](crate::direct)); grown to the largest payload.
    words: Vec<u64>,
    /// Where a one-message frame (header and payload) is received; grown to the largest.
    frame: AlignedBuf,
}

impl Receiver {
    /// Takes at most one incoming message (a frame with its payload, a goodbye or the stop).
    pub(super) fn take_one(&self) -> Took {
        let comm = &self.comm.0;
        let Some((msg, status)) = comm.any_process().immediate_matched_probe() else {
            return Took::Nothing;
        };
        let src = status.source_rank() as usize;
        let mut byte = [0u8; 1];
        match status.tag() {
            TAG_HEADER => {
                let mut header = [0u8; HEADER_BYTES];
                msg.matched_receive_into(&mut header[..]);
                let Ok((mut frame, len)) = Frame::decode_header(&header) else {
                    // A corrupt header cannot be resynchronised: treat the peer as lost.
                    self.mark_lost(src);
                    return Took::Message;
                };
                frame.src = src;
                if let Some((mailbox, target)) = self.inbox.route(&frame, len) {
                    // Direct receive: the payload goes straight into the collective's buffer
                    // (reducing steps receive it whole into the scratch, then reduce).
                    let (pmsg, pstatus) = comm
                        .process_at_rank(src as i32)
                        .matched_probe_with_tag(TAG_PAYLOAD);
                    let real = pstatus.count(u8::equivalent_datatype()) as usize;
                    if real != len {
                        // A header that lies about its payload: drain what was sent (its
                        // real size) and count the sender as lost.
                        let mut sink = self.inbox.pool().take(real);
                        pmsg.matched_receive_into(sink.as_bytes_mut());
                        self.inbox.pool().give(sink);
                        mailbox.complete(target.slot, false);
                        self.mark_lost(src);
                        self.inbox.wake();
                        return Took::Message;
                    }
                    let mut pmsg = Some(pmsg);
                    let mut guard = self.scratch.lock().expect("mpi scratch poisoned");
                    let scratch = &mut guard.words;
                    let words = target.bytes().div_ceil(8).max(1);
                    if scratch.len() < words {
                        scratch.resize(words, 0);
                    }
                    let r = target.receive(
                        |buf| {
                            if let Some(m) = pmsg.take() {
                                m.matched_receive_into(buf);
                            }
                            Ok(())
                        },
                        scratch,
                    );
                    mailbox.complete(target.slot, r.is_ok());
                    self.inbox.wake();
                    return Took::Message;
                }
                let payload = if len > 0 {
                    // The payload was sent right after its header: it is (about to be) here.
                    // Its buffer is sized by the message MPI holds, never by the header.
                    let (pmsg, pstatus) = comm
                        .process_at_rank(src as i32)
                        .matched_probe_with_tag(TAG_PAYLOAD);
                    let real = pstatus.count(u8::equivalent_datatype()) as usize;
                    let mut payload = self.inbox.pool().take(real);
                    pmsg.matched_receive_into(payload.as_bytes_mut());
                    if real != len {
                        self.inbox.pool().give(payload);
                        self.mark_lost(src);
                        return Took::Message;
                    }
                    payload
                } else {
                    self.inbox.pool().take(0)
                };
                frame.payload = payload;
                self.inbox.deliver(frame);
            }
            TAG_FRAME => {
                let n = status.count(u8::equivalent_datatype()) as usize;
                let mut guard = self.scratch.lock().expect("mpi scratch poisoned");
                let Scratch { words, frame } = &mut *guard;
                frame.set_len_bytes(n);
                msg.matched_receive_into(frame.as_bytes_mut());
                self.take_packed(src, frame.as_bytes(), words);
            }
            TAG_GOODBYE => {
                msg.matched_receive_into(&mut byte[..]);
                self.mark_lost(src);
            }
            TAG_STOP => {
                msg.matched_receive_into(&mut byte[..]);
                self.stopped.store(true, Ordering::SeqCst);
                return Took::Stop;
            }
            _ => {
                // Not ours (cannot happen on the duplicated communicator): drain it.
                let n = status.count(u8::equivalent_datatype()) as usize;
                msg.matched_receive_into(&mut vec![0u8; n][..]);
            }
        }
        Took::Message
    }

    /// Delivers a whole frame received in one message (header, then payload): into its posted
    /// slot if there is one, else into the mailbox.
    fn take_packed(&self, src: usize, bytes: &[u8], scratch: &mut Vec<u64>) {
        let decoded = bytes
            .get(..HEADER_BYTES)
            .and_then(|h| <&[u8; HEADER_BYTES]>::try_from(h).ok())
            .map(Frame::decode_header);
        let Some(Ok((mut frame, len))) = decoded else {
            self.mark_lost(src);
            return;
        };
        let data = &bytes[HEADER_BYTES..];
        if len != data.len() {
            // The header disagrees with the message: the peer is broken.
            self.mark_lost(src);
            return;
        }
        frame.src = src;
        if let Some((mailbox, target)) = self.inbox.route(&frame, len) {
            // The payload follows the 56-byte header in 8-byte words: aligned, so a reducing
            // step reduces straight from it (the scratch only serves an unaligned fallback).
            if scratch.is_empty() {
                scratch.resize(1 << 10, 0);
            }
            let r = target.receive_from(data, scratch);
            mailbox.complete(target.slot, r.is_ok());
            self.inbox.wake();
            return;
        }
        let mut payload = self.inbox.pool().take(len);
        crate::copy::copy_slice(payload.as_bytes_mut(), data);
        frame.payload = payload;
        self.inbox.deliver(frame);
    }

    fn mark_lost(&self, rank: usize) {
        self.lost[rank].store(true, Ordering::SeqCst);
        self.inbox.wake();
    }

    /// Receiver thread: takes messages until told to stop; yields while they come, then
    /// naps with a growing back-off. Every wait is a `park_timeout`, so a driver that parks
    /// (and so waits for a message this thread must take) or leaves work behind wakes it at
    /// once ([`Inbox::park_driver`]; a driver that leaves nothing pending lets the nap, at most
    /// `max_idle_sleep`, run out); and after standing aside for polling drivers it polls afresh
    /// (no back-off carried over), so the message a parked driver waits for is taken without
    /// a back-off sleep in between.
    pub(super) fn run(&self, cfg: &MpiConfig) {
        const FIRST_NAP: Duration = Duration::from_micros(1);
        let mut idle = 0u32;
        let mut nap = FIRST_NAP;
        while !self.stopped.load(Ordering::SeqCst) {
            if cfg.receiver_defers && self.inbox.drivers_polling() {
                // A driver polls MPI itself; it unparks us when it parks or leaves work behind
                // (the timeout bounds the other hand-backs, e.g. a driver asleep on its handle,
                // or one that left with nothing pending).
                std::thread::park_timeout(cfg.max_idle_sleep);
                (idle, nap) = (0, FIRST_NAP);
                continue;
            }
            let took = {
                let _g = self.lock.lock().expect("mpi receive lock poisoned");
                self.take_one()
            };
            match took {
                Took::Stop => return,
                Took::Message => (idle, nap) = (0, FIRST_NAP),
                Took::Nothing => {
                    idle = idle.saturating_add(1);
                    if idle <= cfg.idle_spins {
                        std::thread::yield_now();
                    } else {
                        // Not `sleep`: a parking driver's unpark ends the nap.
                        std::thread::park_timeout(nap);
                        nap = (nap * 2).min(cfg.max_idle_sleep);
                    }
                }
            }
        }
    }
}
