//! FewRel instances with typed entity markers, tokenised for relation classification.
//!
//! Entities are marked in the text with typed-marker punctuation (`@ head @`, `# tail #`, Zhou &
//! Chen, "An Improved Baseline for Sentence-level Relation Extraction", AACL 2022); a classifier
//! reads the encoder states at the two opening markers.

use crate::data::{FewRel, FewRelInstance, SubwordTokenizer};
use crate::Result;

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
/// the two opening markers among the returned words.
pub fn mark_entities(inst: &FewRelInstance) -> (Vec<&str>, usize, usize) {
    let span = |pos: &[Vec<usize>]| -> (usize, usize) {
        let first = pos.first().map(Vec::as_slice).unwrap_or(&[]);
        let lo = first.iter().copied().min().unwrap_or(0);
        (lo, first.iter().copied().max().unwrap_or(lo))
    };
    let (hs, he) = span(&inst.h.2);
    let (ts, te) = span(&inst.t.2);
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

/// Tokenises every instance; marker positions cut off by truncation fall back to `[CLS]` (0).
pub fn encode_fewrel(data: &FewRel, tok: &SubwordTokenizer) -> Result<Vec<Vec<RelationExample>>> {
    let mut out = Vec::with_capacity(data.relations.len());
    for (label, (_, insts)) in data.relations.iter().enumerate() {
        let mut rel = Vec::with_capacity(insts.len());
        for inst in insts {
            let (words, h, t) = mark_entities(inst);
            let enc = tok.encode_words(&words)?;
            rel.push(RelationExample {
                head: enc.word_start[h].unwrap_or(0),
                tail: enc.word_start[t].unwrap_or(0),
                ids: enc.ids,
                label: label as u32,
            });
        }
        out.push(rel);
    }
    Ok(out)
}
