//! The settings of the key-variables study on the GPT.

use std::path::PathBuf;

use ml_models::models::GptConfig;

use crate::Result;

/// Study settings. `StudyConfig::quick()` runs in a few CPU-minutes, `full()` in about 35.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyConfig {
    /// Model size: `micro`, `mini` or `tiny` (see [`GptConfig`]).
    pub preset: String,
    /// Tokens per training sequence.
    pub seq_len: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// Pretraining steps on the source domain.
    pub pretrain_steps: usize,
    /// Pretraining learning rate.
    pub pretrain_lr: f64,
    /// Fine-tuning steps per variant.
    pub finetune_steps: usize,
    /// Learning rate of adapter fine-tuning (LoRA/QLoRA).
    pub adapter_lr: f64,
    /// Learning rate of full fine-tuning.
    pub full_lr: f64,
    /// Gradient clipping (QLoRA reference: 0.3).
    pub grad_clip: f64,
    /// Held-out windows of `seq_len` used for perplexity.
    pub eval_windows: usize,
    /// Seeds (each variant is fine-tuned once per seed).
    pub seeds: Vec<u64>,
    /// Ranks of the rank sweep.
    pub ranks: Vec<usize>,
    /// Reference rank for the LoRA/QLoRA, α, budget and depth comparisons.
    pub ref_rank: usize,
    /// Rank for the α sweep (α ∈ {r, 2r, 16}).
    pub alpha_rank: usize,
    /// Where to cache the pretrained model (safetensors); `None` pretrains every time.
    pub pretrained_path: Option<PathBuf>,
}

impl StudyConfig {
    /// A few minutes on 2 CPU cores: mini model, short runs, one seed, ranks {1, 4, 16}.
    pub fn quick() -> Self {
        Self {
            preset: "mini".into(),
            seq_len: 64,
            batch: 8,
            pretrain_steps: 200,
            pretrain_lr: 3e-3,
            finetune_steps: 30,
            adapter_lr: 2e-3,
            full_lr: 5e-4,
            grad_clip: 0.3,
            eval_windows: 32,
            seeds: vec![0],
            ranks: vec![1, 4, 16],
            ref_rank: 8,
            alpha_rank: 4,
            pretrained_path: None,
        }
    }

    /// The full study grid on the `tiny` preset (~4.8M parameters): ranks {1, 2, 4, 8, 16, 32,
    /// 64} on attention / MLP / both, α ∈ {4, 8, 16} at r = 4, equal-budget splits and depth
    /// halves at r = 8, three seeds: 30 distinct variants × 3 seeds × 40 steps of 8 × 64 tokens
    /// after 300 pretraining steps (its measured CPU and wall time are in the `ml-models`
    /// README).
    pub fn full() -> Self {
        Self {
            preset: "tiny".into(),
            seq_len: 64,
            batch: 8,
            pretrain_steps: 300,
            finetune_steps: 40,
            eval_windows: 64,
            seeds: vec![0, 1, 2],
            ranks: vec![1, 2, 4, 8, 16, 32, 64],
            ref_rank: 8,
            alpha_rank: 4,
            ..Self::quick()
        }
    }

    /// The model configuration for `vocab` characters.
    pub fn model(&self, vocab: usize) -> Result<GptConfig> {
        let mut c = match self.preset.as_str() {
            "micro" => GptConfig::micro(vocab),
            "mini" => GptConfig::mini(vocab),
            "tiny" => GptConfig::tiny(vocab),
            p => {
                return Err(crate::StudyError::InvalidInput(format!(
                    "unknown preset `{p}` (micro, mini, tiny)"
                )))
            }
        };
        c.max_seq = c.max_seq.max(self.seq_len);
        Ok(c)
    }
}
