//! MPI transport (cargo feature `mpi`): ranks are the processes of an MPI job, started by the
//! MPI launcher users already have (`mpirun -n 4 ./app`), on one host or many.
//!
//! **Design.** pardis keeps its own progress engine and schedules and uses MPI only for
//! point-to-point delivery, so preemption and stickiness work exactly as on the other
//! transports. All pardis traffic of a process goes through *one* communicator duplicated from
//! `MPI_COMM_WORLD` at [`MpiJob::init`] (so it never matches the application's own MPI
//! messages). The issue suggested one duplicated MPI communicator per pardis collective; that
//! is not done on purpose: `MPI_Comm_dup` is itself a collective that every rank must call in
//! the same order, so creating communicators per collective (or per `split`) from the engine
//! would bring back the very ordering constraint the engine removes. Instead, as on TCP, every
//! frame carries the pardis header (communicator id, sequence number, fingerprint) and is
//! sorted into its collective's mailbox.
//!
//! **Wire.** A frame whose payload is smaller than [`MpiConfig::packed_frame_bytes`] and
//! [`MpiConfig::zero_copy_send_bytes`] (both 64 KiB) is *one* MPI message (tag `0x5048`): the
//! 56-byte header followed by the payload, copied into a pooled buffer, sent without waiting
//! and reaped later — one send and one receive per frame, which is what small collectives pay
//! for. The receiving side keeps a receive for the next message posted ahead into a landing
//! buffer of [`MAX_PACKED_FRAME_BYTES`] plus the header, so MPI matches an arriving frame at
//! once and copies it there (no unexpected-message queue, no probe). No pardis peer sends a
//! larger message there (`MpiConfig::validate` bounds packed frames); a larger one — only a
//! foreign program sending on pardis's own duplicate could — would be `MPI_ERR_TRUNCATE`, which
//! MPI's default error handler makes fatal to the job. Other frames are two MPI
//! messages: the header (tag `0x5044`) and the payload (tag `0x5045`), from
//! [`MpiConfig::zero_copy_send_bytes`] on sent straight from the collective's buffer (the
//! engine tests the request until MPI is done with it), below it copied into a pooled buffer
//! and reaped later. Headers, packed frames and goodbyes travel on pardis's own duplicate of
//! `MPI_COMM_WORLD` (so the tags never meet the application's), payloads on a second one (so a
//! payload never lands in the landing buffer); sends of one process are serialised, and MPI
//! does not reorder messages of one communicator and tag between two processes, so the `k`-th
//! payload from a peer belongs to its `k`-th non-empty header.
//!
//! **Per-collective flow control.** A receiver thread per process takes every incoming frame
//! as soon as it arrives (its posted receive completes) into a pooled buffer put into its
//! collective's mailbox (not straight into the collective's buffer as on TCP's direct
//! receive, `Config::direct_receive`: over MPI that was no faster at any size and up to 1.7×
//! slower from 128 KiB, benches/README.md) — so a large (rendezvous-protocol) send of one collective never waits
//! for the destination to start *that* collective. The thread yields while messages come in,
//! then sleeps with a growing back-off ([`MpiConfig::idle_spins`],
//! [`MpiConfig::max_idle_sleep`]) instead of spinning, so it does not starve the ranks on a
//! machine with few cores.
//!
//! **Faults.** An aborted or panicking rank sends a goodbye message (tag `0x5046`) to every
//! peer, which then fails the collectives waiting for it with
//! [`PeerLost`](crate::CollectiveError::PeerLost); a rank that shuts down normally says goodbye
//! too (it needs nothing more), so that peers never wait for it to take a message. A *killed* process is MPI's business: with
//! MPI's default error handler the launcher ends the whole job.
//!
//! MPI must provide `MPI_THREAD_MULTIPLE` (Open MPI and MPICH do): the engine thread sends
//! while the receiver thread receives, and the application may use MPI itself through
//! [`MpiJob::mpi_world`].

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::mpi::environment::Universe;
use ::mpi::ffi;
use ::mpi::point_to_point::Destination as _;
use ::mpi::raw::AsRaw as _;
use ::mpi::topology::{Communicator as _, SimpleCommunicator};
use ::mpi::Threading;

use super::Transport;
use crate::dtype::AlignedBuf;
use crate::engine::Engine;
use crate::frame::{Frame, HEADER_BYTES};
use crate::inbox::Inbox;
use crate::{CollectiveError, Communicator, Config, Result};

mod receiver;

use receiver::{Landing, Receiver, Took};

pub use ::mpi as rsmpi;

/// MPI tag of a frame header.
const TAG_HEADER: i32 = 0x5044;
/// MPI tag of a frame payload.
const TAG_PAYLOAD: i32 = 0x5045;
/// MPI tag of the notice that the sending rank is gone (aborted or panicked).
const TAG_GOODBYE: i32 = 0x5046;
/// MPI tag a process sends to itself to stop its receiver thread.
const TAG_STOP: i32 = 0x5047;
/// MPI tag of a whole small frame: header and payload in one message.
const TAG_FRAME: i32 = 0x5048;

