//! The key-variables study of Shen, Lai, Li, Hu (CMC 2025) on a real pretrained model:
//! all-MiniLM-L6-v2, NF4 + double quantization of every projection, LoRA adapters on attention
//! only / MLP only / both over a rank grid plus equal-budget splits, fine-tuned for FewRel
//! relation classification ([`ml_models::qlora::relation`]); held-out accuracy.
//!
//! MiniLM's attention projections are 384×384 and its MLP projections 384×1536, so, as in the
//! paper, the two layer types differ in size by 4×.

use ml_models::data::RelationExample;
use ml_models::models::{Bert, BertConfig};
use ml_models::qlora::relation::{fine_tune_relations, RelationConfig};
use ml_models::qlora::{budget_splits, split_config, BaseFormat, LoraConfig};

use crate::study::{StepHook, StudyHooks};
use crate::Result;

/// Settings of the MiniLM study.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationStudyConfig {
    /// Ranks of the rank × layer-type sweep; default {1, 8, 64}, [`Self::full`]: 1 … 64.
    pub ranks: Vec<usize>,
    /// Rank whose all-layer budget the equal-budget splits share, default 8.
    pub budget_rank: usize,
    /// α of every adapter, default 16 (QLoRA reference).
    pub alpha: f32,
    /// Seeds per variant; default {0}, [`Self::full`]: {0, 1, 2}. A seed sets the instance
    /// split (which 16 of a relation's 80 % share are trained on, which 20 of its 20 % share
    /// are tested), the batch order and the adapter and head initialisation; every variant
    /// sees the same data for the same seed.
    pub seeds: Vec<u64>,
    /// Per-run settings (subset sizes, epochs, batch, learning rate); its `lora` and `seed` are
    /// replaced per run. Default: 16 training and 20 test instances per relation (the first of
    /// each relation's seeded 80 % / 20 % shares: 256 / 320 sentences), one epoch, batch 16,
    /// lr 1e-3, no accuracy-before evaluation.
    pub run: RelationConfig,
}

impl Default for RelationStudyConfig {
    fn default() -> Self {
        Self {
            ranks: vec![1, 8, 64],
            budget_rank: 8,
            alpha: 16.0,
            seeds: vec![0],
            run: RelationConfig {
                train_per_class: 16,
                test_per_class: 20,
                eval_before: false,
                ..RelationConfig::default()
            },
        }
    }
}

impl RelationStudyConfig {
    /// The whole grid: ranks {1, 2, 4, 8, 16, 32, 64} × {attention, MLP, both} plus the three
    /// equal-budget splits (23 distinct fine-tunings), three seeds each.
    pub fn full() -> Self {
        Self {
            ranks: vec![1, 2, 4, 8, 16, 32, 64],
            seeds: vec![0, 1, 2],
            ..Self::default()
        }
    }
}

/// One adapter configuration of the MiniLM study.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelationStudyRow {
    /// The variant.
    pub variant: RelationVariant,
    /// The seed of this run.
    pub seed: u64,
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

