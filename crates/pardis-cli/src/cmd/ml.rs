//! `pardis ml` (issue #8): machine-learning experiments.

use std::path::PathBuf;

use ml_studies::plot::plot_rank_sweep;
use ml_studies::relation_study::{
    plot_relation_rank_sweep, relation_summary, relation_variants, run_relation_study,
    RelationStudyConfig,
};
use ml_studies::study::{run_study, StudyConfig, StudyData, StudyHooks};
use pardis::ml::data::{encode_fewrel, read_fewrel, RelationExample, SubwordTokenizer};
use pardis::ml::models::{Bert, BertConfig};
use pardis::ml::qlora::relation::{fine_tune_relations, RelationConfig};
use pardis::ml::qlora::{BaseFormat, LayerKind, LoraConfig};
use pardis::ml::train::{StepMetrics, TrainCallback};
use pardis_datasets::DataRoots;

use crate::output::{bytes, progress, table};

/// Arguments of `pardis ml`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: MlCommand,
}

#[derive(Debug, clap::Subcommand)]
enum MlCommand {
    /// QLoRA key-variables study: pretrain a small GPT on Tiny Shakespeare, fine-tune on PubMed
    /// sentences with full FT / LoRA / QLoRA by rank, layer type, α, budget split and depth;
    /// with `--model minilm`, NF4 all-MiniLM-L6-v2 on FewRel by rank, layer type and budget.
    QloraStudy(StudyArgs),
    /// QLoRA fine-tuning of all-MiniLM-L6-v2 (fetch it with scripts/fetch-minilm) for relation
    /// classification on FewRel val_wiki (16 relations, 80/20 split); test accuracy.
    MinilmFewrel(MinilmArgs),
    /// Tabular anomaly detection (PCL-AD and baselines) on the ADBench protocol.
    Anomaly(anomaly::AnomalyArgs),
    /// Few-shot relation extraction on FewRel: PO-HRL (hyperbolic, partial-order cones) and
    /// Euclidean baselines, N-way K-shot accuracy with 95% CI on unseen relations.
    Fewrel(fewrel::FewrelArgs),
    /// Semi-supervised class-incremental learning: fine-tuning, joint, ER, iCaRL-style, DER++ and
    /// replay of unlabelled data with temporal consistency on split digits or Fashion-MNIST.
    Cil(cil::CilArgs),
}

