//! `pardis ml fewrel` (issue #28): few-shot relation extraction on FewRel with PO-HRL and its
//! baselines; training on the meta-train relations happens inside the command unless
//! `--checkpoints DIR` names models saved by `--save-checkpoints DIR`.

use std::path::PathBuf;

use anyhow::Context;

use pardis::ml::fewshot::{load_split, EpisodeConfig};
use pardis::ml::hyperbolic::pohrl::{
    check_counts, run_benchmark, BenchmarkConfig, Checkpoints, EncoderChoice, Method, PohrlConfig,
};
use pardis::ml::train::{StepMetrics, TrainCallback};
use pardis_datasets::{DataRoots, Origin};

use crate::output::{progress, table};

/// Arguments of `pardis ml fewrel`.
#[derive(Debug, clap::Args)]
pub(super) struct FewrelArgs {
    /// `tiny` (a 2-layer BERT trained from scratch with each method) or `minilm`
    /// (all-MiniLM-L6-v2, fetch it with scripts/fetch-minilm; frozen, features cached, only the
    /// projection head trains, unless --fine-tune-layers is given).
    #[arg(long, default_value = "tiny")]
    encoder: String,
    /// pohrl, proto, proto-desc, pohrl-no-cone, or all; several as proto,pohrl.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    method: Vec<String>,
    /// Classes per episode (N-way); several as 5,10. The default test set has 8 relations, so
    /// 10-way needs --data semeval or another file.
    #[arg(long, value_delimiter = ',', default_value = "5")]
    n: Vec<usize>,
    /// Support instances per class (K-shot); several as 1,5.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    k: Vec<usize>,
    /// Query instances per class.
    #[arg(long, default_value_t = 5)]
    q: usize,
    /// Test episodes per method and setting (at most 1000000).
    #[arg(long, default_value_t = 1000)]
    episodes: usize,
    /// Training episodes (optimiser steps) per method and setting (at most 10000000).
    #[arg(long, default_value_t = 300)]
    steps: usize,
    /// AdamW learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// With --encoder minilm: fine-tune its last N transformer layers with each method (every
    /// training step encodes the episode; the test set is encoded again per method).
    #[arg(long, default_value_t = 0)]
    fine_tune_layers: usize,
    /// Learning rate of the encoder's trained weights (default: 2e-5 for fine-tuned MiniLM
    /// layers, --lr for the tiny encoder).
    #[arg(long)]
    encoder_lr: Option<f64>,
    /// Test set: the 8 unseen val_wiki relations (default), `semeval` (val_semeval.json), or
    /// any file in FewRel format (relations seen in training are dropped).
    #[arg(long)]
    data: Option<String>,
    /// Represent relations by their names only.
    #[arg(long)]
    no_descriptions: bool,
    /// PO-HRL's alignment and cone losses on the points the paper uses (the support
    /// representations u + α·r, alignment anchored at the relations) instead of the instance
    /// representations of support and queries.
    #[arg(long)]
    paper_losses: bool,
    /// Seed of initialisation, training and test episodes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Use at most this many instances of each training relation (first in file order).
    #[arg(long)]
    max_train_instances: Option<usize>,
    /// Use at most this many instances of each test relation (first in file order).
    #[arg(long)]
    max_test_instances: Option<usize>,
    /// Directory of the cached MiniLM features (default: `fewrel-features/` in the workspace's
    /// data cache, `datasets/cache/`).
    #[arg(long)]
    feature_cache: Option<PathBuf>,
    /// Write each trained model to DIR/<encoder>-<method>-<N>x<K>-<hash>.safetensors, the hash of
    /// every training option and of the training data (an existing file of that name stops the
    /// command before training).
    #[arg(long, value_name = "DIR", conflicts_with = "checkpoints")]
    save_checkpoints: Option<PathBuf>,
    /// Skip training: evaluate the models saved by --save-checkpoints in DIR with the same
    /// training options (a model trained with other options is refused, naming them).
    #[arg(long, value_name = "DIR")]
    checkpoints: Option<PathBuf>,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

struct Steps(indicatif::ProgressBar);

impl TrainCallback for Steps {
    fn on_step(&mut self, m: &StepMetrics) {
        self.0.inc(1);
        self.0.set_message(format!("loss {:.3}", m.loss));
    }
}

pub(super) fn run(a: FewrelArgs, roots: &DataRoots) -> anyhow::Result<()> {
    if let Some(lr) = a.encoder_lr {
        if !(lr.is_finite() && lr > 0.0) {
            anyhow::bail!("--encoder-lr must be a positive number, not {lr}");
        }
        if a.encoder == "minilm" && a.fine_tune_layers == 0 {
            anyhow::bail!(
                "--encoder-lr trains MiniLM's layers: give --fine-tune-layers N as well \
                 (the frozen encoder has none to train)"
            );
        }
    }
    // The library's count check, before any data is read.
    check_counts(a.episodes, a.steps).context("--episodes / --steps")?;
    if let Some(&k) = a.k.iter().find(|&&k| k.checked_add(a.q).is_none()) {
        anyhow::bail!(
            "--k {k} plus --q {} overflows: no relation has that many instances",
            a.q
        );
    }
    let dir = "relation-extraction/fewrel";
    let file = |rel: String| -> anyhow::Result<PathBuf> { Ok(roots.require_path(&rel)?.path) };
    let test = match a.data.as_deref() {
        None | Some("wiki") => None,
        Some("semeval") => Some(file(format!("{dir}/val_semeval.json"))?),
        Some(path) => Some(PathBuf::from(path)),
    };
    let (split, removed) = load_split(
        &file(format!("{dir}/val_wiki.json"))?,
        &file(format!("{dir}/val_nyt.json"))?,
        &file(format!("{dir}/pid2name.json"))?,
        test.as_deref(),
    )?;
    let encoder = match a.encoder.as_str() {
        "tiny" if a.fine_tune_layers > 0 => {
            anyhow::bail!("--fine-tune-layers is for --encoder minilm (tiny trains all layers)")
        }
        "tiny" => EncoderChoice::Tiny(None),
        "minilm" => {
            let cfg = roots
                .require_path("minilm/config.json")
                .context("all-MiniLM-L6-v2 is missing: run scripts/fetch-minilm")?
                .path;
            let cache = a.feature_cache.clone().or_else(|| {
                roots
                    .dirs()
                    .find(|(o, _)| *o == Origin::Cache)
                    .map(|(_, d)| d.join("fewrel-features"))
            });
            EncoderChoice::MiniLm {
                dir: cfg.parent().unwrap_or(&cfg).to_path_buf(),
                cache,
                fine_tune_layers: a.fine_tune_layers,
            }
        }
        e => anyhow::bail!("unknown --encoder {e} (tiny, minilm)"),
    };
    let methods = if a.method.iter().any(|m| m == "all") {
        Method::ALL.to_vec()
    } else {
        a.method
            .iter()
            .map(|m| Method::parse(m))
            .collect::<Result<Vec<_>, _>>()?
    };
    let shapes: Vec<EpisodeConfig> =
        a.n.iter()
            .flat_map(|&n| a.k.iter().map(move |&k| EpisodeConfig { n, k, q: a.q }))
            .collect();
    let cfg = BenchmarkConfig {
        encoder,
        methods,
        shapes,
        episodes: a.episodes,
        train_steps: a.steps,
        lr: a.lr,
        encoder_lr: a.encoder_lr.or((a.fine_tune_layers > 0).then_some(2e-5)),
        descriptions: !a.no_descriptions,
        seed: a.seed,
        pohrl: PohrlConfig {
            paper_losses: a.paper_losses,
            ..PohrlConfig::default()
        },
        max_train_instances: a.max_train_instances,
        max_test_instances: a.max_test_instances,
        checkpoints: match (a.save_checkpoints.clone(), a.checkpoints.clone()) {
            (_, Some(dir)) => Some(Checkpoints::Load(dir)),
            (Some(dir), None) => Some(Checkpoints::Save(dir)),
            (None, None) => None,
        },
    };
    let cells = (cfg.methods.len() * cfg.shapes.len()) as u64;
    let bar = progress(cells.saturating_mul(a.steps as u64), "fewrel");
    if a.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let rep = run_benchmark(
        &split,
        &cfg,
        &mut |p| bar.set_message(p.to_string()),
        &mut Steps(bar.clone()),
    )?;
    bar.finish_and_clear();
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
        return Ok(());
    }
    println!(
        "{} training relations, {} test relations{}; {} test episodes per cell, {} training \
         episodes; encoder {}",
        rep.relations.0,
        rep.relations.1,
        if removed > 0 {
            format!(" ({removed} dropped: seen in training)")
        } else {
            String::new()
        },
        a.episodes,
        a.steps,
        encoder_label(&a.encoder, a.fine_tune_layers, rep.cache_seconds)
    );
    let mut t = table([
        "method",
        "setting",
        "accuracy % (95% CI)",
        "train steps/s",
        "test episodes/s",
        "final loss",
    ]);
    for r in &rep.rows {
        t.add_row(vec![
            r.method.to_string(),
            format!("{}-way {}-shot", r.shape.n, r.shape.k),
            format!(
                "{:.2} ± {:.2}",
                100.0 * r.accuracy.mean,
                100.0 * r.accuracy.ci95
            ),
            format!("{:.1}", r.train_steps as f64 / r.train_seconds.max(1e-9)),
            format!(
                "{:.0}",
                r.accuracy.episodes as f64 / r.eval_seconds.max(1e-9)
            ),
            format!("{:.3}", r.final_loss),
        ]);
    }
    println!("{t}");
    Ok(())
}