/// Sends pending (posted, not yet reaped) from which the send path itself reaps
/// ([`MpiTransport::reap_some`]); below it `progress` does, once per round, and the engine
/// thread when the rank goes idle (`reap_idle`).
const REAP_AT_SEND: usize = 16;

/// Most messages one drain takes ([`MpiTransport::drain`]): a peer that keeps sending cannot
/// hold the thread in the drain past its own timeouts and rounds.
const DRAIN_MAX: usize = 64;

/// How long shutdown waits for payloads still being sent to live peers.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Default [`MpiConfig::packed_frame_bytes`]: 64 KiB (every payload that is copied anyway
/// travels with its header).
pub const DEFAULT_PACKED_FRAME_BYTES: usize = 64 << 10;

/// [`Config::small_message_bytes`] in [`MpiConfig::default`]: 256 KiB (halving-doubling below,
/// the ring from there). Over MPI on 4 ranks of a 2-core VM halving-doubling took 64–79 µs at
/// 64 KiB and 89–131 µs at 128 KiB against the ring's 110–125 and 173–189 µs (its `2 (n − 1)`
/// dependent steps against `2 log2 n`), and about the same at 256 KiB (benches/README.md). The
/// engine's own default stays 64 KiB: on threads of one process the ring is faster at 64 KiB
/// (34–39 µs against 44–46 µs on 4 ranks).
pub const DEFAULT_MPI_SMALL_MESSAGE_BYTES: usize = 256 << 10;

/// [`Config::halving_doubling_bytes`] of the MPI transport when the config leaves it `None`:
/// 2 MiB (on 4, 8, 16, … ranks: halving-doubling all-reduce, recursive-halving reduce-scatter
/// and recursive-doubling all-gather below it). Over Open MPI on 4 ranks of a 2-core VM the
/// recursive algorithms took 0.4–0.95× the ring's time from 256 KiB to 1.5 MiB (median of six
/// alternated jobs per size), and were even to slower at 2 MiB in one of two runs
/// (benches/README.md, collectives, "Halving-doubling on power-of-two worlds over TCP").
pub const DEFAULT_MPI_HALVING_DOUBLING_BYTES: usize = 2 << 20;

/// [`Config::recursive_doubling_bytes`] in [`MpiConfig::default`]: 3 KiB. Recursive doubling
/// sends the whole vector in one frame, header included; Open MPI's shared-memory transport
/// (`btl_vader_eager_limit`, 4 KiB with its own header) sends larger messages by a rendezvous
/// that pardis's threads progress several µs more slowly than the eager path. Below 3 KiB the
/// frame stays eager; from there halving-doubling sends halves. On a Zen 4 VM, 2 ranks,
/// pardis-mpi with recursive doubling below 16 KiB took 7.9 µs at 4 KiB (3.1 µs at 2 KiB) and
/// 22.3 µs at 16 KiB, with halving-doubling from 4 KiB 2.6 and 11.6 µs; with the eager limit
/// raised to 8 KiB recursive doubling took 1.6 µs at 4 KiB (benches/README.md, collectives,
/// "Zen 4: the eager limit").
pub const DEFAULT_MPI_RECURSIVE_DOUBLING_BYTES: usize = 3 << 10;

/// [`Config::small_piece_bytes`] in [`MpiConfig::default`]: 4040 bytes, so that a piece with
/// pardis's 56-byte header stays within Open MPI's 4 KiB shared-memory eager limit (see
/// [`DEFAULT_MPI_RECURSIVE_DOUBLING_BYTES`]).
pub const DEFAULT_MPI_SMALL_PIECE_BYTES: usize = 4096 - HEADER_BYTES;

/// [`Config::small_piece_limit_bytes`] in [`MpiConfig::default`]: 32 KiB. Halving-doubling's
/// halves from 4 KiB crossed the eager limit into the rendezvous; cut into eager pieces they
/// took, on a Zen 4 VM with 2 ranks, 7.7 µs at 8 KiB against 14.1 µs uncut (`MPI_Allreduce`
/// 6.0 µs) and 7.8–8.1 against 11.7–14.4 µs at 16 KiB; on 4 ranks of the 2-core VM 32.7
/// against 38.3 µs at 8 KiB and about even at 16 KiB. At 32 KiB they were still faster on 2
/// ranks (15.1 against 17.8 µs) but 2× slower on 4 ranks, and up to 3× slower there from
/// 64 KiB (each piece a message and a turn of an engine that shares its core); on 2 ranks even
/// at 64 KiB and slower from 128 KiB: benches/README.md, collectives, "Eager pieces".
pub const DEFAULT_MPI_SMALL_PIECE_LIMIT_BYTES: usize = 32 << 10;

/// Largest accepted [`MpiConfig::packed_frame_bytes`]: 64 KiB. Every rank posts the receive
/// for its next incoming message ahead, into a buffer this large plus the header, so a packed
/// frame must fit it whatever the sender's settings.
pub const MAX_PACKED_FRAME_BYTES: usize = 64 << 10;

/// Default [`MpiConfig::zero_copy_send_bytes`]: 64 KiB.
pub const DEFAULT_ZERO_COPY_SEND_BYTES: usize = 64 << 10;

