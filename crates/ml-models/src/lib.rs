//! # ml_models
//!
//! Machine-learning models on [candle](https://github.com/huggingface/candle) (CPU; a `cuda`
//! feature passes through): a shared training core, shared models and data loaders, and one
//! module per paper.
//!
//! Shared by every paper:
//!
//! - [`train`]: seeded initialisation (candle's CPU RNG cannot be seeded), differentiable
//!   RMSNorm/LayerNorm/softmax (candle's fused kernels have no backward), named parameters with
//!   safetensors checkpoints, AdamW with exportable state, a training loop with callbacks, early
//!   stopping and resume, differentiable `asin`/`acos`/`acosh`, data-parallel gradient
//!   synchronisation, and a counting allocator for measured peak memory.
//! - [`models`]: a GPT-style decoder and a BERT encoder that loads all-MiniLM-L6-v2 from
//!   safetensors, both built from LoRA-capable [`qlora::Linear`] projections.
//! - [`data`]: loaders for `.npy`/`.npz`, CSV, IDX and FewRel JSON (with entity-marked
//!   encoding), character text and sub-word tokenisation through Hugging Face `tokenizers`
//!   (pretrained `tokenizer.json`, BPE training). Loaders take paths; locating data sets on disk
//!   is the caller's job.
//!
//! One module per paper:
//!
//! - [`qlora`]: NF4 quantization with double quantization (Dettmers et al., QLoRA, 2023), a fused
//!   dequantize-and-multiply, LoRA over f32/bf16/NF4/int8 bases with per-layer-type and per-depth
//!   ranks and equal-budget rank splits, and QLoRA relation classification on FewRel.
//!
//! - [`anomaly`]: tabular anomaly detection on the ADBench protocol behind one
//!   [`anomaly::Detector`] trait: partition contrastive learning (PCL-AD, Li et al., Data Mining
//!   and Knowledge Discovery 2025) and the baselines Isolation Forest, ECOD, k-NN distance, ICL
//!   and NeuTraL-AD, with exact AUC-ROC and average precision.
//!
//! - [`incremental`]: semi-supervised class-incremental learning with replay of unlabelled data
//!   and temporal consistency (Wang et al., Frontiers of Computer Science 2025): task streams,
//!   a bounded labelled/unlabelled memory, MLP/CNN with a growing head, fine-tuning, joint, ER,
//!   iCaRL-style, DER++ and the paper's method, incremental accuracy and forgetting.
//!
//! - [`hyperbolic`]: the Lorentz model of hyperbolic space on candle tensors
//!   ([`hyperbolic::lorentz`]: distances, maps, entailment cones, centroids, all differentiable)
//!   and PO-HRL, partial-order-centred hyperbolic representation learning for few-shot relation
//!   extraction (Hu et al., COLING 2025), with Euclidean baselines
//!   ([`hyperbolic::pohrl`]), on the FewRel episode harness of [`fewshot`].
//!
//! The experiment drivers
//! (the key-variables study of Shen et al., CMC 2025, its tables and plots) are not part of this
//! library: they live in the workspace's unpublished `ml-studies` crate.
//!
//! ## Features
//!
//! - `collectives`: `train::distributed::DataParallel`, gradient all-reduce over the
//!   `collectives` crate, so any [`train::Trainer`] runs data-parallel on n ranks.
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

pub mod anomaly;
pub mod data;
mod error;
pub mod fewshot;
pub mod hyperbolic;
pub mod incremental;
pub mod models;
pub mod qlora;
pub mod stats;
pub mod train;

pub use error::{MlError, Result};

/// The candle version this crate is built on, re-exported for callers' tensors.
pub use candle_core as candle;
