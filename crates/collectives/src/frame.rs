//! Messages between ranks: the frame header, the collective fingerprint and the wire format.

use std::fmt;

use crate::dtype::{wire_enum, AlignedBuf, DType, ReduceOp};
use crate::CollectiveError;

wire_enum! {
    /// The kind of a collective operation (also the `op` in errors and statistics).
    pub enum OpKind {
        AllReduce = 1, "all-reduce", "All-reduce."; ReduceScatter = 2, "reduce-scatter", "Reduce-scatter.";
        AllGather = 3, "all-gather", "All-gather."; Broadcast = 4, "broadcast", "Broadcast from a root.";
        Reduce = 5, "reduce", "Reduce to a root."; AllToAll = 6, "all-to-all", "All-to-all personalised exchange.";
        Barrier = 7, "barrier", "Barrier."; PointToPoint = 8, "send/recv", "Point-to-point message (send or matching receive).";
    }
}

/// What every rank must agree on for one collective; sent in every frame header and compared
/// by the receiver, so disagreeing ranks get [`CollectiveError::Mismatch`] instead of garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Default))]
pub(crate) struct Fingerprint {
    /// [`OpKind`] code.
    pub(crate) kind: u8,
    /// [`DType`] code.
    pub(crate) dtype: u8,
    /// [`ReduceOp`] code, 0 without reduction.
    pub(crate) reduce: u8,
    /// Algorithm code (all-reduce: 1 ring, 2 halving-doubling, 3 recursive doubling, 4 shared
    /// memory; broadcast: 0 binomial, 3 pipelined), 0 where there is one algorithm.
    pub(crate) algo: u8,
    /// Root rank of rooted collectives, else 0.
    pub(crate) root: u32,
    /// Element count (per block for block-wise collectives).
    pub(crate) count: u64,
}

impl Fingerprint {
    /// Names the first field in which `theirs` differs from `self`, if any.
    pub(crate) fn difference(&self, theirs: &Fingerprint) -> Option<String> {
        fn named<E: fmt::Display>(code: u64, from: fn(u8) -> Option<E>) -> String {
            let known = u8::try_from(code).ok().and_then(from);
            known.map_or_else(|| format!("#{code}"), |e| e.to_string())
        }
        type Field = (&'static str, u64, u64, fn(u64) -> String);
        let fields: [Field; 6] = [
            (
                "collective type",
                self.kind.into(),
                theirs.kind.into(),
                |c| named(c, OpKind::from_u8),
            ),
            ("dtype", self.dtype.into(), theirs.dtype.into(), |c| {
                named(c, DType::from_u8)
            }),
            ("element count", self.count, theirs.count, |c| c.to_string()),
            ("root", self.root.into(), theirs.root.into(), |c| {
                c.to_string()
            }),
            ("reduce op", self.reduce.into(), theirs.reduce.into(), |c| {
                named(c, ReduceOp::from_u8)
            }),
            ("algorithm", self.algo.into(), theirs.algo.into(), |c| {
                c.to_string()
            }),
        ];
        let (what, here, peer, show) = fields.into_iter().find(|f| f.1 != f.2)?;
        Some(format!("{what}: here {}, peer {}", show(here), show(peer)))
    }
}

/// Data frame or failure notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// A piece of a collective's data.
    Data,
    /// The sender failed this collective because world rank `aux` was lost.
    AbortLost,
    /// The sender failed this collective; the payload is the UTF-8 reason, `aux` is
    /// [`NOTICE_MISMATCH`] when the failure was a [`CollectiveError::Mismatch`].
    AbortOther,
}

/// `aux` of an [`FrameKind::AbortOther`] notice whose sender failed with a mismatch: the
/// receiver reports [`CollectiveError::Mismatch`] too, so that every rank of a collective the
/// ranks disagree on gets the same error kind.
pub(crate) const NOTICE_MISMATCH: u64 = 1;

/// Identifies one collective instance on a rank: communicator and sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct MailboxKey {
    pub(crate) comm: u64,
    pub(crate) seq: u64,
}

/// One message.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) kind: FrameKind,
    /// World rank of the sender.
    pub(crate) src: usize,
    pub(crate) key: MailboxKey,
    pub(crate) fp: Fingerprint,
    /// Lost rank for `AbortLost`.
    pub(crate) aux: u64,
    pub(crate) payload: AlignedBuf,
}

