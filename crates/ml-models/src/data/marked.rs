//! FewRel instances with typed entity markers, tokenised for relation classification.
//!
//! Entities are marked in the text with typed-marker punctuation (`@ head @`, `# tail #`, Zhou &
//! Chen, "An Improved Baseline for Sentence-level Relation Extraction", AACL 2022); a classifier
//! reads the encoder states at the two opening markers.

use std::collections::HashMap;

use crate::data::{Encoded, FewRel, FewRelInstance, SubwordTokenizer};
use crate::{MlError, Result};

/// One tokenised, marked instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationExample {
    /// Token ids (`[CLS] … [SEP]`).
    pub ids: Vec<u32>,
    /// Position of the opening head marker.
    pub head: usize,
    /// Position of the opening tail marker.
    pub tail: usize,
    /// Relation index (position of the relation in the file's sorted order).
    pub label: u32,
}

/// Words of `inst` with `@`/`#` around the first mention of the head/tail, and the indices of
/// the two opening markers among the returned words. Meant for instances that pass
/// [`FewRelInstance::check`] (every file [`crate::data::read_fewrel`] returns); for others the
/// markers may be missing or cross, never a panic ([`encode_marked`] refuses them).
pub fn mark_entities(inst: &FewRelInstance) -> (Vec<&str>, usize, usize) {
    let (hs, he) = inst.span(true).unwrap_or((0, 0));
    let (ts, te) = inst.span(false).unwrap_or((0, 0));
    let mut words = Vec::with_capacity(inst.tokens.len() + 4);
    let (mut h_at, mut t_at) = (0, 0);
    for (i, w) in inst.tokens.iter().enumerate() {
        if i == hs {
            h_at = words.len();
            words.push("@");
        }
        if i == ts {
            t_at = words.len();
            words.push("#");
        }
        words.push(w.as_str());
        if i == te {
            words.push("#");
        }
        if i == he {
            words.push("@");
        }
    }
    (words, h_at, t_at)
}

/// Tokenises one instance with entity markers; marker positions cut off by truncation fall back
/// to position 0 (`[CLS]`).
///
/// # Errors
/// [`MlError::InvalidInput`] when `inst` fails [`FewRelInstance::check`] (no tokens, entity
/// positions missing or beyond the tokens, overlapping head and tail); the tokenizer's errors.
pub fn encode_marked(
    inst: &FewRelInstance,
    tok: &dyn WordEncoder,
    label: u32,
) -> Result<RelationExample> {
    inst.check()
        .map_err(|why| MlError::InvalidInput(format!("FewRel instance: {why}")))?;
    let (words, h, t) = mark_entities(inst);
    let enc = tok.encode_words(&words)?;
    let at = |i: usize| -> Result<usize> {
        match enc.word_start.get(i) {
            Some(p) => Ok(p.unwrap_or(0)),
            None => Err(MlError::InvalidInput(format!(
                "the tokenizer returned {} word starts for {} words",
                enc.word_start.len(),
                words.len()
            ))),
        }
    };
    Ok(RelationExample {
        head: at(h)?,
        tail: at(t)?,
        ids: enc.ids.clone(),
        label,
    })
}

/// Tokenises every instance; marker positions cut off by truncation fall back to `[CLS]` (0).
///
/// # Errors
/// As [`encode_marked`], naming the relation and the instance's index in it.
pub fn encode_fewrel(data: &FewRel, tok: &dyn WordEncoder) -> Result<Vec<Vec<RelationExample>>> {
    data.relations
        .iter()
        .enumerate()
        .map(|(label, (id, insts))| {
            insts
                .iter()
                .enumerate()
                .map(|(i, inst)| {
                    encode_marked(inst, tok, label as u32).map_err(|e| in_instance(e, id, i))
                })
                .collect()
        })
        .collect()
}