/// How long a send straight from a collective's buffer keeps waiting for MPI to finish with it
/// once its destination is known to be gone (a rank that aborted still takes messages until it
/// shuts down) before the request is abandoned.
const LOST_SEND_GRACE: Duration = Duration::from_millis(500);

/// Largest accepted [`MpiConfig::idle_spins`]: 65 536 (a receiver with nothing to do yields
/// this many times before it sleeps; more is a spin, [`MpiConfig::validate`]).
pub const MAX_IDLE_SPINS: u32 = 1 << 16;
/// Default [`MpiConfig::idle_spins`]: 64.
pub const DEFAULT_IDLE_SPINS: u32 = 64;
/// Default [`MpiConfig::max_idle_sleep`]: 200 µs.
pub const DEFAULT_MAX_IDLE_SLEEP: Duration = Duration::from_micros(200);
/// Smallest accepted [`MpiConfig::max_idle_sleep`]: 10 µs. Shorter naps (0 above all) make
/// the idle or deferring receiver thread a busy loop that takes a core from the ranks.
pub const MIN_IDLE_SLEEP: Duration = Duration::from_micros(10);
/// Largest accepted [`MpiConfig::max_idle_sleep`] and [`MpiConfig::stand_aside_sleep`]:
/// 10 ms. It bounds how long a message waits for an idle receiver thread when nobody wakes it,
/// and how long the receiver stays aside after a driver left with nothing pending.
pub const MAX_IDLE_SLEEP: Duration = Duration::from_millis(10);
/// Default [`MpiConfig::stand_aside_sleep`]: 2 ms. Each end of such a nap wakes the receiver
/// thread on a core where a rank busy-polls: at 200 µs (the receiver's idle nap, its length
/// before) about 2 700 times a second per rank on the 2-vCPU test VM, every one an involuntary
/// switch of the polling rank. With this default (and the wake-ups that end the nap early,
/// see [`MpiConfig::stand_aside_sleep`]) a 1 KiB all-reduce on 2 ranks took 1.59–1.62 times
/// the in-process `MPI_Allreduce` against 1.88–1.95 (benches/README.md, collectives, "The
/// receiver's nap").
pub const DEFAULT_STAND_ASIDE_SLEEP: Duration = Duration::from_millis(2);

/// How to join an MPI job.
#[derive(Debug, Clone, PartialEq)]
pub struct MpiConfig {
    /// Engine settings. Default: [`Config::default`] (waiting threads drive the engine, which
    /// measured faster than handing every operation to the engine thread up to 1 MiB and about
    /// even above: benches/README.md, collectives, "Measurements behind code defaults") with
    /// [`Config::small_message_bytes`] at [`DEFAULT_MPI_SMALL_MESSAGE_BYTES`],
    /// [`Config::recursive_doubling_bytes`] at [`DEFAULT_MPI_RECURSIVE_DOUBLING_BYTES`] and
    /// [`Config::small_piece_bytes`] / [`Config::small_piece_limit_bytes`] at
    /// [`DEFAULT_MPI_SMALL_PIECE_BYTES`] / [`DEFAULT_MPI_SMALL_PIECE_LIMIT_BYTES`].
    pub engine: Config,
    /// Empty looks (tests of the posted receive, each followed by a `yield`) before the
    /// receiver thread starts sleeping.
    /// Default: [`DEFAULT_IDLE_SPINS`].
    pub idle_spins: u32,
    /// Longest sleep of an idle receiver thread; sleeps double from 1 µs up to this, and a
    /// message resets them. A driver that parks waiting for a message (and so needs this
    /// thread to take it) ends a sleep at once; otherwise this bounds the added latency after an
    /// idle period. Between [`MIN_IDLE_SLEEP`] and [`MAX_IDLE_SLEEP`] (checked by
    /// [`MpiConfig::validate`]). Default: [`DEFAULT_MAX_IDLE_SLEEP`].
    pub max_idle_sleep: Duration,
    /// Payloads from this size on are sent straight from the collective's buffer (the engine
    /// tests the request until MPI is done with it); smaller ones are copied behind their
    /// header into one pooled buffer, sent as one message and left to MPI (they go out
    /// eagerly, and the engine need not wait for them).
    /// Default: [`DEFAULT_ZERO_COPY_SEND_BYTES`].
    pub zero_copy_send_bytes: usize,
    /// Frames whose payload is smaller than this (and than `zero_copy_send_bytes`) go out as
    /// one MPI message, header and payload together; others as two (header, then payload).
    /// Default: [`DEFAULT_PACKED_FRAME_BYTES`]; 0 sends every frame as two messages; at most
    /// [`MAX_PACKED_FRAME_BYTES`] ([`MpiConfig::validate`]).
    pub packed_frame_bytes: usize,
    /// Whether the receiver thread stands aside (parks) while an application thread drives the
    /// engine without parking: that thread polls MPI itself, and on few cores the two would
    /// take turns on the CPU and the receive lock. The driver unparks it when it parks or
    /// leaves work behind, and so does a submission or delivery after the last driver left;
    /// [`stand_aside_sleep`](Self::stand_aside_sleep) bounds the rest. Default: true.
    pub receiver_defers: bool,
    /// Longest sleep of the receiver thread standing aside for polling drivers
    /// (`receiver_defers`): a driver that parks or leaves work behind, and a submission or
    /// delivery after the last driver left, end it at once, so it bounds only how long a
    /// message waits after a driver left with nothing pending. Between [`MIN_IDLE_SLEEP`] and
    /// [`MAX_IDLE_SLEEP`] ([`MpiConfig::validate`]). Default: [`DEFAULT_STAND_ASIDE_SLEEP`].
    pub stand_aside_sleep: Duration,
}

