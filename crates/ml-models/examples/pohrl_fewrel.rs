//! PO-HRL and its baselines on FewRel (meta-train: val_nyt + 8 val_wiki relations; meta-test:
//! the 8 other val_wiki relations, or `--data FILE`), printed as a Markdown table.
//!
//! ```text
//! cargo run --release -p ml-models --example pohrl_fewrel -- \
//!     [--encoder tiny|minilm] [--methods proto,proto-desc,pohrl-no-cone,pohrl] \
//!     [--shapes 5x1,5x5,10x1,10x5] [--queries 5] [--episodes 1000] [--steps 300] \
//!     [--lr 1e-3] [--seed 0] [--no-descriptions] [--data FILE] [--max-train N] [--max-test N] \
//!     [--fine-tune-layers N] [--encoder-lr LR]
//! ```
//!
//! `--encoder minilm` needs `scripts/fetch-minilm` first; it stays frozen unless
//! `--fine-tune-layers N` trains its last N layers (at `--encoder-lr`, default 2e-5; the tiny
//! encoder trains at `--lr` unless `--encoder-lr` is given).
//!
//! Measured (2026-12-05 evening, release build, shared 2-core Xeon VM; 1000 test episodes, 300
//! training episodes, Q = 5; MiniLM frozen with `--max-train 200 --max-test 300`; the full table
//! and discussion are in the crate README), accuracy %:
//!
//! | encoder | setting | proto | proto-desc | pohrl-no-cone | pohrl |
//! |---|---|---|---|---|---|
//! | MiniLM | 5-way 1-shot | 52.15 ± 0.78 | 46.91 ± 0.82 | 44.20 ± 0.78 | 50.74 ± 0.83 |
//! | MiniLM | 5-way 5-shot | 72.04 ± 0.72 | 55.13 ± 0.85 | 67.62 ± 0.75 | 66.46 ± 0.76 |
//! | tiny | 5-way 1-shot | 35.80 ± 0.70 | 22.09 ± 0.33 | 34.46 ± 0.64 | 37.72 ± 0.72 |

use std::path::PathBuf;
use std::time::Instant;

use ml_models::fewshot::{load_split, EpisodeConfig};
use ml_models::hyperbolic::pohrl::{
    run_benchmark, BenchmarkConfig, EncoderChoice, Method, PohrlConfig,
};
use ml_models::train::NoCallback;
use pardis_datasets::DataRoots;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str, d: &str| -> String {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| d.to_string())
    };
    let roots = DataRoots::from_env();
    let file = |rel: &str| -> Result<PathBuf, String> {
        roots
            .require_path(rel)
            .map(|l| l.path)
            .map_err(|e| e.to_string())
    };
    let dir = "relation-extraction/fewrel";
    let data = args
        .iter()
        .position(|a| a == "--data")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from);
    let (split, removed) = load_split(
        &file(&format!("{dir}/val_wiki.json"))?,
        &file(&format!("{dir}/val_nyt.json"))?,
        &file(&format!("{dir}/pid2name.json"))?,
        data.as_deref(),
    )?;
    let encoder = match flag("--encoder", "tiny").as_str() {
        "minilm" => {
            let cfg = file("minilm/config.json")
                .map_err(|e| format!("{e} (run scripts/fetch-minilm)"))?;
            EncoderChoice::MiniLm {
                dir: cfg.parent().expect("a file has a parent").to_path_buf(),
                cache: None,
                fine_tune_layers: flag("--fine-tune-layers", "0").parse()?,
            }
        }
        _ => EncoderChoice::Tiny(None),
    };
    let q: usize = flag("--queries", "5").parse()?;
    let shapes = flag("--shapes", "5x1")
        .split(',')
        .map(|s| -> Result<EpisodeConfig, Box<dyn std::error::Error>> {
            let (n, k) = s.split_once('x').ok_or("shapes look like 5x1")?;
            Ok(EpisodeConfig {
                n: n.parse()?,
                k: k.parse()?,
                q,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let methods = flag("--methods", "proto,proto-desc,pohrl-no-cone,pohrl")
        .split(',')
        .map(Method::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = BenchmarkConfig {
        encoder,
        methods,
        shapes,
        episodes: flag("--episodes", "1000").parse()?,
        train_steps: flag("--steps", "300").parse()?,
        lr: flag("--lr", "1e-3").parse()?,
        encoder_lr: flag("--encoder-lr", "")
            .parse()
            .ok()
            .or_else(|| (flag("--fine-tune-layers", "0") != "0").then_some(2e-5)),
        descriptions: !args.iter().any(|a| a == "--no-descriptions"),
        seed: flag("--seed", "0").parse()?,
        pohrl: PohrlConfig::default(),
        max_train_instances: flag("--max-train", "0")
            .parse()
            .ok()
            .filter(|&m: &usize| m > 0),
        max_test_instances: flag("--max-test", "0")
            .parse()
            .ok()
            .filter(|&m: &usize| m > 0),
        checkpoints: None,
    };
    let start = Instant::now();
    let rep = run_benchmark(
        &split,
        &cfg,
        &mut |p| eprintln!("[{:>7.1}s] {p}", start.elapsed().as_secs_f64()),
        &mut NoCallback,
    )?;
    println!(
        "{} training relations, {} test relations ({removed} removed as seen in training); \
         {} test episodes per cell; feature cache {:.1} s",
        rep.relations.0, rep.relations.1, cfg.episodes, rep.cache_seconds
    );
    println!("| method | N-way K-shot | accuracy % (95% CI) | train steps/s | test episodes/s | final loss |");
    println!("|---|---|---|---|---|---|");
    for r in &rep.rows {
        println!(
            "| {} | {}-way {}-shot | {:.2} ± {:.2} | {:.1} | {:.0} | {:.3} |",
            r.method,
            r.shape.n,
            r.shape.k,
            100.0 * r.accuracy.mean,
            100.0 * r.accuracy.ci95,
            r.train_steps as f64 / r.train_seconds.max(1e-9),
            r.accuracy.episodes as f64 / r.eval_seconds.max(1e-9),
            r.final_loss
        );
    }
    eprintln!("total {:.1} s", start.elapsed().as_secs_f64());
    Ok(())
}
