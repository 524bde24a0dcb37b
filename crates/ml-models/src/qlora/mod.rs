//! QLoRA: NF4 quantization with double quantization, a fused dequantize-and-multiply, LoRA
//! adapters with per-layer-type and per-depth configuration, a GPT-style decoder, and the
//! key-variables study of Shen, Lai, Li, Hu (CMC 2025).

pub mod bert;
pub mod fused;
pub mod gpt;
pub mod lora;
pub mod nf4;
pub mod quant;
pub mod relation;
pub mod relation_study;
pub mod report;

pub use bert::{Bert, BertConfig};
pub use fused::{fused_matmul_t, FrozenLinearOp, QuantLinearOp};
pub use gpt::{Gpt, GptConfig};
pub use lora::{AdapterSpec, Base, BaseFormat, LayerKind, Linear, LoraConfig, LoraRule};
pub use nf4::{Absmax, Nf4Matrix, DQ_BLOCK, NF4_BLOCK, NF4_CODE};
pub use quant::{dynamic_map_signed, Int8Matrix, QuantizedMatrix};
pub use relation::{fine_tune_relations, RelationConfig, RelationReport};
pub mod plot;
pub mod study;
pub mod variants;

pub use study::{run_study, StudyConfig, StudyData, StudyReport, StudyRow};
