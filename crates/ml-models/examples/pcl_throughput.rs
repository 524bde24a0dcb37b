//! PCL-AD training throughput (training rows per second of `fit`) and test AUC on one data set,
//! one seed of the ADBench protocol. Timed example, not a test: figures go to benches/README.md.
//!
//! ```text
//! cargo run --release -p ml-models --example pcl_throughput -- [FILE.npz|FILE.csv] [SEED]
//! ```
//! Default file: `../shared/datasets/tabular-ad/pclad/01thyroid.csv` (from the workspace root).

use std::path::PathBuf;
use std::time::Instant;

use ml_models::anomaly::data::read_labelled;
use ml_models::anomaly::DeepConfig;
use ml_models::anomaly::{auc_roc, average_precision, protocol_split, Detector, Pcl, PclConfig};

fn main() -> ml_models::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args.next().map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/datasets/tabular-ad/pclad/01thyroid.csv")
    });
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let data = read_labelled(&path)?;
    let split = protocol_split(&data, seed)?;
    let mut pcl = Pcl::new(PclConfig {
        train: DeepConfig {
            seed,
            ..DeepConfig::default()
        },
        ..PclConfig::default()
    });
    let t0 = Instant::now();
    pcl.fit(&split.train)?;
    let fit = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let scores = pcl.score(&split.test)?;
    let score = t1.elapsed().as_secs_f64();
    let (k, m) = pcl.views_and_partitions().unwrap_or((0, 0));
    println!(
        "{}: train {} × {}, K = {k} views, m = {m} parts; {} steps, {} rows in {fit:.2} s = {:.0} rows/s; \
         scoring {} rows in {score:.2} s = {:.0} rows/s; AUC-ROC {:.4}, AUC-PR {:.4}",
        path.file_name().and_then(|f| f.to_str()).unwrap_or("?"),
        split.train.rows,
        split.train.cols,
        pcl.steps(),
        pcl.samples_seen(),
        pcl.samples_seen() as f64 / fit,
        split.test.rows,
        split.test.rows as f64 / score,
        auc_roc(&scores, &split.test_labels)?,
        average_precision(&scores, &split.test_labels)?,
    );
    Ok(())
}
