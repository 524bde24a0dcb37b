//! Built-in model zoo with the published configurations.

use crate::error::{MemoryError, Result};
use crate::model::{MlpKind, ModelConfig, MoeConfig, NormKind, PositionKind};

/// GPT-3 family (Brown et al. 2020, Table 2.1): GeLU, LayerNorm, biases, learned positions
/// (2048), tied embeddings, vocabulary 50257, `f = 4h`.
pub(crate) fn gpt(name: &str, layers: u64, hidden: u64, heads: u64, positions: u64) -> ModelConfig {
    ModelConfig {
        name: name.to_string(),
        num_layers: layers,
        hidden,
        num_heads: heads,
        num_kv_heads: heads,
        head_dim: hidden / heads,
        ffn_hidden: 4 * hidden,
        vocab_size: 50257,
        vocab_pad_multiple: 1,
        max_positions: positions,
        mlp: MlpKind::Gelu,
        norm: NormKind::LayerNorm,
        qkv_bias: true,
        dense_bias: true,
        position: PositionKind::Learned,
        tied_embeddings: true,
        dropout: true,
        moe: None,
        token_types: 0,
        pooler: false,
    }
}

/// Llama family (Touvron et al. 2023; Meta Llama 3 model card): SwiGLU, RMSNorm, no biases,
/// rotary positions, untied embeddings, no dropout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn llama(
    name: &str,
    layers: u64,
    hidden: u64,
    heads: u64,
    kv_heads: u64,
    ffn: u64,
    vocab: u64,
    positions: u64,
) -> ModelConfig {
    ModelConfig {
        name: name.to_string(),
        num_layers: layers,
        hidden,
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_dim: hidden / heads,
        ffn_hidden: ffn,
        vocab_size: vocab,
        vocab_pad_multiple: 1,
        max_positions: positions,
        mlp: MlpKind::SwiGlu,
        norm: NormKind::RmsNorm,
        qkv_bias: false,
        dense_bias: false,
        position: PositionKind::Rotary,
        tied_embeddings: false,
        dropout: false,
        moe: None,
        token_types: 0,
        pooler: false,
    }
}

/// BERT encoders (Devlin et al. 2019; Hugging Face `BertModel`): GeLU, post-LayerNorm, biases,
/// learned positions (512), two token types, a pooler, vocabulary 30522, `f = 4h`. Parameter
/// counts are those of `BertModel` (encoder + pooler); the masked-LM decoder is tied to the word
/// embeddings. The embedding LayerNorm of a post-LN encoder has the size of a decoder's final
/// norm and takes its place in the operator list.
pub(crate) fn bert(name: &str, layers: u64, hidden: u64, heads: u64, ffn: u64) -> ModelConfig {
    let mut m = gpt(name, layers, hidden, heads, 512);
    m.vocab_size = 30522;
    m.ffn_hidden = ffn;
    m.token_types = 2;
    m.pooler = true;
    m
}

/// Names accepted by [`ModelConfig::preset`].
pub const PRESET_NAMES: [&str; 17] = [
    "bert-base",
    "bert-large",
    "gpt2",
    "gpt3-125m",
    "gpt3-350m",
    "gpt3-760m",
    "gpt3-1.3b",
    "gpt3-2.7b",
    "gpt3-6.7b",
    "gpt3-13b",
    "gpt3-175b",
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "mixtral-8x7b",
];

impl ModelConfig {
    /// Names of the built-in models.
    pub fn preset_names() -> &'static [&'static str] {
        &PRESET_NAMES
    }

    /// A built-in model by name (case-insensitive; `_` and `-` are interchangeable).
    ///
    /// GPT-3 XL (1.3B) and 13B: the paper's table lists 24 heads of 128 for `h = 2048` and
    /// `h = 5140` for 13B, which do not multiply out; pardis uses 16 heads of 128 and `h = 5120`,
    /// as Megatron-LM's reproductions do.
    ///
    /// # Errors
    /// [`MemoryError::UnknownModel`] listing the known names.
    pub fn preset(name: &str) -> Result<ModelConfig> {
        let key = name.trim().to_ascii_lowercase().replace('_', "-");
        let m = match key.as_str() {
            "bert-base" => bert("bert-base", 12, 768, 12, 3072),
            "bert-large" => bert("bert-large", 24, 1024, 16, 4096),
            "gpt2" => gpt("gpt2", 12, 768, 12, 1024),
            "gpt3-125m" => gpt("gpt3-125m", 12, 768, 12, 2048),
            "gpt3-350m" => gpt("gpt3-350m", 24, 1024, 16, 2048),
            "gpt3-760m" => gpt("gpt3-760m", 24, 1536, 16, 2048),
            "gpt3-1.3b" => gpt("gpt3-1.3b", 24, 2048, 16, 2048),
            "gpt3-2.7b" => gpt("gpt3-2.7b", 32, 2560, 32, 2048),
            "gpt3-6.7b" => gpt("gpt3-6.7b", 32, 4096, 32, 2048),
            "gpt3-13b" => gpt("gpt3-13b", 40, 5120, 40, 2048),
            "gpt3-175b" => gpt("gpt3-175b", 96, 12288, 96, 2048),
            "llama2-7b" => llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
            "llama2-13b" => llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
            "llama2-70b" => llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
            "llama3-8b" => llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
            "llama3-70b" => llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
            "mixtral-8x7b" => {
                let mut m = llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768);
                m.moe = Some(MoeConfig {
                    num_experts: 8,
                    top_k: 2,
                    expert_ffn_hidden: 14336,
                    shared_experts: 0,
                });
                m
            }
            _ => {
                return Err(MemoryError::UnknownModel {
                    name: name.to_string(),
                    known: PRESET_NAMES.join(", "),
                });
            }
        };
        Ok(m)
    }
}
