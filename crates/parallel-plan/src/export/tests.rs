use memory_model::{ModelConfig, PipelineSchedule, Recompute, ZeroStage};
use proptest::prelude::*;

use super::megatron::{self, shell_quote, MegatronInputs};
use super::*;
use crate::mesh::DeviceMesh;
use crate::peers::{Framework, PeerConfig};

/// GPT-3 125M cut to `layers` layers on `devices` GPUs of one DGX node.
fn small_problem(layers: u64, devices: usize) -> Problem {
    let mut model = ModelConfig::preset("gpt3-125m").unwrap();
    model.num_layers = layers;
    model.vocab_pad_multiple = 1024;
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1)
        .unwrap()
        .stage_mesh(devices)
        .unwrap();
    let mut p = Problem::new(model, mesh);
    p.global_batch = 8;
    p.setup.seq_len = 512;
    p.solver.time_limit_s = 60.0;
    p
}

fn peer(framework: Framework, tp: u64, pp: u64, dp: u64, zero: ZeroStage) -> PeerConfig {
    PeerConfig {
        framework,
        tp,
        pp,
        dp,
        sequence_parallel: tp > 1 && framework != Framework::DeepSpeed,
        zero,
        recompute: Recompute::None,
        micro_batch_size: 2,
        micro_batches: 8 / (2 * dp),
        schedule: PipelineSchedule::OneFOneB,
        offload_optimizer: false,
    }
}

/// A peer's own configuration, exported to its engine, is exact and priced identically.
#[test]
fn peer_configurations_export_exactly_to_their_engines() {
    let p = small_problem(2, 4);
    for (engine, cfg) in [
        (
            Engine::Megatron,
            peer(
                Framework::MegatronLm,
                2,
                1,
                2,
                ZeroStage::DistributedOptimizer,
            ),
        ),
        (
            Engine::Megatron,
            peer(Framework::MegatronLm, 2, 2, 1, ZeroStage::Zero0),
        ),
        (
            Engine::DeepSpeed,
            peer(Framework::DeepSpeed, 1, 1, 4, ZeroStage::Zero3),
        ),
        (
            Engine::Torchtitan,
            peer(Framework::Torchtitan, 2, 1, 2, ZeroStage::Zero3),
        ),
    ] {
        let plan = peers::evaluate(&p, &cfg).unwrap();
        let e = export(&p, &plan, engine).unwrap();
        assert_eq!(e.fidelity, Fidelity::Exact, "{engine}: {:?}", e.given_up);
        assert_eq!(e.config.tp, cfg.tp);
        assert_eq!(e.config.pp, cfg.pp);
        assert_eq!(e.config.micro_batch_size, cfg.micro_batch_size);
        assert_eq!(
            e.plan.per_device_memory.total(),
            plan.per_device_memory.total()
        );
        assert_eq!(e.plan.step_time_s, plan.step_time_s);
    }
}

