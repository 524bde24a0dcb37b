//! `pardis memory` (issue #3): training memory per device, per stage and on the cluster, and the
//! search of the parallel configurations that fit a memory budget.

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;
use pardis::memory::{
    estimate, search, sharded_layer, BaseQuant, DeviceBreakdown, LoraRanks, MemoryReport,
    ModelConfig, OffloadTarget, Optimizer, Peft, PipelineSchedule, Precision, Recompute, SearchHit,
    SearchSpace, TrainingSetup, ZeroStage,
};
use serde_json::json;

use crate::output;

/// Arguments of `pardis memory`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Built-in model (gpt2, gpt3-125m … gpt3-175b, llama2-7b/13b/70b, llama3-8b/70b, mixtral-8x7b).
    #[arg(long, default_value = "llama2-7b")]
    model: String,
    /// Read the model from a Hugging Face config.json instead of --model.
    #[arg(long)]
    hf_config: Option<PathBuf>,
    /// Data-parallel degree.
    #[arg(long, default_value_t = 1)]
    dp: u64,
    /// Tensor-parallel degree.
    #[arg(long, default_value_t = 1)]
    tp: u64,
    /// Pipeline-parallel degree.
    #[arg(long, default_value_t = 1)]
    pp: u64,
    /// Context-parallel degree.
    #[arg(long, default_value_t = 1)]
    cp: u64,
    /// Expert-parallel degree (MoE models).
    #[arg(long, default_value_t = 1)]
    ep: u64,
    /// Megatron sequence parallelism.
    #[arg(long)]
    sp: bool,
    /// ZeRO stage 0–3.
    #[arg(long, default_value_t = 0)]
    zero: u64,
    /// Megatron's distributed optimizer (placement of ZeRO-1); overrides --zero.
    #[arg(long)]
    distributed_optimizer: bool,
    /// Pipeline schedule.
    #[arg(long, value_enum, default_value_t = Schedule::OneFOneB)]
    schedule: Schedule,
    /// Model chunks per device for --schedule interleaved.
    #[arg(long, default_value_t = 2)]
    virtual_stages: u64,
    /// Micro-batch size per device.
    #[arg(long, default_value_t = 1)]
    micro_batch: u64,
    /// Sequence length; default: the model's context length, at most 4096.
    #[arg(long)]
    seq: Option<u64>,
    /// Pad the vocabulary to a multiple of N, as Megatron-LM does (128 × tensor parallel 8, the
    /// same default as `pardis plan`); 1 keeps the model's own vocabulary.
    #[arg(long, default_value_t = pardis::memory::MEGATRON_VOCAB_PADDING)]
    vocab_pad: u64,
    /// Micro-batches per step (gradient accumulation); default: pp.
    #[arg(long)]
    num_microbatches: Option<u64>,
    /// Precision.
    #[arg(long, value_enum, default_value_t = PrecisionArg::Mixed)]
    precision: PrecisionArg,
    /// Keep gradients in fp32 (Megatron main_grad).
    #[arg(long)]
    fp32_grads: bool,
    /// Optimizer.
    #[arg(long, value_enum, default_value_t = OptimizerArg::Adam)]
    optimizer: OptimizerArg,
    /// Activation recomputation.
    #[arg(long, value_enum, default_value_t = RecomputeArg::None)]
    recompute: RecomputeArg,
    /// Flash attention (no s×s score tensors).
    #[arg(long)]
    flash: bool,
    /// Offload optimizer states (and fp32 gradients) to cpu or nvme.
    #[arg(long, value_enum, default_value_t = OffloadArg::None)]
    offload_optimizer: OffloadArg,
    /// Offload parameters (ZeRO-3) to cpu or nvme.
    #[arg(long, value_enum, default_value_t = OffloadArg::None)]
    offload_params: OffloadArg,
    /// LoRA rank on every linear layer (frozen base); 0 = full training.
    #[arg(long, default_value_t = 0)]
    lora_rank: u64,
    /// Storage of the frozen base weights with --lora-rank.
    #[arg(long, value_enum, default_value_t = QuantArg::None)]
    quant: QuantArg,
    /// Per-device memory budget (e.g. 80GiB).
    #[arg(long, value_parser = output::parse_bytes)]
    gpu_mem: Option<u64>,
    /// Fixed per-device overhead (CUDA context etc.).
    #[arg(long, value_parser = output::parse_bytes, default_value = "0")]
    overhead: u64,
    /// GPUs per node (host-memory estimate).
    #[arg(long, default_value_t = 8)]
    gpus_per_node: u64,
    /// Parameters are partitioned at construction (deepspeed.zero.Init): no full fp32 host copy.
    #[arg(long)]
    zero_init: bool,
    /// Devices in the cluster: checked against dp·tp·pp·cp, or searched with --search.
    #[arg(long)]
    devices: Option<u64>,
    /// List every (dp, tp, pp, sp, zero, recompute, micro-batch) that fits --gpu-mem on --devices.
    #[arg(long)]
    search: bool,
    /// Global batch (sequences) for --search; default: m = pp micro-batches.
    #[arg(long)]
    global_batch: Option<u64>,
    /// Rows shown by --search (JSON has all).
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Also print the operators of one layer with their per-device bytes (one micro-batch).
    #[arg(long)]
    operators: bool,
    /// Emit machine-readable JSON on stdout.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Schedule {
    #[value(name = "1f1b")]
    OneFOneB,
    Gpipe,
    Interleaved,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PrecisionArg {
    Mixed,
    Fp32,
    Bf16,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OptimizerArg {
    Adam,
    Sgd,
    SgdMomentum,
    Adafactor,
    Adam8bit,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RecomputeArg {
    /// Keep every activation.
    None,
    /// Recompute the attention core (s×s scores; nothing with flash attention).
    Selective,
    /// Selective plus the norm and activation-function outputs that feed a linear.
    Pointwise,
    /// Keep only each layer's input; rerun the layer in backward.
    Full,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OffloadArg {
    None,
    Cpu,
    Nvme,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum QuantArg {
    None,
    Int8,
    Nf4,
    Nf4Dq,
}

fn offload(a: OffloadArg) -> OffloadTarget {
    match a {
        OffloadArg::None => OffloadTarget::None,
        OffloadArg::Cpu => OffloadTarget::Cpu,
        OffloadArg::Nvme => OffloadTarget::Nvme,
    }
}

fn load_model(args: &Args) -> anyhow::Result<ModelConfig> {
    anyhow::ensure!(args.vocab_pad > 0, "--vocab-pad must be positive");
    let model = match &args.hf_config {
        Some(path) => ModelConfig::from_hf_config_file(path)
            .with_context(|| format!("reading {}", path.display()))?,
        None => ModelConfig::preset(&args.model)?,
    };
    Ok(model.with_vocab_padding(args.vocab_pad))
}

/// Longest default sequence: the model's context length, capped here.
const DEFAULT_SEQ_CAP: u64 = 4096;

/// `--seq`, or the model's context length capped at [`DEFAULT_SEQ_CAP`].
fn seq_len(args: &Args, model: &ModelConfig) -> u64 {
    args.seq
        .unwrap_or_else(|| model.max_positions.min(DEFAULT_SEQ_CAP))
}

fn build_setup(args: &Args, model: &ModelConfig) -> anyhow::Result<TrainingSetup> {
    let mut s = TrainingSetup {
        micro_batch: args.micro_batch,
        seq_len: seq_len(args, model),
        num_microbatches: args.num_microbatches.unwrap_or(args.pp.max(1)),
        precision: match args.precision {
            PrecisionArg::Mixed => Precision::Mixed,
            PrecisionArg::Fp32 => Precision::Fp32,
            PrecisionArg::Bf16 => Precision::PureBf16,
        },
        fp32_grad_accumulation: args.fp32_grads,
        optimizer: match args.optimizer {
            OptimizerArg::Adam => Optimizer::Adam,
            OptimizerArg::Sgd => Optimizer::Sgd { momentum: false },
            OptimizerArg::SgdMomentum => Optimizer::Sgd { momentum: true },
            OptimizerArg::Adafactor => Optimizer::Adafactor,
            OptimizerArg::Adam8bit => Optimizer::Adam8bit,
        },
        recompute: match args.recompute {
            RecomputeArg::None => Recompute::None,
            RecomputeArg::Selective => Recompute::Selective,
            RecomputeArg::Pointwise => Recompute::Pointwise,
            RecomputeArg::Full => Recompute::Full,
        },
        flash_attention: args.flash,
        overhead_bytes: args.overhead,
        ..TrainingSetup::default()
    };
    let p = &mut s.parallel;
    (p.dp, p.tp, p.pp, p.cp, p.ep, p.sequence_parallel) =
        (args.dp, args.tp, args.pp, args.cp, args.ep, args.sp);
    p.zero = if args.distributed_optimizer {
        ZeroStage::DistributedOptimizer
    } else {
        ZeroStage::from_number(args.zero)?
    };
    p.schedule = match args.schedule {
        Schedule::OneFOneB => PipelineSchedule::OneFOneB,
        Schedule::Gpipe => PipelineSchedule::GPipe,
        Schedule::Interleaved => PipelineSchedule::Interleaved {
            virtual_stages: args.virtual_stages,
        },
    };
    s.offload.optimizer = offload(args.offload_optimizer);
    s.offload.parameters = offload(args.offload_params);
    s.host.gpus_per_node = args.gpus_per_node;
    s.host.zero_init = args.zero_init;
    if args.lora_rank > 0 {
        let base = match args.quant {
            QuantArg::None => BaseQuant::None,
            QuantArg::Int8 => BaseQuant::Int8,
            QuantArg::Nf4 => BaseQuant::Nf4 {
                double_quant: false,
            },
            QuantArg::Nf4Dq => BaseQuant::Nf4 { double_quant: true },
        };
        s.peft = Some(Peft {
            lora: LoraRanks::all(args.lora_rank),
            base,
        });
    } else if !matches!(args.quant, QuantArg::None) {
        anyhow::bail!("--quant needs --lora-rank (quantized base weights are frozen)");
    }
    Ok(s)
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let model = load_model(&args)?;
    let setup = build_setup(&args, &model)?;
    if args.search {
        return run_search(&args, &model, setup);
    }
    setup.validate(&model, args.devices)?;
    let report = estimate(&model, &setup)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report_json(&report))?);
    } else {
        print_report(&args, &model, &report);
        if args.operators {
            print_operators(&model, &setup)?;
        }
    }
    Ok(())
}

fn print_operators(model: &ModelConfig, setup: &TrainingSetup) -> anyhow::Result<()> {
    let mut t = output::table([
        "operator (one layer)",
        "parameters",
        "gradients",
        "optimizer",
        "activations",
        "replicated on cluster",
    ]);
    for (op, m) in sharded_layer(model, setup)? {
        let d = &m.device;
        let mut cells = vec![op.name.to_string()];
        cells.extend(
            [
                d.parameters,
                d.gradients,
                d.optimizer_states,
                d.activations,
                m.replicated().total(),
            ]
            .map(output::bytes),
        );
        t.add_row(cells);
    }
    println!("{t}");
    Ok(())
}

/// Per-device bytes by category and their total (also the `per_device_memory` of `pardis plan`).
pub(crate) fn breakdown_json(d: &DeviceBreakdown) -> serde_json::Value {
    json!({
        "parameters": d.parameters,
        "gradients": d.gradients,
        "optimizer_states": d.optimizer_states,
        "activations": d.activations,
        "buffers": d.buffers,
        "transient": d.transient,
        "overhead": d.overhead,
        "total": d.total(),
    })
}

fn report_json(r: &MemoryReport) -> serde_json::Value {
    let stages: Vec<_> = r
        .per_stage
        .iter()
        .map(|s| {
            let mut v = breakdown_json(&s.memory);
            v["stage"] = json!(s.stage);
            v["layers"] = json!(s.layers);
            v["in_flight_microbatches"] = json!(s.in_flight_microbatches);
            v
        })
        .collect();
    json!({
        "per_device": breakdown_json(&r.per_device),
        "per_stage": stages,
        "cluster": {
            "total": r.cluster.total,
            "unique": r.cluster.unique_total,
            "redundancy_ratio": r.cluster.redundancy_ratio,
        },
    })
}

fn row(d: &DeviceBreakdown) -> [String; 8] {
    [
        d.parameters,
        d.gradients,
        d.optimizer_states,
        d.activations,
        d.buffers,
        d.transient,
        d.overhead,
        d.total(),
    ]
    .map(output::bytes)
}

fn print_report(args: &Args, model: &ModelConfig, r: &MemoryReport) {
    let p = &r.per_stage;
    println!(
        "{}: {:.3}B parameters, {} devices (dp {} · tp {} · pp {} · cp {}), micro-batch {}, seq {}",
        model.name,
        model.num_parameters() as f64 / 1e9,
        r.devices,
        args.dp,
        args.tp,
        args.pp,
        args.cp,
        args.micro_batch,
        seq_len(args, model)
    );
    let mut t = output::table([
        "stage",
        "layers",
        "in-flight",
        "parameters",
        "gradients",
        "optimizer",
        "activations",
        "buffers",
        "transient",
        "overhead",
        "total",
    ]);
    for s in p {
        let mut cells = vec![
            s.stage.to_string(),
            s.layers.to_string(),
            format!("{:.2}", s.in_flight_microbatches),
        ];
        cells.extend(row(&s.memory));
        t.add_row(cells);
    }
    println!("{t}");
    let peak = r.per_device.total();
    print!(
        "peak per device: {} (stage {})",
        output::bytes(peak),
        r.peak_stage
    );
    match args.gpu_mem {
        Some(budget) if peak <= budget => println!(
            " — fits in {} ({} free)",
            output::bytes(budget),
            output::bytes(budget - peak)
        ),
        Some(budget) => println!(
            " — does NOT fit in {} (short by {})",
            output::bytes(budget),
            output::bytes(peak - budget)
        ),
        None => println!(),
    }
    let c = &r.cluster;
    let mut red = output::table(["cluster", "held on all devices", "unique", "redundancy"]);
    let ratio = |a: u64, b: u64| {
        if b == 0 {
            "-".to_string()
        } else {
            format!("{:.2}×", a as f64 / b as f64)
        }
    };
    for (name, held, unique) in [
        ("parameters", c.held.parameters, c.unique.parameters),
        ("gradients", c.held.gradients, c.unique.gradients),
        (
            "optimizer states",
            c.held.optimizer_states,
            c.unique.optimizer_states,
        ),
        ("activations", c.held.activations, c.unique.activations),
        ("total", c.total, c.unique_total),
    ] {
        red.add_row([
            name.to_string(),
            output::bytes(held),
            output::bytes(unique),
            ratio(held, unique),
        ]);
    }
    println!("{red}");
    println!("host memory per node: {}", output::bytes(r.host_per_node));
}

fn run_search(args: &Args, model: &ModelConfig, base: TrainingSetup) -> anyhow::Result<()> {
    let devices = args.devices.context("--search needs --devices")?;
    let budget = args.gpu_mem.context("--search needs --gpu-mem")?;
    let mut space = SearchSpace::new(devices, budget, base);
    space.global_batch = args.global_batch;
    let start = std::time::Instant::now();
    let outcome = search(model, &space)?;
    let elapsed = start.elapsed();
    let hits = &outcome.hits;
    if args.json {
        let rows: Vec<_> = hits.iter().map(hit_json).collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "configurations": rows,
                "examined": outcome.examined,
                "rejected": outcome.rejected,
            }))?
        );
        return Ok(());
    }
    println!(
        "{}: {} of {} configurations fit {} on {} devices (searched in {:.1} ms){}",
        model.name,
        hits.len(),
        outcome.examined,
        output::bytes(budget),
        devices,
        elapsed.as_secs_f64() * 1e3,
        if hits.is_empty() { "" } else { ", best first:" }
    );
    if hits.is_empty() {
        let mut t = output::table(["rejected", "reason", "for example"]);
        for r in &outcome.rejected {
            t.add_row([r.count.to_string(), r.reason.clone(), r.example.clone()]);
        }
        println!("{t}");
        return Ok(());
    }
    let mut t = output::table([
        "dp",
        "tp",
        "pp",
        "sp",
        "zero",
        "recompute",
        "micro-batch",
        "m",
        "states",
        "activations",
        "peak",
    ]);
    for h in hits.iter().take(args.limit) {
        let d = &h.per_device;
        t.add_row([
            h.dp.to_string(),
            h.tp.to_string(),
            h.pp.to_string(),
            if h.sequence_parallel { "yes" } else { "no" }.to_string(),
            format!("{:?}", h.zero),
            format!("{:?}", h.recompute).to_lowercase(),
            h.micro_batch.to_string(),
            h.num_microbatches.to_string(),
            output::bytes(d.parameters + d.gradients + d.optimizer_states),
            output::bytes(d.activations),
            output::bytes(d.total()),
        ]);
    }
    println!("{t}");
    if hits.len() > args.limit {
        println!(
            "({} more; --limit N or --json for all)",
            hits.len() - args.limit
        );
    }
    Ok(())
}

fn hit_json(h: &SearchHit) -> serde_json::Value {
    json!({
        "dp": h.dp, "tp": h.tp, "pp": h.pp, "sp": h.sequence_parallel,
        "zero": h.zero, "recompute": h.recompute, "micro_batch": h.micro_batch,
        "num_microbatches": h.num_microbatches, "per_device": breakdown_json(&h.per_device),
    })
}
