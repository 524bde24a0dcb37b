//! The configuration search against a brute-force reference built on `estimate`.

use memory_model::{
    estimate, search, ModelConfig, Recompute, SearchSpace, TrainingSetup, ZeroStage,
};

/// `(dp, tp, pp, sp, zero, recompute, micro-batch, peak bytes)` of one fitting configuration.
type Row = (u64, u64, u64, bool, ZeroStage, Recompute, u64, u64);

/// Reference: every combination through the public `estimate`, no caching.
fn brute_force(model: &ModelConfig, space: &SearchSpace) -> Vec<Row> {
    let mut out = Vec::new();
    let n = space.devices;
    for tp in (1..=n).filter(|d| n.is_multiple_of(*d)) {
        for pp in (1..=n / tp).filter(|d| (n / tp).is_multiple_of(*d)) {
            let dp = n / (tp * pp);
            for &mb in &space.micro_batches {
                for sp in [false, true] {
                    for zero in [
                        ZeroStage::Zero0,
                        ZeroStage::Zero1,
                        ZeroStage::Zero2,
                        ZeroStage::Zero3,
                    ] {
                        for rc in [
                            Recompute::None,
                            Recompute::Selective,
                            Recompute::Pointwise,
                            Recompute::Full,
                        ] {
                            if (sp && tp == 1) || (zero != ZeroStage::Zero0 && dp == 1) {
                                continue;
                            }
                            let mut s = TrainingSetup {
                                micro_batch: mb,
                                num_microbatches: pp,
                                recompute: rc,
                                ..space.base.clone()
                            };
                            (
                                s.parallel.dp,
                                s.parallel.tp,
                                s.parallel.pp,
                                s.parallel.sequence_parallel,
                                s.parallel.zero,
                            ) = (dp, tp, pp, sp, zero);
                            if let Ok(r) = estimate(model, &s) {
                                if r.per_device.total() <= space.budget_bytes {
                                    out.push((dp, tp, pp, sp, zero, rc, mb, r.per_device.total()));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn search_equals_brute_force() {
    for (name, devices, budget) in [
        ("gpt3-1.3b", 16u64, 12u64 << 30),
        ("llama2-7b", 8, 40 << 30),
        ("mixtral-8x7b", 16, 80 << 30),
    ] {
        let model = ModelConfig::preset(name).unwrap();
        let space = SearchSpace::new(
            devices,
            budget,
            TrainingSetup {
                seq_len: 2048,
                ..TrainingSetup::default()
            },
        );
        let hits = search(&model, &space).unwrap().hits;
        let mut got: Vec<_> = hits
            .iter()
            .map(|h| {
                (
                    h.dp,
                    h.tp,
                    h.pp,
                    h.sequence_parallel,
                    h.zero,
                    h.recompute,
                    h.micro_batch,
                    h.per_device.total(),
                )
            })
            .collect();
        got.sort();
        assert_eq!(got, brute_force(&model, &space), "{name}");
        assert!(!hits.is_empty(), "{name}");
        assert!(hits.iter().all(|h| h.per_device.total() <= budget));
    }
}

#[test]
fn search_finds_megatron_style_configuration_and_respects_budget() {
    let model = ModelConfig::preset("llama2-70b").unwrap();
    let base = TrainingSetup {
        seq_len: 4096,
        ..TrainingSetup::default()
    };
    let hits = search(&model, &SearchSpace::new(64, 80 << 30, base.clone()))
        .unwrap()
        .hits;
    assert!(hits
        .iter()
        .any(|h| (h.dp, h.tp, h.pp, h.sequence_parallel, h.zero)
            == (8, 8, 1, true, ZeroStage::Zero1)));
    // Best first: recomputation never decreases along the list.
    assert!(hits.windows(2).all(|w| w[0].recompute <= w[1].recompute));
    // 1 GiB per device fits nothing; the global batch constrains the micro-batch count.
    let none = search(&model, &SearchSpace::new(64, 1 << 30, base.clone())).unwrap();
    assert!(none.hits.is_empty());
    assert_eq!(none.rejected[0].reason, "over the memory budget");
    let mut space = SearchSpace::new(64, 80 << 30, base);
    space.global_batch = Some(512);
    let hits = search(&model, &space).unwrap().hits;
    assert!(hits
        .iter()
        .all(|h| h.dp * h.micro_batch * h.num_microbatches == 512));
}

/// Every examined configuration is either a hit or counted under one reason, and the reasons
/// name what went wrong (not a bare "0 configurations fit").
#[test]
fn search_accounts_for_every_rejected_configuration() {
    let model = ModelConfig::preset("gpt3-13b").unwrap();
    let mut space = SearchSpace::new(
        48,
        40 << 30,
        TrainingSetup {
            seq_len: 2048,
            ..TrainingSetup::default()
        },
    );
    space.global_batch = Some(96);
    let out = search(&model, &space).unwrap();
    let rejected: u64 = out.rejected.iter().map(|r| r.count).sum();
    assert_eq!(out.hits.len() as u64 + rejected, out.examined);
    let reasons: Vec<&str> = out.rejected.iter().map(|r| r.reason.as_str()).collect();
    // 40 heads: tp 3, 6, 12, 16, 24, 48 do not divide them; dp·b does not always divide 96.
    assert!(
        reasons.contains(&"tp does not divide num_heads"),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"global batch not divisible by dp × micro-batch"),
        "{reasons:?}"
    );
    assert!(out.rejected.windows(2).all(|w| w[0].count >= w[1].count));
}

/// A real large setup is counted, not rejected by the 64-bit guard: Llama-2 70B on 8,192
/// devices (dp 128 × tp 8 × pp 8) and on 65,536.
#[test]
fn search_handles_thousands_of_devices() {
    let model = ModelConfig::preset("llama2-70b").unwrap();
    let base = TrainingSetup {
        seq_len: 4096,
        ..TrainingSetup::default()
    };
    let out = search(&model, &SearchSpace::new(8192, 80 << 30, base.clone())).unwrap();
    assert!(out.hits.iter().any(|h| (h.dp, h.tp, h.pp) == (128, 8, 8)));
    let out = search(&model, &SearchSpace::new(65_536, 80 << 30, base)).unwrap();
    assert!(!out.hits.is_empty(), "{:?}", out.rejected);
}
