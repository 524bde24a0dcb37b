//! The sentence encoder of few-shot relation extraction and the two feature kinds of PO-HRL
//! (Hu et al., COLING 2025): an instance is `[h_E1; h_E2]`, the hidden states at the opening
//! head and tail markers (typed markers `@ … @`, `# … #`, see [`crate::data::mark_entities`]); a
//! relation is `[h_CLS; mean of its tokens]` of its name and description.
//!
//! The "two encoders" — a small transformer trained from scratch and the pretrained
//! all-MiniLM-L6-v2 — are one architecture, [`Bert`], with different shapes and weights, so
//! they are one type, [`FewShotEncoder`], told apart by [`EncoderKind`]; there is no encoder
//! trait with a single implementation. What does differ between them, the tokenisation
//! (whole words for the tiny encoder, WordPiece for MiniLM), is behind a trait with two
//! implementations that this type holds as `dyn` ([`WordEncoder`]: [`WordVocab`],
//! [`SubwordTokenizer`]).

use std::path::Path;

use candle_core::{Device, Tensor};

use crate::data::{
    encode_marked, pad_batch, RelationExample, SubwordTokenizer, WordEncoder, WordVocab,
};
use crate::fewshot::RelationSet;
use crate::models::bert::marker_states;
use crate::models::{Bert, BertConfig};
use crate::train::{ParamStore, SeededInit};
use crate::{MlError, Result};

/// The files of a pretrained MiniLM directory (`scripts/fetch-minilm`).
const MINILM_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The shape of the tiny from-scratch encoder for a vocabulary of `vocab` words: a BERT with
/// 2 layers, width 64, 4 heads, MLP 128, 64 positions.
pub fn tiny_bert(vocab: usize) -> BertConfig {
    BertConfig::new(vocab, 64, 2, 4, 128, 64)
}

/// Which encoder a [`FewShotEncoder`] wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderKind {
    /// A small BERT trained from scratch with the method, over a [`WordVocab`].
    Tiny,
    /// Pretrained all-MiniLM-L6-v2 (frozen; its outputs are cached), word pieces.
    MiniLm,
}

/// One relation tokenised: its text (name + description) and its marked instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedRelation {
    /// Ids of the relation text, position 0 being `[CLS]`.
    pub text: Vec<u32>,
    /// Marked instances (labels are the relation's index in the encoded list).
    pub instances: Vec<RelationExample>,
}

/// An encoder with its tokenisation: instance and relation features of width `2·d`.
pub struct FewShotEncoder {
    kind: EncoderKind,
    bert: Bert,
    tok: Box<dyn WordEncoder>,
    /// Layers of a pretrained encoder that train with the method (0: frozen).
    tuned_layers: usize,
}

impl std::fmt::Debug for FewShotEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FewShotEncoder")
            .field("kind", &self.kind)
            .field("bert", self.bert.config())
            .field("tuned_layers", &self.tuned_layers)
            .finish_non_exhaustive()
    }
}

impl FewShotEncoder {
    /// The tiny encoder, its parameters registered in `store` (trainable): a [`WordVocab`] of
    /// the words seen at least twice in `train` (instances and relation texts; at most 20 000),
    /// over a [`tiny_bert`]-shaped model (`shape` overrides it, e.g. for tests).
    pub fn tiny(
        train: &[RelationSet],
        shape: Option<fn(usize) -> BertConfig>,
        store: &mut ParamStore,
        init: &mut SeededInit,
    ) -> Result<Self> {
        let texts: Vec<String> = train.iter().map(|r| r.text(true)).collect();
        let corpus = train
            .iter()
            .flat_map(|r| r.instances.iter())
            .flat_map(|i| i.tokens.iter().map(String::as_str))
            .chain(texts.iter().flat_map(|t| t.split_whitespace()));
        let cfg = shape.unwrap_or(tiny_bert)(0);
        let vocab = WordVocab::fit(corpus, 2, 20_000, cfg.max_position_embeddings);
        let cfg = BertConfig {
            vocab_size: vocab.len(),
            ..cfg
        };
        Ok(Self {
            kind: EncoderKind::Tiny,
            bert: Bert::new(cfg, store, init)?,
            tok: Box::new(vocab),
            tuned_layers: 0,
        })
    }

