//! Loading the study's corpora and summarising its rows over seeds.

use ml_models::data::{read_fewrel_unlabelled, read_text_limited, MAX_FILE_BYTES};
use pardis_datasets::DataRoots;
use std::collections::BTreeMap;

use crate::study::{StudyData, StudyReport};
use crate::Result;

/// Source corpus of the study, relative to a data root.
pub const SOURCE_TEXT: &str = "text/tinyshakespeare.txt";
/// Target corpus (PubMed sentences, FewRel 2.0 unsupervised domain data).
pub const TARGET_SENTENCES: &str = "relation-extraction/fewrel/pubmed_unsupervised.json";

impl StudyData {
    /// Reads Tiny Shakespeare and the PubMed sentences from the first of `roots` holding each.
    pub fn load(roots: &DataRoots) -> Result<Self> {
        let src = roots.require_path(SOURCE_TEXT)?.path;
        // The crate's bounded reader: regular files of at most 1 GiB, UTF-8 (typed errors).
        let text = read_text_limited(&src, "text", MAX_FILE_BYTES)?;
        let tgt = roots.require_path(TARGET_SENTENCES)?.path;
        let sentences: Vec<String> = read_fewrel_unlabelled(&tgt)?
            .iter()
            .map(|i| i.sentence())
            .collect();
        Ok(Self::new(&text, &sentences))
    }
}

/// A variant's results averaged over seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    /// Variant name.
    pub variant: String,
    /// Comparison group.
    pub group: String,
    /// Trainable parameters.
    pub trainable: usize,
    /// Mean held-out perplexity.
    pub perplexity: f32,
    /// Standard deviation over seeds (0 for one seed).
    pub perplexity_std: f32,
    /// Computed training-state bytes.
    pub state_bytes: usize,
    /// Largest measured peak heap bytes over seeds, if measured.
    pub peak_bytes: Option<u64>,
    /// Predicted peak bytes, if predicted.
    pub predicted_bytes: Option<u64>,
    /// Mean fine-tuning tokens/s.
    pub tokens_per_s: f64,
}

impl StudyReport {
    /// One row per variant, in run order, averaged over seeds.
    pub fn summary(&self) -> Vec<SummaryRow> {
        type Key<'a> = (&'a str, &'a str);
        let mut order: Vec<Key<'_>> = Vec::new();
        let mut by: BTreeMap<Key<'_>, Vec<&crate::study::StudyRow>> = BTreeMap::new();
        for r in &self.rows {
            let key = (r.group.as_str(), r.variant.as_str());
            if !by.contains_key(&key) {
                order.push(key);
            }
            by.entry(key).or_default().push(r);
        }
        order
            .into_iter()
            .map(|key| {
                let rs = &by[&key];
                let name = key.1;
                let n = rs.len() as f32;
                let mean = rs.iter().map(|r| r.perplexity).sum::<f32>() / n;
                let var = rs
                    .iter()
                    .map(|r| (r.perplexity - mean).powi(2))
                    .sum::<f32>()
                    / n;
                SummaryRow {
                    variant: name.to_string(),
                    group: rs[0].group.clone(),
                    trainable: rs[0].trainable,
                    perplexity: mean,
                    perplexity_std: var.sqrt(),
                    state_bytes: rs[0].state_bytes,
                    peak_bytes: rs.iter().filter_map(|r| r.peak_bytes).max(),
                    predicted_bytes: rs[0].predicted_bytes,
                    tokens_per_s: rs.iter().map(|r| r.tokens_per_s).sum::<f64>() / n as f64,
                }
            })
            .collect()
    }

    /// The summary as a Markdown table.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "| variant | group | trainable | perplexity | state MiB | peak MiB | predicted MiB | tokens/s |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        let mib = |b: f64| format!("{:.2}", b / 1048576.0);
        for r in self.summary() {
            s.push_str(&format!(
                "| {} | {} | {} | {:.3} ± {:.3} | {} | {} | {} | {:.0} |\n",
                r.variant,
                r.group,
                r.trainable,
                r.perplexity,
                r.perplexity_std,
                mib(r.state_bytes as f64),
                r.peak_bytes.map_or("-".into(), |b| mib(b as f64)),
                r.predicted_bytes.map_or("-".into(), |b| mib(b as f64)),
                r.tokens_per_s
            ));
        }
        s
    }
}
