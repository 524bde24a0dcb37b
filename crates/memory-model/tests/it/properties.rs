//! Property tests on random small models and setups, plus closed-form references.

use memory_model::{
    chunks_in_flight, embedding_operators, estimate, head_operators, layer_operators,
    operator_memory, sharded_layer, Categories, MemoryReport, MlpKind, ModelConfig, MoeConfig,
    NormKind, OperatorSharding, PipelineSchedule, PositionKind, Recompute, TrainingSetup,
    ZeroStage,
};
use proptest::prelude::*;

fn model_strategy() -> impl Strategy<Value = ModelConfig> {
    (
        (
            1u64..=6,
            prop::sample::select(vec![1u64, 2, 4, 8]),
            prop::sample::select(vec![4u64, 8, 16]),
        ),
        (1u64..=4, 8u64..=48, 17u64..=200),
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        prop::option::of((2u64..=4, 1u64..=2, 0u64..=1)),
    )
        .prop_map(
            |(
                (layers, heads, head_dim),
                (kv_div, ffn, vocab),
                (swiglu, rms, bias, tied, dropout, learned),
                moe,
            )| {
                let kv = heads / kv_div.min(heads).next_power_of_two().min(heads);
                ModelConfig {
                    name: "random".into(),
                    num_layers: layers,
                    hidden: heads * head_dim,
                    num_heads: heads,
                    num_kv_heads: kv.max(1),
                    head_dim,
                    ffn_hidden: ffn,
                    vocab_size: vocab,
                    vocab_pad_multiple: 1,
                    max_positions: 64,
                    mlp: if swiglu {
                        MlpKind::SwiGlu
                    } else {
                        MlpKind::Gelu
                    },
                    norm: if rms {
                        NormKind::RmsNorm
                    } else {
                        NormKind::LayerNorm
                    },
                    qkv_bias: bias,
                    dense_bias: bias,
                    position: if learned {
                        PositionKind::Learned
                    } else {
                        PositionKind::Rotary
                    },
                    tied_embeddings: tied,
                    dropout,
                    moe: moe.map(|(e, k, shared)| MoeConfig {
                        num_experts: e,
                        top_k: k,
                        expert_ffn_hidden: ffn / 2 + 1,
                        shared_experts: shared,
                    }),
                    // BERT-style encoder parts on some of the models with learned positions.
                    token_types: if learned && bias { 2 } else { 0 },
                    pooler: learned && bias,
                }
            },
        )
}

fn setup_strategy() -> impl Strategy<Value = TrainingSetup> {
    (
        1u64..=3,
        prop::sample::select(vec![8u64, 16, 32]),
        1u64..=6,
        any::<bool>(),
        any::<bool>(),
        0u64..=2,
    )
        .prop_map(|(mb, seq, m, flash, sp, sched)| {
            let mut s = TrainingSetup {
                micro_batch: mb,
                seq_len: seq,
                num_microbatches: m,
                flash_attention: flash,
                ..TrainingSetup::default()
            };
            s.parallel.sequence_parallel = sp;
            s.parallel.schedule = match sched {
                0 => PipelineSchedule::OneFOneB,
                1 => PipelineSchedule::GPipe,
                _ => PipelineSchedule::Interleaved { virtual_stages: 1 },
            };
            s
        })
}

/// Largest model states (parameters + gradients + optimizer states) over the stages.
fn max_states(r: &MemoryReport) -> u64 {
    r.per_stage
        .iter()
        .map(|s| s.memory.parameters + s.memory.gradients + s.memory.optimizer_states)
        .max()
        .unwrap()
}

