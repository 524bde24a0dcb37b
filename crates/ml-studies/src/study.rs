//! The key-variables study of Shen, Lai, Li, Hu ("Optimizing Fine-Tuning in Quantized Language
//! Models: An In-Depth Analysis of Key Variables", CMC 2025) on a small GPT: pretrain on one
//! domain, fine-tune on another with full fine-tuning, LoRA, QLoRA (± double quantization), and
//! adapters varied by rank, layer type, α, equal-budget splits and depth; held-out perplexity.

use ml_models::candle::Device;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use ml_models::data::{lm_batch, lm_eval_batches, CharTokenizer};
use ml_models::models::{Gpt, GptConfig};
use ml_models::train::{ParamStore, SeededInit, TrainCallback, TrainConfig, Trainer};

pub use crate::config::StudyConfig;
use crate::variants::{study_variants, Method, Variant};
use crate::{Result, StudyError};
use ml_models::MlError;
use std::path::PathBuf;

/// Tokenised corpora of the study.
#[derive(Debug, Clone)]
pub struct StudyData {
    /// Character vocabulary over both domains.
    pub tokenizer: CharTokenizer,
    /// Source-domain stream (pretraining).
    pub source: Vec<u32>,
    /// Target-domain training stream.
    pub target_train: Vec<u32>,
    /// Target-domain held-out stream.
    pub target_eval: Vec<u32>,
}

impl StudyData {
    /// A 64-bit FNV-1a fingerprint of the vocabulary size and the three token streams, stable
    /// across runs and toolchains: a cache key for checkpoints trained on this data.
    pub fn fingerprint(&self) -> u64 {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |x: u64| {
            for b in x.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(PRIME);
            }
        };
        feed(self.tokenizer.vocab_size() as u64);
        for stream in [&self.source, &self.target_train, &self.target_eval] {
            feed(stream.len() as u64);
            stream.iter().for_each(|&t| feed(u64::from(t)));
        }
        h
    }
}

impl StudyData {
    /// Builds the streams: the source text as is; target sentences split 90/10 by index
    /// (every tenth sentence held out), one sentence per line.
    pub fn new(source: &str, target_sentences: &[String]) -> Self {
        let train: Vec<&str> = target_sentences
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 10 != 9)
            .map(|(_, s)| s.as_str())
            .collect();
        let eval: Vec<&str> = target_sentences
            .iter()
            .skip(9)
            .step_by(10)
            .map(String::as_str)
            .collect();
        let (train, eval) = (train.join("\n"), eval.join("\n"));
        let tokenizer = CharTokenizer::fit(&format!("{source}{train}{eval}"));
        Self {
            source: tokenizer.encode(source),
            target_train: tokenizer.encode(&train),
            target_eval: tokenizer.encode(&eval),
            tokenizer,
        }
    }
}

/// One fine-tuning result.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StudyRow {
    /// Variant name, e.g. `qlora-dq r=8 both α=16`.
    pub variant: String,
    /// Comparison group (`method`, `rank`, `alpha`, `budget`, `depth`, `baseline`).
    pub group: String,
    /// Layer types with adapters (`attention`, `mlp`, `both`, `all` for full FT, `-`).
    pub target: String,
    /// Adapter rank (reference rank of the variant), 0 for none.
    pub rank: usize,
    /// α, 0 for none.
    pub alpha: f32,
    /// Seed.
    pub seed: u64,
    /// Trainable parameters.
    pub trainable: usize,
    /// Held-out perplexity on the target domain after fine-tuning.
    pub perplexity: f32,
    /// Computed training-state bytes: frozen weights at their storage size, trainable weights
    /// with gradient and two AdamW moments (16 B each).
    pub state_bytes: usize,
    /// Peak heap bytes during fine-tuning if the caller measured it (see [`StudyHooks`]).
    pub peak_bytes: Option<u64>,
    /// A memory model's prediction of the same run's peak, if the caller gave one (see
    /// [`StudyHooks::predict`]).
    pub predicted_bytes: Option<u64>,
    /// Fine-tuning throughput.
    pub tokens_per_s: f64,
}

/// The whole study's output.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StudyReport {
    /// Perplexity of the pretrained model on the source domain's held-out tail.
    pub source_perplexity: f32,
    /// Perplexity of the pretrained model on the target domain (before fine-tuning).
    pub base_target_perplexity: f32,
    /// Pretraining throughput (0 when loaded from cache).
    pub pretrain_tokens_per_s: f64,
    /// Model parameters.
    pub model_params: usize,
    /// One row per (variant, seed).
    pub rows: Vec<StudyRow>,
}