#[derive(Debug, clap::Args)]
struct MinilmArgs {
    /// Training instances per relation (at most 560).
    #[arg(long, default_value_t = 40)]
    train_per_class: usize,
    /// Test instances per relation (at most 140).
    #[arg(long, default_value_t = 40)]
    test_per_class: usize,
    /// Passes over the training instances.
    #[arg(long, default_value_t = 1)]
    epochs: usize,
    /// LoRA rank.
    #[arg(long, default_value_t = 8)]
    rank: usize,
    /// LoRA α.
    #[arg(long, default_value_t = 16.0)]
    alpha: f32,
    /// Frozen base format: nf4-dq, nf4, int8 or f32.
    #[arg(long, default_value = "nf4-dq")]
    base: String,
    /// Batch size.
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct StudyArgs {
    /// A few-minute run (mini preset, ranks 1/4/16 only, one seed, 30 steps). The default is
    /// the full grid on the tiny preset (~4.8M parameters): ranks 1-64 × attention/MLP/both,
    /// α, equal-budget splits, depth halves, 3 seeds × 40 steps (measured: 32 CPU-minutes, 17 minutes wall on 2 cores).
    #[arg(long)]
    quick: bool,
    /// Model: `gpt` (pretrained here, perplexity) or `minilm` (all-MiniLM-L6-v2 on FewRel,
    /// accuracy; fetch it with scripts/fetch-minilm). MiniLM's full grid (7 ranks × 3 layer
    /// types + 3 equal budgets, 3 seeds) measured 45 CPU-minutes, 28 minutes wall on 2 cores;
    /// --quick: ranks 1/8/64, one seed.
    #[arg(long, default_value = "gpt")]
    model: String,
    /// GPT preset: micro, mini or tiny (default: tiny; mini with --quick).
    #[arg(long)]
    preset: Option<String>,
    /// Seeds per variant (default: 1 with --quick, 3 otherwise).
    #[arg(long)]
    seeds: Option<u64>,
    /// GPT: fine-tuning steps per variant (default: 40; 30 with --quick).
    #[arg(long)]
    steps: Option<usize>,
    /// GPT: pretraining steps (default: 300; 200 with --quick).
    #[arg(long)]
    pretrain_steps: Option<usize>,
    /// Fine-tune the seeds in this many parallel processes, each measuring its own peak memory
    /// (default: one per seed; 1 runs everything in this process). GPT: pretraining runs once,
    /// first, here.
    #[arg(long)]
    jobs: Option<usize>,
    /// Internal (--jobs): the first seed this process fine-tunes.
    #[arg(long, hide = true)]
    first_seed: Option<u64>,
    /// Internal (--jobs): write the report as JSON here and print progress for the parent.
    #[arg(long, hide = true)]
    save_report: Option<PathBuf>,
    /// MiniLM: training instances per relation (of 560).
    #[arg(long, default_value_t = 16)]
    train_per_class: usize,
    /// MiniLM: test instances per relation (of 140).
    #[arg(long, default_value_t = 20)]
    test_per_class: usize,
    /// MiniLM: ranks of the rank × layer-type grid (default: 1,8,64 with --quick, 1,2,4,…,64
    /// otherwise).
    #[arg(long, value_delimiter = ',')]
    ranks: Option<Vec<usize>>,
    /// Output directory for the pretrained checkpoint (a cache, keyed on the preset, the steps
    /// and the data) and the PNG plot.
    #[arg(long, default_value = "qlora-study-out")]
    out: PathBuf,
    /// Replace an existing plot in --out (otherwise the command stops before training).
    #[arg(long)]
    force: bool,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Makes `out` (a directory) and checks that none of `outputs` exists in it unless `force`:
/// the command never replaces a file the user did not ask it to, and finds out before
/// training. A child of `--jobs` (which writes no outputs) passes no `outputs`.
fn prepare_out(out: &std::path::Path, outputs: &[&str], force: bool) -> anyhow::Result<()> {
    if out.exists() && !out.is_dir() {
        anyhow::bail!("--out {} exists and is not a directory", out.display());
    }
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("creating {}: {e}", out.display()))?;
    for name in outputs {
        let path = out.join(name);
        if path.exists() && !force {
            anyhow::bail!(
                "{} exists; pass --force to replace it, or choose another --out",
                path.display()
            );
        }
    }
    Ok(())
}

mod anomaly;
mod cil;
mod fewrel;
mod seeds;

struct Bar(indicatif::ProgressBar);

/// Peak resident set (VmHWM of /proc/self/status), reset per variant through
/// /proc/self/clear_refs; `None` where procfs does not offer it.
pub(super) fn vm_hwm() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

impl TrainCallback for Bar {
    fn on_step(&mut self, m: &StepMetrics) {
        self.0.inc(1);
        self.0.set_message(format!("loss {:.4}", m.loss));
    }
}

impl StudyHooks for Bar {
    fn phase(&mut self, name: &str, steps: usize) {
        self.0.set_length(steps as u64);
        self.0.set_position(0);
        self.0.set_message(name.to_string());
    }
    fn step(&mut self) {
        self.0.inc(1);
    }
    fn measure_begin(&mut self) {
        // Writing 5 resets the peak RSS to the current RSS (Linux ≥ 4.0).
        let _ = std::fs::write("/proc/self/clear_refs", "5");
    }
    fn measure_end(&mut self) -> Option<u64> {
        vm_hwm()
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        MlCommand::QloraStudy(a) => qlora_study(a),
        MlCommand::MinilmFewrel(a) => minilm_fewrel(a),
        MlCommand::Anomaly(a) => anomaly::run(a, &DataRoots::from_env()),
        MlCommand::Fewrel(a) => fewrel::run(a, &DataRoots::from_env()),
        MlCommand::Cil(a) => cil::run(a, &DataRoots::from_env()),
    }
}

fn qlora_study(a: StudyArgs) -> anyhow::Result<()> {
    match a.model.as_str() {
        "gpt" => {}
        "minilm" => return minilm_study(a),
        m => anyhow::bail!("unknown --model {m} (gpt, minilm)"),
    }
    let mut cfg = if a.quick {
        StudyConfig::quick()
    } else {
        StudyConfig::full()
    };
    if let Some(p) = a.preset {
        cfg.preset = p;
    }
    if let Some(n) = a.seeds {
        anyhow::ensure!(n > 0, "--seeds must be at least 1");
        let first = a.first_seed.unwrap_or(0);
        cfg.seeds = (first..first + n).collect();
    }
    if let Some(s) = a.steps {
        cfg.finetune_steps = s;
    }
    if let Some(s) = a.pretrain_steps {
        cfg.pretrain_steps = s;
    }
    let outputs: &[&str] = if a.save_report.is_some() {
        &[]
    } else {
        &["qlora-rank-sweep.png"]
    };
    prepare_out(&a.out, outputs, a.force)?;
    let data = StudyData::load(&DataRoots::from_env())?;
    // The cache is keyed on the data too: a changed training text never reuses a checkpoint.
    cfg.pretrained_path = Some(a.out.join(format!(
        "pretrained-{}-{}-{:016x}.safetensors",
        cfg.preset,
        cfg.pretrain_steps,
        data.fingerprint()
    )));
    if let Some(path) = &a.save_report {
        // A child of `--jobs`: progress goes to the parent as lines on stderr.
        let rep = run_study(&cfg, &data, &mut seeds::ChildHooks)?;
        std::fs::write(path, serde_json::to_string(&rep)?)?;
        return Ok(());
    }
    let jobs = a
        .jobs
        .unwrap_or(cfg.seeds.len())
        .clamp(1, cfg.seeds.len().max(1));
    let rep = if jobs > 1 {
        seeds::run_in_processes(&cfg, &data, jobs, &a.out, a.quick)?
    } else {
        let mut bar = Bar(progress(1, "starting"));
        let rep = run_study(&cfg, &data, &mut bar)?;
        bar.0.finish_and_clear();
        rep
    };
    let png = a.out.join("qlora-rank-sweep.png");
    plot_rank_sweep(&rep, &png)?;
    let summary = rep.summary();
    if a.json {
        let rows: Vec<serde_json::Value> = summary
            .iter()
            .map(|r| {
                serde_json::json!({
                    "variant": r.variant, "group": r.group, "trainable": r.trainable,
                    "perplexity": r.perplexity, "perplexity_std": r.perplexity_std,
                    "state_bytes": r.state_bytes, "peak_rss_bytes": r.peak_bytes,
                    "tokens_per_s": r.tokens_per_s,
                })
            })
            .collect();
        let v = serde_json::json!({
            "preset": cfg.preset, "model_params": rep.model_params,
            "source_perplexity": rep.source_perplexity,
            "base_target_perplexity": rep.base_target_perplexity,
            "pretrain_tokens_per_s": rep.pretrain_tokens_per_s,
            "plot": png, "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{} preset, {} parameters; perplexity before fine-tuning: source {:.3}, target {:.3}",
        cfg.preset, rep.model_params, rep.source_perplexity, rep.base_target_perplexity
    );
    let mut t = table([
        "variant",
        "group",
        "trainable",
        "perplexity",
        "train state",
        "peak RSS",
        "tokens/s",
    ]);
    for r in &summary {
        t.add_row(vec![
            r.variant.clone(),
            r.group.clone(),
            r.trainable.to_string(),
            format!("{:.3} ± {:.3}", r.perplexity, r.perplexity_std),
            bytes(r.state_bytes as u64),
            r.peak_bytes.map_or("-".into(), bytes),
            format!("{:.0}", r.tokens_per_s),
        ]);
    }
    println!(
        "{t}\npeak RSS: VmHWM of the process during each variant (whole process, pages touched)\nplot: {}",
        png.display()
    );
    Ok(())
}

/// MiniLM files, its tokenizer and the encoded FewRel relations.
struct Minilm {
    cfg: BertConfig,
    weights: PathBuf,
    tok: SubwordTokenizer,
    per_class: Vec<Vec<RelationExample>>,
}

fn load_minilm() -> anyhow::Result<Minilm> {
    let roots = DataRoots::from_env();
    let file = |rel: &str| {
        roots
            .require_path(rel)
            .map(|l| l.path)
            .map_err(|e| anyhow::anyhow!("{e} (run scripts/fetch-minilm)"))
    };
    let tok = SubwordTokenizer::from_file(&file("minilm/tokenizer.json")?, 128)?;
    let data = read_fewrel(
        &roots
            .require_path("relation-extraction/fewrel/val_wiki.json")?
            .path,
    )?;
    Ok(Minilm {
        cfg: BertConfig::from_file(&file("minilm/config.json")?)?,
        weights: file("minilm/model.safetensors")?,
        per_class: encode_fewrel(&data, &tok)?,
        tok,
    })
}

fn minilm_study(a: StudyArgs) -> anyhow::Result<()> {
    let m = load_minilm()?;
    let mut cfg = if a.quick {
        RelationStudyConfig::default()
    } else {
        RelationStudyConfig::full()
    };
    if let Some(r) = a.ranks.clone() {
        anyhow::ensure!(
            !r.is_empty() && r.iter().all(|&r| r > 0),
            "--ranks must be positive"
        );
        cfg.ranks = r;
    }
    if let Some(n) = a.seeds {
        anyhow::ensure!(n > 0, "--seeds must be at least 1");
        let first = a.first_seed.unwrap_or(0);
        cfg.seeds = (first..first + n).collect();
    }
    cfg.run.train_per_class = a.train_per_class;
    cfg.run.test_per_class = a.test_per_class;
    let outputs: &[&str] = if a.save_report.is_some() {
        &[]
    } else {
        &["minilm-rank-sweep.png"]
    };
    prepare_out(&a.out, outputs, a.force)?;
    let mut load = || Bert::load(m.cfg, &m.weights);
    let variants = relation_variants(&cfg, &m.cfg);
    let (pad, per_class) = (pad_id(&m.tok), &m.per_class);
    if let Some(path) = &a.save_report {
        // A child of `--jobs`: progress goes to the parent as lines on stderr.
        let hooks = &mut seeds::ChildHooks;
        let rows = run_relation_study(&cfg, variants, &mut load, per_class, pad, hooks)?;
        std::fs::write(path, serde_json::to_string(&rows)?)?;
        return Ok(());
    }
    let jobs = a.jobs.unwrap_or(cfg.seeds.len()).clamp(1, cfg.seeds.len());
    let rows = if jobs > 1 {
        seeds::minilm_in_processes(&cfg, jobs, &a)?
    } else {
        let mut bar = Bar(progress(1, "starting"));
        let rows = run_relation_study(&cfg, variants, &mut load, per_class, pad, &mut bar)?;
        bar.0.finish_and_clear();
        rows
    };
    let png = a.out.join("minilm-rank-sweep.png");
    plot_relation_rank_sweep(&rows, &png)?;
    if a.json {
        let rows: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "variant": r.variant.name, "group": r.variant.group, "seed": r.seed,
                    "attention_rank": r.variant.attention_rank, "mlp_rank": r.variant.mlp_rank,
                    "trainable": r.trainable, "accuracy": r.accuracy,
                    "n_train": r.sizes.0, "n_test": r.sizes.1, "steps": r.sizes.2,
                    "seconds": r.seconds, "peak_rss_bytes": r.peak_bytes,
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let mut t = table([
        "variant",
        "group",
        "attn r",
        "MLP r",
        "trainable",
        "seeds",
        "accuracy (mean ± sd)",
        "peak RSS",
    ]);
    for r in relation_summary(&rows) {
        t.add_row(vec![
            r.variant.name.clone(),
            r.variant.group.clone(),
            r.variant.attention_rank.to_string(),
            r.variant.mlp_rank.to_string(),
            r.trainable.to_string(),
            r.seeds.to_string(),
            format!("{:.3} ± {:.3}", r.accuracy, r.accuracy_std),
            r.peak_bytes.map_or("-".into(), bytes),
        ]);
    }
    println!("{t}");
    println!("plot: {}", png.display());
    Ok(())
}

fn minilm_fewrel(a: MinilmArgs) -> anyhow::Result<()> {
    let Minilm {
        cfg,
        weights,
        tok,
        per_class,
    } = load_minilm()?;
    let mut bert = Bert::load(cfg, &weights)?;
    let base = match a.base.as_str() {
        "f32" => BaseFormat::F32,
        "int8" => BaseFormat::Int8,
        "nf4" => BaseFormat::Nf4 {
            double_quant: false,
        },
        "nf4-dq" => BaseFormat::Nf4 { double_quant: true },
        b => anyhow::bail!("unknown --base {b} (nf4-dq, nf4, int8, f32)"),
    };
    anyhow::ensure!(
        a.rank > 0 && a.batch > 0,
        "--rank and --batch must be positive"
    );
    let rc = RelationConfig {
        train_per_class: a.train_per_class,
        test_per_class: a.test_per_class,
        epochs: a.epochs,
        batch_size: a.batch,
        lora: LoraConfig::uniform(&LayerKind::ALL, a.rank, a.alpha, base),
        ..RelationConfig::default()
    };
    let steps = (a.train_per_class.min(560) * per_class.len()).div_ceil(a.batch) * a.epochs.max(1);
    let mut bar = Bar(progress(steps as u64, "fine-tuning"));
    let rep = fine_tune_relations(&mut bert, &per_class, pad_id(&tok), &rc, &mut bar)?;
    bar.0.finish_and_clear();
    if a.json {
        let v = serde_json::json!({
            "base": a.base, "rank": a.rank, "alpha": a.alpha,
            "n_train": rep.n_train, "n_test": rep.n_test, "steps": rep.steps,
            "seconds": rep.seconds, "trainable": rep.trainable,
            "projection_bytes": rep.base_bytes,
            "accuracy_before": rep.accuracy_before, "accuracy": rep.accuracy,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let mut t = table(["quantity", "value"]);
    for (k, v) in [
        ("relations", per_class.len().to_string()),
        (
            "train / test instances",
            format!("{} / {}", rep.n_train, rep.n_test),
        ),
        ("steps (batch)", format!("{} ({})", rep.steps, a.batch)),
        (
            "base, rank, α",
            format!("{}, {}, {}", a.base, a.rank, a.alpha),
        ),
        ("trainable parameters", rep.trainable.to_string()),
        ("projection weights", bytes(rep.base_bytes as u64)),
        (
            "test accuracy before",
            rep.accuracy_before
                .map_or("-".into(), |a| format!("{a:.4}")),
        ),
        ("test accuracy after", format!("{:.4}", rep.accuracy)),
        ("training time", format!("{:.0} s", rep.seconds)),
    ] {
        t.add_row(vec![k.to_string(), v]);
    }
    println!("{t}");
    Ok(())
}

fn pad_id(tok: &SubwordTokenizer) -> u32 {
    tok.token_id("[PAD]").unwrap_or(0)
}
