//! IDX files (the MNIST / Fashion-MNIST format, LeCun et al.), plain or gzip-compressed.

use std::io::Read;
use std::path::Path;

use super::limited::try_values;
use super::{read_bytes_limited, MAX_FILE_BYTES, MAX_VALUES};
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
///
/// A compressed file is decompressed only as far as its header says the array reaches (plus
/// one byte, to tell trailing data), and never past [`MAX_FILE_BYTES`], so a gzip bomb is
/// neither decompressed nor held in memory.
///
/// # Errors
/// Those of [`read_bytes_limited`] with the limit [`MAX_FILE_BYTES`]; [`MlError::Format`] when
/// the gzip stream is corrupt, the header's shape needs more than [`MAX_FILE_BYTES`] (or more
/// than [`MAX_VALUES`] elements, for values other than unsigned bytes), or the bytes fail
/// [`parse_idx`].
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let raw = read_bytes_limited(path, "idx", MAX_FILE_BYTES)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        parse_idx(&gunzip(&raw, path, MAX_FILE_BYTES)?, path)
    } else {
        parse_idx(&raw, path)
    }
}

/// Decompresses the gzip IDX stream `gz`: its header first, then as many bytes as the header's
/// shape needs and one more (at most `max` in all): more is an error, fewer is left for
/// [`parse_idx`] to name.
fn gunzip(gz: &[u8], path: &Path, max: u64) -> Result<Vec<u8>> {
    let bad = |e: std::io::Error| MlError::format("idx", path, format!("gzip: {e}"));
    let mut dec = flate2::read::GzDecoder::new(gz);
    let mut out = Vec::new();
    (&mut dec).take(4).read_to_end(&mut out).map_err(bad)?;
    if out.len() == 4 {
        (&mut dec)
            .take(4 * u64::from(out[3]))
            .read_to_end(&mut out)
            .map_err(bad)?;
    }
    let header = parse_header(&out, path)?;
    let total = header
        .body_bytes()
        .and_then(|b| b.checked_add(header.len))
        .filter(|&t| t as u64 <= max)
        .ok_or_else(|| {
            MlError::format(
                "idx",
                path,
                format!(
                    "shape {:?} needs more than the {max} bytes this reader accepts",
                    header.shape
                ),
            )
        })?;
    (&mut dec)
        .take((total - out.len()) as u64 + 1)
        .read_to_end(&mut out)
        .map_err(bad)?;
    if out.len() > total {
        return Err(MlError::format(
            "idx",
            path,
            format!(
                "the decompressed stream holds more than the {total} bytes shape {:?} needs",
                header.shape
            ),
        ));
    }
    Ok(out)
}

/// The header of an IDX file.
struct Header {
    /// Element type code.
    ty: u8,
    /// Bytes per element.
    size: usize,
    /// Dimensions.
    shape: Vec<usize>,
    /// Header bytes (magic and dimensions).
    len: usize,
}

impl Header {
    /// Bytes the body needs; `None` past `usize`.
    fn body_bytes(&self) -> Option<usize> {
        self.shape
            .iter()
            .try_fold(self.size, |acc, &d| acc.checked_mul(d))
    }
}

/// The header at the start of `b`.
fn parse_header(b: &[u8], path: &Path) -> Result<Header> {
    let bad = |r: String| MlError::format("idx", path, r);
    if b.len() < 4 || b[0] != 0 || b[1] != 0 {
        return Err(bad("missing 00 00 magic".into()));
    }
    let (ty, nd) = (b[2], b[3] as usize);
    let len = 4 + 4 * nd;
    if b.len() < len {
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
    // Before the body: values other than unsigned bytes become eight bytes each.
    let elements = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if ty != 0x08 && elements.is_none_or(|n| n > MAX_VALUES) {
        return Err(bad(format!(
            "shape {shape:?} has more than the {MAX_VALUES} elements (of 8 bytes) this reader \
             returns"
        )));
    }
    Ok(Header {
        ty,
        size,
        shape,
        len,
    })
}

/// Parses uncompressed IDX bytes; `path` only labels errors.
///
/// # Errors
/// [`MlError::Format`] when the magic, the dimension list or the element type is bad, a shape
/// of values other than unsigned bytes has more than [`MAX_VALUES`] elements, or the body is
/// shorter or longer than the shape needs (checked before anything is allocated);
/// [`MlError::Io`] (kind `OutOfMemory`) when the values cannot be allocated.
pub fn parse_idx(b: &[u8], path: &Path) -> Result<IdxArray> {
    let header = parse_header(b, path)?;
    let body = &b[header.len..];
    // Checked: a header's dimensions may multiply past usize; the body bounds the size.
    let need = header.body_bytes();
    let Header {
        ty, size, shape, ..
    } = header;
    if need != Some(body.len()) {
        let need = need.map_or_else(|| "more than usize".to_string(), |n| n.to_string());
        return Err(MlError::format(
            "idx",
            path,
            format!(
                "body has {} bytes, shape {shape:?} needs {need}",
                body.len()
            ),
        ));
    }
    let data = if ty == 0x08 {
        IdxData::U8(body.to_vec())
    } else {
        let mut values = try_values(body.len() / size, path)?;
        values.extend(body.chunks_exact(size).map(|c| match ty {
            0x09 => c[0] as i8 as f64,
            0x0B => i16::from_be_bytes([c[0], c[1]]) as f64,
            0x0C => i32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64,
            0x0D => f32::from_be_bytes([c[0], c[1], c[2], c[3]]) as f64,
            _ => f64::from_be_bytes(c.try_into().expect("8 bytes")),
        }));
        IdxData::F64(values)
    };
    Ok(IdxArray { shape, data })
}
