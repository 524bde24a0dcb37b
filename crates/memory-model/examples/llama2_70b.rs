//! Walk-through: what it takes to train (and fine-tune) Llama-2-70B, step by step.
//!
//! `cargo run -p memory-model --example llama2_70b`

use memory_model::{
    estimate, operator_memory, search, BaseQuant, LoraRanks, MemoryReport, ModelConfig,
    OperatorSharding, Peft, Recompute, SearchSpace, TrainingSetup, ZeroStage,
};

const GIB: f64 = (1u64 << 30) as f64;

fn gib(b: u64) -> String {
    format!("{:8.2} GiB", b as f64 / GIB)
}

fn line(label: &str, r: &MemoryReport) {
    let d = r.per_device;
    println!(
        "  {label:<44} states {}  activations {}  peak {}  redundancy {:.2}×",
        gib(d.parameters + d.gradients + d.optimizer_states),
        gib(d.activations),
        gib(d.total()),
        r.cluster.redundancy_ratio
    );
}

fn main() -> Result<(), memory_model::MemoryError> {
    let model = ModelConfig::preset("llama2-70b")?;
    println!(
        "Llama-2-70B: {} parameters ({} layers, h = {}, {} heads, {} kv heads, SwiGLU f = {})",
        model.num_parameters(),
        model.num_layers,
        model.hidden,
        model.num_heads,
        model.num_kv_heads,
        model.ffn_hidden
    );

    // 1. Model states alone: 16 bytes per parameter with mixed-precision Adam.
    let single = TrainingSetup {
        seq_len: 4096,
        ..TrainingSetup::default()
    };
    println!("\n1. One device, mixed-precision Adam, s = 4096, b = 1:");
    line("no parallelism", &estimate(&model, &single)?);

    // 2. Add the techniques one at a time on 64 devices (8 nodes of 8).
    println!("\n2. 64 devices, one technique at a time:");
    let mut s = single.clone();
    s.parallel.dp = 64;
    line("dp 64", &estimate(&model, &s)?);
    for zero in [ZeroStage::Zero1, ZeroStage::Zero2, ZeroStage::Zero3] {
        s.parallel.zero = zero;
        line(&format!("dp 64, {zero:?}"), &estimate(&model, &s)?);
    }
    let mut s = single.clone();
    (
        s.parallel.dp,
        s.parallel.tp,
        s.parallel.pp,
        s.num_microbatches,
    ) = (2, 8, 4, 16);
    line(
        "dp 2 · tp 8 · pp 4 (1F1B, 16 micro-batches)",
        &estimate(&model, &s)?,
    );
    s.parallel.sequence_parallel = true;
    line("  + sequence parallelism", &estimate(&model, &s)?);
    s.recompute = Recompute::Selective;
    line("  + selective recomputation", &estimate(&model, &s)?);
    s.parallel.zero = ZeroStage::DistributedOptimizer;
    line("  + distributed optimizer", &estimate(&model, &s)?);
    s.flash_attention = true;
    s.recompute = Recompute::None;
    line(
        "  flash attention instead of recomputation",
        &estimate(&model, &s)?,
    );

    // 3. Per stage: the first stage holds the most in-flight micro-batches.
    let r = estimate(&model, &s)?;
    println!("\n3. Per pipeline stage of the last configuration:");
    for st in &r.per_stage {
        println!(
            "  stage {} ({} layers, {:.0} micro-batches in flight): activations {}  total {}",
            st.stage,
            st.layers,
            st.in_flight_microbatches,
            gib(st.memory.activations),
            gib(st.memory.total())
        );
    }

    // 4. Per operator: what the planner sees. Largest holders of one layer under that sharding.
    println!("\n4. Operators of one layer under Megatron's sharding (one micro-batch):");
    let w = s.workload();
    let mut ops: Vec<_> = memory_model::layer_operators(&model, &w)
        .into_iter()
        .map(|op| {
            let m = operator_memory(&op, &OperatorSharding::megatron(&op, &s), &s)?;
            Ok((op.name, m))
        })
        .collect::<Result<_, memory_model::MemoryError>>()?;
    ops.sort_by_key(|(_, m)| std::cmp::Reverse(m.device.total()));
    for (name, m) in ops.iter().take(6) {
        println!(
            "  {name:<22} device {}  held {:.2}× over its unique bytes on the cluster ({} replicated)",
            gib(m.device.total()),
            m.cluster.total() as f64 / m.unique.total().max(1) as f64,
            gib(m.replicated().total())
        );
    }

    // 5. QLoRA fine-tuning on one 80 GiB device: NF4 base with double quantization, rank 64.
    let q = TrainingSetup {
        seq_len: 2048,
        peft: Some(Peft {
            lora: LoraRanks::all(64),
            base: BaseQuant::Nf4 { double_quant: true },
        }),
        recompute: Recompute::Full,
        ..TrainingSetup::default()
    };
    println!("\n5. QLoRA (NF4 + double quantization, LoRA r = 64 everywhere, full recomputation), one device:");
    line("s = 2048, b = 1", &estimate(&model, &q)?);

    // 6. Search: everything that fits 64 × 80 GiB.
    let space = SearchSpace::new(
        64,
        80 << 30,
        TrainingSetup {
            seq_len: 4096,
            ..TrainingSetup::default()
        },
    );
    let hits = search(&model, &space)?.hits;
    println!(
        "\n6. {} configurations fit 64 × 80 GiB; the first five:",
        hits.len()
    );
    for h in hits.iter().take(5) {
        println!("  {h}: peak {}", gib(h.per_device.total()));
    }
    Ok(())
}
