//! Data loaders: NumPy `.npy`/`.npz`, numeric CSV, IDX (MNIST), FewRel JSON, character text.

mod csv;
mod fewrel;
mod idx;
mod npy;
mod text;
mod tokenize;

pub use csv::{parse_csv, read_csv, CsvTable};
pub use fewrel::{read_fewrel, read_fewrel_unlabelled, Entity, FewRel, FewRelInstance};
pub use idx::{parse_idx, read_idx, IdxArray, IdxData};
pub use npy::{parse_npy, read_npy, read_npz, NpyArray};
pub use text::{lm_batch, lm_eval_batches, CharTokenizer};
pub use tokenize::{pad_batch, Encoded, SubwordTokenizer};

use std::path::{Path, PathBuf};

/// The data roots in the project's order of preference: `pardis_data` (the caller reads
/// `$PARDIS_DATA`), `<workspace>/datasets/cache/`, `<workspace>/../shared/datasets/`.
pub fn data_roots(pardis_data: Option<PathBuf>, workspace: &Path) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = pardis_data.into_iter().collect();
    roots.extend([
        workspace.join("datasets/cache"),
        workspace.join("../shared/datasets"),
    ]);
    roots
}

/// The first of `roots` that holds `rel` (e.g. `text/tinyshakespeare.txt`).
///
/// The library reads no environment variables: callers pass the roots in their order of
/// preference (the CLI uses `$PARDIS_DATA`, `datasets/cache/`, `../shared/datasets/`).
pub fn find_data(rel: &str, roots: &[PathBuf]) -> crate::Result<PathBuf> {
    roots
        .iter()
        .map(|r| r.join(rel))
        .find(|p| Path::new(p).is_file())
        .ok_or_else(|| crate::MlError::DataNotFound(rel.to_string()))
}