/// Exporting a plan to an engine that cannot express it says what was given up.
#[test]
fn inexpressible_choices_are_listed() {
    let p = small_problem(2, 4);
    // ZeRO-3 with TP 2: Megatron-LM runs it as Megatron-FSDP without a pipeline (and only the
    // distributed optimizer with one, below); DeepSpeed (AutoTP with ZeRO-3 since v0.19.4)
    // keeps it but drops sequence parallelism.
    let cfg = peer(Framework::Torchtitan, 2, 1, 2, ZeroStage::Zero3);
    let plan = peers::evaluate(&p, &cfg).unwrap();
    let fsdp = export(&p, &plan, Engine::Megatron).unwrap();
    assert_eq!(fsdp.config.zero, ZeroStage::Zero3, "{:?}", fsdp.given_up);
    let args = &fsdp.files[0].contents;
    assert!(args.contains("--use-megatron-fsdp") && args.contains("optim_grads_params"));
    let piped_zero3 = peer(Framework::Torchtitan, 2, 2, 1, ZeroStage::Zero3);
    let mut piped_zero3 = PeerConfig {
        dp: 2,
        tp: 1,
        micro_batches: 2,
        ..piped_zero3
    };
    piped_zero3.sequence_parallel = false;
    let zero3_pp = peers::evaluate(&p, &piped_zero3).unwrap();
    let m = export(&p, &zero3_pp, Engine::Megatron).unwrap();
    assert_eq!(m.fidelity, Fidelity::NearestExpressible);
    assert!(m
        .given_up
        .contains(&GivenUp::ZeroStage { plan: 3, engine: 1 }));
    assert!(!m.files[0].contents.contains("--use-megatron-fsdp"));
    let d = export(&p, &plan, Engine::DeepSpeed).unwrap();
    assert!(!d
        .given_up
        .iter()
        .any(|g| matches!(g, GivenUp::ZeroStage { .. })));
    assert_eq!(d.config.zero, ZeroStage::Zero3);
    assert!(d.given_up.contains(&GivenUp::SequenceParallel {
        plan: true,
        engine: false
    }));
    // Each is priced as the engine's own configuration (the same model as the peers), and
    // differs from the plan it stands for.
    for e in [&m, &d] {
        let own = peers::evaluate_with_layers(&p, &e.config, &e.layers_per_stage).unwrap();
        assert_eq!(e.plan.per_device_memory, own.per_device_memory);
        assert_eq!(e.plan.step_time_s, own.step_time_s);
        assert_ne!(
            (e.plan.per_device_memory.total(), e.plan.step_time_s),
            (plan.per_device_memory.total(), plan.step_time_s)
        );
    }
    // A pipeline DeepSpeed cannot run.
    let piped =
        peers::evaluate(&p, &peer(Framework::MegatronLm, 2, 2, 1, ZeroStage::Zero0)).unwrap();
    let d = export(&p, &piped, Engine::DeepSpeed).unwrap();
    assert!(d
        .given_up
        .contains(&GivenUp::Pipeline { plan: 2, engine: 1 }));
    assert_eq!(d.config.pp, 1);
}

#[test]
fn uneven_splits_use_first_last_or_a_layout() {
    let p = small_problem(7, 4);
    let mut cfg = peer(Framework::MegatronLm, 1, 4, 1, ZeroStage::Zero0);
    cfg.micro_batches = 4;
    let args = |layers: &[u64]| megatron::arguments(&p, &cfg, layers).join(" ");
    // 7 layers do not split evenly over 4 stages: Megatron needs the last stage named.
    assert!(args(&[2, 2, 2, 1]).contains("--decoder-last-pipeline-num-layers 1"));
    assert!(args(&[1, 2, 2, 2]).contains("--decoder-first-pipeline-num-layers 1"));
    assert!(!args(&[1, 2, 2, 2]).contains("--decoder-last"));
    assert!(args(&[3, 1, 1, 2]).contains("--decoder-first-pipeline-num-layers 3"));
    assert!(args(&[3, 1, 1, 2]).contains("--decoder-last-pipeline-num-layers 2"));
    assert!(args(&[2, 1, 3, 1]).contains("--pipeline-model-parallel-layout Ett|t|ttt|tL"));
    // Priced with the uneven split, exported exactly.
    let plan = crate::peers::evaluate_with_layers(&p, &cfg, &[3, 1, 1, 2]).unwrap();
    assert_eq!(plan.layers_per_stage, vec![3, 1, 1, 2]);
    let e = export(&p, &plan, Engine::Megatron).unwrap();
    assert_eq!(e.fidelity, Fidelity::Exact, "{:?}", e.given_up);
    assert!(crate::peers::evaluate_with_layers(&p, &cfg, &[3, 3, 1]).is_err());
}

