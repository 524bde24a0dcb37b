//! The transformer planner: tying, trivial meshes, validity, and agreement with memory-model.

use memory_model::MEGATRON_VOCAB_PADDING;
use memory_model::{estimate, ModelConfig, PipelineSchedule, Recompute};
use parallel_plan::ilp::{IlpObjective, IlpSolution, SolveStatus, SolverConfig, StrategyGraph};
use parallel_plan::mesh::DeviceMesh;
use parallel_plan::peers::{self, Framework};
use parallel_plan::planner::{self, Objective};
use parallel_plan::search::{balanced_layers, Candidate, Problem};
use parallel_plan::PlanError;

fn quiet(_: usize, _: usize, _: &str) {}

/// GPT-3 125M shapes with `layers` layers, short sequences: small ILPs, fast tests.
fn small_problem(layers: u64, devices: usize) -> Problem {
    small_model_problem("gpt3-125m", layers, devices)
}

fn small_model_problem(name: &str, layers: u64, devices: usize) -> Problem {
    let mut model = ModelConfig::preset(name)
        .unwrap()
        .with_vocab_padding(MEGATRON_VOCAB_PADDING);
    model.num_layers = layers;
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1)
        .unwrap()
        .stage_mesh(devices)
        .unwrap();
    let mut p = Problem::new(model, mesh);
    p.global_batch = 16;
    p.setup.seq_len = 256;
    // Proven optima even on a loaded machine (HiGHS's limit is wall-clock time).
    p.solver.time_limit_s = 60.0;
    p
}

/// HiGHS run to proven optimality: no time limit, zero MIP gap.
fn exact() -> SolverConfig {
    SolverConfig {
        time_limit_s: f64::INFINITY,
        mip_rel_gap: 0.0,
    }
}

const FASTEST: IlpObjective = IlpObjective::MinTime {
    memory_budget: None,
};

/// The tied and the untied ILP of one stage of a small model.
fn tied_and_untied(layers: u64, factor: Option<usize>) -> (StrategyGraph, StrategyGraph) {
    let mut p = small_problem(layers, 4);
    let mesh = match factor {
        Some(f) => p.mesh.factorized(f).unwrap(),
        None => p.mesh.clone(),
    };
    let cand = Candidate::new(p.model.num_layers, 1, mesh, 2);
    let tied = p.build(&cand, None).unwrap().remove(0).space.ilp;
    p.tie_layers = false;
    let untied = p.build(&cand, None).unwrap().remove(0).space.ilp;
    assert!(untied.nodes.len() > tied.nodes.len());
    (tied, untied)
}

/// The tied choice applied to every layer of the untied graph (operators matched by name).
fn expand(tied: &StrategyGraph, untied: &StrategyGraph, choice: &[usize]) -> Vec<usize> {
    untied
        .nodes
        .iter()
        .map(|n| {
            let k = tied.nodes.iter().position(|t| t.name == n.name).unwrap();
            assert_eq!(tied.nodes[k].time, n.time, "{}", n.name);
            choice[k]
        })
        .collect()
}

/// Both ILPs solved to proven optimality.
fn solve_both(
    t: &StrategyGraph,
    u: &StrategyGraph,
    objective: IlpObjective,
) -> (IlpSolution, IlpSolution) {
    let (st, su) = (
        t.solve(objective, &exact()).unwrap(),
        u.solve(objective, &exact()).unwrap(),
    );
    assert_eq!(st.stats.status, SolveStatus::Optimal);
    assert_eq!(su.stats.status, SolveStatus::Optimal);
    (st, su)
}

/// Tying is exact for min-time: the tied and untied ILPs, both proven optimal, reach the same
/// step time (2 and 3 layers; one mesh axis and a 2×2 factorization).
#[test]
fn tying_gives_the_untied_min_time_optimum() {
    for (layers, factor) in [(2, None), (3, None), (3, Some(2))] {
        let (t, u) = tied_and_untied(layers, factor);
        let (ft, fu) = solve_both(&t, &u, FASTEST);
        assert!(
            (ft.time - fu.time).abs() <= 1e-12 * fu.time,
            "{layers} layers: tied {} untied {}",
            ft.time,
            fu.time
        );
        assert!(ft.stats.variables < fu.stats.variables);
        // The tied optimum costs the same in the untied graph (copies accounted exactly).
        let expanded = expand(&t, &u, &ft.choice);
        assert!((u.time_of(&expanded) - ft.time).abs() <= 1e-12 * ft.time);
        assert_eq!(u.memory_of(&expanded), ft.memory);
    }
}