/// Progress and measurement hooks of [`run_study`].
pub trait StudyHooks {
    /// A phase started (`pretrain` or a variant name) with this many steps.
    fn phase(&mut self, _name: &str, _steps: usize) {}
    /// A training step finished.
    fn step(&mut self) {}
    /// A (variant, seed) result is complete (e.g. to log partial results of a long run).
    fn row_done(&mut self, _row: &StudyRow) {}
    /// A finished result as one line of text (e.g. to log partial results of a long run).
    fn note(&mut self, _line: &str) {}
    /// Called right before a variant is built; reset a peak-memory counter here.
    fn measure_begin(&mut self) {}
    /// Called after the variant trained; return the measured peak heap bytes.
    fn measure_end(&mut self) -> Option<u64> {
        None
    }
    /// A predicted peak for fine-tuning `model` as `variant` with `cfg`'s batch and sequence
    /// length (e.g. from the `memory-model` crate); `None` when not predicted.
    fn predict(
        &mut self,
        _model: &GptConfig,
        _cfg: &StudyConfig,
        _variant: &Variant,
    ) -> Option<u64> {
        None
    }
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;
impl StudyHooks for NoHooks {}

/// Forwards training steps to [`StudyHooks::step`].
pub(crate) struct StepHook<'a>(pub(crate) &'a mut dyn StudyHooks);
impl TrainCallback for StepHook<'_> {
    fn on_step(&mut self, _: &ml_models::train::StepMetrics) {
        self.0.step();
    }
}

/// Mean cross-entropy of `gpt` over held-out windows, as perplexity (no autograd graph).
pub fn perplexity(gpt: &Gpt, ids: &[u32], seq: usize, windows: usize) -> Result<f32> {
    let batches = lm_eval_batches(ids, 16, seq, windows, &Device::Cpu)?;
    // Evaluate through a view that builds no autograd graph (candle has no no-grad mode).
    let gpt = gpt.detached();
    let (mut sum, mut n) = (0.0f64, 0usize);
    for (x, y) in &batches {
        let l = gpt.loss(x, y, false)?.to_scalar::<f32>()? as f64;
        sum += l * x.dim(0)? as f64;
        n += x.dim(0)?;
    }
    Ok((sum / n as f64).exp() as f32)
}

/// One training phase: stream, steps, learning rate, batch-sampling seed.
struct Phase<'a> {
    ids: &'a [u32],
    steps: usize,
    lr: f64,
    seed: u64,
}