fn run(model: &ModelConfig, setup: &TrainingSetup) -> MemoryReport {
    estimate(model, setup).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn more_parallelism_never_increases_model_states(model in model_strategy(), setup in setup_strategy(), dp in 1u64..=4, zero in 0u64..=3) {
        let mut base = setup;
        base.parallel.dp = dp;
        base.parallel.zero = ZeroStage::from_number(zero).unwrap();
        let before = max_states(&run(&model, &base));
        // tp → 2·tp when it divides the kv heads.
        if model.num_kv_heads % 2 == 0 {
            let mut s = base.clone();
            s.parallel.tp = 2;
            prop_assert!(max_states(&run(&model, &s)) <= before);
        }
        // pp → pp + 1 (ZeRO-3 excluded, as with pipelines).
        if model.num_layers >= 2 && zero < 3 {
            let mut s = base.clone();
            s.parallel.pp = 2;
            s.parallel.schedule = PipelineSchedule::OneFOneB;
            prop_assert!(max_states(&run(&model, &s)) <= before);
        }
        // dp → 2·dp.
        let mut s = base.clone();
        s.parallel.dp = 2 * dp;
        prop_assert!(max_states(&run(&model, &s)) <= before);
        // Higher ZeRO stage.
        if zero < 3 {
            let mut s = base.clone();
            s.parallel.zero = ZeroStage::from_number(zero + 1).unwrap();
            prop_assert!(max_states(&run(&model, &s)) <= before);
        }
    }

    #[test]
    fn recomputation_orders_activations(model in model_strategy(), setup in setup_strategy(), tp in prop::sample::select(vec![1u64, 2])) {
        let mut s = setup;
        if model.num_kv_heads % tp != 0 { s.parallel.tp = 1 } else { s.parallel.tp = tp }
        let act = |r| { let mut x = s.clone(); x.recompute = r; run(&model, &x).per_stage.iter().map(|st| st.memory.activations).collect::<Vec<_>>() };
        let (none, sel, full) = (act(Recompute::None), act(Recompute::Selective), act(Recompute::Full));
        for i in 0..none.len() {
            prop_assert!(full[i] <= sel[i] && sel[i] <= none[i], "{:?} {:?} {:?}", full, sel, none);
        }
    }

    #[test]
    fn sums_equal_totals(model in model_strategy(), setup in setup_strategy(), dp in 1u64..=3, zero in 0u64..=3, rc in 0u8..3) {
        let mut s = setup;
        s.parallel.dp = dp;
        s.parallel.zero = ZeroStage::from_number(zero).unwrap();
        s.recompute = [Recompute::None, Recompute::Selective, Recompute::Full][rc as usize];
        s.overhead_bytes = 1 << 20;
        let r = run(&model, &s);
        let d = r.per_device;
        prop_assert_eq!(d.total(), d.parameters + d.gradients + d.optimizer_states + d.activations + d.buffers + d.transient + d.overhead);
        prop_assert!(r.per_stage.iter().all(|st| st.memory.total() <= d.total()));
        prop_assert!(r.cluster.total >= r.cluster.unique_total);
        prop_assert!(r.cluster.redundancy_ratio >= 1.0);
        let extras: u64 = r.per_stage.iter().map(|st| (st.memory.buffers + st.memory.transient + st.memory.overhead) * dp).sum();
        prop_assert_eq!(r.cluster.total, r.cluster.held.total() + extras);
        // One device per stage when dp = tp = cp = 1: cluster = Σ stages.
        if dp == 1 {
            let staged: u64 = r.per_stage.iter().map(|st| st.memory.total()).sum();
            prop_assert_eq!(r.cluster.total, staged);
        }
    }

    #[test]
    fn operator_sums_equal_whole_model(model in model_strategy(), setup in setup_strategy(), dp in 1u64..=3, zero in 0u64..=3) {
        let mut s = setup;
        s.parallel.dp = dp;
        s.parallel.zero = ZeroStage::from_number(zero).unwrap();
        let r = run(&model, &s);
        let w = s.workload();
        let in_flight = chunks_in_flight(s.parallel.schedule, 1, 0, s.num_microbatches);
        let mut expect = Categories::default();
        let mut held = Categories::default();
        for (k, ops) in [(model.num_layers, layer_operators(&model, &w)), (1, embedding_operators(&model, &w)), (1, head_operators(&model, &w, false))] {
            for op in &ops {
                let m = operator_memory(op, &OperatorSharding::megatron(op, &s), &s).unwrap();
                expect.add(&m.device.scaled(k, k * in_flight));
                held.add(&m.cluster.scaled(k, k * in_flight));
            }
        }
        let d = r.per_device;
        prop_assert_eq!((d.parameters, d.gradients, d.optimizer_states, d.activations), (expect.parameters, expect.gradients, expect.optimizer_states, expect.activations));
        prop_assert_eq!(r.cluster.held, held);
    }

    #[test]
    fn parameter_count_matches_closed_form(layers in 1u64..=8, heads in prop::sample::select(vec![2u64, 4, 8]), kv_div in prop::sample::select(vec![1u64, 2]), d in 4u64..=32, f in 4u64..=100, v in 1u64..=1000, tied in any::<bool>()) {
        // Llama-style: per layer 2h·ad + 2h·gd + 3hf + 2h; embeddings V·h (twice untied); final norm h.
        let model = ModelConfig { num_layers: layers, hidden: heads * d, num_heads: heads, num_kv_heads: heads / kv_div, head_dim: d, ffn_hidden: f, vocab_size: v, tied_embeddings: tied, ..ModelConfig::preset("llama2-7b").unwrap() };
        let (h, a, g) = (heads * d, heads, heads / kv_div);
        let per_layer = 2 * h * a * d + 2 * h * g * d + 3 * h * f + 2 * h;
        let expected = layers * per_layer + v * h * if tied { 1 } else { 2 } + h;
        prop_assert_eq!(model.num_parameters(), expected);
    }

    #[test]
    fn activations_match_korthikanti_closed_form(s in prop::sample::select(vec![16u64, 64, 256]), b in 1u64..=4, heads in prop::sample::select(vec![2u64, 4, 8]), d in prop::sample::select(vec![8u64, 16, 64]), t in prop::sample::select(vec![1u64, 2])) {
        // GPT-style layer (GeLU, f = 4h, dropout): 10sbh + 24sbh/t + 5as²b/t bytes per device
        // with tensor parallelism t (Korthikanti et al. 2022, Table 2).
        let h = heads * d;
        let model = ModelConfig { hidden: h, num_heads: heads, num_kv_heads: heads, head_dim: d, ffn_hidden: 4 * h, max_positions: 256, ..ModelConfig::preset("gpt3-125m").unwrap() };
        let mut setup = TrainingSetup { micro_batch: b, seq_len: s, ..TrainingSetup::default() };
        setup.parallel.tp = t;
        let act: u64 = sharded_layer(&model, &setup).unwrap().iter().map(|(_, m)| m.device.activations).sum();
        prop_assert_eq!(act, 10 * s * b * h + 24 * s * b * h / t + 5 * heads * s * s * b / t);
    }
}