#[test]
fn shell_quoting() {
    assert_eq!(shell_quote("--num-layers"), "--num-layers");
    assert_eq!(shell_quote("Et|tL"), "'Et|tL'");
    assert_eq!(shell_quote("a'b"), r"'a'\''b'");
    assert_eq!(shell_quote(""), "''");
}

/// Megatron's formula by hand for GPT-3 1.3B-like inputs (Korthikanti's 34·s·b·h/t per layer
/// with SP and selective recomputation; `10 + 24/t` and 5 % otherwise).
#[test]
fn megatron_formula_matches_a_hand_computation() {
    let mut x = MegatronInputs {
        num_layers: 24.0,
        hidden: 2048.0,
        heads: 16.0,
        query_groups: 16.0,
        kv_channels: 128.0,
        ffn: 8192.0,
        padded_vocab: 51200.0,
        seq: 2048.0,
        micro_batch: 1.0,
        tp: 2.0,
        pp: 2.0,
        dp: 4.0,
        virtual_stages: None,
        num_microbatches: 8.0,
        sequence_parallel: true,
        recompute: Recompute::Selective,
        distributed_optimizer: true,
        swiglu: false,
        rms_norm: false,
        untied: false,
    };
    let m = megatron::theoretical_memory(&x);
    let h = 2048.0_f64;
    // 12h² per layer split over TP, 4h of norms per layer and 2h of final norm replicated.
    let params = (12.0 * h * h * 24.0 / 2.0 + h * 51200.0) / 2.0 + (4.0 * h * 24.0 + 2.0 * h) / 2.0;
    assert!((m.weight_and_optimizer_bytes - params * (6.0 + 3.0)).abs() < 1.0);
    let sbh = 2048.0 * h;
    let act = (34.0 * sbh * 24.0 + 8.0 * 2048.0 * 2.0 + sbh * 2.0) / 2.0;
    assert!((m.activation_bytes - act).abs() < 1.0);
    assert!(m.sequence_parallel_formula);
    // Without SP: (10 + 24/2)·sbh per layer, 5 % on top, not divided by TP; 4 of 8 micro-batches
    // in flight on 2 stages count fully.
    x.sequence_parallel = false;
    let m = megatron::theoretical_memory(&x);
    let act = (22.0 * sbh * 24.0 + 8.0 * 2048.0 * 2.0 + sbh * 2.0) * 1.05;
    assert!((m.activation_bytes - act).abs() < 1.0);
    assert!(!m.sequence_parallel_formula);
    // Fewer micro-batches than stages scale it down; one stage adds the logits.
    x.num_microbatches = 1.0;
    assert!((megatron::theoretical_memory(&x).activation_bytes - act / 2.0).abs() < 1.0);
    x.pp = 1.0;
    let one =
        (22.0 * sbh * 24.0 + 8.0 * 2048.0 + sbh + (2048.0 * 51200.0 / 2.0 + sbh) * 2.0) * 1.05;
    assert!((megatron::theoretical_memory(&x).activation_bytes - one).abs() < 1.0);
}

/// The layer split Megatron-LM builds from `args` (reference decoder of the flags' help texts).
fn megatron_split(args: &[String], layers: u64, pp: u64) -> Vec<u64> {
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .map(|k| args[k + 1].clone())
    };
    if let Some(layout) = value("--pipeline-model-parallel-layout") {
        return layout
            .split('|')
            .map(|s| s.chars().filter(|&c| c == 't').count() as u64)
            .collect();
    }
    let first = value("--decoder-first-pipeline-num-layers").map(|v| v.parse::<u64>().unwrap());
    let last = value("--decoder-last-pipeline-num-layers").map(|v| v.parse::<u64>().unwrap());
    let middle = pp - u64::from(first.is_some()) - u64::from(last.is_some());
    let rest = layers - first.unwrap_or(0) - last.unwrap_or(0);
    assert!(
        middle > 0 && rest.is_multiple_of(middle),
        "Megatron rejects {args:?}"
    );
    let mut out = Vec::new();
    out.extend(first);
    out.extend(std::iter::repeat_n(rest / middle, middle as usize));
    out.extend(last);
    out
}

