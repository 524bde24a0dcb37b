//! Criterion benchmarks of `ml-models`: NF4 fused dequantize-matmul vs dense f32 matmul vs
//! dequantize-then-matmul, NF4 quantization, training tokens/s of the mini GPT, and the forward
//! latency of all-MiniLM-L6-v2 (f32 and NF4; skipped unless `scripts/fetch-minilm` has run), and
//! PO-HRL/baseline test episodes and head training steps on MiniLM-width cached features, and
//! a fine-tuning step of MiniLM's last layers on an episode-sized batch.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pardis::ml::candle::{Device, Tensor};
use pardis::ml::models::{Gpt, GptConfig};
use pardis::ml::qlora::{
    fused_matmul_t, BaseFormat, LayerKind, LoraConfig, Nf4Matrix, QuantizedMatrix,
};
use pardis::ml::train::{ParamStore, SeededInit, TrainConfig, Trainer};

fn normal(n: usize, seed: u64) -> Vec<f32> {
    SeededInit::new(seed)
        .normal(&[n], 0.05, &Device::Cpu)
        .unwrap()
        .to_vec1()
        .unwrap()
}

fn nf4_matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("nf4_matmul");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let (n, k) = (1024, 1024);
    let w = normal(n * k, 1);
    let q = Nf4Matrix::quantize(&w, n, k, true).unwrap();
    let wt = Tensor::from_vec(w, (n, k), &Device::Cpu).unwrap();
    for m in [1usize, 16, 128] {
        let x = normal(m * k, 2);
        let xt = Tensor::from_vec(x.clone(), (m, k), &Device::Cpu).unwrap();
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        g.bench_with_input(BenchmarkId::new("fused_nf4", m), &m, |b, _| {
            b.iter(|| fused_matmul_t(&x, &q))
        });
        g.bench_with_input(BenchmarkId::new("dense_f32_candle", m), &m, |b, _| {
            b.iter(|| xt.matmul(&wt.t().unwrap()).unwrap())
        });
        g.bench_with_input(BenchmarkId::new("dequantize_then_matmul", m), &m, |b, _| {
            b.iter(|| {
                let d = Tensor::from_vec(q.dequantize(), (n, k), &Device::Cpu).unwrap();
                xt.matmul(&d.t().unwrap()).unwrap()
            })
        });
    }
    g.finish();
}

fn nf4_quantize(c: &mut Criterion) {
    let mut g = c.benchmark_group("nf4_quantize");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let w = normal(1 << 20, 3);
    g.throughput(Throughput::Elements(1 << 20));
    for dq in [false, true] {
        g.bench_with_input(
            BenchmarkId::new("quantize_1M", if dq { "dq" } else { "plain" }),
            &dq,
            |b, &dq| b.iter(|| Nf4Matrix::quantize(&w, 1024, 1024, dq).unwrap()),
        );
    }
    g.finish();
}

fn train_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("train_step_mini_gpt");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));
    let (batch, seq) = (8usize, 64usize);
    g.throughput(Throughput::Elements((batch * seq) as u64));
    let ids: Vec<u32> = (0..batch * seq).map(|i| (i * 31 % 67) as u32).collect();
    let x = Tensor::from_vec(ids.clone(), (batch, seq), &Device::Cpu).unwrap();
    let y = Tensor::from_vec(ids, (batch, seq), &Device::Cpu).unwrap();
    for method in ["full", "lora_f32_r8", "qlora_nf4_dq_r8"] {
        let mut store = ParamStore::new();
        let mut init = SeededInit::new(1);
        let mut gpt = Gpt::new(GptConfig::mini(68), &mut store, &mut init).unwrap();
        let base = match method {
            "full" => None,
            "lora_f32_r8" => Some(BaseFormat::F32),
            _ => Some(BaseFormat::Nf4 { double_quant: true }),
        };
        if let Some(b) = base {
            gpt.apply_lora(
                &LoraConfig::uniform(&LayerKind::ALL, 8, 16.0, b),
                &mut store,
                &mut init,
            )
            .unwrap();
        }
        let cfg = TrainConfig {
            max_steps: usize::MAX,
            steps_per_epoch: 1,
            ..TrainConfig::default()
        };
        let mut tr = Trainer::new(cfg, &store).unwrap();
        g.bench_function(method, |b| {
            b.iter(|| {
                // One forward, backward and AdamW update per iteration.
                tr.step_once(&mut |_| gpt.loss(&x, &y, true)).unwrap()
            })
        });
    }
    g.finish();
}

/// The MiniLM weights' directory, its config and the benchmark sentence's word pieces; `None`
/// (after saying so) without the weights.
fn minilm_fixture(
    bench: &str,
) -> Option<(std::path::PathBuf, pardis::ml::models::BertConfig, Vec<u32>)> {
    use pardis::ml::data::SubwordTokenizer;
    use pardis::ml::models::BertConfig;
    let roots = pardis_datasets::DataRoots::from_env();
    let Some(dir) = roots
        .locate_path("minilm/model.safetensors")
        .and_then(|l| l.path.parent().map(std::path::Path::to_path_buf))
    else {
        eprintln!("{bench}: skipped, run scripts/fetch-minilm first");
        return None;
    };
    let tok = SubwordTokenizer::from_file(&dir.join("tokenizer.json"), 128).unwrap();
    let cfg = BertConfig::from_file(&dir.join("config.json")).unwrap();
    let ids = tok
        .encode("The Eiffel Tower , located in Paris , was completed in 1889 by the company of Gustave Eiffel .")
        .unwrap();
    Some((dir, cfg, ids))
}