/// Under a time bound the untied ILP may give different layers different strategies (one time
/// budget shared by identical items: a knapsack), which tying excludes, so there tying is exact
/// only up to that mixing: the tied optimum, expanded to every layer, is a feasible untied plan
/// with the same time and memory (so untied ≤ tied, exactly), both proven optimal; the mixing
/// gain is small on this model (a few per cent: the buffers' caps and the transients' maxima
/// reward mixing a little more than the per-operator sums alone); and where the bound does not
/// bind, both are at least the per-node lower bound.
#[test]
fn tying_under_a_time_bound_differs_only_by_mixing_layers() {
    let (t, u) = tied_and_untied(3, None);
    let fastest = t.solve(FASTEST, &exact()).unwrap().time;
    for slack in [0.0, 0.05, 0.2, 100.0] {
        let bound = IlpObjective::MinMemory {
            time_limit: fastest * (1.0 + slack),
        };
        let (mt, mu) = solve_both(&t, &u, bound);
        let expanded = expand(&t, &u, &mt.choice);
        assert_eq!(u.memory_of(&expanded), mt.memory, "slack {slack}");
        assert!((u.time_of(&expanded) - mt.time).abs() <= 1e-12 * mt.time);
        assert!(mu.memory <= mt.memory, "slack {slack}");
        assert!(
            (mt.memory - mu.memory) as f64 <= 0.05 * mu.memory as f64,
            "slack {slack}: tied {} untied {}",
            mt.memory,
            mu.memory
        );
        assert!(mt.memory >= t.min_memory() && mu.memory >= u.min_memory());
    }
}

#[test]
fn one_device_gives_the_trivial_plan() {
    let p = small_problem(2, 1);
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.05 }, &quiet).unwrap();
    let plan = &report.plan;
    assert_eq!(plan.pipeline_stages, 1);
    for op in &plan.stages[0].operators {
        assert_eq!(op.sharding, "replicated", "{} in {}", op.name, plan.name);
        assert_eq!(op.zero, 0, "{} in {}", op.name, plan.name);
        assert!(
            op.collectives.is_empty(),
            "{}: {:?}",
            op.name,
            op.collectives
        );
    }
}

#[test]
fn ilp_memory_equals_memory_model_and_splits_divide() {
    // A decoder and an encoder (BERT: token types, a pooler with a square h×h weight).
    for name in ["gpt3-125m", "bert-base"] {
        check_memory_and_splits(&small_model_problem(name, 4, 8));
    }
}

/// The ILP's memory of a stage is the whole per-device memory memory-model recomputes for it:
/// operators, buffers, transients and overhead.
fn assert_ilp_memory_is_stage_memory(plan: &parallel_plan::plan::Plan) {
    for s in &plan.stages {
        assert_eq!(
            s.ilp_memory,
            s.memory.total(),
            "{} stage {}: {:?}",
            plan.name,
            s.index,
            s.memory
        );
    }
}

fn check_memory_and_splits(p: &Problem) {
    let report = planner::plan(p, Objective::MinMemory { slack: 0.05 }, &quiet).unwrap();
    let peer_plans = report.peers.iter().flat_map(|s| {
        s.fastest
            .iter()
            .chain(&s.leanest_within_budget)
            .map(|pp| &pp.plan)
    });
    for plan in std::iter::once(&report.plan)
        .chain(&report.runners_up)
        .chain(std::iter::once(&report.fastest))
        .chain(peer_plans)
    {
        assert_ilp_memory_is_stage_memory(plan);
        assert!(
            plan.ilp.status == SolveStatus::Optimal,
            "{}",
            plan.ilp.status
        );
        assert_eq!(
            plan.fits,
            plan.per_device_memory.total() <= p.mesh.device_memory_bytes
        );
    }
    // Every split of every candidate divides its dimension (checked on the built spaces).
    let cand = Candidate::new(p.model.num_layers, 2, p.mesh.stage_mesh(4).unwrap(), 4);
    for st in p.build(&cand, None).unwrap() {
        for (op, cands) in st.graph.graph.ops.iter().zip(&st.space.shardings) {
            for s in cands {
                assert!(s.is_valid(&cand.stage_mesh, op));
                for (d, &axes) in op.dims.iter().zip(&s.dim_axes) {
                    let ways = parallel_plan::cost_model::group_size(&cand.stage_mesh, axes) as u64;
                    assert_eq!(d.units() % ways, 0);
                }
            }
        }
    }
}

