//! NumPy `.npy` arrays and `.npz` archives (format spec: NEP 1, "A simple file format for NumPy
//! arrays"). Little- and big-endian numeric dtypes and Fortran order are supported; values are
//! returned as `f64` in C (row-major) order.

use std::collections::BTreeMap;
use std::path::Path;

use super::limited::read_to_end_limited;
use super::{read_bytes_limited, MAX_FILE_BYTES};
use crate::{MlError, Result};

/// A dense n-dimensional array read from `.npy`, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct NpyArray {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: Vec<f64>,
}

impl NpyArray {
    /// Converts to an `f32` candle tensor of the same shape.
    pub fn to_tensor(&self, dev: &candle_core::Device) -> Result<candle_core::Tensor> {
        let v: Vec<f32> = self.data.iter().map(|&x| x as f32).collect();
        Ok(candle_core::Tensor::from_vec(
            v,
            self.shape.as_slice(),
            dev,
        )?)
    }
}

/// Reads a `.npy` file.
///
/// # Errors
/// Those of [`read_bytes_limited`] with the limit [`MAX_FILE_BYTES`], and those of
/// [`parse_npy`].
pub fn read_npy(path: &Path) -> Result<NpyArray> {
    let bytes = read_bytes_limited(path, "npy", MAX_FILE_BYTES)?;
    parse_npy(&bytes, path)
}

/// Reads every array of a `.npz` archive (stored or deflate-compressed), keyed by its entry's
/// name without the `.npy` suffix.
///
/// The entries together may hold at most [`MAX_FILE_BYTES`] decompressed: an entry's declared
/// size is checked against what is left of that before it is read, and no entry is read past
/// its declared size (plus one byte, to tell), so neither a header's claim nor a zip bomb sizes
/// memory.
///
/// # Errors
/// Those of [`read_bytes_limited`] for the archive file; [`MlError::Format`] (format `npz`,
/// naming the entry) when the archive is not a zip file or claims more entries than its bytes
/// can hold (46 bytes of directory each), an entry declares more than the bytes
/// left, holds more or fewer bytes than it declares or fails its CRC, two entries give the same
/// array name, or an entry is not a valid `.npy` (the message of [`parse_npy`] after the entry's
/// name).
pub fn read_npz(path: &Path) -> Result<BTreeMap<String, NpyArray>> {
    // In memory: the zip crate reads by seeking, byte by byte where it searches for its end
    // records, which on a file would be two system calls a byte.
    let bytes = read_bytes_limited(path, "npz", MAX_FILE_BYTES)?;
    let bad = |r: String| MlError::format("npz", path, r);
    check_entry_count(&bytes).map_err(bad)?;
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(&bytes[..])).map_err(|e| bad(e.to_string()))?;
    let mut out = BTreeMap::new();
    // Decompressed bytes the remaining entries may hold.
    let mut left = MAX_FILE_BYTES;
    for i in 0..zip.len() {
        let entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        let full = entry.name().to_string();
        let declared = entry.size();
        if declared > left {
            return Err(bad(format!(
                "entry {full} declares {declared} bytes, more than the {left} left of the \
                 {MAX_FILE_BYTES} this reader accepts"
            )));
        }
        let buf = read_to_end_limited(entry, declared)
            .map_err(|e| bad(format!("entry {full}: {e}")))?
            .ok_or_else(|| {
                bad(format!(
                    "entry {full} holds more than the {declared} bytes it declares"
                ))
            })?;
        if buf.len() as u64 != declared {
            return Err(bad(format!(
                "entry {full} holds {} bytes, it declares {declared}",
                buf.len()
            )));
        }
        left -= declared;
        let name = full.strip_suffix(".npy").unwrap_or(&full).to_string();
        if out.contains_key(&name) {
            return Err(bad(format!("two entries hold the array {name}")));
        }
        let array = parse_npy(&buf, path).map_err(|e| match e {
            MlError::Format { reason, .. } => bad(format!("entry {full}: {reason}")),
            e => e,
        })?;
        out.insert(name, array);
    }
    Ok(out)
}

/// Bytes of the smallest central-directory header of a zip archive (an entry with an empty name).
const CENTRAL_HEADER_BYTES: usize = 46;