fn minilm_forward(c: &mut Criterion) {
    use pardis::ml::data::pad_batch;
    use pardis::ml::models::Bert;
    let Some((dir, cfg, ids)) = minilm_fixture("minilm_forward") else {
        return;
    };
    let mut g = c.benchmark_group("minilm_forward");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_millis(500));
    for base in ["f32", "nf4_dq"] {
        let mut bert = Bert::load(cfg, &dir.join("model.safetensors")).unwrap();
        if base == "nf4_dq" {
            let lc = LoraConfig {
                rules: Vec::new(),
                ..LoraConfig::default()
            };
            bert.apply_lora(&lc, &mut ParamStore::new(), &mut SeededInit::new(0))
                .unwrap();
        }
        for batch in [1usize, 16] {
            let seqs = vec![ids.as_slice(); batch];
            let (x, mask) = pad_batch(&seqs, 0, &Device::Cpu).unwrap();
            g.throughput(Throughput::Elements((batch * ids.len()) as u64));
            g.bench_with_input(BenchmarkId::new(base, batch), &batch, |b, _| {
                b.iter(|| bert.forward(&x, &mask, false).unwrap())
            });
        }
    }
    g.finish();
}

/// PO-HRL and its baselines on cached frozen-encoder features of MiniLM's width (2 × 384):
/// one 5-way 1-shot 5-query test episode (projection head + classification), and one training
/// step of the head (forward with the method's loss, backward, AdamW).
fn pohrl_episode(c: &mut Criterion) {
    use pardis::ml::hyperbolic::pohrl::{forward, EpisodeTensors, Method, PohrlConfig};
    use pardis::ml::qlora::Linear;
    use pardis::ml::train::{AdamW, AdamWConfig};
    let mut g = c.benchmark_group("pohrl_episode");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let (n, k, q, f) = (5usize, 1usize, 5usize, 768usize);
    let cfg = PohrlConfig::default();
    let feats = |rows: usize, seed: u64| {
        Tensor::from_vec(normal(rows * f, seed), (rows, f), &Device::Cpu).unwrap()
    };
    let (s, qx, r) = (feats(n * k, 1), feats(n * q, 2), feats(n, 3));
    let labels: Vec<u32> = (0..n as u32).flat_map(|c| [c; 5]).collect();
    for method in Method::ALL {
        let mut store = ParamStore::new();
        let head = Linear::new(
            "head",
            f,
            cfg.proj_dim,
            0.036,
            &mut store,
            &mut SeededInit::new(0),
        )
        .unwrap();
        let view = head.detached();
        let project = |h: &Linear, train: bool| EpisodeTensors {
            support: h
                .forward(&s, train)
                .unwrap()
                .reshape((n, k, cfg.proj_dim))
                .unwrap(),
            query: h.forward(&qx, train).unwrap(),
            relations: h.forward(&r, train).unwrap(),
        };
        g.bench_function(BenchmarkId::new("test_episode", method.name()), |b| {
            b.iter(|| forward(method, &cfg, &project(&view, false), None).unwrap())
        });
        let mut opt = AdamW::new(&store, AdamWConfig::default()).unwrap();
        g.bench_function(BenchmarkId::new("train_step", method.name()), |b| {
            b.iter(|| {
                let (_, loss) =
                    forward(method, &cfg, &project(&head, true), Some(&labels)).unwrap();
                let grads = loss.unwrap().backward().unwrap();
                opt.step(&grads, 1e-3, Some(1.0)).unwrap()
            })
        });
    }
    g.finish();
}

/// One fine-tuning step of all-MiniLM-L6-v2 with its last `n` layers trainable (n = 1, 2):
/// a 5-way 1-shot 5-query episode's 30 instances plus 5 relation texts, modelled as 35 copies
/// of a 26-word-piece sentence, forward through the whole encoder (the frozen layers build no
/// graph), backward through the trainable layers, AdamW update. Skipped without the weights.
fn minilm_finetune_step(c: &mut Criterion) {
    use pardis::ml::data::pad_batch;
    use pardis::ml::models::Bert;
    let Some((dir, cfg, ids)) = minilm_fixture("minilm_finetune_step") else {
        return;
    };
    let seqs = vec![ids.as_slice(); 35];
    let (x, mask) = pad_batch(&seqs, 0, &Device::Cpu).unwrap();
    let mut g = c.benchmark_group("minilm_finetune_step");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    for layers in [1usize, 2] {
        let mut store = ParamStore::new();
        let mut bert = Bert::load(cfg, &dir.join("model.safetensors")).unwrap();
        bert.unfreeze_last(layers, &mut store).unwrap();
        let tcfg = TrainConfig {
            max_steps: usize::MAX,
            steps_per_epoch: 1,
            ..TrainConfig::default()
        };
        let mut tr = Trainer::new(tcfg, &store).unwrap();
        g.bench_with_input(BenchmarkId::new("episode_5x1", layers), &layers, |b, _| {
            b.iter(|| {
                tr.step_once(&mut |_| Ok(bert.forward(&x, &mask, true)?.sqr()?.mean_all()?))
                    .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    nf4_matmul,
    nf4_quantize,
    train_step,
    minilm_forward,
    pohrl_episode,
    minilm_finetune_step
);
criterion_main!(benches);