/// Every peer configuration holds exactly the bytes memory-model's `estimate` (what `pardis
/// memory` prints) gives the same configuration, every category of every stage and the
/// per-device total: Megatron-LM (TP 1–8, PP 1–4, ± sequence parallelism, ± distributed
/// optimizer, every recomputation mode), DeepSpeed ZeRO 1–3 and torchtitan FSDP + TP, over
/// micro-batch sizes, on two nodes.
#[test]
fn peer_plans_match_pardis_memory_to_the_byte() {
    // GPT-3 350M shapes (16 heads: tensor parallel 8 divides them), 4 layers, on two nodes,
    // without flash attention (selective recomputation then drops the attention core); and
    // Llama-2 7B shapes (SwiGLU, RMSNorm, untied head), 4 layers, on one node with flash.
    let mut gpt = small_model_problem("gpt3-350m", 4, 8);
    gpt.mesh = DeviceMesh::preset("dgx-a100-80g", 2).unwrap();
    gpt.setup.flash_attention = false;
    let llama = small_model_problem("llama2-7b", 4, 8);
    for (p, every) in [(gpt, 3), (llama, 5)] {
        let mut checked = 0;
        for framework in Framework::ALL {
            let configs = peers::configurations(&p, framework);
            assert!(!configs.is_empty(), "{framework}");
            // Every few configurations (and the last) keeps the test short.
            for (k, cfg) in configs.iter().enumerate() {
                if k % every != 0 && k + 1 != configs.len() {
                    continue;
                }
                let plan = peers::evaluate(&p, cfg).unwrap();
                let report = estimate(&p.model, &cfg.training_setup(&p)).unwrap();
                for stage in &plan.stages {
                    assert_eq!(
                        stage.memory, report.per_stage[stage.index as usize].memory,
                        "{} stage {}",
                        plan.name, stage.index
                    );
                }
                assert_eq!(
                    plan.per_device_memory.total(),
                    report.per_device.total(),
                    "{}",
                    plan.name
                );
                assert_ilp_memory_is_stage_memory(&plan);
                checked += 1;
            }
        }
        assert!(
            checked > 20,
            "{}: {checked} configurations checked",
            p.model.name
        );
    }
}

/// The peers' searches follow their frameworks' rules and find what a user would pick: on one
/// node the fastest fitting configurations exist for all three frameworks and Megatron-LM's
/// TP stays inside the node and divides the heads.
#[test]
fn peer_searches_follow_their_rules() {
    let p = small_model_problem("gpt3-350m", 4, 8);
    for cfg in peers::configurations(&p, Framework::MegatronLm) {
        assert!(8 % cfg.tp == 0 && 16 % cfg.tp == 0 && 4 % cfg.pp == 0);
        assert_eq!(cfg.tp * cfg.pp * cfg.dp, 8);
        assert_eq!(
            cfg.micro_batch_size * cfg.micro_batches * cfg.dp,
            p.global_batch
        );
    }
    assert!(peers::configurations(&p, Framework::DeepSpeed)
        .iter()
        .all(|c| c.tp == 1 && c.pp == 1 && c.dp == 8));
    assert!(peers::configurations(&p, Framework::Torchtitan)
        .iter()
        .all(|c| c.pp == 1
            && c.zero
                == if c.dp > 1 {
                    memory_model::ZeroStage::Zero3
                } else {
                    memory_model::ZeroStage::Zero0
                }
            && c.sequence_parallel == (c.tp > 1)));
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.0 }, &quiet).unwrap();
    for s in &report.peers {
        assert!(s.fastest.is_some(), "{}", s.framework);
    }
    // The chosen plan is held to the strongest peer's step time and is at least as lean as
    // the leanest peer configuration within it.
    let budget = report.objective.time_budget_s;
    assert!(report.plan.step_time_s <= budget * (1.0 + 1e-9));
    let r = report
        .peer_reference
        .as_ref()
        .expect("the strongest peer meets its own time");
    assert!(report.plan.per_device_memory.total() <= r.plan.per_device_memory.total());
    assert!(report.memory_saving().unwrap() >= 0.0);
}