impl MpiConfig {
    /// Checks the bounds not in the types: [`Config::validate`] of `engine`,
    /// [`MpiConfig::max_idle_sleep`] and [`MpiConfig::stand_aside_sleep`] within
    /// [`MIN_IDLE_SLEEP`]..=[`MAX_IDLE_SLEEP`],
    /// [`MpiConfig::idle_spins`] at most [`MAX_IDLE_SPINS`] and
    /// [`MpiConfig::packed_frame_bytes`] at most [`MAX_PACKED_FRAME_BYTES`].
    /// [`MpiJob::init`] calls it before it initialises MPI.
    pub fn validate(&self) -> Result<()> {
        self.engine.validate()?;
        for (name, sleep) in [
            ("max_idle_sleep", self.max_idle_sleep),
            ("stand_aside_sleep", self.stand_aside_sleep),
        ] {
            if !(MIN_IDLE_SLEEP..=MAX_IDLE_SLEEP).contains(&sleep) {
                return Err(CollectiveError::InvalidInput(format!(
                    "MpiConfig::{name} is {sleep:?}, outside the accepted \
                     {MIN_IDLE_SLEEP:?}..={MAX_IDLE_SLEEP:?}"
                )));
            }
        }
        if self.idle_spins > MAX_IDLE_SPINS {
            return Err(CollectiveError::InvalidInput(format!(
                "MpiConfig::idle_spins is {}, more than the largest accepted {MAX_IDLE_SPINS}",
                self.idle_spins
            )));
        }
        if self.packed_frame_bytes > MAX_PACKED_FRAME_BYTES {
            return Err(CollectiveError::InvalidInput(format!(
                "MpiConfig::packed_frame_bytes is {}, more than the largest accepted \
                 {MAX_PACKED_FRAME_BYTES} (the receivers' landing buffer)",
                self.packed_frame_bytes
            )));
        }
        Ok(())
    }
}

impl Default for MpiConfig {
    fn default() -> Self {
        Self {
            engine: Config {
                small_message_bytes: DEFAULT_MPI_SMALL_MESSAGE_BYTES,
                recursive_doubling_bytes: DEFAULT_MPI_RECURSIVE_DOUBLING_BYTES,
                small_piece_bytes: DEFAULT_MPI_SMALL_PIECE_BYTES,
                small_piece_limit_bytes: DEFAULT_MPI_SMALL_PIECE_LIMIT_BYTES,
                ..Config::default()
            },
            idle_spins: DEFAULT_IDLE_SPINS,
            max_idle_sleep: DEFAULT_MAX_IDLE_SLEEP,
            zero_copy_send_bytes: DEFAULT_ZERO_COPY_SEND_BYTES,
            packed_frame_bytes: DEFAULT_PACKED_FRAME_BYTES,
            receiver_defers: true,
            stand_aside_sleep: DEFAULT_STAND_ASIDE_SLEEP,
        }
    }
}

/// pardis's two duplicates of `MPI_COMM_WORLD`, shared by threads. Never freed
/// (`MPI_Comm_free`): they live until `MPI_Finalize`, which releases them, so no thread can
/// free one while another still uses it.
struct SharedComm {
    /// Frame headers, packed frames, goodbyes and the stop: every message here fits the
    /// receiver's landing buffer (see [`receiver`]).
    frames: ManuallyDrop<SimpleCommunicator>,
    /// The payloads of two-message frames (any size).
    payloads: ManuallyDrop<SimpleCommunicator>,
}

// SAFETY: the handles are opaque MPI object references; MPI is initialised with
// `MPI_THREAD_MULTIPLE` (checked in `MpiJob::init`), under which any thread may call MPI on it
// concurrently. It is never freed before `MPI_Finalize` (`ManuallyDrop`).
unsafe impl Send for SharedComm {}
// SAFETY: as above; every operation through `&SharedComm` is a thread-safe MPI call.
unsafe impl Sync for SharedComm {}

/// The sends in flight, and buffers of finished packed frames kept for the next ones.
#[derive(Default)]
struct Sends {
    pending: Vec<PendingSend>,
    spare: Vec<AlignedBuf>,
}

/// Most buffers of finished packed frames the send path keeps for reuse ([`Sends::spare`]).
const SPARE_SEND_BUFFERS: usize = 2 * REAP_AT_SEND;

