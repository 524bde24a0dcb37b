//! Allocation bounded by the data, not by a header: the two rules every reader here applies.

use crate::error::{FormatError, Result};

/// The most elements a reader reserves up front for a count declared by a header (65,536);
/// beyond it, vectors grow with the entries actually read, so a tiny file with a huge header
/// fails fast (truncated) instead of allocating first.
pub const MAX_RESERVE: usize = 1 << 16;

/// The capacity to reserve for `declared` elements: `min(declared, MAX_RESERVE)`.
///
/// ```
/// assert_eq!(sparse_formats::reserve_hint(10), 10);
/// assert_eq!(sparse_formats::reserve_hint(u64::MAX), sparse_formats::MAX_RESERVE);
/// ```
pub fn reserve_hint(declared: u64) -> usize {
    usize::try_from(declared).map_or(MAX_RESERVE, |d| d.min(MAX_RESERVE))
}

/// Checks that a dimension `n` (rows of a matrix, vertices of a graph) is plausible for
/// `entries` stored entries: at most `32 · entries + 2^20`. Entries touch at most `2 · entries`
/// rows or vertices, so more would allocate per-row (per-vertex) arrays that are almost all
/// empty, and a stray large header or id could exhaust memory.
///
/// # Errors
/// [`FormatError::TooLarge`] naming `n`, `entries` and the memory the per-`what` arrays would
/// need at `bytes_per` bytes each.
///
/// ```
/// use sparse_formats::check_dimension;
/// assert!(check_dimension("rows", 1_000, 0, 8).is_ok());
/// let e = check_dimension("rows", 1_000_000_000, 1, 8).unwrap_err();
/// assert!(e.to_string().contains("8.0 GB"), "{e}");
/// ```
pub fn check_dimension(what: &str, n: u64, entries: u64, bytes_per: u64) -> Result<()> {
    let plausible = entries.saturating_mul(32).saturating_add(1 << 20);
    if n > plausible {
        return Err(FormatError::TooLarge(format!(
            "{n} {what} for only {entries} entries (more than 32 × entries + 2^20): \
             arrays over the {what} alone would need {}; renumber the ids densely",
            human_bytes(n.saturating_mul(bytes_per)),
        )));
    }
    Ok(())
}

/// `bytes` as a decimal size with one decimal (`8.0 GB`, `512.0 MB`, `12 bytes`).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 5] = [
        ("EB", 1e18),
        ("PB", 1e15),
        ("TB", 1e12),
        ("GB", 1e9),
        ("MB", 1e6),
    ];
    for (unit, size) in UNITS {
        if bytes as f64 >= size {
            return format!("{:.1} {unit}", bytes as f64 / size);
        }
    }
    format!("{bytes} bytes")
}
