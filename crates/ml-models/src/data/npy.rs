//! NumPy `.npy` arrays and `.npz` archives (format spec: NEP 1, "A simple file format for NumPy
//! arrays"). Little- and big-endian numeric dtypes and Fortran order are supported; values are
//! returned as `f64` in C (row-major) order.

use std::collections::BTreeMap;
use std::path::Path;

use super::limited::{read_to_end_limited, try_values};
use super::{read_bytes_limited, MAX_FILE_BYTES, MAX_VALUES};
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
/// memory. The arrays together may hold at most [`MAX_VALUES`] elements (their `f64` values
/// within [`MAX_FILE_BYTES`]), each array's shape checked against what is left before its
/// values are allocated.
///
/// # Errors
/// Those of [`read_bytes_limited`] for the archive file; [`MlError::Format`] (format `npz`,
/// naming the entry) when the archive is not a zip file, claims more entries than its central
/// directory's bytes can hold (46 bytes each) or end records that disagree on the count, holds
/// two entries of the same name (a zip reader keeps one), an entry declares more than the bytes left, holds more or fewer bytes than it
/// declares or fails its CRC, two entries give the same array name, the arrays hold more
/// elements than are left, or an entry is not a valid `.npy` (the message of [`parse_npy`]
/// after the entry's name).
pub fn read_npz(path: &Path) -> Result<BTreeMap<String, NpyArray>> {
    // In memory: the zip crate reads by seeking, byte by byte where it searches for its end
    // records, which on a file would be two system calls a byte.
    let bytes = read_bytes_limited(path, "npz", MAX_FILE_BYTES)?;
    parse_npz(&bytes, path, MAX_VALUES)
}

/// [`read_npz`] of the archive `bytes`, whose arrays together hold at most `max_values`
/// elements; `path` only labels errors.
fn parse_npz(bytes: &[u8], path: &Path, max_values: usize) -> Result<BTreeMap<String, NpyArray>> {
    let bad = |r: String| MlError::format("npz", path, r);
    let claimed = claimed_entries(bytes).map_err(bad)?;
    let mut zip =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| bad(e.to_string()))?;
    // The zip crate keys entries by name: a second entry of a name replaces the first.
    if let Some(claimed) = claimed.filter(|&c| c != zip.len() as u64) {
        return Err(bad(format!(
            "the central directory lists {claimed} entries, {} distinct names: two entries \
             share a name",
            zip.len()
        )));
    }
    let mut out = BTreeMap::new();
    // Decompressed bytes the remaining entries may hold.
    let mut left = MAX_FILE_BYTES;
    // Elements the remaining arrays may hold.
    let mut values_left = max_values;
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
        let array = parse_npy_within(&buf, path, values_left).map_err(|e| match e {
            MlError::Format { reason, .. } => bad(format!("entry {full}: {reason}")),
            e => e,
        })?;
        values_left -= array.data.len();
        out.insert(name, array);
    }
    Ok(out)
}

/// Bytes of the smallest central-directory header of a zip archive (an entry with an empty name).
const CENTRAL_HEADER_BYTES: u64 = 46;

