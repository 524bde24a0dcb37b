//! Character-level tokenisation and language-model batches.

use std::collections::BTreeSet;

use candle_core::{Device, Tensor};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::{MlError, Result};

/// A character vocabulary; id 0 is reserved for characters outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharTokenizer {
    chars: Vec<char>,
}

impl CharTokenizer {
    /// The vocabulary of `text` (sorted characters) plus the unknown id 0.
    pub fn fit(text: &str) -> Self {
        let set: BTreeSet<char> = text.chars().collect();
        Self {
            chars: set.into_iter().collect(),
        }
    }

    /// Vocabulary size including the unknown id.
    pub fn vocab_size(&self) -> usize {
        self.chars.len() + 1
    }

    /// Token ids of `text`; unseen characters map to 0.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        text.chars()
            .map(|c| self.chars.binary_search(&c).map_or(0, |i| i as u32 + 1))
            .collect()
    }

    /// Text of `ids` (unknown id → `?`).
    pub fn decode(&self, ids: &[u32]) -> String {
        ids.iter()
            .map(|&i| {
                if i == 0 {
                    '?'
                } else {
                    self.chars.get(i as usize - 1).copied().unwrap_or('?')
                }
            })
            .collect()
    }
}

/// Random contiguous windows of a token stream as `(inputs, targets)` tensors `[batch, seq]`,
/// the targets shifted by one.
pub fn lm_batch(
    ids: &[u32],
    batch: usize,
    seq: usize,
    rng: &mut ChaCha8Rng,
    dev: &Device,
) -> Result<(Tensor, Tensor)> {
    if ids.len() <= seq + 1 {
        return Err(MlError::InvalidInput(format!(
            "token stream of {} ids is too short for sequence length {seq}",
            ids.len()
        )));
    }
    let mut x = Vec::with_capacity(batch * seq);
    let mut y = Vec::with_capacity(batch * seq);
    for _ in 0..batch {
        let s = rng.random_range(0..ids.len() - seq - 1);
        x.extend_from_slice(&ids[s..s + seq]);
        y.extend_from_slice(&ids[s + 1..s + seq + 1]);
    }
    Ok((
        Tensor::from_vec(x, (batch, seq), dev)?,
        Tensor::from_vec(y, (batch, seq), dev)?,
    ))
}

/// Consecutive non-overlapping windows covering `ids` (for deterministic evaluation), at most
/// `max_windows` of them, as `(inputs, targets)` batches of up to `batch` windows.
pub fn lm_eval_batches(
    ids: &[u32],
    batch: usize,
    seq: usize,
    max_windows: usize,
    dev: &Device,
) -> Result<Vec<(Tensor, Tensor)>> {
    let n = ((ids.len().saturating_sub(1)) / seq).min(max_windows);
    if n == 0 {
        return Err(MlError::InvalidInput(format!(
            "evaluation stream of {} ids is shorter than one window of {seq}",
            ids.len()
        )));
    }
    let mut out = Vec::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(batch) {
        let mut x = Vec::new();
        let mut y = Vec::new();
        for &w in chunk {
            x.extend_from_slice(&ids[w * seq..(w + 1) * seq]);
            y.extend_from_slice(&ids[w * seq + 1..(w + 1) * seq + 1]);
        }
        out.push((
            Tensor::from_vec(x, (chunk.len(), seq), dev)?,
            Tensor::from_vec(y, (chunk.len(), seq), dev)?,
        ));
    }
    Ok(out)
}
