//! Validation protocol of the class-incremental benchmark (issue 29): choose among variants of
//! the temporal method without touching a test row. 1/6 of the training rows (stratified, seed
//! 99) are held out as the evaluation set, the task stream is built from the other 5/6, and
//! every variant runs on the given class orders (ρ, M and steps as the benchmark's defaults).
//!
//! ```text
//! cargo run --release -p ml-studies --example cil_validation -- \
//!     [digits|fashion-mnist] [VARIANT,VARIANT,...] [ORDER,ORDER,...] [M] [RHO] [test]
//! ```
//!
//! With `test` as the sixth argument it runs the benchmark's protocol instead (the whole
//! training set, evaluated on the test rows): the final table of a variant already chosen.
//!
//! Variants: `er`, `temporal` (defaults), `recorded` (replayed rows matched to the prediction
//! recorded when they entered the memory), `exlabels` (labelled exemplars keep their label as
//! the pseudo-label), `replayonly` (no unsupervised term on the current task's unlabelled
//! rows), and `+`-joined combinations such as `recorded+exlabels`; any other method name of
//! `ml_models::incremental::Method` runs with its defaults. One line per run on stderr (with the
//! 1-minute load average), a Markdown table of the mean over the orders on stdout.

use ml_models::incremental::{
    run_method, CilConfig, Method, ReplayTarget, StreamConfig, TaskStream, TemporalConfig,
};
use ml_studies::cil::{CilBenchConfig, CilData};
use pardis_datasets::DataRoots;

fn variant(name: &str) -> Result<Method, Box<dyn std::error::Error>> {
    let mut c = TemporalConfig::default();
    for part in name.split('+') {
        match part {
            "temporal" => {}
            "recorded" => c.replay_target = ReplayTarget::Recorded,
            "exlabels" => c.exemplar_labels = true,
            "replayonly" => c.current_unlabeled = false,
            other if name == other => return Ok(Method::by_name(other)?),
            other => return Err(format!("unknown variant part `{other}`").into()),
        }
    }
    Ok(Method::Temporal(c))
}

fn load1() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let data = CilData::parse(args.first().map_or("fashion-mnist", String::as_str))?;
    let names: Vec<String> = args
        .get(1)
        .map_or("er,temporal,recorded", String::as_str)
        .split(',')
        .map(str::to_string)
        .collect();
    let orders: Vec<u64> = args
        .get(2)
        .map_or("0,1", String::as_str)
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let bench = CilBenchConfig::for_data(data);
    let mut run = bench.run.clone();
    if let Some(m) = args.get(3) {
        run.memory = m.parse()?;
    }
    let rho: f64 = args.get(4).map_or(Ok(bench.label_ratio), |r| r.parse())?;
    let (train, test) = data.load(&DataRoots::from_env())?;
    let on_test = args.get(5).is_some_and(|a| a == "test");
    let (fit, val) = if on_test {
        (train, test)
    } else {
        train.stratified_split(1.0 / 6.0, 99)?
    };
    eprintln!(
        "{} {}: {} fit / {} evaluation rows; ρ = {rho}, M = {}, {} steps per task",
        data.name(),
        if on_test {
            "TEST protocol"
        } else {
            "validation (held-out training rows)"
        },
        fit.len(),
        val.len(),
        run.memory,
        run.steps_per_task
    );
    let mut table = String::from(
        "| variant | final (mean of orders) | per order | avg incremental | forgetting |\n|---|---|---|---|---|\n",
    );
    for name in &names {
        let method = variant(name)?;
        let mut fin = Vec::new();
        let mut inc = Vec::new();
        let mut fgt = Vec::new();
        for &order in &orders {
            let stream = TaskStream::new(
                fit.clone(),
                val.clone(),
                &StreamConfig {
                    tasks: bench.tasks,
                    label_ratio: rho,
                    seed: order,
                    class_order: None,
                },
            )?;
            let r = run_method(
                &stream,
                &method,
                &CilConfig {
                    seed: order,
                    ..run.clone()
                },
            )?;
            let m = &r.metrics;
            let curve: Vec<String> = m
                .accuracy_curve()
                .iter()
                .map(|a| format!("{a:.3}"))
                .collect();
            eprintln!(
                "  {name} order {order}: final {:.3} avg inc {:.3} forgetting {:.3} curve {} ({:.0} s, load {:.1})",
                m.final_accuracy(),
                m.average_incremental_accuracy(),
                m.average_forgetting(),
                curve.join(" "),
                r.seconds,
                load1()
            );
            fin.push(m.final_accuracy());
            inc.push(m.average_incremental_accuracy());
            fgt.push(m.average_forgetting());
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let per: Vec<String> = fin.iter().map(|a| format!("{a:.3}")).collect();
        table.push_str(&format!(
            "| {name} | {:.3} | {} | {:.3} | {:.3} |\n",
            mean(&fin),
            per.join(" "),
            mean(&inc),
            mean(&fgt)
        ));
    }
    println!("{table}");
    Ok(())
}
