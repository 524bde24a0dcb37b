//! # ml_studies
//!
//! The experiments run on the `ml-models` library, kept out of it: experiment drivers, their
//! tables and PNG plots. Unpublished; the `pardis ml` subcommands and this crate's examples run
//! them. The library itself holds only models, training and data.
//!
//! - [`study`], [`config`], [`variants`], [`report`]: the key-variables study of Shen, Lai, Li,
//!   Hu ("Optimizing Fine-Tuning in Quantized Language Models: An In-Depth Analysis of Key
//!   Variables", CMC 2025) on a small GPT pretrained here: full fine-tuning, LoRA, QLoRA
//!   (± double quantization), adapters by rank, layer type, α, equal-budget split and depth;
//!   held-out perplexity.
//! - [`relation_study`]: the same questions on all-MiniLM-L6-v2 (NF4 + double quantization)
//!   fine-tuned for FewRel relation classification; held-out accuracy.
//! - [`cil`]: the class-incremental benchmark of `ml_models::incremental` (fine-tuning, joint,
//!   ER, iCaRL-style, DER++ and replay of unlabelled data with temporal consistency) over
//!   seeded class orders: mean ± std tables and accuracy-after-each-task plots.
//! - [`plot`]: metric-versus-rank and accuracy-per-task line plots (`plotters`, PNG).
//!
//! Data sets are located through `pardis-datasets`' `DataRoots::require_path`, the workspace's one
//! data-root resolver.
//!
//! ```
//! use ml_studies::variants::study_variants;
//! use ml_studies::config::StudyConfig;
//!
//! let cfg = StudyConfig::quick();
//! let model = cfg.model(65)?;
//! let variants = study_variants(&cfg, &model);
//! assert_eq!(variants[0].name, "full fine-tune");
//! # Ok::<(), ml_studies::StudyError>(())
//! ```

pub mod cil;
pub mod config;
mod error;
pub mod plot;
pub mod relation_study;
pub mod report;
pub mod study;
pub mod variants;

pub use error::{Result, StudyError};