/// DeepSpeed's ZeRO-Offload twin of a configuration holds no gradients or optimizer states
/// on the device, pays the host's update and the link in step time, and must fit the host.
#[test]
fn deepspeed_optimizer_offload_trades_device_memory_for_host_time() {
    let mut p = small_model_problem("gpt3-350m", 4, 8);
    let configs = peers::configurations(&p, Framework::DeepSpeed);
    let plain = *configs
        .iter()
        .find(|c| c.zero == memory_model::ZeroStage::Zero2 && !c.offload_optimizer)
        .unwrap();
    let twin = peers::PeerConfig {
        offload_optimizer: true,
        ..plain
    };
    assert!(configs.contains(&twin));
    assert!(twin.label().contains("offload"));
    let (a, b) = (
        peers::evaluate(&p, &plain).unwrap(),
        peers::evaluate(&p, &twin).unwrap(),
    );
    let (ma, mb) = (a.per_device_memory, b.per_device_memory);
    assert!(ma.optimizer_states > 0 && mb.optimizer_states == 0 && mb.gradients == 0);
    assert_eq!(ma.parameters, mb.parameters);
    assert_eq!(ma.activations, mb.activations);
    assert!(b.step_time_s > a.step_time_s);
    // The extra time is at least the host's streaming update of the node's partitions:
    // 8 devices × (4 + 2·12 + 4 + 2) bytes per parameter of each one's 1/8 (gradients read,
    // states read and written, then fp32 master weights read and 16-bit parameters written).
    let params = memory_model::estimate(&p.model, &plain.training_setup(&p))
        .unwrap()
        .cluster
        .unique
        .parameters
        / 2;
    let update = 34.0 * params as f64 / p.mesh.host.memory_bandwidth_bytes_per_s;
    assert!(
        b.step_time_s - a.step_time_s >= update * 0.99,
        "{a:?} {b:?}"
    );
    assert!(a.fits && b.fits);
    // A host too small for the node's offloaded states: the twin no longer fits.
    p.mesh.host.memory_bytes = 1 << 20;
    assert!(!peers::evaluate(&p, &twin).unwrap().fits);
    assert!(peers::evaluate(&p, &plain).unwrap().fits);
}

/// Full recomputation is a choice of the search: when no plan without it fits, the planner
/// recomputes (and its memory still agrees with memory-model's).
#[test]
fn recomputation_is_chosen_when_nothing_else_fits() {
    let mut p = small_problem(8, 2);
    // Activations dominate: long sequences, a small vocabulary (small fp32 logits).
    p.setup.seq_len = 2048;
    p.model.vocab_size = 1024;
    p.recomputes = vec![Recompute::None];
    let without = match planner::plan(&p, Objective::MinTime, &quiet) {
        Err(PlanError::Infeasible { .. }) => unreachable!("fits 80 GB"),
        r => r.unwrap(),
    };
    assert_eq!(without.plan.recompute, Recompute::None);
    // The whole memory of the leanest plan (least operator memory over every candidate)
    // without recomputation, and with full recomputation.
    let leanest = |p: &mut Problem, r: Recompute| {
        p.recomputes = vec![r];
        p.mesh.device_memory_bytes = 1 << 20;
        match planner::plan(p, Objective::MinTime, &quiet) {
            Err(PlanError::Infeasible { min_achievable, .. }) => min_achievable,
            other => panic!("expected Infeasible, got {other:?}"),
        }
    };
    let floor = leanest(&mut p, Recompute::None);
    let full = leanest(&mut p, Recompute::Full);
    assert!(
        full < floor / 10 * 9,
        "full recomputation {full} B vs {floor} B without"
    );
    // A device between the two: only recomputation fits.
    p.mesh.device_memory_bytes = full;
    p.recomputes = vec![Recompute::None, Recompute::Selective, Recompute::Full];
    let report = planner::plan(&p, Objective::MinTime, &quiet).unwrap();
    assert_eq!(report.plan.recompute, Recompute::Full);
    assert!(report.plan.fits);
    assert!(report.plan.step_time_s > without.plan.step_time_s);
    assert_ilp_memory_is_stage_memory(&report.plan);
}

