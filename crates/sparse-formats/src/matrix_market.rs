//! Matrix Market exchange format (Boisvert, Pozo, Remington, "The Matrix Market Exchange
//! Formats: Initial Design", NIST 1996): a streaming reader of the banner, the size line and
//! the entries, shared by the sparse-matrix and the graph readers.
//!
//! The reader checks what the format promises (indices in range, entry count, lower triangle
//! of symmetric storage) and that the size line is plausible before anything is allocated:
//! sizes must fit `usize`, and rows may not exceed `32 · entries + 2^20`
//! ([`crate::check_dimension`]). Callers check their index types and build their structure.

use crate::bounds::check_dimension;
use crate::error::{FormatError, Result};
use crate::lines::{fields, parse_u64, LineReader};
use std::io::BufRead;

/// Storage format of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmFormat {
    /// `coordinate`: one `row col [value]` line per stored entry.
    Coordinate,
    /// `array`: every entry, column by column.
    Array,
}

/// Value field of a Matrix Market file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmField {
    /// Floating-point values.
    Real,
    /// Integer values.
    Integer,
    /// No values: every stored entry is 1.
    Pattern,
    /// Complex values `re im` (the reader yields the real part).
    Complex,
}

/// Symmetry of a Matrix Market file (only the lower triangle is stored when not general).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmSymmetry {
    /// Every entry stored.
    General,
    /// `a(j, i) = a(i, j)`.
    Symmetric,
    /// `a(j, i) = -a(i, j)`, zero diagonal.
    SkewSymmetric,
    /// `a(j, i) = conj(a(i, j))`.
    Hermitian,
}

/// The parsed `%%MatrixMarket matrix <format> <field> <symmetry>` banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmHeader {
    /// Coordinate or array.
    pub format: MmFormat,
    /// Real, integer, pattern or complex.
    pub field: MmField,
    /// General, symmetric, skew-symmetric or hermitian.
    pub symmetry: MmSymmetry,
}

/// The size line: dimensions and the number of stored entries that follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmSize {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Stored entries declared (for `array` files: the entries of the stored part).
    pub entries: usize,
    /// 1-based line number of the size line.
    pub line: usize,
}

/// One stored entry, 0-based. Symmetric storage is not expanded: the caller mirrors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MmEntry {
    /// Row (0-based).
    pub row: usize,
    /// Column (0-based).
    pub col: usize,
    /// The value (1 for `pattern`, the real part for `complex`).
    pub value: f64,
    /// 1-based line number of the entry.
    pub line: usize,
}

/// A banner word as quoted in a message: at most 40 characters, control characters escaped.
fn quoted(word: &str) -> String {
    word.chars()
        .take(40)
        .collect::<String>()
        .escape_debug()
        .to_string()
}

fn parse_header(line: &[u8]) -> Result<MmHeader> {
    let banner = String::from_utf8_lossy(line).to_ascii_lowercase();
    let words: Vec<&str> = banner.split_whitespace().collect();
    if words.first() != Some(&"%%matrixmarket") || words.len() != 5 {
        return Err(FormatError::parse(
            1,
            "expected `%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> <symmetry>`",
        ));
    }
    if words[1] != "matrix" {
        return Err(FormatError::Unsupported(format!(
            "object `{}` (only `matrix`)",
            quoted(words[1])
        )));
    }
    let format = match words[2] {
        "coordinate" => MmFormat::Coordinate,
        "array" => MmFormat::Array,
        f => {
            return Err(FormatError::parse(
                1,
                format!("unknown format `{}`", quoted(f)),
            ))
        }
    };
    let field = match words[3] {
        "real" | "double" => MmField::Real,
        "integer" => MmField::Integer,
        "pattern" if format == MmFormat::Coordinate => MmField::Pattern,
        "complex" => MmField::Complex,
        f => {
            return Err(FormatError::parse(
                1,
                format!("unknown or invalid field `{}`", quoted(f)),
            ))
        }
    };
    let symmetry = match words[4] {
        "general" => MmSymmetry::General,
        "symmetric" => MmSymmetry::Symmetric,
        "skew-symmetric" => MmSymmetry::SkewSymmetric,
        "hermitian" => MmSymmetry::Hermitian,
        s => {
            return Err(FormatError::parse(
                1,
                format!("unknown symmetry `{}`", quoted(s)),
            ))
        }
    };
    Ok(MmHeader {
        format,
        field,
        symmetry,
    })
}

