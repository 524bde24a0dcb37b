//! Sub-word tokenisation through Hugging Face's `tokenizers` crate: loading a pretrained
//! `tokenizer.json` (e.g. MiniLM's WordPiece) and training a byte-level BPE (Sennrich et al.,
//! ACL 2016; GPT-2's byte-level variant) on a corpus, plus padding into candle batches.

use std::path::Path;

use candle_core::{Device, Tensor};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::{ModelWrapper, TrainerWrapper};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{
    DecoderWrapper, InputSequence, NormalizerWrapper, PostProcessorWrapper, PreTokenizerWrapper,
    Tokenizer, TokenizerImpl, TruncationParams,
};

use crate::{MlError, Result};

/// A `tokenizers` tokenizer with padding off and a fixed truncation length.
#[derive(Debug, Clone)]
pub struct SubwordTokenizer {
    inner: Tokenizer,
}

/// One encoded sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    /// Token ids, special tokens included.
    pub ids: Vec<u32>,
    /// For each input word, the index of its first token (`None` if truncated away).
    pub word_start: Vec<Option<usize>>,
}

fn tok_err(what: &str, e: impl std::fmt::Display) -> MlError {
    MlError::InvalidInput(format!("tokenizer: {what}: {e}"))
}

impl SubwordTokenizer {
    /// Loads a `tokenizer.json`; sequences are cut to `max_len` tokens (special tokens
    /// included); the file's own padding setting is switched off (batches are padded by
    /// [`pad_batch`]).
    ///
    /// # Errors
    /// Those of [`super::read_bytes_limited`] with the limit [`super::MAX_FILE_BYTES`], and
    /// [`MlError::Format`] when the file is not a tokenizer the `tokenizers` crate reads.
    pub fn from_file(path: &Path, max_len: usize) -> Result<Self> {
        let json = super::read_bytes_limited(path, "tokenizer.json", super::MAX_FILE_BYTES)?;
        let inner = Tokenizer::from_bytes(&json)
            .map_err(|e| MlError::format("tokenizer.json", path, e.to_string()))?;
        Self::wrap(inner, max_len)
    }

    fn wrap(mut inner: Tokenizer, max_len: usize) -> Result<Self> {
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length: max_len,
                ..TruncationParams::default()
            }))
            .map_err(|e| tok_err("truncation", e))?;
        Ok(Self { inner })
    }

    /// Trains a byte-level BPE with `vocab_size` entries on `texts` (no special tokens, no
    /// normalisation: every byte sequence round-trips). Truncation at `max_len` tokens.
    pub fn train_bpe(texts: &[String], vocab_size: usize, max_len: usize) -> Result<Self> {
        let mut trainer = TrainerWrapper::BpeTrainer(
            BpeTrainerBuilder::new()
                .show_progress(false)
                .vocab_size(vocab_size)
                .min_frequency(2)
                .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
                .build(),
        );
        let mut tk: TokenizerImpl<
            ModelWrapper,
            NormalizerWrapper,
            PreTokenizerWrapper,
            PostProcessorWrapper,
            DecoderWrapper,
        > = TokenizerImpl::new(ModelWrapper::BPE(BPE::default()));
        tk.with_pre_tokenizer(Some(PreTokenizerWrapper::ByteLevel(
            ByteLevel::default().add_prefix_space(false),
        )));
        tk.with_decoder(Some(DecoderWrapper::ByteLevel(ByteLevelDecoder::default())));
        tk.train(&mut trainer, texts.iter())
            .map_err(|e| tok_err("BPE training", e))?;
        Self::wrap(Tokenizer::from(tk), max_len)
    }

    /// Vocabulary size (added tokens included).
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of `token`, if in the vocabulary.
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Token ids of `text` (with the tokenizer's special tokens, e.g. `[CLS] … [SEP]`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, true)
            .map_err(|e| tok_err("encode", e))?;
        Ok(enc.get_ids().to_vec())
    }

    /// Encodes pre-split `words` (e.g. FewRel tokens) and reports where each word starts.
    pub fn encode_words(&self, words: &[&str]) -> Result<Encoded> {
        let enc = self
            .inner
            .encode(InputSequence::from(words.to_vec()), true)
            .map_err(|e| tok_err("encode", e))?;
        let mut word_start = vec![None; words.len()];
        for (pos, w) in enc.get_word_ids().iter().enumerate() {
            if let Some(w) = w.map(|w| w as usize) {
                if w < words.len() && word_start[w].is_none() {
                    word_start[w] = Some(pos);
                }
            }
        }
        Ok(Encoded {
            ids: enc.get_ids().to_vec(),
            word_start,
        })
    }

    /// The text of `ids` (special tokens skipped).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| tok_err("decode", e))
    }
}

/// Right-pads `seqs` with `pad_id` into ids `[n, max_len]` (u32) and a mask `[n, max_len]` (f32,
/// 1 = token).
///
/// # Panics
/// If `seqs` is empty.
#[track_caller]
pub fn pad_batch(seqs: &[&[u32]], pad_id: u32, dev: &Device) -> Result<(Tensor, Tensor)> {
    assert!(!seqs.is_empty(), "pad_batch needs at least one sequence");
    let t = seqs.iter().map(|s| s.len()).max().unwrap_or(0).max(1);
    let mut ids = Vec::with_capacity(seqs.len() * t);
    let mut mask = Vec::with_capacity(seqs.len() * t);
    for s in seqs {
        ids.extend_from_slice(s);
        ids.extend(std::iter::repeat_n(pad_id, t - s.len()));
        mask.extend(std::iter::repeat_n(1.0f32, s.len()));
        mask.extend(std::iter::repeat_n(0.0f32, t - s.len()));
    }
    Ok((
        Tensor::from_vec(ids, (seqs.len(), t), dev)?,
        Tensor::from_vec(mask, (seqs.len(), t), dev)?,
    ))
}