fn train_lm(
    gpt: &Gpt,
    store: &ParamStore,
    cfg: &StudyConfig,
    ph: Phase<'_>,
    hooks: &mut dyn StudyHooks,
) -> Result<f64> {
    let Phase {
        ids,
        steps,
        lr,
        seed,
    } = ph;
    let tc = TrainConfig {
        lr,
        warmup_steps: steps / 10,
        grad_clip: Some(cfg.grad_clip),
        max_steps: steps,
        steps_per_epoch: steps,
        ..TrainConfig::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut tr = Trainer::new(tc, store)?;
    let mut loss_at = |_| {
        let (x, y) = lm_batch(ids, cfg.batch, cfg.seq_len, &mut rng, &Device::Cpu)?;
        gpt.loss(&x, &y, true)
    };
    let rep = tr.fit(store, &mut loss_at, None, &mut StepHook(hooks))?;
    Ok((steps * cfg.batch * cfg.seq_len) as f64 / rep.seconds.max(1e-9))
}

/// Runs the study: pretrain (or load), then every variant × seed.
pub fn run_study(
    cfg: &StudyConfig,
    data: &StudyData,
    hooks: &mut dyn StudyHooks,
) -> Result<StudyReport> {
    let mcfg = cfg.model(data.tokenizer.vocab_size())?;
    let mut store = ParamStore::new();
    let gpt = Gpt::new(mcfg, &mut store, &mut SeededInit::new(1234))?;
    // Hold out the last 10% of the source text.
    let cut = data.source.len() * 9 / 10;
    let (src_train, src_eval) = data.source.split_at(cut);
    let cached = cfg.pretrained_path.as_ref().filter(|p| p.is_file());
    let loaded_from = cached.filter(|p| store.load(p).is_ok());
    let pretrain_tps = match loaded_from {
        Some(_) => 0.0,
        None => {
            hooks.phase("pretrain", cfg.pretrain_steps);
            let ph = Phase {
                ids: src_train,
                steps: cfg.pretrain_steps,
                lr: cfg.pretrain_lr,
                seed: 7,
            };
            let tps = train_lm(&gpt, &store, cfg, ph, hooks)?;
            if let Some(p) = &cfg.pretrained_path {
                store.save(p, &[])?;
            }
            tps
        }
    };
    let pretrained = store.snapshot()?;
    let source_perplexity = perplexity(&gpt, src_eval, cfg.seq_len, cfg.eval_windows)?;
    let base_target_perplexity =
        perplexity(&gpt, &data.target_eval, cfg.seq_len, cfg.eval_windows)?;
    let mut rows: Vec<StudyRow> = Vec::new();
    let variants = study_variants(cfg, &mcfg);
    // Seed-major order: every variant of seed 0 before any of seed 1, so a run cut short still
    // holds complete seeds.
    for &seed in &cfg.seeds {
        for (i, v) in variants.iter().enumerate() {
            // A variant identical to an earlier one (e.g. the balanced budget split and the
            // reference QLoRA run) reuses its results instead of training again.
            let twin = variants[..i].iter().find(|w| w.method == v.method);
            let mut row = match twin.and_then(|w| {
                rows.iter()
                    .find(|r| r.variant == w.name && r.group == w.group && r.seed == seed)
            }) {
                Some(r) => r.clone(),
                None => {
                    hooks.measure_begin();
                    hooks.phase(&v.name, cfg.finetune_steps);
                    let mut row = finetune(cfg, mcfg, &pretrained, data, v, seed, hooks)
                        .map_err(|e| name_cached_checkpoint(e, loaded_from))?;
                    row.peak_bytes = hooks.measure_end();
                    row.predicted_bytes = hooks.predict(&mcfg, cfg, v);
                    row
                }
            };
            (row.variant, row.group, row.target) =
                (v.name.clone(), v.group.clone(), v.target.clone());
            (row.rank, row.alpha) = (v.rank, v.alpha);
            hooks.row_done(&row);
            rows.push(row);
        }
    }
    Ok(StudyReport {
        source_perplexity,
        base_target_perplexity,
        pretrain_tokens_per_s: pretrain_tps,
        model_params: store.count(false),
        rows,
    })
}

/// A divergence after loading cached pretrained weights names the cache file, so a user can
/// tell a bad checkpoint from bad settings.
fn name_cached_checkpoint(e: StudyError, loaded_from: Option<&PathBuf>) -> StudyError {
    match (e, loaded_from) {
        (StudyError::Ml(MlError::Diverged { step, loss }), Some(path)) => {
            StudyError::DivergedFromCache {
                path: path.clone(),
                step,
                loss,
            }
        }
        (e, _) => e,
    }
}

fn finetune(
    cfg: &StudyConfig,
    mcfg: GptConfig,
    pretrained: &[ml_models::candle::Tensor],
    data: &StudyData,
    v: &Variant,
    seed: u64,
    hooks: &mut dyn StudyHooks,
) -> Result<StudyRow> {
    let mut store = ParamStore::new();
    let mut init = SeededInit::new(1234);
    let mut gpt = Gpt::new(mcfg, &mut store, &mut init)?;
    store.restore(pretrained)?;
    let mut init = SeededInit::new(seed.wrapping_mul(7919) + 17);
    let lr = match &v.method {
        Method::Full => cfg.full_lr,
        Method::Lora(lc) => {
            gpt.apply_lora(lc, &mut store, &mut init)?;
            cfg.adapter_lr
        }
    };
    let trainable = store.count(true);
    let state_bytes = gpt.frozen_base_bytes()
        + store
            .params()
            .iter()
            .map(|p| p.var.elem_count() * if p.trainable { 16 } else { 4 })
            .sum::<usize>();
    let ph = Phase {
        ids: &data.target_train,
        steps: cfg.finetune_steps,
        lr,
        seed: seed + 100,
    };
    let tps = train_lm(&gpt, &store, cfg, ph, hooks)?;
    Ok(StudyRow {
        variant: v.name.clone(),
        group: v.group.clone(),
        target: v.target.clone(),
        rank: v.rank,
        alpha: v.alpha,
        seed,
        trainable,
        perplexity: perplexity(&gpt, &data.target_eval, cfg.seq_len, cfg.eval_windows)?,
        state_bytes,
        peak_bytes: None,
        predicted_bytes: None,
        tokens_per_s: tps,
    })
}