/// The search prunes schedules and recomputation modes that cannot win, and balances layers.
#[test]
fn search_space_prunes_dominated_choices() {
    let mut p = small_problem(6, 8);
    let cands = p.candidates(None);
    // GPipe holds m ≥ p − i micro-batches at the same step time as 1F1B: never searched.
    assert!(cands
        .iter()
        .all(|c| c.schedule == PipelineSchedule::OneFOneB));
    // With flash attention, selective recomputation drops nothing: pruned.
    assert!(cands.iter().all(|c| c.recompute != Recompute::Selective));
    assert!(cands.iter().any(|c| c.recompute == Recompute::Full));
    p.setup.flash_attention = false;
    p.schedules = vec![PipelineSchedule::GPipe];
    let cands = p.candidates(None);
    assert!(cands.iter().any(|c| c.recompute == Recompute::Selective));
    assert!(cands.iter().all(|c| c.schedule == PipelineSchedule::GPipe));
    for c in &cands {
        assert_eq!(c.layers.iter().sum::<u64>(), 6);
        assert!(c.layers.iter().all(|&l| l >= 1));
    }
    // GPT-3 1.3B over 4 stages: the head is about two layers of compute, so the last stage
    // gets fewer layers.
    let model = ModelConfig::preset("gpt3-1.3b").unwrap();
    let b = balanced_layers(&model, 4);
    assert_eq!(b.iter().sum::<u64>(), 24);
    assert!(b[3] < 6, "{b:?}");
    assert_eq!(balanced_layers(&model, 1), vec![24]);
}

#[test]
fn infeasible_budget_reports_smallest_memory() {
    let mut p = small_problem(2, 2);
    p.mesh.device_memory_bytes = 1 << 20;
    match planner::plan(&p, Objective::MinTime, &quiet) {
        Err(PlanError::Infeasible {
            budget,
            min_achievable,
        }) => {
            assert_eq!(budget, 1 << 20);
            assert!(min_achievable > budget);
        }
        other => panic!("expected Infeasible, got {other:?}"),
    }
}

#[test]
fn bad_mesh_inputs_are_typed_errors() {
    assert!(matches!(
        DeviceMesh::preset("tpu-v9", 1),
        Err(PlanError::UnknownMesh { .. })
    ));
    assert!(DeviceMesh::preset("dgx-h100", 0).is_err());
    assert!(matches!(
        DeviceMesh::from_json("{"),
        Err(PlanError::Json(_))
    ));
    let four_axes = r#"{"name":"x","axes":[
        {"name":"a","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"b","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"c","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0},
        {"name":"d","size":1,"bandwidth_bytes_per_s":1e9,"latency_s":0}],
        "device_memory_bytes":1,"peak_flops":1e12,"efficiency":0.5}"#;
    assert!(matches!(
        DeviceMesh::from_json(four_axes),
        Err(PlanError::InvalidInput(_))
    ));
}

/// A model loaded from a Hugging Face `config.json` through memory-model (Llama-2 7B: SwiGLU,
/// RMSNorm, rotary positions, untied head), cut to 2 layers, plans on one node and its plan's
/// memory agrees with memory-model's per-operator accounting.
#[test]
fn hf_config_model_plans() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../memory-model/tests/data");
    let path = root.join("llama-2-7b-hf.config.json");
    if !path.exists() {
        eprintln!("skipped: {} is absent", path.display());
        return;
    }
    let mut model = ModelConfig::from_hf_config_file(&path)
        .unwrap()
        .with_vocab_padding(MEGATRON_VOCAB_PADDING);
    model.num_layers = 2;
    let mesh = DeviceMesh::preset("dgx-a100-80g", 1).unwrap();
    let mut p = Problem::new(model, mesh);
    p.global_batch = 16;
    p.setup.seq_len = 256;
    p.solver.time_limit_s = 60.0;
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.05 }, &quiet).unwrap();
    assert!(report.plan.fits);
    assert_ilp_memory_is_stage_memory(&report.plan);
    assert!(report
        .peers
        .iter()
        .any(|s| s.framework == Framework::MegatronLm && s.fastest.is_some()));
}

