//! Exact parameter counts of the zoo.

use memory_model::ModelConfig;

fn count(name: &str) -> u64 {
    ModelConfig::preset(name).unwrap().num_parameters()
}

#[test]
fn llama_family_matches_hugging_face_counts() {
    // Counts reported by `sum(p.numel() for p in model.parameters())` on the Hugging Face
    // checkpoints (meta-llama/*, mistralai/Mixtral-8x7B-v0.1), as quoted in their model cards
    // and in countless reproductions.
    assert_eq!(count("llama2-7b"), 6_738_415_616);
    assert_eq!(count("llama2-13b"), 13_015_864_320);
    assert_eq!(count("llama2-70b"), 68_976_648_192);
    assert_eq!(count("llama3-8b"), 8_030_261_248);
    assert_eq!(count("llama3-70b"), 70_553_706_496);
    assert_eq!(count("mixtral-8x7b"), 46_702_792_704);
}

#[test]
fn gpt2_small_matches_hugging_face_count() {
    // `GPT2LMHeadModel.from_pretrained("gpt2")`: 124,439,808 parameters (tied head).
    assert_eq!(count("gpt2"), 124_439_808);
}

#[test]
fn bert_matches_hugging_face_counts() {
    // `BertModel.from_pretrained("bert-base-uncased")` / `("bert-large-uncased")`:
    // `sum(p.numel() for p in model.parameters())` = 109,482,240 / 335,141,888 (encoder, token
    // type embeddings and pooler; the masked-LM decoder is tied to the word embeddings).
    assert_eq!(count("bert-base"), 109_482_240);
    assert_eq!(count("bert-large"), 335_141_888);
    // Closed form: embeddings (V + 512 + 2)·h + 2h, 12h² + 13h per layer, pooler h² + h.
    let (l, h) = (12u64, 768u64);
    let closed = (30522 + 512 + 2) * h + 2 * h + l * (12 * h * h + 13 * h) + h * h + h;
    assert_eq!(count("bert-base"), closed);
}

/// Closed form for a GPT-3-style model (Brown et al. 2020; Narayanan et al. SC'21 eq. 2 without
/// the approximation): per layer `12h² + 13h` (attention `4h² + 4h`, MLP `8h² + 5h`, two
/// LayerNorms `4h`), embeddings `(V + s)·h`, final LayerNorm `2h`.
fn gpt3_closed_form(l: u64, h: u64) -> u64 {
    l * (12 * h * h + 13 * h) + (50257 + 2048) * h + 2 * h
}

#[test]
fn gpt3_family_matches_closed_form() {
    for (name, l, h, approx) in [
        ("gpt3-125m", 12, 768, 125e6),
        ("gpt3-350m", 24, 1024, 350e6),
        ("gpt3-760m", 24, 1536, 760e6),
        ("gpt3-1.3b", 24, 2048, 1.3e9),
        ("gpt3-2.7b", 32, 2560, 2.7e9),
        ("gpt3-6.7b", 32, 4096, 6.7e9),
        ("gpt3-13b", 40, 5120, 13e9),
        ("gpt3-175b", 96, 12288, 175e9),
    ] {
        let n = count(name);
        assert_eq!(n, gpt3_closed_form(l, h), "{name}");
        // Within 5 % of the published nominal size.
        assert!((n as f64 / approx - 1.0).abs() < 0.05, "{name}: {n}");
    }
    // GPT-3 175B with these shapes (computed by hand from the closed form above).
    assert_eq!(count("gpt3-175b"), 174_604_259_328);
}

#[test]
fn presets_are_listed_and_case_insensitive() {
    assert_eq!(ModelConfig::preset_names().len(), 17);
    for name in ModelConfig::preset_names() {
        assert!(ModelConfig::preset(name).unwrap().validate().is_ok());
    }
    assert_eq!(ModelConfig::preset("Llama2_7B").unwrap().name, "llama2-7b");
}
