//! # sparse_formats
//!
//! The file formats and the generator that the sparse-matrix and the graph kernels of pardis
//! share, in one small leaf crate so that neither kernel crate depends on the other:
//!
//! - [`open`]: a file opened for buffered reading, gzip detected by content;
//!   [`LineReader`]: numbered lines capped at [`MAX_LINE_BYTES`] (1 MiB), so `/dev/zero` or a
//!   binary file fails at once instead of growing a buffer.
//! - [`matrix_market`]: a streaming Matrix Market reader (banner, size line, entries) that
//!   checks sizes before anything is allocated.
//! - [`rmat`]: the R-MAT / Graph500 Kronecker edge generator and its constants.
//! - [`reserve_hint`] and [`check_dimension`]: the two rules that keep allocation bounded by
//!   the data rather than by a header.
//!
//! Errors are one [`FormatError`] enum whose messages name the line and what was expected.
//!
//! ```
//! use sparse_formats::matrix_market::MatrixMarketReader;
//!
//! let text = "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n";
//! let mut mm = MatrixMarketReader::new(text.as_bytes())?;
//! let mut entries = Vec::new();
//! while let Some(e) = mm.next_entry()? {
//!     entries.push((e.row, e.col));
//! }
//! assert_eq!(entries, [(0, 1), (1, 0)]);
//!
//! // A 60-byte file declaring 10^9 rows fails before allocating anything.
//! let hostile = "%%MatrixMarket matrix coordinate real general\n1000000000 1 1\n";
//! let err = MatrixMarketReader::new(hostile.as_bytes())?.size().unwrap_err();
//! assert!(err.to_string().contains("GB"), "{err}");
//! # Ok::<(), sparse_formats::FormatError>(())
//! ```

mod bounds;
mod error;
mod lines;
pub mod matrix_market;
pub mod rmat;

pub use bounds::{check_dimension, human_bytes, reserve_hint, MAX_RESERVE};
pub use error::{FormatError, Result};
pub use lines::{fields, open, parse_u64, LineReader, MAX_LINE_BYTES};
