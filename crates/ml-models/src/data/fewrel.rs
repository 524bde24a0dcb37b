//! FewRel JSON (Han et al., EMNLP 2018): `{relation: [{tokens, h, t}, ...]}` or, for the
//! unsupervised PubMed file, a bare list of instances.

use std::path::Path;

use serde::Deserialize;

use super::limited::{read_text_limited, MAX_FILE_BYTES};
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

    /// The token span `(first, last)` of the first mention of the head (`head = true`) or the
    /// tail: the smallest and largest position of its first occurrence.
    pub fn span(&self, head: bool) -> Option<(usize, usize)> {
        let e = if head { &self.h } else { &self.t };
        let first = e.2.first()?;
        Some((*first.iter().min()?, *first.iter().max()?))
    }

    /// Why the instance cannot be marked, if it cannot: no tokens; an entity without an
    /// occurrence, with an empty occurrence, or with a position beyond the tokens; head and
    /// tail whose first mentions overlap (their markers would cross). FewRel's own files pass.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.tokens.is_empty() {
            return Err("no tokens".into());
        }
        for (role, e) in [("head", &self.h), ("tail", &self.t)] {
            if e.2.is_empty() {
                return Err(format!("{role} entity {:?} has no token positions", e.0));
            }
            if e.2.iter().any(Vec::is_empty) {
                return Err(format!("{role} entity {:?} has an empty occurrence", e.0));
            }
            if let Some(&p) = e.2.iter().flatten().find(|&&p| p >= self.tokens.len()) {
                return Err(format!(
                    "{role} entity {:?} at token {p}, the sentence has {} tokens",
                    e.0,
                    self.tokens.len()
                ));
            }
        }
        let (Some((hs, he)), Some((ts, te))) = (self.span(true), self.span(false)) else {
            return Err("an entity has no token positions".into());
        };
        if hs <= te && ts <= he {
            return Err(format!(
                "head (tokens {hs}..={he}) and tail (tokens {ts}..={te}) overlap"
            ));
        }
        Ok(())
    }
}

/// The text of a JSON file of `format`, at most [`MAX_FILE_BYTES`] (see
/// [`read_text_limited`] for its errors).
fn read_text(path: &Path, format: &'static str) -> Result<String> {
    read_text_limited(path, format, MAX_FILE_BYTES)
}

/// A labelled FewRel file: relations in file order, each with its instances.
#[derive(Debug, Clone, PartialEq)]
pub struct FewRel {
    /// `(relation id, instances)` pairs, sorted by relation id.
    pub relations: Vec<(String, Vec<FewRelInstance>)>,
}

/// Reads a labelled FewRel file (`val_wiki.json` and the like).
///
/// # Errors
/// [`MlError::Io`] when the file cannot be read; [`MlError::Format`] when it is too large
/// ([`MAX_FILE_BYTES`]), not UTF-8, not FewRel JSON, has a relation without instances, or has an
/// instance that fails [`FewRelInstance::check`] (the message names the relation and the
/// instance's index in it).
pub fn read_fewrel(path: &Path) -> Result<FewRel> {
    let text = read_text(path, "fewrel")?;
    let map: std::collections::BTreeMap<String, Vec<FewRelInstance>> =
        serde_json::from_str(&text).map_err(|e| MlError::format("fewrel", path, e.to_string()))?;
    for (id, insts) in &map {
        if insts.is_empty() {
            return Err(MlError::format(
                "fewrel",
                path,
                format!("relation {id} has no instances"),
            ));
        }
        for (i, inst) in insts.iter().enumerate() {
            inst.check().map_err(|why| {
                MlError::format(
                    "fewrel",
                    path,
                    format!("relation {id}, instance {i}: {why}"),
                )
            })?;
        }
    }
    Ok(FewRel {
        relations: map.into_iter().collect(),
    })
}

/// Reads an unlabelled FewRel instance list (`pubmed_unsupervised.json`); the same errors as
/// [`read_fewrel`] (instances named by their index).
pub fn read_fewrel_unlabelled(path: &Path) -> Result<Vec<FewRelInstance>> {
    let text = read_text(path, "fewrel")?;
    let insts: Vec<FewRelInstance> =
        serde_json::from_str(&text).map_err(|e| MlError::format("fewrel", path, e.to_string()))?;
    for (i, inst) in insts.iter().enumerate() {
        inst.check()
            .map_err(|why| MlError::format("fewrel", path, format!("instance {i}: {why}")))?;
    }
    Ok(insts)
}

/// Names and descriptions of FewRel relations (`pid2name.json`: `{"P155": ["follows",
/// "immediately prior item ..."], ...}`), by relation id.
pub type RelationNames = std::collections::BTreeMap<String, (String, String)>;

/// Reads FewRel's `pid2name.json`.
pub fn read_pid2name(path: &Path) -> Result<RelationNames> {
    let text = read_text(path, "pid2name")?;
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
