//! The QLoRA key-variables study (Shen et al., CMC 2025) on a small GPT, with the measured peak
//! heap per variant (counting global allocator) next to memory-model's prediction.
//!
//! ```text
//! cargo run --release -p ml-models --example qlora_study -- --quick [--out DIR] [--preset P]
//! ```

use std::path::PathBuf;

use memory_model::{
    estimate, BaseQuant, LoraRanks, MlpKind, ModelConfig, NormKind, Peft, PositionKind, Precision,
    TrainingSetup,
};
use ml_models::core::data::data_roots;
use ml_models::core::CountingAllocator;
use ml_models::qlora::plot::plot_rank_sweep;
use ml_models::qlora::study::{run_study, StudyConfig, StudyData, StudyHooks, Variant};
use ml_models::qlora::variants::Method;
use ml_models::qlora::{BaseFormat, GptConfig, LayerKind};

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
    let mut cfg = if args.iter().any(|a| a == "--quick") {
        StudyConfig::quick()
    } else {
        StudyConfig::full()
    };
    if let Some(p) = flag("--preset") {
        cfg.preset = p;
    }
    let out = PathBuf::from(flag("--out").unwrap_or_else(|| "qlora-study-out".into()));
    std::fs::create_dir_all(&out)?;
    cfg.pretrained_path = Some(out.join(format!("pretrained-{}.safetensors", cfg.preset)));
    let roots = data_roots(
        std::env::var_os("PARDIS_DATA").map(PathBuf::from),
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.."),
    );
    let data = StudyData::load(&roots)?;
    let mut hooks = Hooks;
    let rep = run_study(&cfg, &data, &mut hooks)?;
    println!(
        "model parameters: {}; source ppl {:.3}; target ppl before fine-tuning {:.3}; pretrain {:.0} tokens/s\n",
        rep.model_params, rep.source_perplexity, rep.base_target_perplexity, rep.pretrain_tokens_per_s
    );
    println!("{}", rep.to_markdown());
    let png = out.join("qlora-rank-sweep.png");
    plot_rank_sweep(&rep, &png)?;
    println!("plot: {}", png.display());
    Ok(())
}
