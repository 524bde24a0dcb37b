//! # pardis-datasets
//!
//! Finds and verifies the public data sets that pardis tests, benches and examples use. It parses
//! nothing: each library crate reads its own formats. The manifest (`datasets/manifest.toml`,
//! embedded at compile time) lists every data set with its original URL, licence, size and
//! sha256.
//!
//! A data set's relative path is looked up, in order, under
//! 1. the directory named by `$PARDIS_DATA` (passed in by the caller, see [`DataRoots::from_env`]),
//! 2. `<workspace>/datasets/cache/`,
//! 3. `<workspace>/../shared/datasets/`,
//! 4. `/usr/share/datasets/` (where Debian's `dataset-*` packages install).
//!
//! ```
//! use pardis_datasets::{DataRoots, Manifest};
//!
//! let manifest = Manifest::builtin();
//! let enron = manifest.get("email-Enron").unwrap();
//! assert_eq!(enron.kind, "graph");
//! // Where would it be found on this machine? (None when absent.)
//! let roots = DataRoots::default_for_workspace(None);
//! let _maybe_path = roots.locate(enron);
//! ```

mod manifest;
mod roots;

pub use manifest::{Dataset, Manifest};
pub use roots::{verify, DataRoots, Located, Origin};

/// Errors from reading the manifest or verifying a file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// The manifest could not be parsed.
    #[error("manifest: {0}")]
    Manifest(String),
    /// No data set of this name is listed in the manifest.
    #[error("unknown data set `{name}`; known: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// Comma-separated names in the manifest.
        known: String,
    },
    /// The data set is listed but was not found in any data root.
    #[error("data set `{name}` not found (looked for `{path}` in: {searched})")]
    NotFound {
        /// Data set name.
        name: String,
        /// Relative path inside a data root.
        path: String,
        /// The roots that were searched.
        searched: String,
    },
    /// A file named by its path under a data root was not found in any data root.
    #[error("data file `{path}` not found (searched {searched})")]
    FileNotFound {
        /// Relative path inside a data root.
        path: String,
        /// The roots that were searched.
        searched: String,
    },
    /// The file exists but its size or checksum differs from the manifest.
    #[error("{path}: {what} mismatch (expected {expected}, found {found})")]
    Mismatch {
        /// File that failed verification.
        path: std::path::PathBuf,
        /// `size` or `sha256`.
        what: &'static str,
        /// Value in the manifest.
        expected: String,
        /// Value of the file.
        found: String,
    },
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// File being read.
        path: std::path::PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
}
