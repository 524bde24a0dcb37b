//! # ml_models
//!
//! Machine-learning models on [candle](https://github.com/huggingface/candle) (CPU; a `cuda`
//! feature passes through): a shared training core and, per paper, one module.
//!
//! - [`core`]: seeded initialisation (candle's CPU RNG cannot be seeded), differentiable
//!   RMSNorm/LayerNorm/softmax (candle's fused kernels have no backward), named parameters with
//!   safetensors checkpoints, AdamW with exportable state, a training loop with callbacks, early
//!   stopping and resume, loaders for `.npy`/`.npz`, CSV, IDX and FewRel JSON, sub-word
//!   tokenisation through Hugging Face `tokenizers` (pretrained `tokenizer.json`, BPE training),
//!   differentiable `asin`/`acos`/`acosh`, and a counting allocator for measured peak memory.
//! - [`qlora`]: NF4 quantization with double quantization (Dettmers et al., QLoRA, 2023), a fused
//!   dequantize-and-multiply, LoRA over f32/bf16/NF4/int8 bases with per-layer-type and per-depth
//!   ranks, a GPT-style decoder, a BERT encoder that loads all-MiniLM-L6-v2 from safetensors,
//!   QLoRA relation classification on FewRel, and the key-variables study (Shen et al., CMC 2025).
//!
//! ## Features
//!
//! - `collectives`: `core::distributed::DataParallel`, gradient all-reduce over the `collectives`
//!   crate, so any [`core::Trainer`] runs data-parallel on n ranks.
//! - `cuda`: passes through to candle's CUDA backend (the fused NF4 kernel is CPU-only).
//!
//! Part of the [pardis](https://github.com/pardis-rs/pardis) workspace; usable on its own.
//!
//! ```
//! use ml_models::qlora::{Nf4Matrix, QuantizedMatrix, fused_matmul_t};
//!
//! // Quantize a 4×128 weight to NF4 with double quantization and multiply x·Wᵀ.
//! let w: Vec<f32> = (0..512).map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0).collect();
//! let q = Nf4Matrix::quantize(&w, 4, 128, true)?;
//! let x = vec![1.0f32; 128];
//! let y = fused_matmul_t(&x, &q);
//! assert_eq!(y.len(), 4);
//! assert!(q.bits_per_param() < 4.6);
//! # Ok::<(), ml_models::MlError>(())
//! ```

pub mod core;
mod error;
pub mod qlora;

pub use error::{MlError, Result};

/// The candle version this crate is built on, re-exported for callers' tensors.
pub use candle_core as candle;