fn wild() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..=8,
        1u64..=100_000,
        Just(u64::MAX),
        Just(1 << 33),
        any::<u64>()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Arbitrary (also absurd) sizes give a value or a typed error, never a panic or overflow.
    #[test]
    fn estimate_never_panics(sizes in prop::collection::vec(wild(), 14), zero in 0u64..=3, v in wild()) {
        let mut model = ModelConfig::preset("llama2-7b").unwrap();
        (model.num_layers, model.hidden, model.num_heads, model.num_kv_heads, model.head_dim, model.ffn_hidden, model.vocab_size) =
            (sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5], sizes[6]);
        let mut s = TrainingSetup { micro_batch: sizes[7], seq_len: sizes[8], num_microbatches: sizes[9], ..TrainingSetup::default() };
        (s.parallel.dp, s.parallel.tp, s.parallel.pp, s.parallel.cp) = (sizes[10], sizes[11], sizes[12], sizes[13]);
        s.parallel.zero = ZeroStage::from_number(zero).unwrap();
        s.parallel.schedule = PipelineSchedule::Interleaved { virtual_stages: v };
        let _ = estimate(&model, &s);
        s.parallel.schedule = PipelineSchedule::OneFOneB;
        if let Ok(r) = estimate(&model, &s) {
            prop_assert!(r.per_device.total() >= r.per_device.parameters);
        }
    }
}
