//! Data loaders shared by every paper's module: NumPy `.npy`/`.npz`, numeric CSV, IDX (MNIST and
//! Fashion-MNIST), FewRel JSON and its entity-marked encoding, character text and language-model
//! batches, sub-word tokenisation through Hugging Face `tokenizers`.
//!
//! Every loader takes a path; finding a data set on disk (`$PARDIS_DATA`, the workspace cache,
//! the shared directory) is the caller's job (the workspace's `pardis-datasets` crate does it for
//! the CLI, examples and tests).
//!
//! Every reader of a whole file goes through [`read_bytes_limited`] (or [`read_text_limited`]):
//! regular files only, at most [`MAX_FILE_BYTES`] of data ([`MAX_WEIGHTS_BYTES`] of model
//! weights), and decompressed or archived content bounded the same way, so hostile input is a
//! typed error, never a hang or an allocation a file's header asks for.

mod csv;
mod fewrel;
mod idx;
mod limited;
pub(crate) use limited::{open_limited, too_long};
pub use limited::{
    read_bytes_limited, read_text_limited, MAX_FILE_BYTES, MAX_VALUES, MAX_WEIGHTS_BYTES,
};
mod marked;
pub(crate) use marked::in_instance;
mod npy;
mod split;
mod text;
mod tokenize;

pub use csv::{parse_csv, read_csv, CsvTable};
pub use fewrel::{
    read_fewrel, read_fewrel_unlabelled, read_pid2name, Entity, FewRel, FewRelInstance,
    RelationNames,
};
pub use idx::{parse_idx, read_idx, IdxArray, IdxData};
pub use marked::{
    encode_fewrel, encode_marked, mark_entities, RelationExample, WordEncoder, WordVocab,
};
pub use npy::{parse_npy, read_npy, read_npz, NpyArray, MAX_DIMS};
pub(crate) use split::stratified_rows;
pub use text::{lm_batch, lm_eval_batches, CharTokenizer};
pub use tokenize::{pad_batch, Encoded, SubwordTokenizer};