/// Refuses a zip archive whose ZIP64 end record (the one the zip crate reads, found as it finds
/// it) claims more entries than the archive's bytes can hold. The zip crate (1.3) reserves room
/// for the claimed count before it reads an entry (240 bytes each, up to one entry per byte of
/// the archive): a 256 MiB archive could ask for 64 GB, an abort rather than an error.
fn check_entry_count(zip: &[u8]) -> std::result::Result<(), String> {
    let len = zip.len();
    let u16_at = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([zip[i], zip[i + 1], zip[i + 2], zip[i + 3]]);
    let u64_at = |i: usize| u64::from_le_bytes(zip[i..i + 8].try_into().expect("8 bytes"));
    let Some(last) = len.checked_sub(22) else {
        return Ok(()); // too short for an end record: the zip crate says so
    };
    // The end record: the last signature within 66 000 bytes of the end whose comment fits.
    let Some((end, comment)) = (len.saturating_sub(66_000)..=last).rev().find_map(|p| {
        let comment = usize::from(u16_at(p + 20));
        (u32_at(p) == 0x0605_4b50 && p + 22 + comment <= len).then_some((p, comment))
    }) else {
        return Ok(());
    };
    // The ZIP64 locator, just before the end record (with its comment at the end of the file).
    let Some(locator) = len.checked_sub(42 + comment) else {
        return Ok(());
    };
    if u32_at(locator) != 0x0706_4b50 {
        return Ok(());
    }
    let nominal = usize::try_from(u64_at(locator + 8)).unwrap_or(usize::MAX);
    let Some(upper) = end.checked_sub(60) else {
        return Ok(());
    };
    // Every ZIP64 end record the zip crate considers: from the locator's offset up to 60 bytes
    // before the end record.
    let most = len / CENTRAL_HEADER_BYTES;
    for q in (nominal..=upper).filter(|&q| q + 40 <= len && u32_at(q) == 0x0606_4b50) {
        let claimed = u64_at(q + 32);
        if claimed > most as u64 {
            return Err(format!(
                "the archive claims {claimed} entries, more than its {len} bytes hold \
                 (at most {most})"
            ));
        }
    }
    Ok(())
}

/// Parses `.npy` bytes; `path` only labels errors.
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<NpyArray> {
    let bad = |r: &str| MlError::format("npy", path, r);
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad("missing \\x93NUMPY magic"));
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(&format!("unsupported format version {v}"))),
    };
    let header = bytes
        .get(hstart..hstart + hlen)
        .ok_or_else(|| bad("truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad("header is not text"))?;
    let descr = dict_value(header, "descr").ok_or_else(|| bad("no 'descr' in header"))?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let fortran = dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True"));
    let shape_txt = dict_value(header, "shape").ok_or_else(|| bad("no 'shape' in header"))?;
    let shape = parse_shape(shape_txt).ok_or_else(|| bad("bad 'shape' tuple"))?;
    // Checked: a header's shape may multiply past usize (the body bounds it below).
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad("shape overflows the address space"))?;
    let (big, kind) = match descr.as_bytes().first() {
        Some(b'>') => (true, &descr[1..]),
        Some(b'<' | b'|' | b'=') => (false, &descr[1..]),
        _ => (false, descr),
    };
    let body = &bytes[hstart + hlen..];
    let size = match kind {
        "f8" | "i8" | "u8" => 8,
        "f4" | "i4" | "u4" => 4,
        "f2" | "i2" | "u2" => 2,
        "i1" | "u1" | "b1" => 1,
        other => return Err(bad(&format!("unsupported dtype '{other}'"))),
    };
    if n.checked_mul(size).is_none_or(|need| body.len() < need) {
        return Err(bad(&format!(
            "body has {} bytes, shape {shape:?} needs {n} elements of {size} bytes",
            body.len()
        )));
    }
    let data: Vec<f64> = body[..n * size]
        .chunks_exact(size)
        .map(|c| decode(c, kind, big))
        .collect();
    let data = if fortran && shape.len() > 1 {
        fortran_to_c(&data, &shape)
    } else {
        data
    };
    Ok(NpyArray { shape, data })
}

fn decode(c: &[u8], kind: &str, big: bool) -> f64 {
    let mut b = [0u8; 8];
    b[..c.len()].copy_from_slice(c);
    if big {
        b[..c.len()].reverse();
    }
    match kind {
        "f8" => f64::from_le_bytes(b),
        "i8" => i64::from_le_bytes(b) as f64,
        "u8" => u64::from_le_bytes(b) as f64,
        "f4" => f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "i4" => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "u4" => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
        "f2" => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        "i2" => i16::from_le_bytes([b[0], b[1]]) as f64,
        "u2" => u16::from_le_bytes([b[0], b[1]]) as f64,
        "i1" => b[0] as i8 as f64,
        _ => b[0] as f64,
    }
}

/// Column-major → row-major for an arbitrary-rank array.
fn fortran_to_c(data: &[f64], shape: &[usize]) -> Vec<f64> {
    let n = data.len();
    let mut out = vec![0.0; n];
    let mut idx = vec![0usize; shape.len()];
    for (c_pos, slot) in out.iter_mut().enumerate() {
        let mut r = c_pos;
        for d in (0..shape.len()).rev() {
            idx[d] = r % shape[d];
            r /= shape[d];
        }
        let mut f_pos = 0;
        for d in (0..shape.len()).rev() {
            f_pos = f_pos * shape[d] + idx[d];
        }
        *slot = data[f_pos];
    }
    out
}

/// The raw text of `key`'s value in a Python dict literal.
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let k = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[k + key.len() + 2..];
    let rest = rest[rest.find(':')? + 1..].trim_start();
    if rest.starts_with('(') {
        Some(&rest[..=rest.find(')')?])
    } else {
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim())
    }
}

fn parse_shape(t: &str) -> Option<Vec<usize>> {
    t.trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse().ok())
        .collect()
}
