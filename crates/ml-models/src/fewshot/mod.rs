//! The few-shot relation-extraction harness of FewRel (Han et al., EMNLP 2018; Gao et al.,
//! FewRel 2.0, EMNLP 2019): relations with names and descriptions, the meta-train/meta-test
//! split used here, seeded N-way K-shot episodes, accuracy with a 95 % confidence interval, and
//! the sentence encoder (entity-marker instance features, description features; the tiny and
//! the MiniLM encoder are one BERT type with different shapes, weights and tokenizers, see
//! [`FewShotEncoder`]). The methods trained and evaluated in it live in [`crate::hyperbolic::pohrl`].
//!
//! FewRel's `train_wiki.json` is not available offline, so the split is built from the public
//! validation files: meta-train on the 25 relations of `val_nyt.json` plus 8 of the 16 relations
//! of `val_wiki.json`, meta-test on the other 8 wiki relations, which no training episode ever
//! shows ([`MetaSplit::fewrel`]). The 8 wiki relations that train are the ones whose ids
//! `val_nyt.json` also uses (FewRel 2.0's NYT set is labelled with Wikidata properties): their
//! wiki instances join the NYT relation of the same id, so training has 25 relations, and
//! keeping them out of the test set is what keeps the test relations unseen. Any other FewRel-format file can
//! replace the test set ([`MetaSplit::with_test`]; relations seen in training are removed).

mod encoder;
mod episode;

pub use encoder::{tiny_bert, EncodedRelation, EncoderKind, FewShotEncoder};
pub use episode::{accuracy_ci, Accuracy, Episode, EpisodeConfig, EpisodeSampler};

use crate::data::{FewRel, FewRelInstance, RelationNames};
use crate::{MlError, Result};

/// One relation of a few-shot data set.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationSet {
    /// Relation id (`P155`, `Cause-Effect(e1,e2)`, ...).
    pub id: String,
    /// Relation name (`follows`).
    pub name: String,
    /// Relation description (`pid2name.json`; the name again where the file has none).
    pub description: String,
    /// Labelled instances.
    pub instances: Vec<FewRelInstance>,
}

impl RelationSet {
    /// The text that represents the relation: `name : description`, or the name alone
    /// (the "without descriptions" setting).
    pub fn text(&self, with_description: bool) -> String {
        if with_description && self.description != self.name {
            format!("{} : {}", self.name, self.description)
        } else {
            self.name.clone()
        }
    }
}

/// The relations of a FewRel file with their names and descriptions from `names`. Relations
/// that `names` lacks (SemEval's `Cause-Effect(e1,e2)`, ...) are named by their id with
/// punctuation turned into spaces (`cause effect e1 e2`), which is also their description.
pub fn relations(data: FewRel, names: &RelationNames) -> Vec<RelationSet> {
    data.relations
        .into_iter()
        .map(|(id, instances)| {
            let (name, description) = match names.get(&id) {
                Some((n, d)) => (n.clone(), d.clone()),
                None => {
                    let n: String = id
                        .chars()
                        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
                        .collect::<String>()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .to_lowercase();
                    (n.clone(), n)
                }
            };
            RelationSet {
                id,
                name,
                description,
                instances,
            }
        })
        .collect()
}

/// Meta-training and meta-test relations, disjoint by id.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaSplit {
    /// Relations of training episodes.
    pub train: Vec<RelationSet>,
    /// Relations of test episodes.
    pub test: Vec<RelationSet>,
}

impl MetaSplit {
    /// The split used here: meta-train = every relation of `nyt`, where the `wiki` relations
    /// with the same id add their instances; meta-test = the `wiki` relations that `nyt` lacks.
    /// With FewRel's files, the 8 shared ids (P2094, P25, P40, P410, P412, P413, P463, P921)
    /// train, and P155, P177, P206, P26, P361, P364, P59, P641 are the unseen test relations.
    pub fn fewrel(wiki: Vec<RelationSet>, nyt: Vec<RelationSet>) -> Result<Self> {
        let mut train = nyt;
        let mut test = Vec::new();
        for rel in wiki {
            match train.iter_mut().find(|t| t.id == rel.id) {
                Some(t) => t.instances.extend(rel.instances),
                None => test.push(rel),
            }
        }
        if test.is_empty() {
            return Err(MlError::InvalidInput(
                "every wiki relation also occurs in the nyt file: no unseen test relations".into(),
            ));
        }
        test.sort_by(|a, b| a.id.cmp(&b.id));
        let split = Self { train, test };
        split.check_disjoint()?;
        Ok(split)
    }

    /// The same training relations with `test` as the test set, minus the relations whose id
    /// also occurs in training; returns the split and the number of relations removed.
    pub fn with_test(self, test: Vec<RelationSet>) -> (Self, usize) {
        let before = test.len();
        let test: Vec<RelationSet> = test
            .into_iter()
            .filter(|r| self.train.iter().all(|t| t.id != r.id))
            .collect();
        let removed = before - test.len();
        (
            Self {
                train: self.train,
                test,
            },
            removed,
        )
    }

    /// Errors when a relation id occurs on both sides.
    pub fn check_disjoint(&self) -> Result<()> {
        match self
            .test
            .iter()
            .find(|r| self.train.iter().any(|t| t.id == r.id))
        {
            Some(r) => Err(MlError::InvalidInput(format!(
                "relation {} is in both the training and the test set",
                r.id
            ))),
            None => Ok(()),
        }
    }
}

/// Reads the split of [`MetaSplit::fewrel`] from FewRel's files (`val_wiki.json`,
/// `val_nyt.json`, `pid2name.json`); with `test`, that FewRel-format file replaces the test set
/// (relations seen in training removed, their number returned).
pub fn load_split(
    wiki: &std::path::Path,
    nyt: &std::path::Path,
    pid2name: &std::path::Path,
    test: Option<&std::path::Path>,
) -> Result<(MetaSplit, usize)> {
    let names = crate::data::read_pid2name(pid2name)?;
    let wiki = relations(crate::data::read_fewrel(wiki)?, &names);
    let nyt = relations(crate::data::read_fewrel(nyt)?, &names);
    let split = MetaSplit::fewrel(wiki, nyt)?;
    match test {
        Some(path) => {
            let other = relations(crate::data::read_fewrel(path)?, &names);
            Ok(split.with_test(other))
        }
        None => Ok((split, 0)),
    }
}
