//! `pardis ml` (issue #8): machine-learning experiments.

use std::path::PathBuf;

use pardis::ml::qlora::plot::plot_rank_sweep;
use pardis::ml::qlora::study::{run_study, StudyConfig, StudyData, StudyHooks};
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
    /// sentences with full FT / LoRA / QLoRA by rank, layer type, α, budget split and depth.
    QloraStudy(StudyArgs),
}

#[derive(Debug, clap::Args)]
struct StudyArgs {
    /// A few-minute run (mini model, short fine-tunes, ranks 1/4/16, one seed).
    #[arg(long)]
    quick: bool,
    /// Model preset: micro, mini or tiny (default: mini with --quick, tiny otherwise).
    #[arg(long)]
    preset: Option<String>,
    /// Number of seeds per variant (default: 1 with --quick, 2 otherwise).
    #[arg(long)]
    seeds: Option<u64>,
    /// Fine-tuning steps per variant (default: 40 with --quick, 150 otherwise).
    #[arg(long)]
    steps: Option<usize>,
    /// Output directory for the pretrained checkpoint and the PNG plot.
    #[arg(long, default_value = "qlora-study-out")]
    out: PathBuf,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

struct Bar(indicatif::ProgressBar);

impl StudyHooks for Bar {
    fn phase(&mut self, name: &str, steps: usize) {
        self.0.set_length(steps as u64);
        self.0.set_position(0);
        self.0.set_message(name.to_string());
    }
    fn step(&mut self) {
        self.0.inc(1);
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        MlCommand::QloraStudy(a) => qlora_study(a),
    }
}

fn qlora_study(a: StudyArgs) -> anyhow::Result<()> {
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
        cfg.seeds = (0..n).collect();
    }
    if let Some(s) = a.steps {
        cfg.finetune_steps = s;
    }
    std::fs::create_dir_all(&a.out)?;
    cfg.pretrained_path = Some(a.out.join(format!("pretrained-{}.safetensors", cfg.preset)));
    let roots: Vec<PathBuf> = DataRoots::from_env()
        .dirs()
        .map(|(_, p)| p.clone())
        .collect();
    let data = StudyData::load(&roots)?;
    let mut bar = Bar(progress(1, "starting"));
    let rep = run_study(&cfg, &data, &mut bar)?;
    bar.0.finish_and_clear();
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
                    "state_bytes": r.state_bytes, "tokens_per_s": r.tokens_per_s,
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
        "tokens/s",
    ]);
    for r in &summary {
        t.add_row(vec![
            r.variant.clone(),
            r.group.clone(),
            r.trainable.to_string(),
            format!("{:.3} ± {:.3}", r.perplexity, r.perplexity_std),
            bytes(r.state_bytes as u64),
            format!("{:.0}", r.tokens_per_s),
        ]);
    }
    println!("{t}\nplot: {}", png.display());
    Ok(())
}