/// Runs `variants` (all of [`relation_variants`], or a subset to split a study over processes),
/// each once per seed of `cfg.seeds`:
/// `load` gives a fresh f32 encoder each time (quantized and adapted per variant); `per_class`
/// are the relations from [`ml_models::data::encode_fewrel`], padded with `pad_id`.
/// Each finished row is also passed to [`StudyHooks::note`] as a Markdown table line.
pub fn run_relation_study(
    cfg: &RelationStudyConfig,
    variants: Vec<RelationVariant>,
    load: &mut dyn FnMut() -> ml_models::Result<Bert>,
    per_class: &[Vec<RelationExample>],
    pad_id: u32,
    hooks: &mut dyn StudyHooks,
) -> Result<Vec<RelationStudyRow>> {
    let mut rows: Vec<RelationStudyRow> = Vec::new();
    let runs = variants
        .into_iter()
        .flat_map(|v| cfg.seeds.iter().map(move |&seed| (v.clone(), seed)));
    for (v, seed) in runs {
        // A variant identical to an earlier one (the balanced budget split when the rank grid
        // holds the budget rank) reuses its result for the same seed.
        if let Some(twin) = rows
            .iter()
            .find(|r: &&RelationStudyRow| r.variant.lora == v.lora && r.seed == seed)
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
            seed,
            ..cfg.run.clone()
        };
        let n_train = per_class
            .iter()
            .map(|r| (r.len() * 4 / 5).min(run.train_per_class))
            .sum::<usize>();
        hooks.measure_begin();
        hooks.phase(
            &format!("{} (seed {seed})", v.name),
            n_train.div_ceil(run.batch_size.max(1)) * run.epochs.max(1),
        );
        let rep = fine_tune_relations(&mut bert, per_class, pad_id, &run, &mut StepHook(hooks))?;
        let peak_bytes = hooks.measure_end();
        drop(bert);
        let row = RelationStudyRow {
            variant: v,
            seed,
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

/// The rows (one per variant and seed) as a Markdown table.
pub fn relation_markdown(rows: &[RelationStudyRow]) -> String {
    let mut s = String::from(
        "| variant | group | seed | attn r | MLP r | trainable | accuracy | last loss | train s | peak MiB |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.4} | {:.3} | {:.0} | {} |\n",
            r.variant.name,
            r.variant.group,
            r.seed,
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

/// A MiniLM variant's results over its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationSummaryRow {
    /// The variant.
    pub variant: RelationVariant,
    /// Trainable parameters (adapters + linear head).
    pub trainable: usize,
    /// Seeds run.
    pub seeds: usize,
    /// Mean held-out accuracy over the seeds.
    pub accuracy: f32,
    /// Standard deviation of the accuracy over the seeds (population, 0 for one seed).
    pub accuracy_std: f32,
    /// Largest measured peak heap bytes over the seeds, if measured.
    pub peak_bytes: Option<u64>,
}

/// One row per variant (first-appearance order), accuracy averaged over its seeds.
pub fn relation_summary(rows: &[RelationStudyRow]) -> Vec<RelationSummaryRow> {
    let mut out: Vec<(RelationSummaryRow, Vec<f32>)> = Vec::new();
    for r in rows {
        let i = match out
            .iter()
            .position(|(s, _)| s.variant.name == r.variant.name)
        {
            Some(i) => i,
            None => {
                out.push((
                    RelationSummaryRow {
                        variant: r.variant.clone(),
                        trainable: r.trainable,
                        seeds: 0,
                        accuracy: 0.0,
                        accuracy_std: 0.0,
                        peak_bytes: None,
                    },
                    Vec::new(),
                ));
                out.len() - 1
            }
        };
        let (s, acc) = &mut out[i];
        acc.push(r.accuracy);
        s.peak_bytes = s.peak_bytes.max(r.peak_bytes);
    }
    out.into_iter()
        .map(|(mut s, acc)| {
            let n = acc.len() as f32;
            s.seeds = acc.len();
            s.accuracy = acc.iter().sum::<f32>() / n;
            s.accuracy_std = (acc.iter().map(|a| (a - s.accuracy).powi(2)).sum::<f32>() / n).sqrt();
            s
        })
        .collect()
}

/// [`relation_summary`] as a Markdown table (accuracy as mean ± standard deviation).
pub fn relation_summary_markdown(rows: &[RelationStudyRow]) -> String {
    let mut s = String::from(
        "| variant | group | attn r | MLP r | trainable | seeds | accuracy | peak MiB |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in relation_summary(rows) {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {:.3} ± {:.3} | {} |\n",
            r.variant.name,
            r.variant.group,
            r.variant.attention_rank,
            r.variant.mlp_rank,
            r.trainable,
            r.seeds,
            r.accuracy,
            r.accuracy_std,
            r.peak_bytes
                .map_or("-".into(), |b| format!("{:.0}", b as f64 / 1048576.0)),
        ));
    }
    s
}

/// Mean accuracy over seeds per (target, rank) of the rank sweep, for
/// [`crate::plot::plot_metric_vs_rank`].
pub fn relation_rank_curves(
    rows: &[RelationStudyRow],
) -> std::collections::BTreeMap<String, Vec<(usize, f32)>> {
    let mut out: std::collections::BTreeMap<String, Vec<(usize, f32)>> = Default::default();
    for r in relation_summary(rows) {
        if r.variant.group == "rank" {
            let rank = r.variant.attention_rank.max(r.variant.mlp_rank);
            out.entry(r.variant.target.clone())
                .or_default()
                .push((rank, r.accuracy));
        }
    }
    for pts in out.values_mut() {
        pts.sort_by_key(|p| p.0);
    }
    out
}

/// Draws mean accuracy vs rank per adapted layer type (the rank sweep of `rows`) into `path`
/// (PNG).
pub fn plot_relation_rank_sweep(rows: &[RelationStudyRow], path: &std::path::Path) -> Result<()> {
    let seeds = relation_summary(rows)
        .iter()
        .map(|r| r.seeds)
        .max()
        .unwrap_or(0);
    let caption = format!(
        "all-MiniLM-L6-v2, QLoRA (NF4+DQ), FewRel: held-out accuracy vs rank ({seeds} seeds)"
    );
    crate::plot::plot_metric_vs_rank(
        &relation_rank_curves(rows),
        None,
        &caption,
        "accuracy (mean over seeds)",
        path,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, target: &str, rank: usize, seed: u64, accuracy: f32) -> RelationStudyRow {
        let (ra, rm) = match target {
            "attention" => (rank, 0),
            "mlp" => (0, rank),
            _ => (rank, rank),
        };
        RelationStudyRow {
            variant: RelationVariant {
                name: name.into(),
                group: "rank".into(),
                target: target.into(),
                attention_rank: ra,
                mlp_rank: rm,
                lora: LoraConfig::default(),
            },
            seed,
            trainable: 10,
            accuracy,
            final_loss: 1.0,
            sizes: (1, 1, 1),
            seconds: 0.0,
            peak_bytes: Some(seed * 100),
        }
    }

    #[test]
    fn summary_averages_each_variant_over_its_seeds() {
        let rows = vec![
            row("r=8 mlp", "mlp", 8, 0, 0.4),
            row("r=8 mlp", "mlp", 8, 1, 0.6),
            row("r=1 mlp", "mlp", 1, 0, 0.3),
            row("r=1 mlp", "mlp", 1, 1, 0.3),
        ];
        let s = relation_summary(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].variant.name, "r=8 mlp");
        assert_eq!(s[0].seeds, 2);
        assert!((s[0].accuracy - 0.5).abs() < 1e-6);
        assert!((s[0].accuracy_std - 0.1).abs() < 1e-6);
        assert_eq!(s[0].peak_bytes, Some(100));
        assert_eq!(s[1].accuracy_std, 0.0);
        // Curves are sorted by rank whatever the run order.
        let c = relation_rank_curves(&rows);
        let mlp: Vec<usize> = c["mlp"].iter().map(|p| p.0).collect();
        assert_eq!(mlp, vec![1, 8]);
        // Rows survive a JSON round trip (the example merges runs of separate processes).
        let back: Vec<RelationStudyRow> =
            serde_json::from_str(&serde_json::to_string(&rows).unwrap()).unwrap();
        assert_eq!(back, rows);
        assert!(relation_summary_markdown(&rows).contains("0.500 ± 0.100"));
    }

    #[test]
    fn full_config_covers_seven_ranks_and_three_seeds() {
        let f = RelationStudyConfig::full();
        assert_eq!(f.ranks, vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(f.seeds, vec![0, 1, 2]);
        assert_eq!(f.run, RelationStudyConfig::default().run);
    }
}