/// The number of entries the end records of the zip archive `zip` claim, found as the zip crate
/// (1.3) finds them; `None` where there is no end record (the zip crate then fails). End
/// records that claim different counts are refused (the zip crate would pick one).
///
/// Refuses a ZIP64 end record (every one the zip crate considers) that claims more entries than
/// the bytes from its central directory's start to the end record can hold: the zip crate
/// reserves room for the claimed count before it reads an entry (about 240 bytes each, up to
/// one entry per byte of the archive), so a 256 MiB archive could ask for 64 GB, an abort
/// rather than an error.
fn claimed_entries(zip: &[u8]) -> std::result::Result<Option<u64>, String> {
    let len = zip.len();
    let u16_at = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([zip[i], zip[i + 1], zip[i + 2], zip[i + 3]]);
    let u64_at = |i: usize| u64::from_le_bytes(zip[i..i + 8].try_into().expect("8 bytes"));
    let Some(last) = len.checked_sub(22) else {
        return Ok(None); // too short for an end record: the zip crate says so
    };
    // The end record: the last signature within 66 000 bytes of the end whose comment fits.
    let Some((end, comment)) = (len.saturating_sub(66_000)..=last).rev().find_map(|p| {
        let comment = usize::from(u16_at(p + 20));
        (u32_at(p) == 0x0605_4b50 && p + 22 + comment <= len).then_some((p, comment))
    }) else {
        return Ok(None);
    };
    // The zip crate counts the entries "on this disk". 0xFFFF means "see the ZIP64 record":
    // refused, since no archive of arrays has that many, and an exact 32-bit count leaves the
    // ZIP64 records nothing to claim but the same number (a larger claim could still reserve
    // gigabytes, or hide a duplicate name).
    let zip32 = u16_at(end + 8);
    if zip32 == u16::MAX {
        return Err(format!(
            "the end record claims {} or more entries (ZIP64 counts are not accepted)",
            u16::MAX
        ));
    }
    let zip32 = Some(u64::from(zip32));
    // The ZIP64 locator, just before the end record (with its comment at the end of the file).
    let locator = len
        .checked_sub(42 + comment)
        .filter(|&l| u32_at(l) == 0x0706_4b50);
    let (Some(locator), Some(upper)) = (locator, end.checked_sub(60)) else {
        return Ok(zip32);
    };
    let nominal = usize::try_from(u64_at(locator + 8)).unwrap_or(usize::MAX);
    // Every ZIP64 end record the zip crate considers: from the locator's offset up to 60 bytes
    // before the end record; its central directory starts at the record's offset plus the
    // bytes found before where the locator says the record is.
    let mut counts = Vec::new();
    for q in (nominal..=upper).filter(|&q| q + 56 <= len && u32_at(q) == 0x0606_4b50) {
        let claimed = u64_at(q + 32);
        let start = u64_at(q + 48).checked_add((q - nominal) as u64);
        let Some(start) = start.filter(|&s| s <= upper as u64) else {
            continue; // the zip crate refuses this record before reading its entries
        };
        let most = (end as u64 - start) / CENTRAL_HEADER_BYTES;
        if claimed > most {
            return Err(format!(
                "the archive claims {claimed} entries, more than the {} bytes of its central \
                 directory hold (at most {most})",
                end as u64 - start
            ));
        }
        counts.push(claimed);
    }
    counts.extend(zip32);
    counts.sort_unstable();
    counts.dedup();
    match counts[..] {
        [] => Ok(Some(u64::from(u16::MAX))),
        [n] => Ok(Some(n)),
        _ => Err(format!(
            "the end records disagree on the number of entries ({counts:?})"
        )),
    }
}

/// The most dimensions an array may have: NumPy's own maximum (`NPY_MAXDIMS`, 64 since NumPy
/// 2.0).
pub const MAX_DIMS: usize = 64;

/// Parses `.npy` bytes; `path` only labels errors.
///
/// # Errors
/// [`MlError::Format`] when the magic, version, header, dtype or shape is bad, the shape has
/// more than [`MAX_DIMS`] dimensions or more than [`MAX_VALUES`] elements (checked before the
/// body is looked at), or the body is shorter or longer than the shape needs;
/// [`MlError::Io`] (kind `OutOfMemory`) when the values cannot be allocated.
pub fn parse_npy(bytes: &[u8], path: &Path) -> Result<NpyArray> {
    parse_npy_within(bytes, path, MAX_VALUES)
}

