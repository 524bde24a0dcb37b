//! Bad input gets a typed error with a one-line message, never a panic.

use memory_model::{
    estimate, layer_operators, operator_memory, search, Dim, MemoryError, ModelConfig,
    OffloadTarget, OperatorSharding, SearchSpace, TrainingSetup, ZeroStage,
};

fn llama7() -> ModelConfig {
    ModelConfig::preset("llama2-7b").unwrap()
}

fn one_line(e: &MemoryError) {
    let s = e.to_string();
    assert!(!s.is_empty() && !s.contains('\n'), "{s:?}");
}

#[test]
fn tp_must_divide_heads_and_kv_heads() {
    let mut s = TrainingSetup::default();
    s.parallel.tp = 3;
    let e = estimate(&llama7(), &s).unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::NotDivisible {
                what: "tp",
                dimension: "num_heads",
                ..
            }
        ),
        "{e}"
    );
    one_line(&e);
    // Llama-2-70B: 64 heads, 8 kv heads; tp = 16 divides the heads but not the kv heads.
    s.parallel.tp = 16;
    let e = estimate(&ModelConfig::preset("llama2-70b").unwrap(), &s).unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::NotDivisible {
                dimension: "num_kv_heads",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn pipeline_and_device_counts() {
    let mut s = TrainingSetup::default();
    s.parallel.pp = 33;
    assert!(matches!(
        estimate(&llama7(), &s),
        Err(MemoryError::TooManyStages { pp: 33, layers: 32 })
    ));
    let mut s = TrainingSetup::default();
    s.parallel.dp = 4;
    s.parallel.tp = 2;
    let e = s.validate(&llama7(), Some(16)).unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::DeviceCountMismatch {
                product: 8,
                devices: 16,
                ..
            }
        ),
        "{e}"
    );
    one_line(&e);
}

#[test]
fn unsupported_combinations() {
    let mut s = TrainingSetup::default();
    s.parallel.pp = 2;
    s.parallel.dp = 2;
    s.parallel.zero = ZeroStage::Zero3;
    assert!(matches!(
        estimate(&llama7(), &s),
        Err(MemoryError::Unsupported(_))
    ));
    let mut s = TrainingSetup::default();
    s.offload.parameters = OffloadTarget::Cpu;
    assert!(matches!(
        estimate(&llama7(), &s),
        Err(MemoryError::Unsupported(_))
    ));
    let mut s = TrainingSetup::default();
    s.parallel.ep = 2;
    assert!(matches!(
        estimate(&llama7(), &s),
        Err(MemoryError::Unsupported(_))
    ));
}

#[test]
fn zero_sizes() {
    let e = estimate(
        &llama7(),
        &TrainingSetup {
            micro_batch: 0,
            ..TrainingSetup::default()
        },
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::NonPositive {
                field: "micro_batch",
                ..
            }
        ),
        "{e}"
    );
    one_line(&e);
    assert!(matches!(
        estimate(
            &llama7(),
            &TrainingSetup {
                seq_len: 0,
                ..TrainingSetup::default()
            }
        ),
        Err(MemoryError::NonPositive { .. })
    ));
    let mut s = TrainingSetup::default();
    s.parallel.dp = 0;
    assert!(matches!(
        estimate(&llama7(), &s),
        Err(MemoryError::NonPositive { field: "dp", .. })
    ));
    let m = ModelConfig {
        hidden: 0,
        ..llama7()
    };
    assert!(matches!(
        estimate(&m, &TrainingSetup::default()),
        Err(MemoryError::NonPositive {
            field: "hidden",
            ..
        })
    ));
    let space = SearchSpace::new(0, 1 << 30, TrainingSetup::default());
    assert!(search(&llama7(), &space).is_err());
    // A learned position table shorter than the sequence.
    let gpt2 = ModelConfig::preset("gpt2").unwrap();
    assert!(matches!(
        estimate(
            &gpt2,
            &TrainingSetup {
                seq_len: 2048,
                ..TrainingSetup::default()
            }
        ),
        Err(MemoryError::InvalidInput(_))
    ));
}

#[test]
fn unknown_model_lists_the_known_ones() {
    let e = ModelConfig::preset("llama9-1t").unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("llama9-1t") && msg.contains("llama2-7b") && msg.contains("mixtral-8x7b"),
        "{msg}"
    );
    one_line(&e);
}

#[test]
fn over_split_sharding_is_rejected() {
    let model = llama7();
    let setup = TrainingSetup::default();
    let ops = layer_operators(&model, &setup.workload());
    let qkv = ops.iter().find(|op| op.name == "qkv_proj").unwrap();
    // Heads split 16 ways on a group of 8 devices.
    let mut s = OperatorSharding::replicated(1).split(Dim::Heads, 16);
    s.group = 8;
    let e = operator_memory(qkv, &s, &setup).unwrap_err();
    assert!(
        matches!(
            e,
            MemoryError::InvalidSharding {
                splits: 16,
                group: 8,
                ..
            }
        ),
        "{e}"
    );
    one_line(&e);
    // ZeRO over more replicas than exist.
    let mut s = OperatorSharding::replicated(2);
    s.zero_group = 4;
    s.zero = ZeroStage::Zero1;
    assert!(matches!(
        operator_memory(qkv, &s, &setup),
        Err(MemoryError::InvalidSharding { .. })
    ));
    // Zero sizes.
    let s = OperatorSharding {
        group: 0,
        ..OperatorSharding::replicated(1)
    };
    assert!(matches!(
        operator_memory(qkv, &s, &setup),
        Err(MemoryError::InvalidInput(_))
    ));
}

#[test]
fn absurd_sizes_are_errors_not_overflows() {
    let model = llama7();
    let huge = TrainingSetup {
        seq_len: 1 << 40,
        micro_batch: 1 << 20,
        ..TrainingSetup::default()
    };
    assert!(matches!(
        estimate(&model, &huge),
        Err(MemoryError::InvalidInput(_))
    ));
    let mut s = TrainingSetup::default();
    s.parallel.dp = u64::MAX / 2;
    s.parallel.cp = 4;
    assert!(matches!(
        estimate(&model, &s),
        Err(MemoryError::InvalidInput(_))
    ));
    let big = ModelConfig {
        hidden: 1 << 30,
        ffn_hidden: 1 << 32,
        ..llama7()
    };
    assert!(matches!(
        estimate(&big, &TrainingSetup::default()),
        Err(MemoryError::InvalidInput(_))
    ));
    let space = SearchSpace::new(1 << 40, 1 << 30, TrainingSetup::default());
    assert!(matches!(
        search(&model, &space),
        Err(MemoryError::InvalidInput(_))
    ));
    let mut s = TrainingSetup::default();
    s.parallel.schedule = memory_model::PipelineSchedule::Interleaved {
        virtual_stages: u64::MAX,
    };
    assert!(matches!(
        estimate(&model, &s),
        Err(MemoryError::InvalidInput(_))
    ));
}