/// `e` with the relation id and instance index prefixed to an [`MlError::InvalidInput`]
/// message (other errors unchanged).
pub(crate) fn in_instance(e: MlError, relation: &str, index: usize) -> MlError {
    match e {
        MlError::InvalidInput(m) => {
            MlError::InvalidInput(format!("relation {relation}, instance {index}: {m}"))
        }
        other => other,
    }
}

/// Encodes pre-split words into ids starting with a `[CLS]`-like token, reporting where each
/// word starts: [`SubwordTokenizer`] (pretrained word pieces) and [`WordVocab`] (whole words,
/// for encoders trained from scratch).
pub trait WordEncoder {
    /// Ids of `words` (special tokens included) and the first position of each word.
    fn encode_words(&self, words: &[&str]) -> Result<Encoded>;
    /// The padding id.
    fn pad_id(&self) -> u32;
}

impl WordEncoder for SubwordTokenizer {
    fn encode_words(&self, words: &[&str]) -> Result<Encoded> {
        SubwordTokenizer::encode_words(self, words)
    }
    fn pad_id(&self) -> u32 {
        self.token_id("[PAD]").unwrap_or(0)
    }
}

/// A lower-cased whole-word vocabulary for encoders trained from scratch. Ids 0–3 are
/// `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, then the entity markers `@` and `#`, then the words in
/// order of decreasing count (ties alphabetical), so the vocabulary is a pure function of its
/// corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WordVocab {
    words: Vec<String>,
    index: HashMap<String, u32>,
    max_len: usize,
}

impl WordVocab {
    /// Padding id.
    pub const PAD: u32 = 0;
    /// Unknown-word id.
    pub const UNK: u32 = 1;
    /// Sequence-start id (position 0 of every encoding).
    pub const CLS: u32 = 2;
    /// Sequence-end id.
    pub const SEP: u32 = 3;

    /// The words of `corpus` seen at least `min_count` times, at most `max_size` entries in all;
    /// encodings are cut to `max_len` ids (at least 2).
    pub fn fit<'a>(
        corpus: impl IntoIterator<Item = &'a str>,
        min_count: usize,
        max_size: usize,
        max_len: usize,
    ) -> Self {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for w in corpus {
            *counts.entry(w.to_lowercase()).or_default() += 1;
        }
        let mut words: Vec<String> = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "@", "#"]
            .map(String::from)
            .to_vec();
        let mut ranked: Vec<(String, usize)> = counts
            .into_iter()
            .filter(|(w, n)| *n >= min_count && !words.contains(w))
            .collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let room = max_size.saturating_sub(words.len());
        words.extend(ranked.into_iter().take(room).map(|(w, _)| w));
        let index = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.clone(), i as u32))
            .collect();
        Self {
            words,
            index,
            max_len: max_len.max(2),
        }
    }

    /// Vocabulary size (special tokens included).
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether only the special tokens are present.
    pub fn is_empty(&self) -> bool {
        self.words.len() <= 6
    }

    /// The id of `word` (lower-cased), [`WordVocab::UNK`] when absent.
    pub fn id(&self, word: &str) -> u32 {
        self.index
            .get(&word.to_lowercase())
            .copied()
            .unwrap_or(Self::UNK)
    }
}

impl WordEncoder for WordVocab {
    /// `[CLS] w₁ … wₙ [SEP]`, cut to `max_len` ids (the `[SEP]` is kept).
    fn encode_words(&self, words: &[&str]) -> Result<Encoded> {
        let keep = words.len().min(self.max_len - 2);
        let mut ids = Vec::with_capacity(keep + 2);
        ids.push(Self::CLS);
        ids.extend(words[..keep].iter().map(|w| self.id(w)));
        ids.push(Self::SEP);
        let word_start = (0..words.len())
            .map(|i| (i < keep).then_some(i + 1))
            .collect();
        Ok(Encoded { ids, word_start })
    }
    fn pad_id(&self) -> u32 {
        Self::PAD
    }
}
