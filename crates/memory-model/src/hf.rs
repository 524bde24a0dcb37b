//! Reading a Hugging Face `config.json` (Llama, Mistral, Mixtral, GPT-2, GPT-NeoX field names).

use serde_json::{Map, Value};

use crate::error::{MemoryError, Result};
use crate::model::{ModelConfig, MoeConfig, PositionKind};
use crate::zoo::{bert, gpt, llama};

struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn field_err(field: &str, reason: impl Into<String>) -> MemoryError {
        MemoryError::ConfigField {
            field: field.to_string(),
            reason: reason.into(),
        }
    }

    /// A positive integer field; `None` when absent or `null`.
    fn opt_u64(&self, field: &str) -> Result<Option<u64>> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(0) => Err(Self::field_err(field, "must be positive, got 0")),
                Some(v) if v > MAX_HF_INTEGER => Err(Self::field_err(
                    field,
                    format!("{v} is larger than any model dimension (at most {MAX_HF_INTEGER})"),
                )),
                Some(v) => Ok(Some(v)),
                None => Err(Self::field_err(
                    field,
                    format!("must be a positive integer, got {n}"),
                )),
            },
            Some(other) => Err(Self::field_err(
                field,
                format!("must be an integer, got {other}"),
            )),
        }
    }

    fn u64(&self, field: &str) -> Result<u64> {
        self.opt_u64(field)?
            .ok_or_else(|| Self::field_err(field, "missing"))
    }

    fn opt_bool(&self, field: &str) -> Result<Option<bool>> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Self::field_err(
                field,
                format!("must be true or false, got {other}"),
            )),
        }
    }

    fn opt_f64(&self, field: &str) -> Result<Option<f64>> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(Self::field_err(
                field,
                format!("must be a number, got {other}"),
            )),
        }
    }

    fn str(&self, field: &str) -> Result<&str> {
        match self.0.get(field) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(Self::field_err(field, "missing")),
            Some(other) => Err(Self::field_err(
                field,
                format!("must be a string, got {other}"),
            )),
        }
    }
}

/// Largest integer a `config.json` field may hold (2³²): far above any real dimension, and small
/// enough that the derived sizes (e.g. `4 × hidden`) cannot overflow before validation.
const MAX_HF_INTEGER: u64 = 1 << 32;

/// Largest `config.json` [`ModelConfig::from_hf_config_file`] reads, bytes (1 MiB; real ones are
/// a few KiB).
pub const MAX_HF_CONFIG_BYTES: u64 = 1 << 20;