proptest! {
    /// Any layer split (every stage at least one layer) comes back from the emitted flags.
    #[test]
    fn any_layer_split_round_trips_through_megatron_flags(
        split in proptest::collection::vec(1u64..6, 1..7)
    ) {
        let layers: u64 = split.iter().sum();
        let pp = split.len() as u64;
        let p = small_problem(layers, 4);
        let mut cfg = peer(Framework::MegatronLm, 1, pp, 1, ZeroStage::Zero0);
        cfg.micro_batches = 8;
        let args = megatron::arguments(&p, &cfg, &split);
        prop_assert_eq!(megatron_split(&args, layers, pp), split);
    }
}

/// Recomputation, interleaving and offload reach each engine's own options.
#[test]
fn recomputation_and_virtual_stages_reach_each_engine() {
    let p = small_problem(4, 4);
    let mut cfg = peer(Framework::MegatronLm, 1, 2, 2, ZeroStage::Zero0);
    cfg.micro_batches = 2;
    cfg.micro_batch_size = 2;
    cfg.recompute = Recompute::Full;
    cfg.schedule = PipelineSchedule::Interleaved { virtual_stages: 2 };
    let plan = peers::evaluate(&p, &cfg).unwrap();
    let m = export(&p, &plan, Engine::Megatron).unwrap();
    let args = &m.files[0].contents;
    assert!(args.contains("--recompute-granularity full"), "{args}");
    assert!(args.contains("--recompute-method uniform"));
    assert!(args.contains("--recompute-num-layers 1"));
    assert!(args.contains("--num-layers-per-virtual-pipeline-stage 1"));
    let t = export(&p, &plan, Engine::Torchtitan).unwrap();
    let toml: toml::Table = t.files[0].contents.parse().unwrap();
    assert_eq!(toml["activation_checkpoint"]["mode"].as_str(), Some("full"));
    assert_eq!(
        toml["parallelism"]["pipeline_parallel_schedule"].as_str(),
        Some("Interleaved1F1B")
    );
    // pp · v = 4 model parts of one layer each, embedding first, head last.
    let parts = toml["parallelism"]["module_fqns_per_model_part"]
        .as_array()
        .unwrap();
    assert_eq!(parts.len(), 4);
    assert_eq!(parts[0].as_array().unwrap().len(), 2);
    assert_eq!(parts[3].as_array().unwrap().len(), 3);
    let d = export(&p, &plan, Engine::DeepSpeed).unwrap();
    let json: serde_json::Value = serde_json::from_str(&d.files[0].contents).unwrap();
    assert!(json["activation_checkpointing"].is_object());
    // Selective recomputation: torchtitan's per-operator option; DeepSpeed checkpoints layers.
    cfg.recompute = Recompute::Selective;
    cfg.schedule = PipelineSchedule::OneFOneB;
    let plan = peers::evaluate(&p, &cfg).unwrap();
    let t = export(&p, &plan, Engine::Torchtitan).unwrap();
    let toml: toml::Table = t.files[0].contents.parse().unwrap();
    assert_eq!(
        toml["activation_checkpoint"]["selective_ac_option"].as_str(),
        Some("op")
    );
    let d = export(&p, &plan, Engine::DeepSpeed).unwrap();
    assert!(d.given_up.contains(&GivenUp::Recompute {
        plan: Recompute::Selective,
        engine: Recompute::Full
    }));
    // Pointwise recomputation: torchtitan's per-operator option (exact, priced as pointwise);
    // Megatron-LM's nearest is selective; recomputing on the leading stages only is given up.
    cfg.recompute = Recompute::Pointwise;
    let mut plan = peers::evaluate(&p, &cfg).unwrap();
    let t = export(&p, &plan, Engine::Torchtitan).unwrap();
    let toml: toml::Table = t.files[0].contents.parse().unwrap();
    assert_eq!(
        toml["activation_checkpoint"]["mode"].as_str(),
        Some("selective")
    );
    assert!(!t
        .given_up
        .iter()
        .any(|g| matches!(g, GivenUp::Recompute { .. })));
    let m = export(&p, &plan, Engine::Megatron).unwrap();
    assert!(m.given_up.contains(&GivenUp::Recompute {
        plan: Recompute::Pointwise,
        engine: Recompute::Selective
    }));
    assert!(m.files[0]
        .contents
        .contains("--recompute-granularity selective"));
    plan.recompute_stages = 1;
    let m = export(&p, &plan, Engine::Megatron).unwrap();
    assert!(m
        .given_up
        .contains(&GivenUp::RecomputeStages { plan: 1, stages: 2 }));
    // Optimizer offload goes into zero_optimization.
    let mut p = p;
    p.setup.offload.optimizer = memory_model::OffloadTarget::Cpu;
    let cfg = peer(Framework::DeepSpeed, 1, 1, 4, ZeroStage::Zero2);
    let plan = peers::evaluate(&p, &cfg).unwrap();
    let d = export(&p, &plan, Engine::DeepSpeed).unwrap();
    let json: serde_json::Value = serde_json::from_str(&d.files[0].contents).unwrap();
    assert_eq!(
        json["zero_optimization"]["offload_optimizer"]["device"],
        "cpu"
    );
}

