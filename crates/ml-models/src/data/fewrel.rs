//! FewRel JSON (Han et al., EMNLP 2018): `{relation: [{tokens, h, t}, ...]}` or, for the
//! unsupervised PubMed file, a bare list of instances.

use std::path::Path;

use serde::Deserialize;

use crate::{MlError, Result};

/// An entity mention: surface name, knowledge-base id, token positions of each occurrence.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Entity(pub String, pub String, pub Vec<Vec<usize>>);

/// One sentence with a head and a tail entity.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FewRelInstance {
    /// Tokens of the sentence.
    pub tokens: Vec<String>,
    /// Head entity.
    pub h: Entity,
    /// Tail entity.
    pub t: Entity,
}

impl FewRelInstance {
    /// The sentence with single spaces between tokens.
    pub fn sentence(&self) -> String {
        self.tokens.join(" ")
    }
}

/// A labelled FewRel file: relations in file order, each with its instances.
#[derive(Debug, Clone, PartialEq)]
pub struct FewRel {
    /// `(relation id, instances)` pairs, sorted by relation id.
    pub relations: Vec<(String, Vec<FewRelInstance>)>,
}

/// Reads a labelled FewRel file (`val_wiki.json` and the like).
pub fn read_fewrel(path: &Path) -> Result<FewRel> {
    let text = std::fs::read_to_string(path).map_err(|e| MlError::io(path, e))?;
    let map: std::collections::BTreeMap<String, Vec<FewRelInstance>> =
        serde_json::from_str(&text).map_err(|e| MlError::format("fewrel", path, e.to_string()))?;
    Ok(FewRel {
        relations: map.into_iter().collect(),
    })
}

/// Reads an unlabelled FewRel instance list (`pubmed_unsupervised.json`).
pub fn read_fewrel_unlabelled(path: &Path) -> Result<Vec<FewRelInstance>> {
    let text = std::fs::read_to_string(path).map_err(|e| MlError::io(path, e))?;
    serde_json::from_str(&text).map_err(|e| MlError::format("fewrel", path, e.to_string()))
}

/// Names and descriptions of FewRel relations (`pid2name.json`: `{"P155": ["follows",
/// "immediately prior item ..."], ...}`), by relation id.
pub type RelationNames = std::collections::BTreeMap<String, (String, String)>;

/// Reads FewRel's `pid2name.json`.
pub fn read_pid2name(path: &Path) -> Result<RelationNames> {
    let text = std::fs::read_to_string(path).map_err(|e| MlError::io(path, e))?;
    let map: std::collections::BTreeMap<String, Vec<String>> = serde_json::from_str(&text)
        .map_err(|e| MlError::format("pid2name", path, e.to_string()))?;
    map.into_iter()
        .map(|(id, v)| match <[String; 2]>::try_from(v) {
            Ok([name, desc]) => Ok((id, (name, desc))),
            Err(v) => Err(MlError::format(
                "pid2name",
                path,
                format!(
                    "relation {id}: expected [name, description], got {} strings",
                    v.len()
                ),
            )),
        })
        .collect()
}