impl ModelConfig {
    /// Parses the text of a Hugging Face `config.json`.
    ///
    /// Supported `model_type`s: `llama`, `mistral`, `mixtral` (SwiGLU, RMSNorm, rotary), `gpt2`
    /// (GeLU, LayerNorm, learned positions, tied), `gpt_neox` (GeLU, LayerNorm, rotary) and
    /// `bert` (encoder with token types and pooler; e.g. all-MiniLM-L6-v2).
    /// Optional fields take the Transformers defaults (`num_key_value_heads` = heads,
    /// `head_dim` = hidden / heads, `tie_word_embeddings` = false except GPT-2).
    ///
    /// # Errors
    /// [`MemoryError::Json`] for malformed JSON, [`MemoryError::ConfigField`] naming a missing
    /// or ill-typed field, [`MemoryError::UnknownArchitecture`] for another `model_type`.
    pub fn from_hf_config_json(text: &str) -> Result<ModelConfig> {
        let value: Value = serde_json::from_str(text)?;
        let obj = value.as_object().ok_or_else(|| MemoryError::ConfigField {
            field: "(root)".into(),
            reason: "must be a JSON object".into(),
        })?;
        let f = Fields(obj);
        let model_type = f.str("model_type")?;
        let name = obj
            .get("_name_or_path")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(model_type)
            .to_string();
        let m = match model_type {
            "llama" | "mistral" | "mixtral" => {
                let hidden = f.u64("hidden_size")?;
                let heads = f.u64("num_attention_heads")?;
                let kv_heads = f.opt_u64("num_key_value_heads")?.unwrap_or(heads);
                let ffn = f.u64("intermediate_size")?;
                let positions = f.opt_u64("max_position_embeddings")?.unwrap_or(4096);
                let mut m = llama(
                    &name,
                    f.u64("num_hidden_layers")?,
                    hidden,
                    heads,
                    kv_heads,
                    ffn,
                    f.u64("vocab_size")?,
                    positions,
                );
                m.head_dim = f.opt_u64("head_dim")?.unwrap_or(hidden / heads);
                m.qkv_bias = f.opt_bool("attention_bias")?.unwrap_or(false);
                m.dense_bias = f.opt_bool("mlp_bias")?.unwrap_or(false);
                m.tied_embeddings = f.opt_bool("tie_word_embeddings")?.unwrap_or(false);
                m.dropout = f.opt_f64("attention_dropout")?.unwrap_or(0.0) > 0.0;
                if model_type == "mixtral" {
                    m.moe = Some(MoeConfig {
                        num_experts: f.u64("num_local_experts")?,
                        top_k: f.u64("num_experts_per_tok")?,
                        expert_ffn_hidden: ffn,
                        shared_experts: 0,
                    });
                }
                m
            }
            "gpt2" => {
                let hidden = f.u64("n_embd")?;
                let mut m = gpt(
                    &name,
                    f.u64("n_layer")?,
                    hidden,
                    f.u64("n_head")?,
                    f.u64("n_positions")?,
                );
                m.ffn_hidden = f.opt_u64("n_inner")?.unwrap_or(4 * hidden);
                m.vocab_size = f.u64("vocab_size")?;
                m.tied_embeddings = f.opt_bool("tie_word_embeddings")?.unwrap_or(true);
                m.dropout = f.opt_f64("resid_pdrop")?.unwrap_or(0.1) > 0.0;
                m
            }
            "gpt_neox" => {
                let positions = f.opt_u64("max_position_embeddings")?.unwrap_or(2048);
                let mut m = gpt(
                    &name,
                    f.u64("num_hidden_layers")?,
                    f.u64("hidden_size")?,
                    f.u64("num_attention_heads")?,
                    positions,
                );
                m.ffn_hidden = f.u64("intermediate_size")?;
                m.vocab_size = f.u64("vocab_size")?;
                m.position = PositionKind::Rotary;
                m.qkv_bias = f.opt_bool("attention_bias")?.unwrap_or(true);
                m.tied_embeddings = f.opt_bool("tie_word_embeddings")?.unwrap_or(false);
                m.dropout = f.opt_f64("hidden_dropout")?.unwrap_or(0.0) > 0.0;
                m
            }
            "bert" => {
                let mut m = bert(
                    &name,
                    f.u64("num_hidden_layers")?,
                    f.u64("hidden_size")?,
                    f.u64("num_attention_heads")?,
                    f.u64("intermediate_size")?,
                );
                m.vocab_size = f.u64("vocab_size")?;
                m.max_positions = f.opt_u64("max_position_embeddings")?.unwrap_or(512);
                m.token_types = f.opt_u64("type_vocab_size")?.unwrap_or(2);
                m.dropout = f.opt_f64("hidden_dropout_prob")?.unwrap_or(0.1) > 0.0;
                m
            }
            other => return Err(MemoryError::UnknownArchitecture(other.to_string())),
        };
        m.validate()?;
        Ok(m)
    }

    /// Reads and parses a `config.json` file of at most [`MAX_HF_CONFIG_BYTES`].
    ///
    /// # Errors
    /// [`MemoryError::InvalidInput`] when the file cannot be read or is longer than
    /// [`MAX_HF_CONFIG_BYTES`] (read no further, e.g. `/dev/zero`), else as
    /// [`ModelConfig::from_hf_config_json`].
    pub fn from_hf_config_file(path: &std::path::Path) -> Result<ModelConfig> {
        use std::io::Read;
        let cannot = |e: &dyn std::fmt::Display| {
            MemoryError::InvalidInput(format!("cannot read {}: {e}", path.display()))
        };
        let file = std::fs::File::open(path).map_err(|e| cannot(&e))?;
        let mut text = String::new();
        file.take(MAX_HF_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| cannot(&e))?;
        if text.len() as u64 > MAX_HF_CONFIG_BYTES {
            return Err(cannot(&format_args!(
                "longer than {MAX_HF_CONFIG_BYTES} bytes, not a config.json"
            )));
        }
        ModelConfig::from_hf_config_json(&text)
    }
}
