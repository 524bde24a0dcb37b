//! The time model against Narayanan et al. (SC'21) Table 1: predicted and published
//! teraFLOP/s per GPU for GPT 1.7 B … 1 T on 32 … 3072 A100s, with their ratio.
//!
//! Run: `cargo run --release -p parallel-plan --example narayanan_table`

use parallel_plan::narayanan::{predict, problem, TABLE_1};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("| params (B) | t | p | GPUs | batch | best b | step s | fits | predicted TF/GPU | published | ratio |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let mut worst: f64 = 0.0;
    for r in &TABLE_1 {
        let p = predict(r, &problem(r, "dgx-a100-80g")?)?;
        worst = worst.max((p.ratio() - 1.0).abs());
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {:.0} | {:.3} |",
            r.billions,
            r.tp,
            r.pp,
            r.gpus,
            r.batch,
            p.config.micro_batch_size,
            p.step_time_s,
            p.fits,
            p.tflops_per_gpu,
            r.tflops_per_gpu,
            p.ratio()
        );
    }
    println!("largest deviation: {:.1} %", 100.0 * worst);
    Ok(())
}
