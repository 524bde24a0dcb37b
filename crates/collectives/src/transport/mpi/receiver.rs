//! The receiving side of the MPI transport: takes incoming frames (header, then payload) and
//! goodbyes, from the receiver thread or from the engine thread between rounds.
//!
//! The next message on pardis's frame communicator is received into a *landing buffer* posted
//! ahead (`MPI_Irecv` from any source with any tag), so that MPI copies an arriving small
//! frame straight into it — one copy, matched on arrival — instead of parking it in its
//! unexpected-message queue until a probe finds it (a second copy and a second look). One
//! receive matching every message keeps MPI's arrival order between the frames, headers and
//! goodbyes of a peer exactly as a probe for any message did. Two-message payloads travel on a
//! communicator of their own, so they never land in (and never overflow) the landing buffer.
//! The receive is posted again at the start of the next look, not at the end of a take: there
//! it would sit between a frame's arrival and its collective's completion; a frame that comes
//! while none is posted waits in MPI's unexpected queue and is matched (one copy more) when the
//! next look posts.
//!
//! A driver running a blocking collective inline offers each packed frame it takes to that
//! collective first ([`Receiver::take_one_into`], [`ActiveOp::accept`]): the frame its current
//! step awaits is reduced or copied straight from the landing buffer — no pooled copy, no
//! mailbox, no wake-up between the frame's arrival and its use.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::mpi::datatype::Equivalence as _;
use ::mpi::ffi;
use ::mpi::point_to_point::Source as _;
use ::mpi::raw::AsRaw as _;
use ::mpi::topology::Communicator as _;

use super::{
    MpiConfig, SharedComm, MAX_PACKED_FRAME_BYTES, TAG_FRAME, TAG_GOODBYE, TAG_HEADER, TAG_PAYLOAD,
    TAG_STOP,
};
use crate::dtype::AlignedBuf;
use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::Inbox;
use crate::program::ActiveOp;

/// What taking one incoming message did.
#[derive(PartialEq, Eq)]
pub(super) enum Took {
    Nothing,
    Message,
    /// A frame the caller's operation took from the landing buffer ([`Receiver::take_one_into`]).
    Accepted,
    Stop,
}

/// Bytes of the landing buffer: the largest message on the frame communicator (a packed frame:
/// header plus a payload below [`MAX_PACKED_FRAME_BYTES`]; headers, goodbyes and the stop are
/// smaller).
const LANDING_BYTES: usize = HEADER_BYTES + MAX_PACKED_FRAME_BYTES;

/// The receiving side: shared by the receiver thread and the engine thread (`progress`).
pub(super) struct Receiver {
    pub(super) comm: Arc<SharedComm>,
    pub(super) lost: Arc<Vec<AtomicBool>>,
    pub(super) inbox: Arc<Inbox>,
    /// The landing buffer and the receive posted into it. Held from a message's arrival to the
    /// end of its handling (a header's payload included), so that two threads never split a
    /// header from its payload; whoever holds it takes messages.
    pub(super) lock: Mutex<Landing>,
    /// The stop message was taken (by either thread): the receiver thread ends, and no receive
    /// is posted any more (none may be pending at `MPI_Finalize`).
    pub(super) stopped: AtomicBool,
    /// The transport is shutting down: the receiver thread no longer stands aside for polling
    /// drivers (a driver on a surviving communicator clone polls nothing once the transport is
    /// closed, and the stop message must still be taken).
    pub(super) stopping: AtomicBool,
}

/// The receiving side's own buffers, reused for every message (no pool round trip).
pub(super) struct Landing {
    /// Where the next message on the frame communicator lands ([`LANDING_BYTES`]); never
    /// resized, so its storage stays put while a receive into it is posted.
    buf: AlignedBuf,
    /// The receive posted into `buf`, if any.
    request: Option<ffi::MPI_Request>,
}

// SAFETY: an MPI request handle may be tested from any thread under `MPI_THREAD_MULTIPLE`;
// `buf` is owned memory that MPI writes only while the request is pending, and the landing is
// only reached through the receiver's mutex.
unsafe impl Send for Landing {}

impl Default for Landing {
    fn default() -> Self {
        let mut buf = AlignedBuf::default();
        buf.set_len_bytes(LANDING_BYTES);
        Self { buf, request: None }
    }
}

impl Receiver {
    /// Posts the landing buffer's receive unless one is pending or the stop was taken.
    fn post(&self, landing: &mut Landing) {
        if landing.request.is_some() || self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let bytes = landing.buf.as_bytes_mut();
        // SAFETY: `bytes` is the landing buffer's storage, which is never resized or freed
        // while the request is pending (the receiver lives until after the stop message
        // completed the last one, and none is posted after it); its length fits an int; the
        // communicator is valid until `MPI_Finalize`, and the constants are MPI's.
        let request = unsafe {
            let mut request = ffi::RSMPI_REQUEST_NULL;
            ffi::MPI_Irecv(
                bytes.as_mut_ptr().cast(),
                bytes.len() as i32,
                ffi::RSMPI_UINT8_T,
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                self.comm.frames.as_raw(),
                &mut request,
            );
            request
        };
        landing.request = Some(request);
    }

    /// Takes at most one incoming message (a frame with its payload, a goodbye or the stop);
    /// the caller holds [`Receiver::lock`] and passes what it guards.
    pub(super) fn take_one(&self, landing: &mut Landing) -> Took {
        self.take_one_into(landing, None)
    }