/// Every per-linear layout torchtitan's `parallelize_module` can take (column, row or no split
/// for each of the four layer linears at one degree; not all four unsplit, which reads as no
/// tensor parallelism) exports to torchtitan exactly, priced as the plan; Megatron-LM, with its
/// fixed pairs, lists each non-standard linear as given up.
#[test]
fn per_linear_layouts_export_exactly_to_torchtitan() {
    use super::shape::LAYER_LINEARS;
    let p = small_problem(2, 4);
    let cfg = peer(Framework::Torchtitan, 2, 1, 2, ZeroStage::Zero3);
    let splits = [
        LinearSplit::Column,
        LinearSplit::Row,
        LinearSplit::Replicated,
    ];
    for code in 0..80usize {
        let layout: crate::peers::LinearLayout =
            std::array::from_fn(|i| splits[code / 3usize.pow(i as u32) % 3]);
        let plan = peers::evaluate_with_layout(&p, &cfg, &[2], &layout).unwrap();
        let e = export(&p, &plan, Engine::Torchtitan).unwrap();
        assert_eq!(
            e.fidelity,
            Fidelity::Exact,
            "{layout:?}: gave up {:?}",
            e.given_up
        );
        assert_eq!(
            e.plan.per_device_memory.total(),
            plan.per_device_memory.total()
        );
        assert_eq!(e.plan.step_time_s, plan.step_time_s);
        let py = &e.files[1].contents;
        let has = |s: &str| py.contains(s);
        // q/k/v as the layout says.
        match layout[0] {
            LinearSplit::Column => assert!(has("\"attention.wq\": ColwiseParallel()")),
            LinearSplit::Row => assert!(has(
                "\"attention.wq\": RowwiseParallel(output_layouts=Replicate())"
            )),
            _ => assert!(!has("\"attention.wq\"") && has("use_local_output=True)")),
        }
        let m = export(&p, &plan, Engine::Megatron).unwrap();
        for (i, (name, standard)) in LAYER_LINEARS.iter().enumerate() {
            let listed = m
                .given_up
                .iter()
                .any(|g| matches!(g, GivenUp::LinearLayout { linear, .. } if linear == name));
            let differs = layout[i] != *standard && layout[i] != LinearSplit::Replicated;
            assert!(!differs || listed, "{layout:?}: Megatron kept {name}");
        }
    }
}
