//! `pardis plan` and `pardis memory` end to end: the JSON report, every peer row's memory
//! reproduced to the byte by the `pardis memory` command the report names, and the defaults a
//! new user meets.

mod common;
use common::{json_report, pardis};

/// A small case: GPT-3 350M on one DGX node, short sequences.
const CASE: [&str; 9] = [
    "plan",
    "--model",
    "gpt3-350m",
    "--global-batch",
    "64",
    "--seq",
    "1024",
    "--ilp-time-limit",
    "60",
];

#[test]
fn every_peer_row_is_reproduced_by_pardis_memory() {
    let mut args = CASE.to_vec();
    args.push("--json");
    let r = json_report(&args);
    let mut rows = vec![&r["peer_reference"]];
    for peer in r["peers"].as_array().expect("peers") {
        rows.push(&peer["fastest"]);
        rows.push(&peer["leanest_within_budget"]);
    }
    let mut checked = 0;
    for row in rows.into_iter().filter(|v| !v.is_null()) {
        let command = row["memory_command"].as_str().expect("memory_command");
        let words: Vec<&str> = command.split_whitespace().skip(1).collect();
        let mut memory_args = words.clone();
        memory_args.push("--json");
        let m = json_report(&memory_args);
        assert_eq!(
            m["per_device"]["total"], row["plan"]["per_device_memory"]["total"],
            "{command}"
        );
        for (stage, expected) in row["plan"]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["index"].as_u64().unwrap(), &s["memory"]))
        {
            let got = &m["per_stage"][stage as usize];
            for key in ["parameters", "gradients", "optimizer_states", "activations"] {
                assert_eq!(got[key], expected[key], "{command}: stage {stage} {key}");
            }
            assert_eq!(
                got["buffers"], expected["buffers"],
                "{command}: stage {stage}"
            );
            assert_eq!(
                got["transient"], expected["transient"],
                "{command}: stage {stage}"
            );
            assert_eq!(got["total"], expected["total"], "{command}: stage {stage}");
        }
        checked += 1;
    }
    assert!(checked >= 4, "{checked} rows checked");
}

#[test]
fn plan_json_leads_with_the_leanest_plan_at_the_strongest_peers_time() {
    let mut args = CASE.to_vec();
    args.push("--json");
    let r = json_report(&args);
    assert_eq!(r["objective"]["kind"], "min-memory");
    assert_eq!(r["objective"]["reference"]["basis"], "strongest-peer");
    let budget = r["objective"]["time_budget_s"].as_f64().unwrap();
    let plan = &r["plan"];
    assert_eq!(plan["fits"], true);
    assert!(plan["step_time_s"].as_f64().unwrap() <= budget * (1.0 + 1e-9));
    assert!(r["memory_saving_vs_peer"].as_f64().unwrap() >= 0.0);
    assert_eq!(r["model"]["padded_vocab"], 51200);
    assert_eq!(plan["schedule"], "one_f_one_b");
    let total = plan["per_device_memory"]["total"].as_u64().unwrap();
    let sum: u64 = [
        "parameters",
        "gradients",
        "optimizer_states",
        "activations",
        "buffers",
        "transient",
        "overhead",
    ]
    .iter()
    .map(|k| plan["per_device_memory"][k].as_u64().unwrap())
    .sum();
    assert_eq!(total, sum);
}

#[test]
fn plan_table_fits_120_columns() {
    let out = pardis(&CASE);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("pardis: leanest in budget"), "{text}");
    for line in text.lines().filter(|l| l.starts_with(['┌', '│', '╞', '└'])) {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}

#[test]
fn memory_defaults_to_the_models_context_length() {
    // GPT-3 has 2048 positions: the default sequence must not exceed them.
    let r = json_report(&["memory", "--model", "gpt3-175b", "--tp", "8", "--json"]);
    assert!(r["per_device"]["total"].as_u64().unwrap() > 0);
    let long = pardis(&["memory", "--model", "gpt3-175b", "--seq", "4096"]);
    assert!(!long.status.success());
}

