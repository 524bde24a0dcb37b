//! Messages between ranks: the frame header, the collective fingerprint and the wire format.

use crate::dtype::{AlignedBuf, DType};
use crate::CollectiveError;

/// The kind of a collective operation (also the `op` in errors and statistics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    /// All-reduce.
    AllReduce = 1,
    /// Reduce-scatter.
    ReduceScatter = 2,
    /// All-gather.
    AllGather = 3,
    /// Broadcast from a root.
    Broadcast = 4,
    /// Reduce to a root.
    Reduce = 5,
    /// All-to-all personalised exchange.
    AllToAll = 6,
    /// Barrier.
    Barrier = 7,
    /// Point-to-point message (send or matching receive).
    PointToPoint = 8,
}

impl OpKind {
    /// Human-readable name, e.g. `all-reduce`.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::AllReduce => "all-reduce",
            OpKind::ReduceScatter => "reduce-scatter",
            OpKind::AllGather => "all-gather",
            OpKind::Broadcast => "broadcast",
            OpKind::Reduce => "reduce",
            OpKind::AllToAll => "all-to-all",
            OpKind::Barrier => "barrier",
            OpKind::PointToPoint => "send/recv",
        }
    }
}

/// What every rank must agree on for one collective; sent in every frame header and compared
/// by the receiver, so disagreeing ranks get [`CollectiveError::Mismatch`] instead of garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub(crate) kind: u8,
    pub(crate) dtype: u8,
    pub(crate) reduce: u8,
    pub(crate) algo: u8,
    pub(crate) root: u32,
    pub(crate) count: u64,
}

impl Fingerprint {
    /// Names the first field in which `theirs` differs from `self`, if any.
    pub(crate) fn difference(&self, theirs: &Fingerprint) -> Option<String> {
        let kind = |k: u8| {
            [
                OpKind::AllReduce,
                OpKind::ReduceScatter,
                OpKind::AllGather,
                OpKind::Broadcast,
                OpKind::Reduce,
                OpKind::AllToAll,
                OpKind::Barrier,
                OpKind::PointToPoint,
            ]
            .into_iter()
            .find(|o| *o as u8 == k)
            .map_or("unknown", OpKind::name)
        };
        let dt = |d: u8| DType::from_u8(d).map_or_else(|| "none".to_string(), |d| d.to_string());
        if self.kind != theirs.kind {
            Some(format!(
                "collective type: here {}, peer {}",
                kind(self.kind),
                kind(theirs.kind)
            ))
        } else if self.dtype != theirs.dtype {
            Some(format!(
                "dtype: here {}, peer {}",
                dt(self.dtype),
                dt(theirs.dtype)
            ))
        } else if self.count != theirs.count {
            Some(format!(
                "element count: here {}, peer {}",
                self.count, theirs.count
            ))
        } else if self.root != theirs.root {
            Some(format!("root: here {}, peer {}", self.root, theirs.root))
        } else if self.reduce != theirs.reduce {
            Some(format!(
                "reduce op: here {}, peer {}",
                self.reduce, theirs.reduce
            ))
        } else if self.algo != theirs.algo {
            Some(format!(
                "algorithm: here {}, peer {}",
                self.algo, theirs.algo
            ))
        } else {
            None
        }
    }
}

/// Data frame or failure notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// A piece of a collective's data.
    Data,
    /// The sender failed this collective because world rank `aux` was lost.
    AbortLost,
    /// The sender failed this collective; the payload is the UTF-8 reason.
    AbortOther,
}

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
    pub(crate) fn encode_header(&self) -> [u8; HEADER_BYTES] {
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
        h[48..56].copy_from_slice(&(self.payload.len_bytes() as u64).to_le_bytes());
        h
    }

    /// Decodes a header; returns the frame with an empty payload and the payload length.
    pub(crate) fn decode_header(h: &[u8; HEADER_BYTES]) -> crate::Result<(Frame, usize)> {
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let kind = match h[0] {
            0 => FrameKind::Data,
            1 => FrameKind::AbortLost,
            2 => FrameKind::AbortOther,
            k => {
                return Err(CollectiveError::InvalidInput(format!(
                    "corrupt frame: kind {k}"
                )));
            }
        };
        let len = usize::try_from(u64_at(48))
            .map_err(|_| CollectiveError::InvalidInput("corrupt frame: length".into()))?;
        let frame = Frame {
            kind,
            src: u32_at(8) as usize,
            key: MailboxKey {
                comm: u64_at(16),
                seq: u64_at(24),
            },
            fp: Fingerprint {
                kind: h[1],
                dtype: h[2],
                reduce: h[3],
                algo: h[4],
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
}
