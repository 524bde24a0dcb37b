//! The time model against published throughput (Narayanan et al., SC'21, Table 1).

use parallel_plan::narayanan::{predict, problem, TABLE_1};

/// Every row of Table 1 (GPT 1.7 B … 1 T on 32 … 3072 A100s, the authors' own TP/PP/DP and
/// batch) is predicted within ±15 % of the published teraFLOP/s per GPU, and fits 80 GB.
#[test]
fn every_table_1_row_is_within_fifteen_percent() {
    let off: Vec<String> = TABLE_1
        .iter()
        .map(|r| predict(r, &problem(r, "dgx-a100-80g").unwrap()).unwrap())
        .filter(|p| !((0.85..=1.15).contains(&p.ratio()) && p.fits))
        .map(|p| {
            format!(
                "{} B: predicted {:.1} vs published {} TF/GPU (ratio {:.3}, b = {}, fits {})",
                p.row.billions,
                p.tflops_per_gpu,
                p.row.tflops_per_gpu,
                p.ratio(),
                p.config.micro_batch_size,
                p.fits
            )
        })
        .collect();
    assert!(
        off.is_empty(),
        "rows off by more than 15 %:\n{}",
        off.join("\n")
    );
}
