//! Bounded reading of whole files: the one place where the crate's readers (data sets,
//! `tokenizer.json`, BERT `config.json`, safetensors weights and checkpoints) open a path.
//!
//! A reader accepts regular files only, refuses a file longer than its limit before reading it,
//! and reads at most one byte more than the limit (a file that grows while it is read), so
//! neither a FIFO (whose opening waits for a writer), a device (`/dev/zero` never ends), nor a
//! huge file makes it hang or allocate without bound. Memory is sized by the bytes actually
//! read (and by the file system's length of a regular file, itself within the limit), never by
//! a length a file's content claims.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::{MlError, Result};

/// The largest data file the crate reads, 1 GiB: `.npy`, `.npz` (and the arrays of an archive
/// together, decompressed), CSV, IDX (and a gzip IDX file decompressed), FewRel JSON and
/// `pid2name.json`, `tokenizer.json`, BERT `config.json`. The largest real file the crate reads
/// is far smaller (Fashion-MNIST's training images are 47 MB decompressed, FewRel's largest file
/// 3.5 MB). A longer file is an [`MlError::Format`], refused before it is read, or after at most
/// one byte more than this is read where its length is not known in advance.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The largest model-weights or checkpoint file (safetensors) the crate reads, 16 GiB: above a
/// 7-billion-parameter model in 16-bit floats (13 GiB); all-MiniLM-L6-v2 is 87 MiB. Refused like
/// a data file over [`MAX_FILE_BYTES`].
pub const MAX_WEIGHTS_BYTES: u64 = 16 << 30;

/// The most `f64` values the readers that widen to `f64` return: from one `.npy` file, from
/// the arrays of one `.npz` archive together, from one IDX file of a type other than unsigned
/// bytes. Their values take at most [`MAX_FILE_BYTES`]: a file of one-byte values would
/// otherwise take eight times its size (and a 1 MiB compressed archive 8 GiB). A shape with
/// more elements is an [`MlError::Format`], refused before its body is looked at.
pub const MAX_VALUES: usize = (MAX_FILE_BYTES / 8) as usize;

/// An empty vector with room for `n` values, or an [`MlError::Io`] (kind `OutOfMemory`) naming
/// `path` where that room is not to be had (an error, not an abort).
pub(crate) fn try_values(n: usize, path: &Path) -> Result<Vec<f64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|e| {
        MlError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("{n} values: {e}")),
        )
    })?;
    Ok(v)
}

/// The [`MlError::Format`] of a source longer than `max` bytes.
pub(crate) fn too_long(format: &'static str, path: &Path, max: u64) -> MlError {
    MlError::format(
        format,
        path,
        format!("more than the {max} bytes this reader accepts"),
    )
}

/// What kind of non-regular file `t` is, in words.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Opens the regular file `path` of at most `max` bytes, with its length; checks the type
/// before opening (opening a FIFO would wait for a writer) and again on the open file, which is
/// opened without blocking (`O_NONBLOCK` on Unix), so that a path replaced by a FIFO between
/// the two checks is refused too instead of waiting for a writer.
///
/// # Errors
/// [`MlError::Io`] (kind `InvalidInput`) when `path` is not a regular file (a FIFO, device,
/// socket or directory) or cannot be opened; [`MlError::Format`] when it is longer than `max`.
pub(crate) fn open_regular(path: &Path, format: &'static str, max: u64) -> Result<(File, u64)> {
    let check = |meta: std::fs::Metadata| -> Result<u64> {
        if !meta.is_file() {
            return Err(MlError::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "{}, not a regular file (only regular files are read)",
                        kind(meta.file_type())
                    ),
                ),
            ));
        }
        if meta.len() > max {
            return Err(too_long(format, path, max));
        }
        Ok(meta.len())
    };
    check(std::fs::metadata(path).map_err(|e| MlError::io(path, e))?)?;
    let file = open_without_blocking(path).map_err(|e| MlError::io(path, e))?;
    let len = check(file.metadata().map_err(|e| MlError::io(path, e))?)?;
    Ok((file, len))
}

/// Opens `path` for reading; on Unix with `O_NONBLOCK`, so that opening a FIFO returns at once
/// instead of waiting for a writer (reads of a regular file are not affected by the flag).
fn open_without_blocking(path: &Path) -> std::io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
    }
    #[cfg(not(unix))]
    File::open(path)
}

/// [`open_regular`] as a reader that yields at most `max + 1` bytes (one more than the limit,
/// so a file that grew past it since it was opened can be told from one at the limit).
pub(crate) fn open_limited(
    path: &Path,
    format: &'static str,
    max: u64,
) -> Result<std::io::Take<File>> {
    let (file, _) = open_regular(path, format, max)?;
    Ok(file.take(max.saturating_add(1)))
}

/// Reads `reader` to its end, at most `max` bytes: `Ok(None)` when it holds more (after
/// reading `max + 1` bytes). Memory grows with the bytes read, never beyond `max + 1`.
pub(crate) fn read_to_end_limited<R: Read>(
    reader: R,
    max: u64,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    reader.take(max.saturating_add(1)).read_to_end(&mut out)?;
    Ok((out.len() as u64 <= max).then_some(out))
}

