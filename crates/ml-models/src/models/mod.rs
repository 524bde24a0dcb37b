//! Models shared by the papers' modules: a GPT-style decoder (RMSNorm, rotary positions,
//! SwiGLU, causal attention, tied embeddings) and a BERT encoder that loads all-MiniLM-L6-v2 from
//! safetensors. Every projection is a [`crate::qlora::Linear`], so a model can be quantized and
//! adapted per layer kind and depth.

pub mod bert;
pub mod gpt;

pub use bert::{Bert, BertConfig};
pub use gpt::{Gpt, GptConfig};