/// What the text header says of the encoder: whether it trains with each method (the tiny
/// encoder; MiniLM with `--fine-tune-layers N`) or stays frozen with its features cached — the
/// same split as each JSON row's `fine_tuned_encoder`.
fn encoder_label(encoder: &str, fine_tune_layers: usize, cache_seconds: f64) -> String {
    match (encoder, fine_tune_layers) {
        ("tiny", _) => "tiny, trained with each method".to_string(),
        (_, 0) => format!("MiniLM, frozen (features cached in {cache_seconds:.1} s)"),
        (_, 1) => "MiniLM, top layer fine-tuned with each method (test set re-encoded per \
                   method, no feature cache)"
            .to_string(),
        (_, n) => format!(
            "MiniLM, top {n} layers fine-tuned with each method (test set re-encoded per \
             method, no feature cache)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::encoder_label;

    #[test]
    fn the_header_says_which_runs_fine_tune() {
        assert_eq!(
            encoder_label("tiny", 0, 0.0),
            "tiny, trained with each method"
        );
        assert_eq!(
            encoder_label("minilm", 0, 12.34),
            "MiniLM, frozen (features cached in 12.3 s)"
        );
        for n in [1, 2] {
            let l = encoder_label("minilm", n, 0.0);
            assert!(l.contains("fine-tuned") && !l.contains("frozen"), "{l}");
        }
        assert!(encoder_label("minilm", 2, 0.0).contains("top 2 layers"));
    }
}
