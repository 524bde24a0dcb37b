//! The memory-saving techniques one by one: exact bytes where a closed form exists.

use memory_model::{
    estimate, sharded_layer, BaseQuant, LoraRanks, ModelConfig, OffloadTarget, Peft,
    PipelineSchedule, TrainingSetup, ZeroStage,
};

fn op_device(model: &ModelConfig, setup: &TrainingSetup, name: &str) -> memory_model::Categories {
    sharded_layer(model, setup)
        .unwrap()
        .into_iter()
        .find(|(op, _)| op.name == name)
        .unwrap()
        .1
        .device
}

fn layer_activations(model: &ModelConfig, setup: &TrainingSetup) -> u64 {
    sharded_layer(model, setup)
        .unwrap()
        .iter()
        .map(|(_, m)| m.device.activations)
        .sum()
}

#[test]
fn lora_trainable_parameters_match_peft() {
    // Hugging Face PEFT `print_trainable_parameters()` on Llama-2-7B:
    // r = 8 on q_proj, v_proj: "trainable params: 4,194,304 || all params: 6,742,609,920";
    // r = 8 on all linear layers: "trainable params: 19,988,480 || all params: 6,758,404,096".
    let model = ModelConfig::preset("llama2-7b").unwrap();
    let grads = |lora: LoraRanks| {
        let setup = TrainingSetup {
            peft: Some(Peft {
                lora,
                base: BaseQuant::None,
            }),
            ..TrainingSetup::default()
        };
        estimate(&model, &setup).unwrap().per_device.gradients
    };
    // 16-bit gradients: 2 bytes per trainable parameter.
    assert_eq!(
        grads(LoraRanks {
            q: 8,
            v: 8,
            ..LoraRanks::default()
        }),
        2 * 4_194_304
    );
    assert_eq!(grads(LoraRanks::all(8)), 2 * 19_988_480);
}

#[test]
fn qlora_base_weights_take_nf4_bytes() {
    let model = ModelConfig::preset("llama2-7b").unwrap();
    let peft = |base| TrainingSetup {
        peft: Some(Peft {
            lora: LoraRanks::default(),
            base,
        }),
        ..TrainingSetup::default()
    };
    let params = |base| estimate(&model, &peft(base)).unwrap().per_device.parameters;
    // Layer linear weights: 32 · (4·4096² + 3·4096·11008) = 6,476,005,376; the rest (embeddings,
    // head, norms: 262,410,240) stays 16-bit.
    let linear = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008u64);
    let rest = 6_738_415_616 - linear;
    assert_eq!(params(BaseQuant::None), 2 * 6_738_415_616);
    // Every weight has a multiple of 64·256 elements per tensor: exactly 4.5 and 4.127 bits.
    assert_eq!(
        params(BaseQuant::Nf4 {
            double_quant: false
        }),
        linear * 9 / 16 + 2 * rest
    );
    assert_eq!(
        params(BaseQuant::Nf4 { double_quant: true }),
        linear / 2 + linear / 64 + linear / (64 * 256) * 4 + 2 * rest
    );
    // int8: one byte plus an fp32 scale per output row.
    let rows = 32 * (4 * 4096 + 2 * 11008 + 4096u64);
    assert_eq!(params(BaseQuant::Int8), linear + 4 * rows + 2 * rest);
}

#[test]
fn expert_parallelism_splits_the_experts() {
    // Mixtral: 8 experts of SwiGLU with h = 4096, f = 14336; ep = 8 leaves one expert per device.
    let model = ModelConfig::preset("mixtral-8x7b").unwrap();
    let mut setup = TrainingSetup::default();
    setup.parallel.dp = 8;
    let one_expert_up = 2 * 4096 * 14336u64; // gate + up
    assert_eq!(
        op_device(&model, &setup, "expert_up").parameters,
        8 * one_expert_up * 2
    );
    setup.parallel.ep = 8;
    setup.parallel.zero = ZeroStage::Zero1;
    let d = op_device(&model, &setup, "expert_up");
    assert_eq!(d.parameters, one_expert_up * 2);
    // ZeRO shards experts over dp·cp/ep = 1 replica: the full 12 bytes/param stay.
    assert_eq!(d.optimizer_states, one_expert_up * 12);
    // The dense router is not split by ep but sharded by ZeRO over dp = 8.
    assert_eq!(
        op_device(&model, &setup, "router").optimizer_states,
        4096 * 8 * 12 / 8
    );
}

#[test]
fn context_parallelism_halves_activations() {
    let model = ModelConfig::preset("llama2-7b").unwrap();
    let mut setup = TrainingSetup {
        seq_len: 4096,
        ..TrainingSetup::default()
    };
    let full = layer_activations(&model, &setup);
    setup.parallel.cp = 2;
    assert_eq!(2 * layer_activations(&model, &setup), full);
}

#[test]
fn zero3_parameter_offload_keeps_gathered_layers_only() {
    let model = ModelConfig::preset("llama2-7b").unwrap();
    let mut setup = TrainingSetup::default();
    setup.parallel.dp = 8;
    setup.parallel.zero = ZeroStage::Zero3;
    setup.offload.parameters = OffloadTarget::Cpu;
    setup.offload.optimizer = OffloadTarget::Cpu;
    let r = estimate(&model, &setup).unwrap();
    assert_eq!(
        r.per_device.parameters + r.per_device.gradients + r.per_device.optimizer_states,
        0
    );
    // The largest operator is the untied head or embedding (32000 × 4096, 16-bit), gathered
    // twice (current + prefetched), as DeepSpeed's 4 · largest_layer_params.
    assert!(r.per_device.transient >= 4 * 32000 * 4096);
    // Host per node: the offloaded 16-bit params, fp32 grads, master and moments are
    // (2 + 4 + 12)·P/8 per device, 18·P for 8 devices; the fp32 start-up copies are 4·P·8 = 32·P
    // and decide, times the 1.5 safety factor. With zero.Init the offloaded states decide.
    assert_eq!(r.host_per_node, (4.0 * 6_738_415_616f64 * 8.0 * 1.5) as u64);
    setup.host.zero_init = true;
    let r = estimate(&model, &setup).unwrap();
    assert_eq!(r.host_per_node, (18.0 * 6_738_415_616f64 * 1.5) as u64);
}

#[test]
fn vocabulary_padding_and_pipeline_schedules() {
    let mut model = ModelConfig::preset("gpt3-175b").unwrap();
    model.vocab_pad_multiple = 128;
    assert_eq!(model.padded_vocab(), 50304);
    let base = TrainingSetup {
        num_microbatches: 16,
        ..TrainingSetup::default()
    };
    let first_stage_act = |schedule| {
        let mut s = base.clone();
        s.parallel.pp = 8;
        s.parallel.tp = 8;
        s.parallel.schedule = schedule;
        estimate(&model, &s).unwrap().per_stage[0]
            .memory
            .activations
    };
    let gpipe = first_stage_act(PipelineSchedule::GPipe);
    let one_f = first_stage_act(PipelineSchedule::OneFOneB);
    let inter = first_stage_act(PipelineSchedule::Interleaved { virtual_stages: 2 });
    assert!(one_f < inter && inter < gpipe, "{one_f} {inter} {gpipe}");
}

#[test]
fn dimension_table_is_consistent() {
    use memory_model::Dim;
    assert_eq!(Dim::ALL.len(), Dim::COUNT);
    assert!(Dim::ALL.iter().enumerate().all(|(i, &d)| d as usize == i));
}
