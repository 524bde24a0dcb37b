//! Opening files (gzip detected by content) and reading numbered lines with a length cap.

use crate::error::{FormatError, Result};
use flate2::bufread::MultiGzDecoder;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The longest line a [`LineReader`] accepts by default: 1 MiB. Matrix Market, SNAP and
/// DIMACS lines are a few dozen bytes; a longer one means the stream is not such a file
/// (`/dev/zero`, a binary file), and the cap keeps the reader from buffering it whole.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Buffer size of the readers [`open`] returns.
const BUFFER_BYTES: usize = 1 << 16;

/// Opens a file for buffered reading, decompressing it on the fly when it starts with the gzip
/// magic bytes (whatever its name).
///
/// # Errors
/// [`FormatError::Open`] when the file cannot be opened or its first bytes cannot be read.
///
/// ```no_run
/// use std::io::BufRead;
/// let reader = sparse_formats::open("graph.txt.gz".as_ref())?;
/// println!("{} lines", reader.lines().count());
/// # Ok::<(), sparse_formats::FormatError>(())
/// ```
pub fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let open_err = |error| FormatError::Open {
        path: path.to_path_buf(),
        error,
    };
    let mut file = BufReader::with_capacity(BUFFER_BYTES, File::open(path).map_err(open_err)?);
    let gzip = file
        .fill_buf()
        .map_err(open_err)?
        .starts_with(&[0x1f, 0x8b]);
    if gzip {
        let decoder = MultiGzDecoder::new(file);
        Ok(Box::new(BufReader::with_capacity(BUFFER_BYTES, decoder)))
    } else {
        Ok(Box::new(file))
    }
}

/// Numbered lines of a byte stream, without their terminators (`\n`, `\r\n`), each at most
/// `limit` bytes ([`MAX_LINE_BYTES`] by default). Lines are bytes: no UTF-8 requirement.
///
/// ```
/// let mut lines = sparse_formats::LineReader::new("a\r\nb\n".as_bytes());
/// assert_eq!(lines.next_line()?, Some((1, &b"a"[..])));
/// assert_eq!(lines.next_line()?, Some((2, &b"b"[..])));
/// assert_eq!(lines.next_line()?, None);
/// # Ok::<(), sparse_formats::FormatError>(())
/// ```
#[derive(Debug)]
pub struct LineReader<R> {
    reader: R,
    buf: Vec<u8>,
    line: usize,
    limit: usize,
}

impl<R: BufRead> LineReader<R> {
    /// Reads `reader` with the default cap [`MAX_LINE_BYTES`].
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE_BYTES)
    }

    /// Reads `reader`, rejecting lines longer than `limit` bytes (terminator excluded).
    pub fn with_limit(reader: R, limit: usize) -> Self {
        LineReader {
            reader,
            buf: Vec::with_capacity(256),
            line: 0,
            limit,
        }
    }

    /// The number of the last line returned (0 before the first).
    pub fn line(&self) -> usize {
        self.line
    }

    /// The next line and its 1-based number, or `None` at the end of the stream.
    ///
    /// # Errors
    /// [`FormatError::Read`] when the stream fails (naming the last complete line),
    /// [`FormatError::LineTooLong`] when the line exceeds the cap; at most `limit + 2` bytes
    /// are buffered either way.
    pub fn next_line(&mut self) -> Result<Option<(usize, &[u8])>> {
        self.buf.clear();
        // `limit` bytes, the `\r` and the `\n`: one more means the line is too long.
        let cap = self.limit.saturating_add(2) as u64;
        let read = (&mut self.reader)
            .take(cap)
            .read_until(b'\n', &mut self.buf)
            .map_err(|error| FormatError::Read {
                line: self.line,
                error,
            })?;
        if read == 0 {
            return Ok(None);
        }
        self.line += 1;
        if self.current().len() > self.limit {
            return Err(FormatError::LineTooLong {
                line: self.line,
                limit: self.limit,
            });
        }
        Ok(Some((self.line, self.current())))
    }

    /// The last line returned by [`LineReader::next_line`], without its terminator (empty
    /// before the first).
    pub fn current(&self) -> &[u8] {
        let mut s = self.buf.as_slice();
        if let [rest @ .., b'\n'] = s {
            s = rest;
        }
        if let [rest @ .., b'\r'] = s {
            s = rest;
        }
        s
    }
}

/// Splits a line on ASCII whitespace.
pub fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

/// Parses an unsigned decimal field (digits only, no sign); `what` names it in the error.
///
/// # Errors
/// [`FormatError::Parse`] when the field is missing, not all digits, or above `u64::MAX`.
pub fn parse_u64(field: Option<&[u8]>, line: usize, what: &str) -> Result<u64> {
    let field = field.ok_or_else(|| FormatError::parse(line, format!("missing {what}")))?;
    let bad = || {
        FormatError::parse(
            line,
            format!(
                "{what} `{}` is not a non-negative integer",
                field[..field.len().min(40)].escape_ascii()
            ),
        )
    };
    if field.is_empty() {
        return Err(bad());
    }
    let mut value: u64 = 0;
    for &b in field {
        if !b.is_ascii_digit() {
            return Err(bad());
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
            .ok_or_else(bad)?;
    }
    Ok(value)
}