#[test]
fn memory_search_says_why_nothing_fits() {
    // 1 GiB fits no configuration of GPT-3 175B: the command names the reasons, not just "0".
    let out = pardis(&[
        "memory",
        "--model",
        "gpt3-175b",
        "--search",
        "--devices",
        "64",
        "--gpu-mem",
        "1GiB",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("0 of "), "{text}");
    assert!(text.contains("over the memory budget"), "{text}");
    assert!(text.contains("tp does not divide num_heads"), "{text}");
    let r = json_report(&[
        "memory",
        "--model",
        "llama2-70b",
        "--search",
        "--devices",
        "8192",
        "--gpu-mem",
        "80GiB",
        "--json",
    ]);
    assert!(!r["configurations"].as_array().unwrap().is_empty(), "{r}");
}

/// `--emit all --out DIR` writes every engine's files, refuses to overwrite them on a second run
/// (leaving them untouched), and replaces them with `--force`; without `--out` the files go to
/// stdout.
#[test]
fn emit_writes_engine_files_and_never_overwrites_unasked() {
    let dir = std::env::temp_dir().join(format!("pardis-emit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.to_str().expect("utf-8 temp dir");
    let mut args = CASE.to_vec();
    args.extend(["--emit", "all", "--out", out]);
    let first = pardis(&args);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let names = [
        "megatron_args.sh",
        "torchtitan.toml",
        "torchtitan_tp_plan.py",
        "deepspeed.json",
        "deepspeed_notes.txt",
    ];
    for n in names {
        assert!(dir.join(n).is_file(), "{n} missing");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("deepspeed.json")).unwrap())
            .expect("deepspeed.json parses");
    assert!(json["train_micro_batch_size_per_gpu"].as_u64().is_some());
    // A file the user edited is not overwritten, and nothing else is written either.
    std::fs::write(dir.join("torchtitan.toml"), "# mine\n").unwrap();
    std::fs::remove_file(dir.join("deepspeed.json")).unwrap();
    let second = pardis(&args);
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("refusing to overwrite"), "{err}");
    assert!(err.contains("torchtitan.toml"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("torchtitan.toml")).unwrap(),
        "# mine\n"
    );
    assert!(!dir.join("deepspeed.json").exists());
    args.push("--force");
    let forced = pardis(&args);
    assert!(forced.status.success());
    assert_ne!(
        std::fs::read_to_string(dir.join("torchtitan.toml")).unwrap(),
        "# mine\n"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // Without --out: every file on stdout after its `==> name <==` line.
    let mut args = CASE.to_vec();
    args.extend(["--emit", "megatron"]);
    let printed = pardis(&args);
    assert!(printed.status.success());
    let stdout = String::from_utf8_lossy(&printed.stdout);
    assert!(stdout.starts_with("==> megatron_args.sh <==\n"), "{stdout}");
    assert!(stdout.contains("--tensor-model-parallel-size"));
}

/// The default case (`cargo xtask demo`): torchtitan's FSDP needs less memory than the chosen
/// plan at 0.1 % over the budget, so the table ends with a note naming the `--time-slack` that
/// reaches its step time; with that slack pardis's plan is at most as large and within it.
#[test]
fn a_leaner_but_slower_peer_gets_a_slack_hint_that_works() {
    let out = pardis(&["plan", "--ilp-time-limit", "60"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Paragraphs: a line and its continuation lines (indented by two spaces), joined.
    let mut paragraphs: Vec<String> = Vec::new();
    for line in text.lines() {
        match (line.strip_prefix("  "), paragraphs.last_mut()) {
            (Some(rest), Some(last)) => {
                last.push(' ');
                last.push_str(rest);
            }
            _ => paragraphs.push(line.to_string()),
        }
    }
    let note = paragraphs
        .iter()
        .find(|l| l.starts_with("note: ") && l.contains("--time-slack"))
        .unwrap_or_else(|| panic!("no note in\n{text}"));
    let slack = note
        .split("`--time-slack ")
        .nth(1)
        .and_then(|s| s.split('`').next())
        .unwrap_or_else(|| panic!("no slack in {note}"));
    assert!(slack.parse::<f64>().unwrap() > 0.0, "{note}");
    let r = json_report(&[
        "plan",
        "--ilp-time-limit",
        "60",
        "--time-slack",
        slack,
        "--json",
    ]);
    let budget = r["objective"]["time_budget_s"].as_f64().unwrap();
    let plan = &r["plan"];
    assert!(plan["step_time_s"].as_f64().unwrap() <= budget * (1.0 + 1e-9));
    let leanest_peer = r["peers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["fastest"]["plan"].as_object())
        .filter(|p| p["step_time_s"].as_f64().unwrap() <= budget * (1.0 + 1e-9))
        .map(|p| p["per_device_memory"]["total"].as_u64().unwrap())
        .min()
        .expect("the hinted peer is within the new budget");
    assert!(plan["per_device_memory"]["total"].as_u64().unwrap() <= leanest_peer);
}
