//! Description of a transformer (decoder-only, or a BERT-style encoder): the shapes that decide
//! its memory.

use serde::{Deserialize, Serialize};

use crate::error::{positive, MemoryError, Result};

/// Feed-forward block of a layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpKind {
    /// Two matrices `h×f` and `f×h` with GeLU between (GPT-2/3, BERT).
    Gelu,
    /// Three matrices (gate, up: `h×f`; down: `f×h`) with SiLU(gate)·up (Llama, Mistral).
    SwiGlu,
}

/// Normalisation layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NormKind {
    /// LayerNorm with weight and bias (`2h` parameters).
    LayerNorm,
    /// RMSNorm with weight only (`h` parameters).
    RmsNorm,
}

/// Position encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionKind {
    /// A learned `max_positions × h` table (GPT-2/3).
    Learned,
    /// Rotary embeddings: no parameters (Llama, GPT-NeoX).
    Rotary,
}

/// Mixture-of-experts feed-forward block (replaces the dense MLP of every layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoeConfig {
    /// Routed experts per layer.
    pub num_experts: u64,
    /// Experts each token is routed to.
    pub top_k: u64,
    /// Hidden size of one expert's MLP.
    pub expert_ffn_hidden: u64,
    /// Always-active shared experts (each of size `expert_ffn_hidden`); 0 for Mixtral.
    pub shared_experts: u64,
}

/// Vocabulary padding Megatron-LM applies with 8-way tensor parallelism
/// (`--make-vocab-size-divisible-by 128` × TP 8), so that the vocabulary splits up to 8 ways;
/// `pardis plan` and `pardis memory` pad unpadded models to it by default
/// ([`ModelConfig::with_vocab_padding`]).
pub const MEGATRON_VOCAB_PADDING: u64 = 1024;

/// Largest parameter count [`ModelConfig::validate`] accepts (2^44 ≈ 17.6 trillion), so that
/// bytes on a cluster of up to 2^16 devices fit in 64 bits.
pub const MAX_PARAMETERS: u128 = 1 << 44;

/// A transformer: decoder-only (GPT, Llama, Mixtral) or, with [`ModelConfig::token_types`] and
/// [`ModelConfig::pooler`], a BERT-style encoder.
///
/// All sizes are element counts. Build one with [`ModelConfig::preset`], from a Hugging Face
/// `config.json` with [`ModelConfig::from_hf_config_json`], or by filling the fields and calling
/// [`ModelConfig::validate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Display name.
    pub name: String,
    /// Transformer layers `L`.
    pub num_layers: u64,
    /// Hidden size `h`.
    pub hidden: u64,
    /// Query heads `a`.
    pub num_heads: u64,
    /// Key/value heads `g` (`g = a`: multi-head, `1 < g < a`: GQA, `g = 1`: MQA).
    pub num_kv_heads: u64,
    /// Size of one head `d` (usually `h / a`; GPT-3 XL has `a·d ≠ h`).
    pub head_dim: u64,
    /// Feed-forward hidden size `f` of the dense MLP.
    pub ffn_hidden: u64,
    /// Vocabulary size as published.
    pub vocab_size: u64,
    /// Pad the vocabulary to a multiple of this (1: no padding; Megatron uses 128·tp).
    pub vocab_pad_multiple: u64,
    /// Length of the learned position table (ignored for rotary positions).
    pub max_positions: u64,
    /// MLP kind.
    pub mlp: MlpKind,
    /// Normalisation kind.
    pub norm: NormKind,
    /// Bias on the query/key/value projections.
    pub qkv_bias: bool,
    /// Bias on the attention output projection and the MLP matrices.
    pub dense_bias: bool,
    /// Position encoding.
    pub position: PositionKind,
    /// Output head shares the token-embedding matrix.
    pub tied_embeddings: bool,
    /// Dropout layers present (their 1-byte masks are saved for backward).
    pub dropout: bool,
    /// Mixture-of-experts FFN, when present.
    pub moe: Option<MoeConfig>,
    /// Rows of a learned token-type (segment) embedding table added to the input embeddings
    /// (BERT: 2); 0 for decoders.
    #[serde(default)]
    pub token_types: u64,
    /// A pooler (`h×h` linear with bias and tanh on the first token) after the last layer, as in
    /// BERT's `BertModel`.
    #[serde(default)]
    pub pooler: bool,
}

