//! Plans exported to Megatron-LM, torchtitan and DeepSpeed: golden files for two models, every
//! file parses and names only options its engine defines, and Megatron's own memory formula
//! agrees with memory-model within the documented differences.
//!
//! Regenerate the golden files with `cargo run -p parallel-plan --example export_golden` (only
//! when the planner or the export changed on purpose).

use std::path::PathBuf;

use memory_model::{ModelConfig, PipelineSchedule, Recompute, ZeroStage, MEGATRON_VOCAB_PADDING};
use parallel_plan::export::{self, deepspeed, megatron, torchtitan, Engine, Export};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::peers::{self, Framework, PeerConfig};
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::Problem;

/// The golden cases: (directory, model, DGX A100 nodes). Keep in step with
/// `examples/export_golden.rs`.
const CASES: [(&str, &str, usize); 2] = [
    ("gpt3-1.3b-8", "gpt3-1.3b", 1),
    ("llama2-7b-16", "llama2-7b", 2),
];

fn problem(model: &str, nodes: usize) -> Problem {
    let model = ModelConfig::preset(model)
        .unwrap()
        .with_vocab_padding(MEGATRON_VOCAB_PADDING);
    let mut p = Problem::new(model, DeviceMesh::preset("dgx-a100-80g", nodes).unwrap());
    // Generous: every ILP is solved to optimality, so the plan does not depend on the machine.
    p.solver.time_limit_s = 60.0;
    p
}

fn exports(model: &str, nodes: usize) -> Vec<Export> {
    let p = problem(model, nodes);
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.0 }, &|_, _, _| {}).unwrap();
    Engine::ALL
        .iter()
        .map(|&e| export::export(&p, &report.plan, e).unwrap())
        .collect()
}

fn golden_dir(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(case)
}

/// Every key path of a JSON value (array elements share their array's path).
fn json_paths(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                if v.is_object()
                    || v.as_array()
                        .is_some_and(|a| a.iter().any(|x| x.is_object()))
                {
                    json_paths(v, &p, out);
                } else {
                    out.push(p);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| json_paths(x, prefix, out)),
        _ => out.push(prefix.to_string()),
    }
}

/// The flags of `megatron_args.sh`'s array.
fn megatron_flags(script: &str) -> Vec<String> {
    let body = script
        .split("PARDIS_MEGATRON_ARGS=(\n")
        .nth(1)
        .and_then(|s| s.split("\n)").next())
        .expect("an argument array");
    body.lines()
        .map(|l| l.split_whitespace().next().expect("a flag").to_string())
        .collect()
}

fn check_file(name: &str, contents: &str) {
    match name {
        "megatron_args.sh" => {
            let flags = megatron_flags(contents);
            assert!(flags.len() > 10);
            for f in flags {
                assert!(megatron::ALLOWED_ARGUMENTS.contains(&f.as_str()), "{f}");
            }
        }
        "torchtitan.toml" => {
            let t: toml::Table = contents.parse().expect("TOML");
            for (section, options) in &t {
                for option in options.as_table().expect("a section").keys() {
                    let key = format!("{section}.{option}");
                    assert!(torchtitan::ALLOWED_OPTIONS.contains(&key.as_str()), "{key}");
                }
            }
            assert!(t["parallelism"].get("tensor_parallel_degree").is_some());
            assert!(t["training"].get("seq_len").is_some());
        }
        "torchtitan_tp_plan.py" => {
            let styles = [
                "ColwiseParallel(",
                "RowwiseParallel(",
                "SequenceParallel(",
                "PrepareModuleInput(",
            ];
            // Every plan entry (`    "module": Style(...),`) uses one of torch's four styles.
            let entries: Vec<&str> = contents
                .lines()
                .filter(|l| l.starts_with("    \"") && l.contains("\": "))
                .collect();
            for line in &entries {
                let style = line.split("\": ").nth(1).unwrap_or("");
                assert!(styles.iter().any(|s| style.starts_with(s)), "{line}");
            }
            assert!(contents.contains("def apply_pardis_tp(model, tp_mesh):"));
        }
        "deepspeed.json" => {
            let v: serde_json::Value = serde_json::from_str(contents).expect("JSON");
            let mut paths = Vec::new();
            json_paths(&v, "", &mut paths);
            for p in paths {
                assert!(deepspeed::ALLOWED_KEYS.contains(&p.as_str()), "{p}");
            }
            let b = |k: &str| v[k].as_u64().unwrap();
            assert_eq!(
                b("train_batch_size")
                    % (b("train_micro_batch_size_per_gpu") * b("gradient_accumulation_steps")),
                0
            );
        }
        "deepspeed_notes.txt" => assert!(contents.starts_with("pardis plan -> DeepSpeed")),
        other => panic!("unexpected file {other}"),
    }
}

