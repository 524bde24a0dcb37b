//! QLoRA (Dettmers, Pagnoni, Holtzman, Zettlemoyer, "QLoRA: Efficient Finetuning of Quantized
//! LLMs", NeurIPS 2023): NF4 quantization with double quantization, blockwise int8, a fused
//! dequantize-and-multiply, LoRA adapters with per-layer-type and per-depth configuration and
//! equal-budget rank splits, and QLoRA relation classification on FewRel with a BERT encoder.
//!
//! The models themselves ([`crate::models`]) build every projection as a [`Linear`] of this
//! module, so any of them can be quantized and adapted. The experiments of the key-variables
//! study (Shen, Lai, Li, Hu, CMC 2025) live outside the library, in the workspace's unpublished
//! `ml-studies` crate.

pub mod budget;
pub mod fused;
pub mod lora;
pub mod nf4;
pub mod quant;
pub mod relation;

pub use budget::{budget_splits, split_config};
pub use fused::{fused_matmul_t, FrozenLinearOp, QuantLinearOp};
pub use lora::{AdapterSpec, Base, BaseFormat, LayerKind, Linear, LoraConfig, LoraRule};
pub use nf4::{Absmax, Nf4Matrix, DQ_BLOCK, NF4_BLOCK, NF4_CODE};
pub use quant::{dynamic_map_signed, Int8Matrix, QuantizedMatrix};
pub use relation::{fine_tune_relations, RelationConfig, RelationReport};
