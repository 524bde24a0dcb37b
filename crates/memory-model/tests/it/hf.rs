//! Hugging Face `config.json` files (copies of the public configs in tests/data).

use memory_model::{MemoryError, MlpKind, ModelConfig, NormKind, PositionKind};

fn load(name: &str) -> ModelConfig {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    ModelConfig::from_hf_config_file(&path).unwrap()
}

#[test]
fn llama2_config_gives_the_preset() {
    let m = load("llama-2-7b-hf.config.json");
    assert_eq!(m.num_parameters(), 6_738_415_616);
    let preset = ModelConfig::preset("llama2-7b").unwrap();
    assert_eq!(
        ModelConfig {
            name: preset.name.clone(),
            ..m
        },
        preset
    );
}

#[test]
fn mixtral_config_gives_the_preset_count() {
    let m = load("mixtral-8x7b-v0.1.config.json");
    assert_eq!(m.moe.unwrap().num_experts, 8);
    assert_eq!(m.num_parameters(), 46_702_792_704);
}

#[test]
fn gpt2_and_neox_configs() {
    let g = load("gpt2.config.json");
    assert_eq!(
        (g.mlp, g.norm, g.position, g.tied_embeddings),
        (
            MlpKind::Gelu,
            NormKind::LayerNorm,
            PositionKind::Learned,
            true
        )
    );
    assert_eq!(g.num_parameters(), 124_439_808);
    // EleutherAI/pythia-1.4b: 1,414,647,808 parameters (untied, rotary, biases everywhere).
    assert_eq!(
        load("pythia-1.4b.config.json").num_parameters(),
        1_414_647_808
    );
}

#[test]
fn bert_config_minilm() {
    // sentence-transformers/all-MiniLM-L6-v2 (`BertModel`): 22,713,216 parameters, the count
    // `sum(p.numel() for p in model.parameters())` gives for the published checkpoint.
    let m = load("all-minilm-l6-v2.config.json");
    assert_eq!(
        (m.num_layers, m.hidden, m.token_types, m.pooler),
        (6, 384, 2, true)
    );
    assert_eq!(m.num_parameters(), 22_713_216);
    let base = ModelConfig::preset("bert-base").unwrap();
    let mut shrunk = ModelConfig {
        name: m.name.clone(),
        ..base
    };
    (shrunk.num_layers, shrunk.hidden, shrunk.num_heads) = (6, 384, 12);
    (shrunk.num_kv_heads, shrunk.head_dim, shrunk.ffn_hidden) = (12, 32, 1536);
    assert_eq!(m, shrunk);
}

#[test]
fn bad_configs_name_the_field() {
    let missing = r#"{"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
        "intermediate_size": 11008, "vocab_size": 32000}"#;
    let e = ModelConfig::from_hf_config_json(missing).unwrap_err();
    assert!(
        matches!(&e, MemoryError::ConfigField { field, .. } if field == "num_hidden_layers"),
        "{e}"
    );
    assert!(e.to_string().contains("num_hidden_layers"));

    let wrong = r#"{"model_type": "gpt2", "n_embd": "768"}"#;
    let e = ModelConfig::from_hf_config_json(wrong).unwrap_err();
    assert!(
        matches!(&e, MemoryError::ConfigField { field, .. } if field == "n_embd"),
        "{e}"
    );

    let neg = r#"{"model_type": "gpt2", "n_embd": -768}"#;
    assert!(matches!(
        ModelConfig::from_hf_config_json(neg),
        Err(MemoryError::ConfigField { .. })
    ));

    let e = ModelConfig::from_hf_config_json(r#"{"model_type": "t5"}"#).unwrap_err();
    assert!(matches!(e, MemoryError::UnknownArchitecture(ref t) if t == "t5"));
    assert!(matches!(
        ModelConfig::from_hf_config_json("{\"model_type\": "),
        Err(MemoryError::Json(_))
    ));
    assert!(matches!(
        ModelConfig::from_hf_config_json("[1, 2]"),
        Err(MemoryError::ConfigField { .. })
    ));
    assert!(matches!(
        ModelConfig::from_hf_config_file(std::path::Path::new("/nonexistent/config.json")),
        Err(MemoryError::InvalidInput(_))
    ));
}
