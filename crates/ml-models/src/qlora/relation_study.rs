//! The key-variables study of Shen, Lai, Li, Hu (CMC 2025) on a real pretrained model:
//! all-MiniLM-L6-v2, NF4 + double quantization of every projection, LoRA adapters on attention
//! only / MLP only / both over a rank grid plus equal-budget splits, fine-tuned for FewRel
//! relation classification ([`crate::qlora::relation`]); held-out accuracy.
//!
//! MiniLM's attention projections are 384×384 and its MLP projections 384×1536, so, as in the
//! paper, the two layer types differ in size by 4×.

use crate::qlora::bert::{Bert, BertConfig};
use crate::qlora::lora::{BaseFormat, LoraConfig};
use crate::qlora::relation::{fine_tune_relations, RelationConfig, RelationExample};
use crate::qlora::study::{StepHook, StudyHooks};
use crate::qlora::variants::{budget_splits, split_config};
use crate::Result;

/// Settings of the MiniLM study.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationStudyConfig {
    /// Ranks of the rank × layer-type sweep, default {1, 8, 64}.
    pub ranks: Vec<usize>,
    /// Rank whose all-layer budget the equal-budget splits share, default 8.
    pub budget_rank: usize,
    /// α of every adapter, default 16 (QLoRA reference).
    pub alpha: f32,
    /// Per-run settings (subset sizes, epochs, batch, learning rate, seed); its `lora` is
    /// replaced per variant. Default: 16 training and 20 test instances per relation (the first
    /// of each relation's seeded 80 % / 20 % shares: 256 / 320 sentences), one epoch, batch 16,
    /// lr 1e-3, seed 0, no accuracy-before evaluation.
    pub run: RelationConfig,
}

impl Default for RelationStudyConfig {
    fn default() -> Self {
        Self {
            ranks: vec![1, 8, 64],
            budget_rank: 8,
            alpha: 16.0,
            run: RelationConfig {
                train_per_class: 16,
                test_per_class: 20,
                eval_before: false,
                ..RelationConfig::default()
            },
        }
    }
}

/// One adapter configuration of the MiniLM study.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationVariant {
    /// Display name.
    pub name: String,
    /// Comparison group: `rank` or `budget`.
    pub group: String,
    /// Adapted layer types: `attention`, `mlp` or `both`.
    pub target: String,
    /// Attention rank (0 = none).
    pub attention_rank: usize,
    /// MLP rank (0 = none).
    pub mlp_rank: usize,
    /// The adapters, over NF4 + double quantization.
    pub lora: LoraConfig,
}

/// Every variant: the rank grid × {attention, MLP, both}, then the three equal-budget splits.
pub fn relation_variants(cfg: &RelationStudyConfig, model: &BertConfig) -> Vec<RelationVariant> {
    let layers = 0..model.num_hidden_layers;
    let dq = BaseFormat::Nf4 { double_quant: true };
    let variant = |name: String, group: &str, target: &str, ra: usize, rm: usize| RelationVariant {
        name,
        group: group.into(),
        target: target.into(),
        attention_rank: ra,
        mlp_rank: rm,
        lora: split_config(ra, rm, cfg.alpha, dq, layers.clone()),
    };
    let mut out = Vec::new();
    for &r in &cfg.ranks {
        for (target, ra, rm) in [("attention", r, 0), ("mlp", 0, r), ("both", r, r)] {
            out.push(variant(format!("r={r} {target}"), "rank", target, ra, rm));
        }
    }
    // Adapter parameters per block and unit rank: q, k, v, o are d×d (4·2d); the MLP is
    // up d→ff and down ff→d (2·(d + ff)).
    let (d, ff) = (model.hidden_size, model.intermediate_size);
    for (label, ra, rm) in budget_splits(cfg.budget_rank, (8 * d, 2 * (d + ff))) {
        let name = format!("budget {label}: attn r={ra} mlp r={rm}");
        out.push(variant(name, "budget", "both", ra, rm));
    }
    out
}