/// The bytes of the regular file `path` of at most `max` bytes; `format` names the format in
/// errors (`"npy"`, `"idx"`, ...).
///
/// # Errors
/// [`MlError::Io`] when `path` is not a regular file (a FIFO, device, socket or directory:
/// refused before it is opened, so neither a FIFO without a writer nor `/dev/zero` is waited on
/// or read), cannot be read, or is too long for memory; [`MlError::Format`] when it is longer
/// than `max` bytes (refused before it is read, or after `max + 1` bytes for a file that grows
/// while it is read).
///
/// # Example
/// ```
/// use ml_models::data::{read_bytes_limited, MAX_FILE_BYTES};
/// let path = std::env::temp_dir().join(format!("read-bytes-limited-{}", std::process::id()));
/// std::fs::write(&path, b"12345").unwrap();
/// assert_eq!(read_bytes_limited(&path, "example", MAX_FILE_BYTES).unwrap(), b"12345");
/// assert!(read_bytes_limited(&path, "example", 4).is_err());
/// std::fs::remove_file(&path).unwrap();
/// ```
pub fn read_bytes_limited(path: &Path, format: &'static str, max: u64) -> Result<Vec<u8>> {
    let (file, len) = open_regular(path, format, max)?;
    let mut bytes = Vec::new();
    // The file system's length (within `max`), as `std::fs::read` reserves; a failed
    // reservation is an error, not an abort.
    bytes
        .try_reserve_exact(usize::try_from(len).unwrap_or(usize::MAX))
        .map_err(|e| {
            MlError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::OutOfMemory, format!("{len} bytes: {e}")),
            )
        })?;
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| MlError::io(path, e))?;
    if bytes.len() as u64 > max {
        return Err(too_long(format, path, max));
    }
    Ok(bytes)
}

/// [`read_bytes_limited`] as UTF-8 text; a file that is not UTF-8 is an [`MlError::Format`]
/// naming the byte offset of the first bad byte.
pub fn read_text_limited(path: &Path, format: &'static str, max: u64) -> Result<String> {
    String::from_utf8(read_bytes_limited(path, format, max)?).map_err(|e| {
        MlError::format(
            format,
            path,
            format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pardis-limited-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `/dev/zero` (a device, endless) is refused before it is read, at any limit.
    #[test]
    fn device_is_refused_unread() {
        let zero = Path::new("/dev/zero");
        if !zero.exists() {
            return;
        }
        let err = read_bytes_limited(zero, "npy", MAX_FILE_BYTES).unwrap_err();
        assert!(
            matches!(&err, MlError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::InvalidInput)
                && err
                    .to_string()
                    .contains("a character device, not a regular file"),
            "{err}"
        );
        assert!(read_text_limited(zero, "fewrel", u64::MAX).is_err());
        assert!(open_limited(zero, "npy", 1).is_err());
    }

    /// A FIFO without a writer is refused, and so is one that takes the place of a regular
    /// file after the check by path: the open itself does not wait for a writer.
    #[cfg(unix)]
    #[test]
    fn fifo_is_refused_without_waiting() {
        let dir = scratch("fifo");
        let fifo = dir.join("pipe.npy");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0, "mkfifo");
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let by_path = read_bytes_limited(&path, "npy", 10).map(|_| ());
            // What happens when the check by path passed and the path is a FIFO by the open.
            let opened = open_without_blocking(&path).map(|f| f.metadata().unwrap().is_file());
            sender.send((by_path, opened)).unwrap();
        });
        // Generous for a loaded machine; a blocking open would never return.
        let (by_path, opened) = receiver
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("opening a FIFO without a writer waited");
        let err = by_path.unwrap_err();
        assert!(
            err.to_string().contains("a FIFO, not a regular file"),
            "{err}"
        );
        assert!(!opened.unwrap(), "the open FIFO is not a regular file");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory is refused by type too.
    #[test]
    fn directory_is_refused() {
        let dir = scratch("dir");
        let err = read_bytes_limited(&dir, "csv", 10).unwrap_err();
        assert!(err.to_string().contains("a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file at the limit is read; one byte more is refused, before it is read.
    #[test]
    fn limit_is_inclusive() {
        let dir = scratch("limit");
        let f = dir.join("x.json");
        std::fs::write(&f, "[1, 2]").unwrap();
        assert_eq!(read_text_limited(&f, "fewrel", 6).unwrap(), "[1, 2]");
        assert!(matches!(
            read_text_limited(&f, "fewrel", 5),
            Err(MlError::Format { .. })
        ));
        std::fs::write(&f, [b'a', 0xff]).unwrap();
        let err = read_text_limited(&f, "fewrel", 6).unwrap_err();
        assert!(err.to_string().contains("not UTF-8 (byte 1)"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A stream is cut after one byte more than the limit.
    #[test]
    fn stream_limit() {
        assert_eq!(
            read_to_end_limited(&b"abc"[..], 3).unwrap(),
            Some(b"abc".to_vec())
        );
        assert_eq!(read_to_end_limited(&b"abcd"[..], 3).unwrap(), None);
        // An endless stream ends at the limit.
        assert_eq!(
            read_to_end_limited(std::io::repeat(7), 1 << 16).unwrap(),
            None
        );
    }
}