    /// [`take_one`](Self::take_one), offering a packed frame to `into` first
    /// ([`ActiveOp::accept`]): [`Took::Accepted`] when it took it.
    pub(super) fn take_one_into(
        &self,
        landing: &mut Landing,
        into: Option<&mut dyn ActiveOp>,
    ) -> Took {
        self.post(landing);
        let Some(request) = landing.request.as_mut() else {
            return Took::Nothing;
        };
        let mut flag = 0;
        // SAFETY: `MPI_Status` is plain data that MPI fills in.
        let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: `request` is the pending receive posted above (a completed one is taken out
        // of `landing.request` below and never tested again).
        unsafe { ffi::MPI_Test(request, &mut flag, &mut status) };
        if flag == 0 {
            return Took::Nothing;
        }
        landing.request = None;
        let mut n: i32 = 0;
        // SAFETY: `status` belongs to the completed receive.
        unsafe { ffi::MPI_Get_count(&status, ffi::RSMPI_UINT8_T, &mut n) };
        let n = usize::try_from(n).unwrap_or(0).min(LANDING_BYTES);
        let src = status.MPI_SOURCE as usize;
        let bytes = &landing.buf.as_bytes()[..n];
        match status.MPI_TAG {
            TAG_FRAME => {
                return if self.take_packed(src, bytes, into) {
                    Took::Accepted
                } else {
                    Took::Message
                };
            }
            TAG_HEADER => self.take_header(src, bytes),
            TAG_GOODBYE => self.mark_lost(src),
            TAG_STOP => {
                self.stopped.store(true, Ordering::SeqCst);
                return Took::Stop;
            }
            // Not ours (cannot happen on the duplicated communicator): already drained.
            _ => {}
        }
        Took::Message
    }

    /// A frame header that arrived alone: its payload (if any) follows on the payload
    /// communicator, into a pooled buffer put into its collective's mailbox.
    fn take_header(&self, src: usize, header: &[u8]) {
        let decoded = <&[u8; HEADER_BYTES]>::try_from(header)
            .ok()
            .map(Frame::decode_header);
        let Some(Ok((mut frame, len))) = decoded else {
            // A corrupt header cannot be resynchronised: treat the peer as lost.
            self.mark_lost(src);
            return;
        };
        frame.src = src;
        let payload = if len > 0 {
            // The payload was sent right after its header: it is (about to be) here. Its
            // buffer is sized by the message MPI holds, never by the header; it is taken even
            // when its collective finished here, so that the next header's payload is the next
            // one.
            let (pmsg, pstatus) = self
                .comm
                .payloads
                .process_at_rank(src as i32)
                .matched_probe_with_tag(TAG_PAYLOAD);
            let real = pstatus.count(u8::equivalent_datatype()) as usize;
            let mut payload = self.inbox.pool().take(real);
            pmsg.matched_receive_into(payload.as_bytes_mut());
            if real != len {
                // A header that lies about its payload: the sender is broken.
                self.inbox.pool().give(payload);
                self.mark_lost(src);
                return;
            }
            payload
        } else {
            self.inbox.pool().take(0)
        };
        frame.payload = payload;
        // Looked up once the payload proved the header honest (a lying one opens no mailbox).
        let mailbox = self.inbox.mailbox_of(&frame);
        self.inbox.deliver_to(mailbox, frame);
    }

    /// Delivers a whole frame received in one message (header, then payload): to `into` if it
    /// accepts it ([`ActiveOp::accept`]), else to its collective's mailbox. Returns whether
    /// `into` took it.
    fn take_packed(&self, src: usize, bytes: &[u8], into: Option<&mut dyn ActiveOp>) -> bool {
        let decoded = bytes
            .get(..HEADER_BYTES)
            .and_then(|h| <&[u8; HEADER_BYTES]>::try_from(h).ok())
            .map(Frame::decode_header);
        let Some(Ok((mut frame, len))) = decoded else {
            self.mark_lost(src);
            return false;
        };
        let data = &bytes[HEADER_BYTES..];
        if len != data.len() {
            // The header disagrees with the message: the peer is broken.
            self.mark_lost(src);
            return false;
        }
        frame.src = src;
        if into.is_some_and(|op| op.accept(&frame, data)) {
            return true;
        }
        let Some(mailbox) = self.inbox.mailbox_of(&frame) else {
            // Its collective finished here: nothing to keep.
            return false;
        };
        let mut payload = self.inbox.pool().take(len);
        crate::copy::copy_slice(payload.as_bytes_mut(), data);
        frame.payload = payload;
        self.inbox.deliver_to(Some(mailbox), frame);
        false
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
            if cfg.receiver_defers
                && !self.stopping.load(Ordering::SeqCst)
                && self.inbox.drivers_polling()
            {
                // A driver polls MPI itself; it unparks us when it parks or leaves work behind,
                // and so does a wake-up that finds no driver (the nap bounds the rest: a driver
                // that left with nothing pending).
                if self.inbox.poller_stands_aside(cfg.stand_aside_sleep) {
                    (idle, nap) = (0, FIRST_NAP);
                    continue;
                }
            }
            let took = {
                let mut landing = self.lock.lock().expect("mpi receive lock poisoned");
                self.take_one(&mut landing)
            };
            match took {
                Took::Stop => return,
                Took::Message | Took::Accepted => (idle, nap) = (0, FIRST_NAP),
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