/// Pointwise recomputation reruns the norms and the activation function (whose outputs the next
/// linear would have saved), never a linear; a candidate that recomputes on its leading stages
/// only leaves the later stages keeping everything, and prices each stage with its own mode.
#[test]
fn pointwise_recomputation_on_leading_stages_reruns_only_pointwise_operators() {
    let p = small_problem(4, 8);
    let mut cand = Candidate::new(p.model.num_layers, 2, p.mesh.stage_mesh(4).unwrap(), 4);
    cand.recompute = Recompute::Pointwise;
    cand.recompute_stages = 1;
    assert_eq!(cand.recompute_of(0), Recompute::Pointwise);
    assert_eq!(cand.recompute_of(1), Recompute::None);
    let stages = p.build(&cand, None).unwrap();
    assert_eq!(stages.len(), 2);
    let mut everywhere = cand.clone();
    everywhere.recompute_stages = 2;
    let all = p.build(&everywhere, None).unwrap();
    for (st, st_all) in stages.iter().zip(&all) {
        let rerun: Vec<&str> = st
            .graph
            .graph
            .ops
            .iter()
            .filter(|o| o.recomputed)
            .map(|o| o.name.as_str())
            .collect();
        if st.key_index == 0 {
            assert_eq!(rerun, ["input_norm", "mlp_norm", "mlp_act"]);
            assert_eq!(st.space.ilp.min_memory(), st_all.space.ilp.min_memory());
        } else {
            assert!(rerun.is_empty(), "{rerun:?}");
            // The last stage keeps the linears' inputs: more memory, less time.
            assert!(st.space.ilp.min_memory() > st_all.space.ilp.min_memory());
            assert!(st.space.ilp.time_lower_bound() < st_all.space.ilp.time_lower_bound());
        }
    }
}

/// A peer's layout that the outer search does not enumerate (a two-node stage whose GPU axis is
/// split 2 × 4 for a tensor-parallel group of 4) becomes pardis candidates, one per
/// recomputation mode, and none that the search already has.
#[test]
fn the_strongest_peers_layout_joins_the_search() {
    let mut p = small_model_problem("gpt3-350m", 4, 8);
    p.mesh = DeviceMesh::preset("dgx-a100-80g", 2).unwrap();
    let known = p.candidates(None);
    let cfg = peers::configurations(&p, Framework::MegatronLm)
        .into_iter()
        .find(|c| c.tp == 4 && c.pp == 1)
        .expect("a tp4 Megatron-LM configuration");
    let base = cfg.candidate(&p).unwrap();
    assert_eq!(
        base.stage_mesh.axes.len(),
        3,
        "{}",
        base.stage_mesh.shape_string()
    );
    assert!(!known.iter().any(|k| k.stage_mesh == base.stage_mesh));
    let around = p.candidates_around(&base, &known);
    assert!(!around.is_empty());
    assert!(around
        .iter()
        .all(|c| c.stage_mesh == base.stage_mesh && c.pp == 1));
    assert!(around.iter().any(|c| c.recompute == Recompute::Pointwise));
    // Already known points are not repeated.
    assert!(p.candidates_around(&known[0], &known).is_empty());
}

/// One candidate whose min-memory solve cannot meet the time bound (its fastest plan lies within
/// the MIP gap above it) must not make the planner drop every other candidate's min-memory plan
/// and answer with its fastest one: GPT-3 6.7B on two DGX-A100 nodes did, 57.58 GiB per device
/// where a 44.67 GiB plan met the same budget.
#[test]
fn a_candidate_missing_the_time_bound_keeps_the_others_plans() {
    let model = ModelConfig::preset("gpt3-6.7b")
        .unwrap()
        .with_vocab_padding(MEGATRON_VOCAB_PADDING);
    let mut p = Problem::new(model, DeviceMesh::preset("dgx-a100-80g", 2).unwrap());
    p.global_batch = parallel_plan::DEFAULT_GLOBAL_BATCH;
    p.setup.seq_len = parallel_plan::DEFAULT_SEQ_LEN;
    p.solver.time_limit_s = 60.0;
    let report = planner::plan(&p, Objective::MinMemory { slack: 0.0 }, &quiet).unwrap();
    let (plan, fastest) = (&report.plan, &report.fastest);
    assert!(plan.name.starts_with("pardis min-memory"), "{}", plan.name);
    assert!(plan.step_time_s <= report.objective.time_budget_s * (1.0 + 1e-9));
    assert!(
        plan.per_device_memory.total() < fastest.per_device_memory.total(),
        "{} B against the fastest plan's {} B",
        plan.per_device_memory.total(),
        fastest.per_device_memory.total()
    );
    let peer = report
        .peer_reference
        .as_ref()
        .expect("a peer within the budget");
    assert!(plan.per_device_memory.total() <= peer.plan.per_device_memory.total());
}