impl ModelConfig {
    /// Checks that every size is positive and the head counts are consistent.
    pub fn validate(&self) -> Result<()> {
        positive("num_layers", self.num_layers)?;
        positive("hidden", self.hidden)?;
        positive("num_heads", self.num_heads)?;
        positive("num_kv_heads", self.num_kv_heads)?;
        positive("head_dim", self.head_dim)?;
        positive("ffn_hidden", self.ffn_hidden)?;
        positive("vocab_size", self.vocab_size)?;
        positive("vocab_pad_multiple", self.vocab_pad_multiple)?;
        if self.position == PositionKind::Learned {
            positive("max_positions", self.max_positions)?;
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(MemoryError::NotDivisible {
                what: "num_kv_heads",
                divisor: self.num_kv_heads,
                dimension: "num_heads",
                value: self.num_heads,
            });
        }
        if let Some(moe) = &self.moe {
            positive("num_experts", moe.num_experts)?;
            positive("top_k", moe.top_k)?;
            positive("expert_ffn_hidden", moe.expert_ffn_hidden)?;
            if moe.top_k > moe.num_experts {
                return Err(MemoryError::InvalidInput(format!(
                    "top_k = {} exceeds num_experts = {}",
                    moe.top_k, moe.num_experts
                )));
            }
        }
        // Every byte count must fit in 64 bits even when multiplied out over a large cluster:
        // bound the parameters (in u128) well below 2^64 / 2^16 bytes.
        let big = |v: u64| u128::from(v.min(1 << 40));
        let prod = |xs: &[u128]| xs.iter().fold(1u128, |a, &x| a.saturating_mul(x));
        let (h, l) = (big(self.hidden), big(self.num_layers));
        let heads = big(self.num_heads) + big(self.num_kv_heads);
        let experts = self
            .moe
            .map_or(1, |m| big(m.num_experts) + big(m.shared_experts));
        let ffn = big(self.moe.map_or(self.ffn_hidden, |m| {
            m.expert_ffn_hidden.max(self.ffn_hidden)
        }));
        let per_layer = prod(&[2, h, heads, big(self.head_dim)])
            .saturating_add(prod(&[3, h, ffn, experts]))
            .saturating_add(8 * h);
        let vocab = self
            .vocab_size
            .div_ceil(self.vocab_pad_multiple)
            .saturating_mul(self.vocab_pad_multiple);
        let bound = prod(&[l, per_layer])
            .saturating_add(prod(&[2, big(vocab), h]))
            .saturating_add(prod(&[big(self.max_positions), h]));
        let too_big = [
            self.hidden,
            self.num_layers,
            self.num_heads,
            self.head_dim,
            self.ffn_hidden,
            self.vocab_size,
            self.max_positions,
        ]
        .iter()
        .any(|&v| v > 1 << 40);
        if too_big {
            return Err(MemoryError::InvalidInput(format!(
                "model `{}`: a dimension exceeds 2^40",
                self.name
            )));
        }
        if bound > MAX_PARAMETERS {
            return Err(MemoryError::InvalidInput(format!(
                "model `{}` has about {bound} parameters; pardis counts at most {MAX_PARAMETERS}",
                self.name
            )));
        }
        Ok(())
    }

    /// The model with its vocabulary padded to a multiple of `multiple` (1: unpadded), unless
    /// it already pads it (its [`ModelConfig::vocab_pad_multiple`] is not 1).
    pub fn with_vocab_padding(mut self, multiple: u64) -> Self {
        if self.vocab_pad_multiple == 1 {
            self.vocab_pad_multiple = multiple.max(1);
        }
        self
    }

    /// Vocabulary rounded up to [`ModelConfig::vocab_pad_multiple`].
    pub fn padded_vocab(&self) -> u64 {
        self.vocab_size.div_ceil(self.vocab_pad_multiple) * self.vocab_pad_multiple
    }
}
