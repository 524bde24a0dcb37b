//! QLoRA fine-tuning of all-MiniLM-L6-v2 for supervised relation classification on FewRel
//! `val_wiki.json` (16 relations, instance split 80/20), with the forward latency of the encoder,
//! the measured peak heap of training (counting global allocator) and memory-model's
//! prediction for the same model and setup.
//!
//! ```text
//! scripts/fetch-minilm
//! cargo run --release -p ml-models --example minilm_fewrel -- \
//!     [--train-per-class 40] [--test-per-class 40] [--epochs 1] [--rank 8] [--alpha 16] \
//!     [--target all|attention|mlp] [--base nf4-dq|nf4|int8|f32] [--batch 16] [--lr 1e-3]
//! ```

use std::path::PathBuf;
use std::time::Instant;

use ml_models::candle::Device;
use ml_models::data::{encode_fewrel, pad_batch, read_fewrel, SubwordTokenizer};
use ml_models::models::{Bert, BertConfig};
use ml_models::qlora::relation::{fine_tune_relations, RelationConfig};
use ml_models::qlora::{BaseFormat, LayerKind, LoraConfig};
use ml_models::train::{CountingAllocator, StepMetrics, TrainCallback};
use pardis_datasets::DataRoots;

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

struct Progress(Instant);
impl TrainCallback for Progress {
    fn on_step(&mut self, m: &StepMetrics) {
        if m.step.is_multiple_of(10) {
            eprintln!(
                "[{:>6.1}s] step {} loss {:.4}",
                self.0.elapsed().as_secs_f64(),
                m.step,
                m.loss
            );
        }
    }
}

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
            .map_err(|e| format!("{e} (run scripts/fetch-minilm)"))
    };
    let cfg_path = file("minilm/config.json")?;
    let bcfg = BertConfig::from_file(&cfg_path)?;
    let tok = SubwordTokenizer::from_file(&file("minilm/tokenizer.json")?, 128)?;
    let mut bert = Bert::load(bcfg, &file("minilm/model.safetensors")?)?;
    let pad = tok.token_id("[PAD]").unwrap_or(0);

    // Forward latency of the f32 encoder (batch 1 and 16 of one FewRel-length sentence).
    let probe = tok.encode("The Eiffel Tower , located in Paris , was completed in 1889 by the company of Gustave Eiffel .")?;
    for b in [1usize, 16] {
        let seqs: Vec<&[u32]> = vec![probe.as_slice(); b];
        let (ids, mask) = pad_batch(&seqs, pad, &Device::Cpu)?;
        bert.forward(&ids, &mask, false)?;
        let t = Instant::now();
        let reps = 5;
        for _ in 0..reps {
            bert.forward(&ids, &mask, false)?;
        }
        println!(
            "MiniLM f32 forward, batch {b} × {} tokens: {:.1} ms",
            probe.len(),
            t.elapsed().as_secs_f64() * 1e3 / reps as f64
        );
    }

    let data = read_fewrel(&file("relation-extraction/fewrel/val_wiki.json")?)?;
    let per_class = encode_fewrel(&data, &tok)?;
    let base = match flag("--base", "nf4-dq").as_str() {
        "f32" => BaseFormat::F32,
        "int8" => BaseFormat::Int8,
        "nf4" => BaseFormat::Nf4 {
            double_quant: false,
        },
        _ => BaseFormat::Nf4 { double_quant: true },
    };
    let kinds: Vec<LayerKind> = match flag("--target", "all").as_str() {
        "attention" => LayerKind::ATTENTION.to_vec(),
        "mlp" => vec![LayerKind::Up, LayerKind::Down],
        _ => LayerKind::ALL.to_vec(),
    };
    let rank: usize = flag("--rank", "8").parse()?;
    let alpha: f32 = flag("--alpha", "16").parse()?;
    let cfg = RelationConfig {
        train_per_class: flag("--train-per-class", "40").parse()?,
        test_per_class: flag("--test-per-class", "40").parse()?,
        epochs: flag("--epochs", "1").parse()?,
        batch_size: flag("--batch", "16").parse()?,
        lr: flag("--lr", "1e-3").parse()?,
        lora: LoraConfig::uniform(&kinds, rank, alpha, base),
        ..RelationConfig::default()
    };
    let longest = per_class
        .iter()
        .flatten()
        .map(|e| e.ids.len())
        .max()
        .unwrap_or(0);
    HEAP.reset_peak();
    let rep = fine_tune_relations(
        &mut bert,
        &per_class,
        pad,
        &cfg,
        &mut Progress(Instant::now()),
    )?;
    let peak = HEAP.peak_since_reset();
    println!(
        "FewRel val_wiki, {} relations: {} train / {} test instances, {} steps of batch {} in {:.0} s",
        per_class.len(),
        rep.n_train,
        rep.n_test,
        rep.steps,
        cfg.batch_size,
        rep.seconds
    );
    println!(
        "base {:?}, r={rank}, α={alpha}, target {}: trainable {} parameters, projections {:.2} MiB",
        base,
        flag("--target", "all"),
        rep.trainable,
        rep.base_bytes as f64 / 1048576.0
    );
    println!(
        "test accuracy: {:.4} before fine-tuning (random head), {:.4} after",
        rep.accuracy_before.unwrap_or(f32::NAN),
        rep.accuracy
    );
    println!(
        "first/last training loss: {:.4} / {:.4}",
        rep.losses.first().copied().unwrap_or(f32::NAN),
        rep.losses.last().copied().unwrap_or(f32::NAN)
    );
    println!(
        "measured peak heap during build + fine-tuning + evaluation: {:.1} MiB",
        peak as f64 / 1048576.0
    );
    let predicted = predict(&cfg_path, &cfg, &kinds, rank, longest)?;
    println!(
        "memory-model prediction (fp32, Adam, micro-batch {}, seq {longest}): {:.1} MiB",
        cfg.batch_size,
        predicted as f64 / 1048576.0
    );
    Ok(())
}

/// memory-model's per-device total for this fine-tuning run.
fn predict(
    config_json: &std::path::Path,
    cfg: &RelationConfig,
    kinds: &[LayerKind],
    rank: usize,
    seq: usize,
) -> Result<u64, Box<dyn std::error::Error>> {
    use memory_model::{
        estimate, BaseQuant, LoraRanks, ModelConfig, Peft, Precision, TrainingSetup,
    };
    let model = ModelConfig::from_hf_config_json(&std::fs::read_to_string(config_json)?)?;
    let r = |k: LayerKind| if kinds.contains(&k) { rank as u64 } else { 0 };
    let base = match cfg.lora.base {
        BaseFormat::Nf4 { double_quant } => BaseQuant::Nf4 { double_quant },
        BaseFormat::Int8 => BaseQuant::Int8,
        _ => BaseQuant::None,
    };
    let setup = TrainingSetup {
        micro_batch: cfg.batch_size as u64,
        seq_len: seq as u64,
        precision: Precision::Fp32,
        peft: Some(Peft {
            lora: LoraRanks {
                q: r(LayerKind::Q),
                k: r(LayerKind::K),
                v: r(LayerKind::V),
                o: r(LayerKind::O),
                mlp: r(LayerKind::Up),
            },
            base,
        }),
        overhead_bytes: 0,
        ..TrainingSetup::default()
    };
    Ok(estimate(&model, &setup)?.per_device.total())
}