/// One fine-tuning result of the MiniLM study.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationStudyRow {
    /// The variant.
    pub variant: RelationVariant,
    /// Trainable parameters (adapters + linear head).
    pub trainable: usize,
    /// Held-out accuracy after fine-tuning.
    pub accuracy: f32,
    /// Training loss of the last step.
    pub final_loss: f32,
    /// Training instances, test instances, optimiser steps.
    pub sizes: (usize, usize, usize),
    /// Wall-clock seconds of training.
    pub seconds: f64,
    /// Peak heap bytes of quantization + fine-tuning + evaluation, if measured by the hooks.
    pub peak_bytes: Option<u64>,
}

/// Runs `variants` (all of [`relation_variants`], or a subset to split a study over processes):
/// `load` gives a fresh f32 encoder each time (quantized and adapted per variant); `per_class`
/// are the relations from [`crate::qlora::relation::encode_fewrel`], padded with `pad_id`.
/// Each finished row is also passed to [`StudyHooks::note`] as a Markdown table line.
pub fn run_relation_study(
    cfg: &RelationStudyConfig,
    variants: Vec<RelationVariant>,
    load: &mut dyn FnMut() -> Result<Bert>,
    per_class: &[Vec<RelationExample>],
    pad_id: u32,
    hooks: &mut dyn StudyHooks,
) -> Result<Vec<RelationStudyRow>> {
    let mut rows: Vec<RelationStudyRow> = Vec::new();
    for v in variants {
        // A variant identical to an earlier one (the balanced budget split when the rank grid
        // holds the budget rank) reuses its result.
        if let Some(twin) = rows
            .iter()
            .find(|r: &&RelationStudyRow| r.variant.lora == v.lora)
        {
            let row = RelationStudyRow {
                variant: v,
                ..twin.clone()
            };
            note_row(hooks, &row);
            rows.push(row);
            continue;
        }
        let mut bert = load()?;
        let run = RelationConfig {
            lora: v.lora.clone(),
            ..cfg.run.clone()
        };
        let n_train = per_class
            .iter()
            .map(|r| (r.len() * 4 / 5).min(run.train_per_class))
            .sum::<usize>();
        hooks.measure_begin();
        hooks.phase(
            &v.name,
            n_train.div_ceil(run.batch_size.max(1)) * run.epochs.max(1),
        );
        let rep = fine_tune_relations(&mut bert, per_class, pad_id, &run, &mut StepHook(hooks))?;
        let peak_bytes = hooks.measure_end();
        drop(bert);
        let row = RelationStudyRow {
            variant: v,
            trainable: rep.trainable,
            accuracy: rep.accuracy,
            final_loss: rep.losses.last().copied().unwrap_or(f32::NAN),
            sizes: (rep.n_train, rep.n_test, rep.steps),
            seconds: rep.seconds,
            peak_bytes,
        };
        note_row(hooks, &row);
        rows.push(row);
    }
    Ok(rows)
}

/// Reports one finished row to the hooks as its Markdown table line.
fn note_row(hooks: &mut dyn StudyHooks, row: &RelationStudyRow) {
    let table = relation_markdown(std::slice::from_ref(row));
    hooks.note(table.lines().last().unwrap_or(""));
}

/// The rows as a Markdown table.
pub fn relation_markdown(rows: &[RelationStudyRow]) -> String {
    let mut s = String::from(
        "| variant | group | attn r | MLP r | trainable | accuracy | last loss | train s | peak MiB |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.4} | {:.3} | {:.0} | {} |\n",
            r.variant.name,
            r.variant.group,
            r.variant.attention_rank,
            r.variant.mlp_rank,
            r.trainable,
            r.accuracy,
            r.final_loss,
            r.seconds,
            r.peak_bytes
                .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1048576.0)),
        ));
    }
    s
}