    /// All-MiniLM-L6-v2 from the directory `dir` holding `config.json`, `model.safetensors` and
    /// `tokenizer.json` (as placed by `scripts/fetch-minilm`); a missing file is an
    /// [`MlError::Io`] naming it.
    pub fn minilm(dir: &Path) -> Result<Self> {
        let file = |name: &str| -> Result<std::path::PathBuf> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(MlError::io(
                    &p,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "all-MiniLM-L6-v2 is not there; run scripts/fetch-minilm",
                    ),
                ))
            }
        };
        let cfg = BertConfig::from_file(&file("config.json")?)?;
        let tok = SubwordTokenizer::from_file(&file("tokenizer.json")?, 128)?;
        Ok(Self {
            kind: EncoderKind::MiniLm,
            bert: Bert::load(cfg, &file("model.safetensors")?)?,
            tok: Box::new(tok),
            tuned_layers: 0,
        })
    }

    /// The files of all-MiniLM-L6-v2 in `dir` that [`FewShotEncoder::minilm`] loads
    /// (`config.json`, `tokenizer.json`, `model.safetensors`), each as its size and the CRC-32
    /// of its whole content (the CRC of gzip and zip, Python's `zlib.crc32`), e.g.
    /// `config.json 612 B crc32 0x…, tokenizer.json …, model.safetensors 90868376 B crc32 0x…`.
    /// Deterministic across runs and platforms; other weights (another download, a fine-tuned
    /// copy, a changed vocabulary) give another string. Reads the three files once (87 MiB;
    /// a tenth of the time loading the model takes, see the crate README).
    ///
    /// # Errors
    /// [`MlError::Io`] naming a file that is missing, unreadable or not a regular file;
    /// [`MlError::Format`] naming one longer than [`crate::data::MAX_WEIGHTS_BYTES`].
    pub fn minilm_fingerprint(dir: &Path) -> Result<String> {
        use std::io::Read;
        let mut parts = Vec::with_capacity(MINILM_FILES.len());
        for name in MINILM_FILES {
            let path = dir.join(name);
            let mut f = crate::data::open_limited(
                &path,
                "all-MiniLM-L6-v2",
                crate::data::MAX_WEIGHTS_BYTES,
            )?;
            let mut crc = flate2::Crc::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut size = 0u64;
            loop {
                let n = f.read(&mut buf).map_err(|e| MlError::io(&path, e))?;
                if n == 0 {
                    break;
                }
                crc.update(&buf[..n]);
                size += n as u64;
            }
            if size > crate::data::MAX_WEIGHTS_BYTES {
                return Err(crate::data::too_long(
                    "all-MiniLM-L6-v2",
                    &path,
                    crate::data::MAX_WEIGHTS_BYTES,
                ));
            }
            parts.push(format!("{name} {size} B crc32 {:#010x}", crc.sum()));
        }
        Ok(parts.join(", "))
    }

    /// [`FewShotEncoder::minilm`] with its last `layers` transformer layers fine-tuned: their
    /// weights become trainable parameters in `store` ([`Bert::unfreeze_last`]); `layers = 0`
    /// is the frozen encoder.
    pub fn minilm_tuned(dir: &Path, layers: usize, store: &mut ParamStore) -> Result<Self> {
        let mut enc = Self::minilm(dir)?;
        enc.bert.unfreeze_last(layers, store)?;
        enc.tuned_layers = layers;
        Ok(enc)
    }

    /// Layers of a pretrained encoder that train with the method (0 for a frozen one; the tiny
    /// encoder trains all of its layers and reports 0 here).
    pub fn tuned_layers(&self) -> usize {
        self.tuned_layers
    }

    /// Which encoder this is.
    pub fn kind(&self) -> EncoderKind {
        self.kind
    }

    /// Whether the encoder's weights train with the method (tiny, or MiniLM with tuned layers)
    /// or stay frozen (MiniLM).
    pub fn fine_tuned(&self) -> bool {
        self.kind == EncoderKind::Tiny || self.tuned_layers > 0
    }

    /// Width of instance and relation features, `2·d`.
    pub fn feature_dim(&self) -> usize {
        2 * self.bert.config().hidden_size
    }

    /// Tokenises relations: texts with or without descriptions, instances with markers.
    pub fn encode(
        &self,
        rels: &[RelationSet],
        with_description: bool,
    ) -> Result<Vec<EncodedRelation>> {
        rels.iter()
            .enumerate()
            .map(|(label, r)| {
                let text = r.text(with_description);
                let words: Vec<&str> = text.split_whitespace().collect();
                let instances = r
                    .instances
                    .iter()
                    .enumerate()
                    .map(|(i, inst)| {
                        encode_marked(inst, self.tok.as_ref(), label as u32)
                            .map_err(|e| crate::data::in_instance(e, &r.id, i))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok(EncodedRelation {
                    text: self.tok.encode_words(&words)?.ids,
                    instances,
                })
            })
            .collect()
    }

    fn hidden(&self, seqs: &[&[u32]], train: bool) -> Result<(Tensor, Tensor)> {
        let (ids, mask) = pad_batch(seqs, self.tok.pad_id(), &Device::Cpu)?;
        let h = if train {
            self.bert.forward(&ids, &mask, true)?
        } else {
            self.bert.detached().forward(&ids, &mask, false)?
        };
        Ok((h, mask))
    }

    /// Instance features `[b, 2d]`: hidden states at the head and tail markers. With
    /// `train = false` no autograd graph is built.
    pub fn instance_features(&self, batch: &[&RelationExample], train: bool) -> Result<Tensor> {
        if batch.is_empty() {
            return Err(MlError::InvalidInput("empty instance batch".into()));
        }
        let seqs: Vec<&[u32]> = batch.iter().map(|e| e.ids.as_slice()).collect();
        let (h, _) = self.hidden(&seqs, train)?;
        marker_states(&h, batch)
    }

    /// Relation features `[r, 2d]`: `[h_CLS; mean of the tokens]` of each relation text.
    pub fn relation_features(&self, texts: &[&[u32]], train: bool) -> Result<Tensor> {
        if texts.is_empty() {
            return Err(MlError::InvalidInput("empty relation batch".into()));
        }
        let (h, mask) = self.hidden(texts, train)?;
        let cls = h.narrow(1, 0, 1)?.squeeze(1)?;
        Ok(Tensor::cat(&[cls, Bert::mean_pool(&h, &mask)?], 1)?)
    }

    /// Instance features of many instances without autograd, in batches of `batch` sorted by
    /// length (little padding), returned in input order `[n, 2d]`.
    pub fn instance_features_eval(&self, all: &[&RelationExample], batch: usize) -> Result<Tensor> {
        let mut order: Vec<usize> = (0..all.len()).collect();
        order.sort_by_key(|&i| all[i].ids.len());
        let mut parts = Vec::new();
        for chunk in order.chunks(batch.max(1)) {
            let b: Vec<&RelationExample> = chunk.iter().map(|&i| all[i]).collect();
            parts.push(self.instance_features(&b, false)?);
        }
        let sorted = Tensor::cat(&parts, 0)?;
        let mut inverse = vec![0u32; all.len()];
        for (pos, &i) in order.iter().enumerate() {
            inverse[i] = pos as u32;
        }
        Ok(sorted.index_select(&Tensor::new(inverse, &Device::Cpu)?, 0)?)
    }
}