/// A payload on its way out: the `MPI_Isend` request and the buffer it reads, kept here until
/// `MPI_Test` says MPI is done with it.
struct PendingSend {
    request: ffi::MPI_Request,
    payload: AlignedBuf,
    dst: usize,
}

// SAFETY: an MPI request handle may be tested from any thread under `MPI_THREAD_MULTIPLE`;
// the buffer is owned data that MPI only reads until the request completes.
unsafe impl Send for PendingSend {}

impl PendingSend {
    /// Whether MPI finished sending (then the buffer may be reused).
    fn done(&mut self) -> bool {
        let mut flag = 0;
        // SAFETY: `request` came from `MPI_Isend` and was not completed yet (completed entries
        // are removed), and `RSMPI_STATUS_IGNORE` is MPI's "no status" marker.
        unsafe { ffi::MPI_Test(&mut self.request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
        flag != 0
    }

    /// Gives up on a send that will never complete (its destination is gone): the request is
    /// released and the buffer leaked, so MPI can never read freed memory.
    fn abandon(mut self) {
        // SAFETY: `request` is an active request from `MPI_Isend`; freeing it lets MPI finish
        // or drop it in the background, and its buffer is never freed (`forget` below).
        unsafe { ffi::MPI_Request_free(&mut self.request) };
        std::mem::forget(self.payload);
    }
}

/// The MPI library, initialised, with pardis's world communicator on top of it. Dropping it
/// stops the transport and finalises MPI (`MPI_Finalize`); keep it alive as long as any
/// [`Communicator`] of the job is used (afterwards their operations fail with an error).
pub struct MpiJob {
    world: Option<Communicator>,
    transport: Arc<MpiTransport>,
    universe: Option<Universe>,
}

impl std::fmt::Debug for MpiJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiJob")
            .field("rank", &self.transport.rank)
            .field("size", &self.transport.size)
            .finish()
    }
}

impl MpiJob {
    /// Initialises MPI with `MPI_THREAD_MULTIPLE` (rank and size come from the MPI launcher)
    /// and starts this rank's engine. Fails if MPI was initialised before in this process or
    /// cannot run threads concurrently.
    pub fn init(cfg: &MpiConfig) -> Result<Self> {
        cfg.validate()?;
        let (universe, level) =
            ::mpi::initialize_with_threading(Threading::Multiple).ok_or_else(|| {
                CollectiveError::Rendezvous("MPI is already initialised in this process".into())
            })?;
        if level != Threading::Multiple {
            return Err(CollectiveError::Rendezvous(format!(
                "the MPI library provides {level:?} threading, pardis needs Multiple"
            )));
        }
        let comm = SharedComm {
            frames: ManuallyDrop::new(universe.world().duplicate()),
            payloads: ManuallyDrop::new(universe.world().duplicate()),
        };
        let transport = MpiTransport::start(comm, cfg)?;
        let engine = match Engine::start(transport.clone(), cfg.engine.clone()) {
            Ok(e) => e,
            Err(e) => {
                // The receiver thread runs (and a receive is posted) until the transport stops:
                // stop it before the universe finalises MPI.
                transport.shutdown();
                return Err(e);
            }
        };
        let world = Communicator::world(engine);
        Ok(Self {
            world: Some(world),
            transport,
            universe: Some(universe),
        })
    }

    /// The world communicator of the job (ranks as in `MPI_COMM_WORLD`).
    pub fn world(&self) -> &Communicator {
        self.world.as_ref().expect("world lives until drop")
    }

    /// `MPI_COMM_WORLD`, for the application's own MPI calls next to pardis's.
    pub fn mpi_world(&self) -> SimpleCommunicator {
        self.universe
            .as_ref()
            .expect("universe lives until drop")
            .world()
    }
}

impl Drop for MpiJob {
    fn drop(&mut self) {
        drop(self.world.take());
        self.transport.shutdown();
        // Dropping the universe calls `MPI_Finalize`.
        drop(self.universe.take());
    }
}

/// Posts `MPI_Isend` of `bytes` to rank `dst` of `comm` with `tag`; returns the request.
///
/// # Safety
/// `bytes` must stay alive and unchanged until the request completes (or is freed because
/// `dst` is gone), and its length must fit an `int`; `dst` must be a rank of `comm`.
unsafe fn isend(comm: &SimpleCommunicator, dst: usize, bytes: &[u8], tag: i32) -> ffi::MPI_Request {
    // SAFETY: the caller's contract; `comm` is a valid communicator (never freed before
    // `MPI_Finalize`), `request` a place for the handle, and the null-request and datatype
    // statics are MPI constants set once at initialisation.
    unsafe {
        let mut request = ffi::RSMPI_REQUEST_NULL;
        ffi::MPI_Isend(
            bytes.as_ptr().cast(),
            bytes.len() as i32,
            ffi::RSMPI_UINT8_T,
            dst as i32,
            tag,
            comm.as_raw(),
            &mut request,
        );
        request
    }
}

