//! LoRA configurations by layer type: separate ranks for the attention and MLP projections,
//! and the splits of an equal trainable-parameter budget between them (the "equal budget"
//! comparison of Shen, Lai, Li, Hu, CMC 2025).

use crate::qlora::lora::{AdapterSpec, BaseFormat, LayerKind, LoraConfig, LoraRule};

/// Three splits of the trainable-parameter budget of rank `r` on every layer between attention
/// and MLP adapters, as `(label, attention rank, MLP rank)`: attention rank 2r (MLP rank cut to
/// keep the budget), r on both, r/4 (MLP rank raised). `per_rank` is the adapter parameter
/// count per block and unit rank of (all attention projections, all MLP projections).
pub fn budget_splits(r: usize, per_rank: (usize, usize)) -> [(&'static str, usize, usize); 3] {
    let (ca, cm) = per_rank;
    let budget = r * (ca + cm);
    let mlp_rank = |ra: usize| (budget.saturating_sub(ca * ra) as f64 / cm as f64).round() as usize;
    [
        ("cut MLP rank", 2 * r, mlp_rank(2 * r)),
        ("balanced", r, r),
        ("cut attention rank", r / 4, mlp_rank(r / 4)),
    ]
}

/// A LoRA configuration with rank `ra` on attention and `rm` on MLP (0 = none), over `base`,
/// restricted to blocks `layers`.
pub fn split_config(
    ra: usize,
    rm: usize,
    alpha: f32,
    base: BaseFormat,
    layers: std::ops::Range<usize>,
) -> LoraConfig {
    let mut rules = Vec::new();
    for (kinds, r) in [
        (LayerKind::ATTENTION.to_vec(), ra),
        (LayerKind::MLP.to_vec(), rm),
    ] {
        if r > 0 {
            rules.push(LoraRule {
                kinds,
                layers: layers.clone(),
                adapter: Some(AdapterSpec { rank: r, alpha }),
            });
        }
    }
    LoraConfig {
        rules,
        dropout: 0.0,
        base,
    }
}
