//! The list of study variants.

use ml_models::models::GptConfig;
use ml_models::qlora::{budget_splits, split_config, BaseFormat, LoraConfig};

use crate::config::StudyConfig;

/// How a variant fine-tunes.
#[derive(Debug, Clone, PartialEq)]
pub enum Method {
    /// All parameters trainable.
    Full,
    /// Adapters over a frozen base.
    Lora(LoraConfig),
}

/// One fine-tuning configuration of the study.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// Display name.
    pub name: String,
    /// Comparison group.
    pub group: String,
    /// Adapted layer types.
    pub target: String,
    /// Rank (attention rank for budget splits), 0 for full FT.
    pub rank: usize,
    /// α, 0 for full FT.
    pub alpha: f32,
    /// The method.
    pub method: Method,
}

const DQ: BaseFormat = BaseFormat::Nf4 { double_quant: true };

fn lora(
    name: String,
    group: &str,
    target: &str,
    (ra, rm): (usize, usize),
    alpha: f32,
    base: BaseFormat,
    layers: std::ops::Range<usize>,
) -> Variant {
    Variant {
        name,
        group: group.into(),
        target: target.into(),
        rank: ra.max(rm),
        alpha,
        method: Method::Lora(split_config(ra, rm, alpha, base, layers)),
    }
}

/// Every variant of the study for `cfg` on model `m`.
pub fn study_variants(cfg: &StudyConfig, m: &GptConfig) -> Vec<Variant> {
    let r = cfg.ref_rank;
    let all = 0..m.n_layers;
    let mut v = vec![Variant {
        name: "full fine-tune".into(),
        group: "method".into(),
        target: "all".into(),
        rank: 0,
        alpha: 0.0,
        method: Method::Full,
    }];
    for (base, tag) in [
        (BaseFormat::F32, "lora-f32"),
        (
            BaseFormat::Nf4 {
                double_quant: false,
            },
            "qlora-nf4",
        ),
        (DQ, "qlora-nf4-dq"),
    ] {
        v.push(lora(
            format!("{tag} r={r} both α=16"),
            "method",
            "both",
            (r, r),
            16.0,
            base,
            all.clone(),
        ));
    }
    for &rank in &cfg.ranks {
        for (target, ra, rm) in [
            ("attention", rank, 0),
            ("mlp", 0, rank),
            ("both", rank, rank),
        ] {
            let name = format!("qlora-nf4-dq r={rank} {target} α=16");
            v.push(lora(name, "rank", target, (ra, rm), 16.0, DQ, all.clone()));
        }
    }
    let ar = cfg.alpha_rank;
    for alpha in [ar as f32, 2.0 * ar as f32, 16.0] {
        let name = format!("qlora-nf4-dq r={ar} both α={alpha}");
        v.push(lora(
            name,
            "alpha",
            "both",
            (ar, ar),
            alpha,
            DQ,
            all.clone(),
        ));
    }
    // Equal trainable-parameter budget = rank r on every linear layer. Adapter parameters per
    // block and unit rank: attention 4·2d, SwiGLU MLP 3·(d + d_ff).
    let per_rank = (8 * m.d_model, 3 * (m.d_model + m.d_ff));
    for (label, ra, rm) in budget_splits(r, per_rank) {
        let name = format!("budget {label}: attn r={ra} mlp r={rm}");
        v.push(lora(
            name,
            "budget",
            "both",
            (ra, rm),
            16.0,
            DQ,
            all.clone(),
        ));
    }
    let half = m.n_layers / 2;
    for (label, layers) in [("shallow", 0..half), ("deep", half..m.n_layers)] {
        let name = format!("{label} layers {}..{} r={r} both", layers.start, layers.end);
        v.push(lora(name, "depth", "both", (r, r), 16.0, DQ, layers));
    }
    v
}