/// [`parse_npy`] of an array of at most `max_values` elements.
fn parse_npy_within(bytes: &[u8], path: &Path, max_values: usize) -> Result<NpyArray> {
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
    if shape.len() > MAX_DIMS {
        return Err(bad(&format!(
            "shape has more than the {MAX_DIMS} dimensions this reader accepts"
        )));
    }
    // Checked: a header's shape may multiply past usize (the body bounds it below).
    let n = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad("shape overflows the address space"))?;
    // Before the body: a one-byte dtype becomes eight bytes a value.
    if n > max_values {
        return Err(bad(&format!(
            "shape {shape:?} has {n} elements, more than the {max_values} left of the \
             {MAX_VALUES} (of 8 bytes) this reader returns"
        )));
    }
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
    if n.checked_mul(size) != Some(body.len()) {
        return Err(bad(&format!(
            "body has {} bytes, shape {shape:?} needs {n} elements of {size} bytes",
            body.len()
        )));
    }
    let mut data = try_values(n, path)?;
    let values = body.chunks_exact(size).map(|c| decode(c, kind, big));
    if fortran && shape.len() > 1 && n > 0 {
        // Written straight to their row-major places: no second copy. (With a zero dimension
        // there is nothing to place, and the other dimensions' strides could overflow.)
        data.resize(n, 0.0);
        for (v, c_pos) in values.zip(fortran_positions(&shape)) {
            data[c_pos] = v;
        }
    } else {
        data.extend(values);
    }
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

/// The row-major (C) position of each element of an array of `shape`, in column-major
/// (Fortran) order: an odometer whose first index turns fastest, stepping the position by that
/// dimension's row-major stride. O(1) amortized per element (a carry into dimension `d` comes
/// once every `shape[0] * ... * shape[d-1]` steps), whatever the rank.
fn fortran_positions(shape: &[usize]) -> impl Iterator<Item = usize> + '_ {
    let n: usize = shape.iter().product();
    // Row-major strides.
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let mut idx = vec![0usize; shape.len()];
    let mut pos = 0usize;
    (0..n).map(move |_| {
        let here = pos;
        for d in 0..shape.len() {
            idx[d] += 1;
            pos += strides[d];
            if idx[d] < shape[d] {
                break;
            }
            pos -= shape[d] * strides[d];
            idx[d] = 0;
        }
        here
    })
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

/// The dimensions of a shape tuple; at most [`MAX_DIMS`] + 1 are collected (the caller refuses
/// more), so a header of millions of dimensions costs no memory.
fn parse_shape(t: &str) -> Option<Vec<usize>> {
    t.trim_matches(|c| c == '(' || c == ')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .take(MAX_DIMS + 1)
        .map(|s| s.trim_end_matches('L').parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;

    use super::*;

    /// The row-major position of each column-major element, by division (the reference).
    fn positions_by_division(shape: &[usize]) -> Vec<usize> {
        let n: usize = shape.iter().product();
        (0..n)
            .map(|f_pos| {
                let mut r = f_pos;
                let mut idx = vec![0; shape.len()];
                for (i, &d) in idx.iter_mut().zip(shape) {
                    *i = r % d;
                    r /= d;
                }
                idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn fortran_positions_match_division(shape in prop::collection::vec(0usize..5, 0..6)) {
            prop_assert_eq!(
                fortran_positions(&shape).collect::<Vec<_>>(),
                positions_by_division(&shape)
            );
        }
    }

    /// A version-1 `.npy` file of `n` unsigned bytes (all 1).
    fn npy_u8(n: usize) -> Vec<u8> {
        let h = format!("{{'descr': '|u1', 'fortran_order': False, 'shape': ({n},), }}\n");
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend((h.len() as u16).to_le_bytes());
        b.extend(h.as_bytes());
        b.extend(std::iter::repeat_n(1u8, n));
        b
    }

    /// The arrays of an archive share one budget of values: each fits alone, not together.
    #[test]
    fn npz_arrays_share_the_value_budget() {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for name in ["a.npy", "b.npy"] {
            zip.start_file(name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(&npy_u8(60)).unwrap();
        }
        let bytes = zip.finish().unwrap().into_inner();
        let path = Path::new("budget.npz");
        assert_eq!(parse_npz(&bytes, path, 120).unwrap().len(), 2);
        let err = parse_npz(&bytes, path, 100).unwrap_err();
        assert!(
            err.to_string()
                .contains("entry b.npy: shape [60] has 60 elements, more than the 40 left"),
            "{err}"
        );
    }
}