fn number<N: std::str::FromStr>(word: Option<&[u8]>, line: usize, what: &str) -> Result<N> {
    let w = word.ok_or_else(|| FormatError::parse(line, format!("missing {what}")))?;
    let bad = || {
        FormatError::parse(
            line,
            format!(
                "{what} `{}` is not a valid number",
                w[..w.len().min(40)].escape_ascii()
            ),
        )
    };
    std::str::from_utf8(w)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)
}

fn finite(v: f64, line: usize) -> Result<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(FormatError::parse(line, format!("value {v} is not finite")))
    }
}

/// Next line that is neither a comment nor blank (trimmed), or `None` at the end.
fn next_data_line<R: BufRead>(lines: &mut LineReader<R>) -> Result<Option<(usize, &[u8])>> {
    loop {
        match lines.next_line()? {
            None => return Ok(None),
            Some((_, l)) => {
                let t = l.trim_ascii();
                if !t.is_empty() && !t.starts_with(b"%") {
                    break;
                }
            }
        }
    }
    Ok(Some((lines.line(), lines.current().trim_ascii())))
}

/// A streaming Matrix Market reader: the banner on construction, then the size line, then
/// one stored entry at a time. Lines are capped at [`crate::MAX_LINE_BYTES`].
///
/// ```
/// use sparse_formats::matrix_market::{MatrixMarketReader, MmSymmetry};
/// let text = "%%MatrixMarket matrix coordinate real symmetric\n% a comment\n3 3 2\n2 1 0.5\n3 3 -1\n";
/// let mut mm = MatrixMarketReader::new(text.as_bytes())?;
/// assert_eq!(mm.header().symmetry, MmSymmetry::Symmetric);
/// assert_eq!((mm.size()?.rows, mm.size()?.entries), (3, 2));
/// let first = mm.next_entry()?.unwrap();
/// assert_eq!((first.row, first.col, first.value, first.line), (1, 0, 0.5, 4));
/// assert!(mm.next_entry()?.is_some());
/// assert!(mm.next_entry()?.is_none());
/// # Ok::<(), sparse_formats::FormatError>(())
/// ```
#[derive(Debug)]
pub struct MatrixMarketReader<R> {
    lines: LineReader<R>,
    header: MmHeader,
    size: Option<MmSize>,
    /// Entries read so far.
    read: usize,
    /// Position of the next `array` entry (row, column), 0-based.
    next_array: (usize, usize),
    done: bool,
}

impl<R: BufRead> MatrixMarketReader<R> {
    /// Reads the banner.
    ///
    /// # Errors
    /// [`FormatError::Parse`] (line 1) for an empty file or a malformed banner,
    /// [`FormatError::Unsupported`] for an object other than `matrix`, line errors of
    /// [`LineReader`].
    pub fn new(reader: R) -> Result<Self> {
        let mut lines = LineReader::new(reader);
        let header = match lines.next_line()? {
            Some((_, banner)) => parse_header(banner)?,
            None => return Err(FormatError::parse(1, "empty file")),
        };
        let skew = usize::from(header.symmetry == MmSymmetry::SkewSymmetric);
        Ok(MatrixMarketReader {
            lines,
            header,
            size: None,
            read: 0,
            next_array: (skew, 0),
            done: false,
        })
    }

    /// The banner.
    pub fn header(&self) -> MmHeader {
        self.header
    }

    /// The number of the last line read.
    pub fn line(&self) -> usize {
        self.lines.line()
    }

    /// The size line (read on the first call), checked: non-square symmetric storage, sizes
    /// beyond `usize` and rows beyond `32 · entries + 2^20` are rejected before anything is
    /// allocated.
    ///
    /// # Errors
    /// [`FormatError::Truncated`] when there is no size line, [`FormatError::Parse`] for a
    /// malformed one, [`FormatError::TooLarge`] for implausible sizes.
    pub fn size(&mut self) -> Result<MmSize> {
        if let Some(size) = self.size {
            return Ok(size);
        }
        let header = self.header;
        let Some((line, text)) = next_data_line(&mut self.lines)? else {
            return Err(FormatError::Truncated {
                what: "size line",
                expected: 1,
                found: 0,
                line: self.lines.line(),
            });
        };
        let mut w = fields(text);
        let rows = number::<u64>(w.next(), line, "row count")?;
        let cols = number::<u64>(w.next(), line, "column count")?;
        let declared = match header.format {
            MmFormat::Coordinate => Some(number::<u64>(w.next(), line, "entry count")?),
            MmFormat::Array => None,
        };
        if w.next().is_some() {
            return Err(FormatError::parse(
                line,
                "too many numbers on the size line",
            ));
        }
        if header.symmetry != MmSymmetry::General && rows != cols {
            return Err(FormatError::parse(line, "symmetric matrix is not square"));
        }
        let too_large = |what: String| FormatError::TooLarge(format!("line {line}: {what}"));
        let entries = match declared {
            Some(e) => e,
            None => match header.symmetry {
                MmSymmetry::General => rows.checked_mul(cols),
                MmSymmetry::Symmetric | MmSymmetry::Hermitian => {
                    rows.checked_mul(rows.saturating_add(1)).map(|p| p / 2)
                }
                MmSymmetry::SkewSymmetric => {
                    rows.checked_mul(rows.saturating_sub(1)).map(|p| p / 2)
                }
            }
            .ok_or_else(|| too_large(format!("a dense {rows}×{cols} array")))?,
        };
        let to_usize = |v: u64, what: &str| {
            usize::try_from(v).map_err(|_| too_large(format!("{what} {v} does not fit usize")))
        };
        check_dimension("rows", rows, entries, 8).map_err(|e| match e {
            FormatError::TooLarge(m) => too_large(m),
            other => other,
        })?;
        let size = MmSize {
            rows: to_usize(rows, "row count")?,
            cols: to_usize(cols, "column count")?,
            entries: to_usize(entries, "entry count")?,
            line,
        };
        self.size = Some(size);
        Ok(size)
    }