/// One process's end of the MPI transport.
struct MpiTransport {
    rank: usize,
    size: usize,
    /// pardis's communicators, valid until `MPI_Finalize` (see `closed`).
    comm: Arc<SharedComm>,
    /// Set once by [`shutdown`](Self::shutdown): later sends fail and polls do nothing.
    closed: AtomicBool,
    /// Serialises sends so that a header and its payload stay adjacent per destination; holds
    /// the payloads still being sent.
    sending: Mutex<Sends>,
    lost: Arc<Vec<AtomicBool>>,
    inbox: Arc<Inbox>,
    receiving: Arc<Receiver>,
    receiver: Mutex<Option<JoinHandle<()>>>,
    /// [`MpiConfig::zero_copy_send_bytes`].
    zero_copy_send_bytes: usize,
    /// [`MpiConfig::packed_frame_bytes`].
    packed_frame_bytes: usize,
}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl MpiTransport {
    fn start(comm: SharedComm, cfg: &MpiConfig) -> Result<Arc<Self>> {
        let (rank, size) = (comm.frames.rank() as usize, comm.frames.size() as usize);
        let comm = Arc::new(comm);
        let lost: Arc<Vec<AtomicBool>> =
            Arc::new((0..size).map(|_| AtomicBool::new(false)).collect());
        let inbox = Arc::new(Inbox::default());
        let receiving = Arc::new(Receiver {
            comm: comm.clone(),
            lost: lost.clone(),
            inbox: inbox.clone(),
            lock: Mutex::new(Landing::default()),
            stopped: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        });
        let receiver = {
            let (r, cfg) = (receiving.clone(), cfg.clone());
            std::thread::Builder::new()
                .name(format!("pardis-mpi-recv-{rank}"))
                .spawn(move || r.run(&cfg))
                .map_err(|e| CollectiveError::io("spawning the MPI receiver thread", e))?
        };
        inbox.set_poller(receiver.thread().clone());
        Ok(Arc::new(Self {
            rank,
            size,
            comm,
            closed: AtomicBool::new(false),
            sending: Mutex::new(Sends::default()),
            lost,
            inbox,
            receiving,
            receiver: Mutex::new(Some(receiver)),
            zero_copy_send_bytes: cfg.zero_copy_send_bytes,
            packed_frame_bytes: cfg.packed_frame_bytes,
        }))
    }

    /// The communicators, unless the transport was shut down.
    fn comm(&self) -> Option<&SharedComm> {
        (!self.closed.load(Ordering::SeqCst)).then_some(&*self.comm)
    }

    /// The send lock, unless the transport was shut down meanwhile: [`shutdown`](Self::shutdown)
    /// marks it closed before it takes this lock to say goodbye and wait for the pending sends,
    /// so no send is posted after those.
    fn lock_sending(&self) -> Result<std::sync::MutexGuard<'_, Sends>> {
        let sending = self.sending.lock().expect("mpi send lock poisoned");
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.closed());
        }
        Ok(sending)
    }

    /// Says goodbye, waits for the pending sends and stops the receiver thread; later sends
    /// fail and polls do nothing (the communicators live until `MPI_Finalize`).
    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        // From here drivers' polls do nothing: the receiver thread must take every message
        // (peers' goodbyes end the wait below early, and the stop ends the thread).
        self.receiving.stopping.store(true, Ordering::SeqCst);
        self.inbox.wake_poller();
        let comm = &*self.comm;
        {
            // A rank that shuts down has finished all its collectives: peers may give up on
            // sends to it. Then MPI must be done with every buffer before `MPI_Finalize`: the
            // receiver thread still runs (peers' goodbyes still arrive), sends to gone ranks
            // and, after `SHUTDOWN_GRACE`, all sends are abandoned instead of waited for.
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            let mut sending = self.sending.lock().expect("mpi send lock poisoned");
            self.say_goodbye(comm);
            loop {
                self.reap(&mut sending);
                let give_up = Instant::now() >= deadline;
                let pending = &mut sending.pending;
                let mut i = 0;
                while i < pending.len() {
                    if give_up || self.is_lost(pending[i].dst) {
                        pending.swap_remove(i).abandon();
                    } else {
                        i += 1;
                    }
                }
                if pending.is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            comm.frames
                .process_at_rank(self.rank as i32)
                .send_with_tag(&[0u8][..], TAG_STOP);
            self.inbox.wake_poller();
        }
        if let Some(t) = self.receiver.lock().expect("receiver poisoned").take() {
            let _ = t.join();
        }
        self.lost
            .iter()
            .for_each(|l| l.store(true, Ordering::SeqCst));
        self.inbox.wake();
    }

    /// Tells every peer that this rank is gone (small eager messages; the caller holds the
    /// send lock).
    fn say_goodbye(&self, comm: &SharedComm) {
        for peer in (0..self.size).filter(|&p| p != self.rank) {
            comm.frames
                .process_at_rank(peer as i32)
                .send_with_tag(&[1u8][..], TAG_GOODBYE);
        }
    }

    /// [`reap`](Self::reap) on the send path only once [`REAP_AT_SEND`] sends are pending:
    /// each `MPI_Test` of an unfinished request runs MPI's progress engine (about 0.2 µs here),
    /// which would sit between a small frame's `MPI_Isend` and the engine's next look for the
    /// answer; `progress` reaps after every look for messages that found nothing.
    fn reap_some(&self, sending: &mut Sends) {
        if sending.pending.len() >= REAP_AT_SEND {
            self.reap(sending);
        }
    }

    /// Takes the messages that have arrived, at most [`DRAIN_MAX`], unless the receiver
    /// thread is receiving.
    fn drain(&self) {
        if let Ok(mut landing) = self.receiving.lock.try_lock() {
            for _ in 0..DRAIN_MAX {
                if self.receiving.take_one(&mut landing) != Took::Message {
                    break;
                }
            }
        }
    }

    /// [`reap`](Self::reap) unless another thread holds the send lock.
    fn reap_pending(&self) {
        if let Ok(mut sending) = self.sending.try_lock() {
            if !sending.pending.is_empty() {
                self.reap(&mut sending);
            }
        }
    }

    /// Keeps the buffers of completed sends for the next packed frames (up to
    /// [`SPARE_SEND_BUFFERS`], none larger than the largest packed frame), returns the others
    /// to the pool.
    fn reap(&self, sending: &mut Sends) {
        let Sends { pending, spare } = sending;
        let mut i = 0;
        while i < pending.len() {
            if pending[i].done() {
                let payload = pending.swap_remove(i).payload;
                if spare.len() < SPARE_SEND_BUFFERS
                    && payload.capacity_bytes() <= HEADER_BYTES + MAX_PACKED_FRAME_BYTES
                {
                    spare.push(payload);
                } else {
                    self.inbox.pool().give(payload);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Whether a payload of `len` bytes goes out in one message with its header.
    fn packs(&self, len: usize) -> bool {
        len < self.packed_frame_bytes.min(self.zero_copy_send_bytes)
            && i32::try_from(len + HEADER_BYTES).is_ok()
    }

    /// Sends `head` with `data` as one message ([`TAG_FRAME`]): header and payload copied into
    /// one pooled buffer, posted with `MPI_Isend` and reaped later.
    fn send_packed(&self, dst: usize, head: &Frame, data: &[u8]) -> Result<()> {
        let Some(comm) = self.comm() else {
            return Err(self.closed());
        };
        let mut sending = self.lock_sending()?;
        // A spare buffer of an earlier packed frame, taken under the send lock held anyway
        // (the pool's lock twice per frame otherwise).
        let mut packed = match sending.spare.pop() {
            Some(mut b) => {
                b.set_len_bytes(HEADER_BYTES + data.len());
                b
            }
            None => self.inbox.pool().take(HEADER_BYTES + data.len()),
        };
        let bytes = packed.as_bytes_mut();
        bytes[..HEADER_BYTES].copy_from_slice(&head.encode_header_for(data.len()));
        crate::copy::copy_slice(&mut bytes[HEADER_BYTES..], data);
        // SAFETY: the buffer (heap storage of `packed`, which moves into `sending` without
        // moving its storage) stays alive and unchanged until the request completes in
        // `reap`/`shutdown`; its length fits an int (`packs`).
        let request = unsafe { isend(&comm.frames, dst, packed.as_bytes(), TAG_FRAME) };
        sending.pending.push(PendingSend {
            request,
            payload: packed,
            dst,
        });
        self.reap_some(&mut sending);
        Ok(())
    }

    fn closed(&self) -> CollectiveError {
        CollectiveError::Aborted("the MPI job was finalised (MpiJob dropped)".into())
    }
}

impl Transport for MpiTransport {
    fn world_rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.size
    }

    fn send(&self, dst: usize, frame: Frame) -> Result<()> {
        let len = frame.payload.len_bytes();
        if self.packs(len) {
            let mut head = frame;
            let payload = std::mem::take(&mut head.payload);
            let r = self.send_packed(dst, &head, payload.as_bytes());
            self.inbox.pool().give(payload);
            return r;
        }
        if i32::try_from(len).is_err() {
            return Err(CollectiveError::InvalidInput(format!(
                "an MPI message holds at most {} bytes, this one has {len}",
                i32::MAX
            )));
        }
        let Some(comm) = self.comm() else {
            return Err(self.closed());
        };
        let header = frame.encode_header();
        let mut sending = self.lock_sending()?;
        // The header is small (sent eagerly); the payload goes out without blocking the engine
        // (a blocking rendezvous send from one thread while another probes stalls Open MPI).
        comm.frames
            .process_at_rank(dst as i32)
            .send_with_tag(&header[..], TAG_HEADER);
        if len == 0 {
            self.inbox.pool().give(frame.payload);
        } else {
            // SAFETY: the buffer (heap storage of `payload`, which moves into `sending` without
            // moving its storage) stays alive and unchanged until the request completes in
            // `reap`/`shutdown`; its length fits an int (checked above).
            let request =
                unsafe { isend(&comm.payloads, dst, frame.payload.as_bytes(), TAG_PAYLOAD) };
            sending.pending.push(PendingSend {
                request,
                payload: frame.payload,
                dst,
            });
        }
        self.reap_some(&mut sending);
        Ok(())
    }

    /// Payloads of [`MpiConfig::zero_copy_send_bytes`] and more go out straight from `data` (no staging
    /// copy): the header, then `MPI_Isend` from `data`, tested (yielding between tests) until MPI
    /// is done with it, so that the caller may reuse `data` when this returns. The peer's
    /// receiver thread takes every message as it arrives, whatever its engine does, so the wait
    /// ends as soon as the peer's MPI has pulled the data. Smaller payloads are copied behind
    /// the header into one pooled buffer and sent as one message without waiting.
    fn send_slice(&self, dst: usize, head: Frame, data: &[u8]) -> Result<()> {
        let len = data.len();
        if self.packs(len) {
            return self.send_packed(dst, &head, data);
        }
        if len < self.zero_copy_send_bytes || i32::try_from(len).is_err() {
            // Staged (and `send` reports a payload too large for one MPI message).
            return super::send_copied(self, dst, head, data);
        }
        let Some(comm) = self.comm() else {
            return Err(self.closed());
        };
        if self.is_lost(dst) {
            return Err(CollectiveError::Aborted(format!("rank {dst} is gone")));
        }
        let header = head.encode_header_for(len);
        let mut request = {
            // Header and payload posted under the send lock: the `k`-th payload from this
            // process is the one of its `k`-th non-empty header.
            let _sending = self.lock_sending()?;
            comm.frames
                .process_at_rank(dst as i32)
                .send_with_tag(&header[..], TAG_HEADER);
            // SAFETY: `data` stays borrowed (alive and unchanged) until the request completes
            // below or is abandoned when `dst` is gone; its length fits an int (checked above).
            unsafe { isend(&comm.payloads, dst, data, TAG_PAYLOAD) }
        };
        let mut lost_since: Option<Instant> = None;
        loop {
            let mut flag = 0;
            // SAFETY: `request` is the active request from `MPI_Isend` above (a completed one
            // is not tested again), `RSMPI_STATUS_IGNORE` is MPI's "no status" marker.
            unsafe { ffi::MPI_Test(&mut request, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
            if flag != 0 {
                return Ok(());
            }
            if self.is_lost(dst) {
                let since = *lost_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= LOST_SEND_GRACE {
                    // A gone peer's receiver thread takes every message within microseconds
                    // while it still runs (until that rank shuts down); one that has not taken
                    // this payload in LOST_SEND_GRACE has stopped, so its MPI will not pull the
                    // data any more and `data` may be released. (The one case this relies on
                    // timing rather than on MPI: there is no way to cancel a send portably.)
                    // SAFETY: `request` is active; freeing it lets MPI drop it.
                    unsafe { ffi::MPI_Request_free(&mut request) };
                    return Err(CollectiveError::Aborted(format!("rank {dst} is gone")));
                }
            }
            // Take incoming messages meanwhile: the peer may be sending to us at the same
            // time, and our receiver thread may be standing aside for the driver that is here.
            self.drain();
            std::thread::yield_now();
        }
    }

    /// Packed frames: copied into a pooled buffer and posted with `MPI_Isend`.
    fn sends_at_once(&self, bytes: usize) -> bool {
        self.packs(bytes)
    }

    fn is_lost(&self, rank: usize) -> bool {
        self.lost[rank].load(Ordering::SeqCst)
    }

    fn mark_self_lost(&self) {
        // Checked before the send lock (shutdown may hold it while it waits for pending sends,
        // up to `SHUTDOWN_GRACE`) and again under it: no goodbye goes out after shutdown's.
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let Ok(_g) = self.lock_sending() else { return };
        self.say_goodbye(&self.comm);
    }

    fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    fn receives_in_progress(&self) -> bool {
        true
    }

    fn halving_doubling_bytes(&self) -> usize {
        DEFAULT_MPI_HALVING_DOUBLING_BYTES
    }

    /// Takes the messages that have arrived, at most [`DRAIN_MAX`] (no hand-off from the
    /// receiver thread), unless the receiver thread is busy receiving, then reaps finished
    /// sends.
    fn progress(&self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        self.drain();
        self.reap_pending();
    }

    fn reap_idle(&self) {
        self.reap_pending();
    }

    fn pending_sends(&self) -> usize {
        self.sending.lock().map_or(0, |s| s.pending.len())
    }

    /// Takes one message if one has arrived (an `MPI_Test` of the posted receive); nothing
    /// else, so that a busy-polling driver looks again as soon as possible. Finished sends are
    /// reaped by [`progress`](Transport::progress) (every round that waited), on the send path
    /// and when the rank goes idle.
    fn progress_one(&self) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        if let Ok(mut landing) = self.receiving.lock.try_lock() {
            self.receiving.take_one(&mut landing);
        }
    }

    /// [`progress_one`](Transport::progress_one), offering a packed frame to `op` first (from
    /// the landing buffer: no pooled copy, no mailbox, no wake-up).
    fn progress_one_into(&self, op: &mut dyn crate::program::ActiveOp) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        match self.receiving.lock.try_lock() {
            Ok(mut landing) => {
                self.receiving.take_one_into(&mut landing, Some(op)) == Took::Accepted
            }
            Err(_) => false,
        }
    }
}
