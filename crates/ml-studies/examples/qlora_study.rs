//! The QLoRA key-variables study (Shen et al., CMC 2025) on a small GPT, with the measured peak
//! heap per variant (counting global allocator) next to memory-model's prediction; or, with
//! `--model minilm`, on the real pretrained all-MiniLM-L6-v2 (FewRel relation classification).
//!
//! ```text
//! cargo run --release -p ml-studies --example qlora_study -- [--quick] [--out DIR] [--preset P] \
//!     [--seeds N] [--steps N] [--pretrain-steps N]
//! cargo run --release -p ml-studies --example qlora_study -- --model minilm [--quick] \
//!     [--seeds N] [--first-seed S] [--train-per-class N] [--test-per-class N] [--ranks 1,4,16,64] \
//!     [--only 0,1,2] [--save-rows F] [--out DIR]
//! cargo run --release -p ml-studies --example qlora_study -- --model minilm --merge-rows F1 F2 ...
//! ```
//!
//! MiniLM: the default is the whole grid (ranks 1–64 × layer type + equal budgets, seeds 0–2);
//! `--quick` is ranks {1, 8, 64} with seed 0. `--only` / `--first-seed` split a study over
//! processes, `--save-rows` keeps each process's rows and `--merge-rows` prints and plots them
//! together.

use std::path::PathBuf;

use memory_model::{
    estimate, BaseQuant, LoraRanks, MlpKind, ModelConfig, NormKind, Peft, PositionKind, Precision,
    TrainingSetup,
};
use ml_models::data::{encode_fewrel, read_fewrel, SubwordTokenizer};
use ml_models::models::{Bert, BertConfig, GptConfig};
use ml_models::qlora::{BaseFormat, LayerKind};
use ml_models::train::CountingAllocator;
use ml_studies::plot::plot_rank_sweep;
use ml_studies::relation_study::{
    plot_relation_rank_sweep, relation_markdown, relation_summary_markdown, relation_variants,
    run_relation_study, RelationStudyConfig, RelationStudyRow,
};
use ml_studies::study::{run_study, StudyConfig, StudyData, StudyHooks, StudyReport, StudyRow};
use ml_studies::variants::{Method, Variant};
use pardis_datasets::DataRoots;

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

struct Hooks;

impl StudyHooks for Hooks {
    fn phase(&mut self, name: &str, steps: usize) {
        eprintln!(
            "[{:>6.1}s] {name} ({steps} steps)",
            START.with(|s| s.elapsed().as_secs_f64())
        );
    }
    fn measure_begin(&mut self) {
        HEAP.reset_peak();
    }
    fn note(&mut self, line: &str) {
        eprintln!("  {line}");
    }
    fn row_done(&mut self, r: &StudyRow) {
        eprintln!(
            "  seed {} {} [{}]: perplexity {:.4}, trainable {}, peak {:.1} MiB, {:.0} tokens/s",
            r.seed,
            r.variant,
            r.group,
            r.perplexity,
            r.trainable,
            r.peak_bytes.unwrap_or(0) as f64 / 1048576.0,
            r.tokens_per_s
        );
    }
    fn measure_end(&mut self) -> Option<u64> {
        Some(HEAP.peak_since_reset() as u64)
    }
    fn predict(&mut self, m: &GptConfig, cfg: &StudyConfig, v: &Variant) -> Option<u64> {
        predict(m, cfg, v)
    }
}