    /// The next stored entry, or `None` after the last declared one (then checking that no
    /// data follows).
    ///
    /// # Errors
    /// [`FormatError::Parse`] for a malformed entry, a non-finite value, an entry above the
    /// diagonal of symmetric storage or on the diagonal of skew-symmetric storage, or data after
    /// the declared entries; [`FormatError::OutOfRange`] for indices outside the size line's
    /// bounds; [`FormatError::Truncated`] when the stream ends early.
    pub fn next_entry(&mut self) -> Result<Option<MmEntry>> {
        let size = self.size()?;
        let header = self.header;
        if self.done {
            return Ok(None);
        }
        if self.read == size.entries {
            self.done = true;
            if let Some((line, _)) = next_data_line(&mut self.lines)? {
                return Err(FormatError::parse(
                    line,
                    format!("more than the {} declared entries", size.entries),
                ));
            }
            return Ok(None);
        }
        let (read, array_position) = (self.read, self.next_array);
        let Some((line, text)) = next_data_line(&mut self.lines)? else {
            return Err(FormatError::Truncated {
                what: "entries",
                expected: size.entries,
                found: read,
                line: self.lines.line(),
            });
        };
        let mut w = fields(text);
        let (row, col) = match header.format {
            MmFormat::Coordinate => {
                let i = parse_u64(w.next(), line, "row index")?;
                let j = parse_u64(w.next(), line, "column index")?;
                if i == 0 || i > size.rows as u64 || j == 0 || j > size.cols as u64 {
                    return Err(FormatError::OutOfRange {
                        line,
                        row: i,
                        col: j,
                        nrows: size.rows as u64,
                        ncols: size.cols as u64,
                    });
                }
                (i as usize - 1, j as usize - 1)
            }
            MmFormat::Array => array_position,
        };
        let value = match header.field {
            MmField::Pattern => 1.0,
            MmField::Integer => number::<i64>(w.next(), line, "integer value")? as f64,
            MmField::Real => finite(number::<f64>(w.next(), line, "value")?, line)?,
            MmField::Complex => {
                let re = finite(number::<f64>(w.next(), line, "real part")?, line)?;
                finite(number::<f64>(w.next(), line, "imaginary part")?, line)?;
                re
            }
        };
        if w.next().is_some() {
            return Err(FormatError::parse(line, "too many fields in entry"));
        }
        if header.symmetry != MmSymmetry::General && col > row {
            return Err(FormatError::parse(
                line,
                format!(
                    "entry ({}, {}) above the diagonal in a {:?} file",
                    row + 1,
                    col + 1,
                    header.symmetry
                ),
            ));
        }
        if header.symmetry == MmSymmetry::SkewSymmetric && row == col {
            return Err(FormatError::parse(
                line,
                "diagonal entry in a skew-symmetric file",
            ));
        }
        if header.format == MmFormat::Array {
            // Array entries run down the columns, over the stored (lower) part only.
            let (mut ai, mut aj) = array_position;
            ai += 1;
            if ai == size.rows {
                aj += 1;
                ai = match header.symmetry {
                    MmSymmetry::General => 0,
                    MmSymmetry::Symmetric | MmSymmetry::Hermitian => aj,
                    MmSymmetry::SkewSymmetric => aj + 1,
                };
            }
            self.next_array = (ai, aj);
        }
        self.read += 1;
        Ok(Some(MmEntry {
            row,
            col,
            value,
            line,
        }))
    }
}