/// Megatron-LM with TP 2 + SP, PP 2, the distributed optimizer and selective recomputation on
/// Llama-2 7B over 16 GPUs: every engine's TP plan, stage lists and AutoTP specs. Keep in step
/// with `examples/export_golden.rs`.
const TP_PP_CASE: PeerConfig = PeerConfig {
    framework: Framework::MegatronLm,
    tp: 2,
    pp: 2,
    dp: 4,
    sequence_parallel: true,
    zero: ZeroStage::DistributedOptimizer,
    recompute: Recompute::Selective,
    micro_batch_size: 1,
    micro_batches: 64,
    schedule: PipelineSchedule::OneFOneB,
    offload_optimizer: false,
};

#[test]
fn golden_files_for_two_models() {
    let p = problem("llama2-7b", 2);
    let plan = peers::evaluate(&p, &TP_PP_CASE).unwrap();
    let tp_pp: Vec<Export> = Engine::ALL
        .iter()
        .map(|&e| export::export(&p, &plan, e).unwrap())
        .collect();
    // Megatron-LM runs its own configuration exactly.
    assert_eq!(
        tp_pp[0].fidelity,
        export::Fidelity::Exact,
        "{:?}",
        tp_pp[0].given_up
    );
    let cases = CASES
        .iter()
        .map(|&(case, model, nodes)| (case, exports(model, nodes)))
        .chain([("llama2-7b-16-tp2-pp2", tp_pp)]);
    for (case, exported) in cases {
        for e in exported {
            for f in &e.files {
                check_file(&f.name, &f.contents);
                let path = golden_dir(case).join(&f.name);
                let golden = std::fs::read_to_string(&path).unwrap_or_else(|_| {
                    panic!("{} missing: run the export_golden example", path.display())
                });
                assert_eq!(
                    f.contents,
                    golden,
                    "{} differs from its golden file",
                    path.display()
                );
            }
        }
    }
}

/// Megatron's formula and memory-model on GPT-3 2.7B (multi-head attention with
/// `kv-channels = hidden / heads`, unfused attention): weights and optimizer agree once the
/// itemised differences (gradient bytes, biases, position table, final norm) are added, with
/// nothing left unexplained; activations under Korthikanti's formula (sequence parallelism with
/// selective recomputation) agree within 2 %.
#[test]
fn megatron_formula_agrees_with_memory_model() {
    let mut p = problem("gpt3-2.7b", 1);
    p.setup.flash_attention = false;
    for fp32_grads in [false, true] {
        p.setup.fp32_grad_accumulation = fp32_grads;
        let cfg = PeerConfig {
            framework: Framework::MegatronLm,
            tp: 4,
            pp: 1,
            dp: 2,
            sequence_parallel: true,
            zero: ZeroStage::DistributedOptimizer,
            recompute: Recompute::Selective,
            micro_batch_size: 1,
            micro_batches: 128,
            schedule: PipelineSchedule::OneFOneB,
            offload_optimizer: false,
        };
        let plan = peers::evaluate(&p, &cfg).unwrap();
        let c = megatron::cross_check(&p, &cfg, &[p.model.num_layers], &plan);
        assert!(c.megatron.sequence_parallel_formula);
        assert!(
            !c.differences
                .iter()
                .any(|d| d.what.starts_with("unexplained")),
            "{:?}",
            c.differences
        );
        let wo = c.pardis_weight_and_optimizer as f64;
        let explained = c.explained_weight_and_optimizer();
        assert!(
            (wo - explained).abs() / wo < 1e-3,
            "weights+optimizer: memory-model {wo}, Megatron + differences {explained} ({:?})",
            c.differences
        );
        let act = c.pardis_activations as f64;
        let theirs = c.megatron.activation_bytes;
        assert!(
            (act - theirs).abs() / theirs < 0.02,
            "activations: memory-model {act}, Megatron {theirs}"
        );
    }
}