/// memory-model's per-device total for fine-tuning the GPT as `v` (fp32, Adam); `None` for
/// adapters on a subset of blocks, which memory-model cannot express.
fn predict(m: &GptConfig, cfg: &StudyConfig, v: &Variant) -> Option<u64> {
    let model = ModelConfig {
        name: format!("study-{}", cfg.preset),
        num_layers: m.n_layers as u64,
        hidden: m.d_model as u64,
        num_heads: m.n_heads as u64,
        num_kv_heads: m.n_heads as u64,
        head_dim: (m.d_model / m.n_heads) as u64,
        ffn_hidden: m.d_ff as u64,
        vocab_size: m.vocab as u64,
        vocab_pad_multiple: 1,
        max_positions: m.max_seq as u64,
        mlp: MlpKind::SwiGlu,
        norm: NormKind::RmsNorm,
        qkv_bias: false,
        dense_bias: false,
        position: PositionKind::Rotary,
        tied_embeddings: true,
        dropout: false,
        moe: None,
        token_types: 0,
        pooler: false,
    };
    let peft = match &v.method {
        Method::Full => None,
        Method::Lora(lc) => {
            let all = 0..m.n_layers;
            if lc
                .rules
                .iter()
                .any(|r| r.layers.start > 0 || r.layers.end < m.n_layers)
            {
                return None;
            }
            let r = |k| {
                all.clone()
                    .map(|l| lc.adapter_for(k, l).map_or(0, |a| a.rank))
                    .max()
            };
            let base = match lc.base {
                BaseFormat::Nf4 { double_quant } => BaseQuant::Nf4 { double_quant },
                BaseFormat::Int8 => BaseQuant::Int8,
                _ => BaseQuant::None,
            };
            Some(Peft {
                lora: LoraRanks {
                    q: r(LayerKind::Q)? as u64,
                    k: r(LayerKind::K)? as u64,
                    v: r(LayerKind::V)? as u64,
                    o: r(LayerKind::O)? as u64,
                    mlp: r(LayerKind::Up)? as u64,
                },
                base,
            })
        }
    };
    let setup = TrainingSetup {
        micro_batch: cfg.batch as u64,
        seq_len: cfg.seq_len as u64,
        precision: Precision::Fp32,
        peft,
        ..TrainingSetup::default()
    };
    estimate(&model, &setup).ok().map(|r| r.per_device.total())
}

thread_local! {
    static START: std::time::Instant = std::time::Instant::now();
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    START.with(|_| ());
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let number = |f: &str| -> Result<Option<usize>, std::num::ParseIntError> {
        flag(f).map(|v| v.parse()).transpose()
    };
    let roots = DataRoots::from_env();
    if flag("--model").as_deref() == Some("minilm") {
        let out = PathBuf::from(flag("--out").unwrap_or_else(|| "qlora-study-out".into()));
        std::fs::create_dir_all(&out)?;
        if let Some(i) = args.iter().position(|a| a == "--merge-rows") {
            let mut rows: Vec<RelationStudyRow> = Vec::new();
            for f in &args[i + 1..] {
                rows.extend(serde_json::from_str::<Vec<RelationStudyRow>>(
                    &std::fs::read_to_string(f)?,
                )?);
            }
            // Grid order: the rank sweep by rank and layer type, then the budget splits from
            // the largest attention rank down (as `relation_variants` lists them); seeds in
            // order within a variant (stable sort).
            rows.sort_by_key(|r| {
                let v = &r.variant;
                let t = ["attention", "mlp", "both"]
                    .iter()
                    .position(|t| *t == v.target);
                match v.group.as_str() {
                    "rank" => (0, v.attention_rank.max(v.mlp_rank), t, r.seed),
                    _ => (1, usize::MAX - v.attention_rank, None, r.seed),
                }
            });
            return minilm_report(&rows, &out);
        }
        let mut cfg = if args.iter().any(|a| a == "--quick") {
            RelationStudyConfig::default()
        } else {
            RelationStudyConfig::full()
        };
        if let Some(n) = number("--seeds")? {
            let first = number("--first-seed")?.unwrap_or(0) as u64;
            cfg.seeds = (first..first + n as u64).collect();
        }
        if let Some(n) = number("--train-per-class")? {
            cfg.run.train_per_class = n;
        }
        if let Some(n) = number("--test-per-class")? {
            cfg.run.test_per_class = n;
        }
        if let Some(r) = flag("--ranks") {
            cfg.ranks = r.split(',').map(str::parse).collect::<Result<_, _>>()?;
        }
        let only: Option<Vec<usize>> = flag("--only")
            .map(|o| o.split(',').map(str::parse).collect())
            .transpose()?;
        let rows = minilm(&cfg, only, &roots)?;
        if let Some(f) = flag("--save-rows") {
            std::fs::write(f, serde_json::to_string(&rows)?)?;
        }
        return minilm_report(&rows, &out);
    }
    let mut cfg = if args.iter().any(|a| a == "--quick") {
        StudyConfig::quick()
    } else {
        StudyConfig::full()
    };
    if let Some(p) = flag("--preset") {
        cfg.preset = p;
    }
    if let Some(n) = number("--seeds")? {
        let first = number("--first-seed")?.unwrap_or(0) as u64;
        cfg.seeds = (first..first + n as u64).collect();
    }
    if let Some(n) = number("--steps")? {
        cfg.finetune_steps = n;
    }
    if let Some(n) = number("--pretrain-steps")? {
        cfg.pretrain_steps = n;
    }
    let out = PathBuf::from(flag("--out").unwrap_or_else(|| "qlora-study-out".into()));
    std::fs::create_dir_all(&out)?;
    // `--merge a.json b.json ...`: one report from runs of the same study with different seeds
    // (e.g. run in parallel with `--first-seed`), each saved by `--save-report`.
    if let Some(i) = args.iter().position(|a| a == "--merge") {
        let mut merged: Option<StudyReport> = None;
        for f in &args[i + 1..] {
            let rep: StudyReport = serde_json::from_str(&std::fs::read_to_string(f)?)?;
            match merged.as_mut() {
                Some(m) => m.rows.extend(rep.rows),
                None => merged = Some(rep),
            }
        }
        let mut rep = merged.ok_or("--merge needs report files")?;
        // Group rows by variant in run order, seeds in order.
        let key = |r: &StudyRow| (r.group.clone(), r.variant.clone());
        let order: Vec<_> = rep.rows.iter().map(key).collect();
        let first = |r: &StudyRow| order.iter().position(|o| *o == key(r)).unwrap_or(0);
        rep.rows.sort_by_key(|r| (first(r), r.seed));
        return report(&rep, &out);
    }
    cfg.pretrained_path = Some(out.join(format!(
        "pretrained-{}-{}.safetensors",
        cfg.preset, cfg.pretrain_steps
    )));
    eprintln!("{cfg:?}");
    let data = StudyData::load(&roots)?;
    let mut hooks = Hooks;
    let rep = run_study(&cfg, &data, &mut hooks)?;
    if let Some(f) = flag("--save-report") {
        std::fs::write(f, serde_json::to_string(&rep)?)?;
    }
    report(&rep, &out)
}