/// Size of the wire header of a frame.
pub(crate) const HEADER_BYTES: usize = 56;

impl Frame {
    /// Encodes the header (little endian); the payload follows on the wire.
    #[cfg(any(feature = "mpi", test))]
    pub(crate) fn encode_header(&self) -> [u8; HEADER_BYTES] {
        self.encode_header_for(self.payload.len_bytes())
    }

    /// Encodes the header for a payload of `len` bytes sent separately.
    pub(crate) fn encode_header_for(&self, len: usize) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[0] = match self.kind {
            FrameKind::Data => 0,
            FrameKind::AbortLost => 1,
            FrameKind::AbortOther => 2,
        };
        h[1] = self.fp.kind;
        h[2] = self.fp.dtype;
        h[3] = self.fp.reduce;
        h[4] = self.fp.algo;
        h[8..12].copy_from_slice(&(self.src as u32).to_le_bytes());
        h[12..16].copy_from_slice(&self.fp.root.to_le_bytes());
        h[16..24].copy_from_slice(&self.key.comm.to_le_bytes());
        h[24..32].copy_from_slice(&self.key.seq.to_le_bytes());
        h[32..40].copy_from_slice(&self.fp.count.to_le_bytes());
        h[40..48].copy_from_slice(&self.aux.to_le_bytes());
        h[48..56].copy_from_slice(&(len as u64).to_le_bytes());
        h
    }

    /// Decodes a header; returns the frame with an empty payload and the payload length.
    pub(crate) fn decode_header(h: &[u8; HEADER_BYTES]) -> crate::Result<(Frame, usize)> {
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let frame_kind = match h[0] {
            0 => FrameKind::Data,
            1 => FrameKind::AbortLost,
            2 => FrameKind::AbortOther,
            k => {
                return Err(CollectiveError::InvalidInput(format!(
                    "corrupt frame: kind {k}"
                )));
            }
        };
        let [kind, dtype, reduce, algo] = [h[1], h[2], h[3], h[4]];
        let len = usize::try_from(u64_at(48))
            .map_err(|_| CollectiveError::InvalidInput("corrupt frame: length".into()))?;
        let frame = Frame {
            kind: frame_kind,
            src: u32_at(8) as usize,
            key: MailboxKey {
                comm: u64_at(16),
                seq: u64_at(24),
            },
            fp: Fingerprint {
                kind,
                dtype,
                reduce,
                algo,
                root: u32_at(12),
                count: u64_at(32),
            },
            aux: u64_at(40),
            payload: AlignedBuf::default(),
        };
        Ok((frame, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let mut payload = AlignedBuf::default();
        payload.fill_from(&[1u8, 2, 3]);
        let f = Frame {
            kind: FrameKind::AbortLost,
            src: 7,
            key: MailboxKey {
                comm: 0xdead_beef,
                seq: 42,
            },
            fp: Fingerprint {
                kind: 1,
                dtype: 2,
                reduce: 3,
                algo: 4,
                root: 5,
                count: 6,
            },
            aux: 9,
            payload,
        };
        let (g, len) = Frame::decode_header(&f.encode_header()).unwrap();
        assert_eq!(len, 3);
        assert_eq!(
            (g.kind, g.src, g.key, g.fp, g.aux),
            (f.kind, f.src, f.key, f.fp, f.aux)
        );
        let other = Fingerprint { count: 7, ..f.fp };
        assert!(f.fp.difference(&other).unwrap().contains("element count"));
    }

    #[test]
    fn root_mismatch_is_named() {
        let here = Fingerprint {
            kind: OpKind::Broadcast as u8,
            dtype: 1,
            reduce: 0,
            algo: 0,
            root: 0,
            count: 10,
        };
        assert_eq!(here.difference(&here), None);
        let theirs = Fingerprint { root: 3, ..here };
        assert_eq!(
            here.difference(&theirs).as_deref(),
            Some("root: here 0, peer 3")
        );
        // The root survives the wire.
        let f = Frame {
            kind: FrameKind::Data,
            src: 1,
            key: MailboxKey { comm: 1, seq: 1 },
            fp: theirs,
            aux: 0,
            payload: AlignedBuf::default(),
        };
        let (g, _) = Frame::decode_header(&f.encode_header()).unwrap();
        assert_eq!(g.fp.root, 3);
        assert!(here.difference(&g.fp).unwrap().starts_with("root"));
    }
}
