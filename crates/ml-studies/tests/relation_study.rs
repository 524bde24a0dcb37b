//! The MiniLM relation study's variants and runner on a seeded micro BERT (no download needed).

use std::collections::HashMap;

use ml_models::candle::{DType, Device, Tensor};
use ml_models::data::RelationExample;
use ml_models::models::{Bert, BertConfig};
use ml_models::qlora::LayerKind;
use ml_studies::relation_study::{
    relation_summary, relation_variants, run_relation_study, RelationStudyConfig,
};
use ml_studies::study::StudyHooks;

/// A scratch directory unique to this test process.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("ml-studies-it-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn minilm_study_variants_cover_the_grid() {
    let model = BertConfig::new(30522, 384, 6, 12, 1536, 512);
    let cfg = RelationStudyConfig {
        ranks: vec![1, 4, 16, 64],
        ..RelationStudyConfig::default()
    };
    let v = relation_variants(&cfg, &model);
    assert_eq!(v.len(), 4 * 3 + 3);
    for var in &v {
        for l in 0..6 {
            let rank = |k| var.lora.adapter_for(k, l).map_or(0, |a| a.rank);
            assert_eq!(rank(LayerKind::Q), var.attention_rank, "{}", var.name);
            assert_eq!(rank(LayerKind::O), var.attention_rank, "{}", var.name);
            assert_eq!(rank(LayerKind::Up), var.mlp_rank, "{}", var.name);
            assert_eq!(rank(LayerKind::Down), var.mlp_rank, "{}", var.name);
        }
    }
    // Budget of r = 8 everywhere: 8·(4·768 + 2·1920) = 55,296 adapter weights per block.
    let budget: Vec<(usize, usize)> = v[12..]
        .iter()
        .map(|x| (x.attention_rank, x.mlp_rank))
        .collect();
    assert_eq!(budget, vec![(16, 2), (8, 8), (2, 13)]);
}

/// A micro BERT (d = 64 so the NF4 blocks divide it) with seeded random weights, written to
/// `path`.
fn write_micro_bert(cfg: &BertConfig, path: &std::path::Path) {
    let mut rng = ml_models::train::SeededInit::new(7);
    let mut m = HashMap::new();
    let mut put = |name: String, shape: &[usize], std: f32| {
        let t = if std == 0.0 {
            Tensor::ones(shape, DType::F32, &Device::Cpu).unwrap()
        } else {
            rng.normal(shape, std, &Device::Cpu).unwrap()
        };
        m.insert(name, t);
    };
    let (d, ff) = (cfg.hidden_size, cfg.intermediate_size);
    put(
        "embeddings.word_embeddings.weight".into(),
        &[cfg.vocab_size, d],
        0.5,
    );
    put(
        "embeddings.position_embeddings.weight".into(),
        &[cfg.max_position_embeddings, d],
        0.1,
    );
    put(
        "embeddings.token_type_embeddings.weight".into(),
        &[cfg.type_vocab_size, d],
        0.1,
    );
    let norm = |put: &mut dyn FnMut(String, &[usize], f32), p: &str| {
        put(format!("{p}.LayerNorm.weight"), &[d], 0.0);
        put(format!("{p}.LayerNorm.bias"), &[d], 0.01);
    };
    norm(&mut put, "embeddings");
    for l in 0..cfg.num_hidden_layers {
        let p = format!("encoder.layer.{l}");
        for (n, o, i) in [
            ("attention.self.query", d, d),
            ("attention.self.key", d, d),
            ("attention.self.value", d, d),
            ("attention.output.dense", d, d),
            ("intermediate.dense", ff, d),
            ("output.dense", d, ff),
        ] {
            put(format!("{p}.{n}.weight"), &[o, i], 0.1);
            put(format!("{p}.{n}.bias"), &[o], 0.01);
        }
        norm(&mut put, &format!("{p}.attention.output"));
        norm(&mut put, &format!("{p}.output"));
    }
    ml_models::candle::safetensors::save(&m, path).unwrap();
}

#[test]
fn relation_study_runs_every_variant_once_per_seed() {
    struct Quiet;
    impl StudyHooks for Quiet {}
    let cfg_b = BertConfig::new(40, 64, 2, 2, 128, 16);
    let dir = scratch("relation-study");
    let path = dir.join("model.safetensors");
    write_micro_bert(&cfg_b, &path);
    // Three relations, ten instances each, told apart by one token.
    let per_class: Vec<Vec<RelationExample>> = (0..3u32)
        .map(|c| {
            (0..10u32)
                .map(|i| RelationExample {
                    ids: vec![1, 2, 10 + c, 3, 20 + (i % 5), 4],
                    head: 1,
                    tail: 3,
                    label: c,
                })
                .collect()
        })
        .collect();
    let mut cfg = RelationStudyConfig {
        ranks: vec![1, 8],
        seeds: vec![0, 1],
        ..RelationStudyConfig::default()
    };
    cfg.run.train_per_class = 4;
    cfg.run.test_per_class = 2;
    cfg.run.batch_size = 4;
    let variants = relation_variants(&cfg, &cfg_b);
    let n_variants = variants.len();
    let rows = run_relation_study(
        &cfg,
        variants,
        &mut || Bert::load(cfg_b, &path),
        &per_class,
        0,
        &mut Quiet,
    )
    .unwrap();
    assert_eq!(rows.len(), n_variants * 2);
    // Variant-major, seeds in order.
    assert_eq!(rows[0].seed, 0);
    assert_eq!(rows[1].seed, 1);
    assert_eq!(rows[0].variant, rows[1].variant);
    // The balanced budget split (r = 8 on both) reuses the rank sweep's run of the same seed.
    for seed in [0, 1] {
        let pick = |name: &str| {
            rows.iter()
                .find(|r| r.seed == seed && r.variant.name.starts_with(name))
                .unwrap()
        };
        let (a, b) = (pick("r=8 both"), pick("budget balanced"));
        assert_eq!((a.accuracy, a.final_loss), (b.accuracy, b.final_loss));
    }
    // Different seeds are different runs (split, order and initialisation).
    assert_ne!(rows[0].final_loss, rows[1].final_loss);
    let s = relation_summary(&rows);
    assert_eq!(s.len(), n_variants);
    assert!(s.iter().all(|r| r.seeds == 2 && r.accuracy.is_finite()));
    std::fs::remove_dir_all(dir).ok();
}