/// Prints the summary table and writes the plot.
fn report(rep: &StudyReport, out: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    println!(
        "model parameters: {}; source ppl {:.3}; target ppl before fine-tuning {:.3}; pretrain {:.0} tokens/s\n",
        rep.model_params, rep.source_perplexity, rep.base_target_perplexity, rep.pretrain_tokens_per_s
    );
    println!("{}", rep.to_markdown());
    let png = out.join("qlora-rank-sweep.png");
    plot_rank_sweep(rep, &png)?;
    println!("plot: {}", png.display());
    Ok(())
}

/// The study on all-MiniLM-L6-v2 (FewRel `val_wiki.json`, 16 relations, 80/20 split).
/// `only`: indices into [`relation_variants`] to run (to split the study over processes).
fn minilm(
    cfg: &RelationStudyConfig,
    only: Option<Vec<usize>>,
    roots: &DataRoots,
) -> Result<Vec<RelationStudyRow>, Box<dyn std::error::Error>> {
    let file = |rel: &str| roots.require_path(rel).map(|l| l.path);
    let bert_cfg = BertConfig::from_file(&file("minilm/config.json")?)?;
    let weights = file("minilm/model.safetensors")?;
    let tok = SubwordTokenizer::from_file(&file("minilm/tokenizer.json")?, 128)?;
    let pad = tok.token_id("[PAD]").unwrap_or(0);
    let data = read_fewrel(&file("relation-extraction/fewrel/val_wiki.json")?)?;
    let per_class = encode_fewrel(&data, &tok)?;
    eprintln!("{cfg:?}");
    let mut load = || Bert::load(bert_cfg, &weights);
    let variants: Vec<_> = relation_variants(cfg, &bert_cfg)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| only.as_ref().is_none_or(|o| o.contains(i)))
        .map(|(_, v)| v)
        .collect();
    let rows = run_relation_study(cfg, variants, &mut load, &per_class, pad, &mut Hooks)?;
    if let Some(r) = rows.first() {
        let (train, test, steps) = r.sizes;
        println!(
            "all-MiniLM-L6-v2, NF4 + DQ, α = {}: {} relations, {train} train / {test} test instances, {steps} steps of batch {} (lr {})\n",
            cfg.alpha,
            per_class.len(),
            cfg.run.batch_size,
            cfg.run.lr
        );
    }
    Ok(rows)
}

/// Prints the MiniLM rows (per seed, then averaged over seeds) and plots accuracy vs rank.
fn minilm_report(
    rows: &[RelationStudyRow],
    out: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("{}", relation_markdown(rows));
    println!("{}", relation_summary_markdown(rows));
    if rows.iter().any(|r| r.variant.group == "rank") {
        let png = out.join("minilm-rank-sweep.png");
        plot_relation_rank_sweep(rows, &png)?;
        println!("plot: {}", png.display());
    }
    Ok(())
}
