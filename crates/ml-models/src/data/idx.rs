//! IDX files (the MNIST / Fashion-MNIST format, LeCun et al.), plain or gzip-compressed.

use std::io::Read;
use std::path::Path;

use crate::{MlError, Result};

/// An IDX array: unsigned-byte data stays bytes, other element types become `f64`.
#[derive(Debug, Clone, PartialEq)]
pub enum IdxData {
    /// Type code 0x08.
    U8(Vec<u8>),
    /// Type codes 0x09 (i8), 0x0B (i16), 0x0C (i32), 0x0D (f32), 0x0E (f64).
    F64(Vec<f64>),
}

/// A decoded IDX file.
#[derive(Debug, Clone, PartialEq)]
pub struct IdxArray {
    /// Dimensions (e.g. `[60000, 28, 28]`).
    pub shape: Vec<usize>,
    /// The values, row-major.
    pub data: IdxData,
}

/// Reads an IDX file; a gzip stream (magic `1f 8b`) is decompressed first.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let raw = std::fs::read(path).map_err(|e| MlError::io(path, e))?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| MlError::format("idx", path, format!("gzip: {e}")))?;
        out
    } else {
        raw
    };
    parse_idx(&bytes, path)
}

/// Parses uncompressed IDX bytes; `path` only labels errors.
pub fn parse_idx(b: &[u8], path: &Path) -> Result<IdxArray> {
    let bad = |r: String| MlError::format("idx", path, r);
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(bad("missing 00 00 magic".into()));
    }
    let (ty, nd) = (b[2], b[3] as usize);
    let hdr = 4 + 4 * nd;
    if b.len() < hdr {
        return Err(bad("truncated dimension list".into()));
    }
    let shape: Vec<usize> = (0..nd)
        .map(|i| u32::from_be_bytes(b[4 + 4 * i..8 + 4 * i].try_into().expect("4 bytes")) as usize)
        .collect();
    let size = match ty {
        0x08 | 0x09 => 1,
        0x0B => 2,
        0x0C | 0x0D => 4,
        0x0E => 8,
        t => return Err(bad(format!("unknown element type 0x{t:02x}"))),
    };
    let body = &b[hdr..];
    // Checked: a header's dimensions may multiply past usize; the body bounds the size.
    let need = shape
        .iter()
        .try_fold(size, |acc: usize, &d| acc.checked_mul(d))
        .filter(|&bytes| bytes <= body.len());
    let Some(need) = need else {
        return Err(bad(format!(
            "body has {} bytes, fewer than shape {shape:?} needs",
            body.len()
        )));
    };
    let body = &body[..need];
    let data = if ty == 0x08 {
        IdxData::U8(body.to_vec())
    } else {
        IdxData::F64(
            body.chunks_exact(size)
                .map(|c| match ty {
                    0x09 => c[0] as i8 as f64,
                    0x0B => i16::from_be_bytes([c[0], c[1]]) as f64,
                    0x0C => i32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64,
                    0x0D => f32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64,
                    _ => f64::from_be_bytes(c.try_into().expect("8 bytes")),
                })
                .collect(),
        )
    };
    Ok(IdxArray { shape, data })
}
