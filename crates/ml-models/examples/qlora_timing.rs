//! Quick timings without criterion: NF4 fused dequantize-matmul vs dense f32 (candle/gemm) vs
//! dequantize-then-matmul, and training tokens/s of the mini GPT (full FT, LoRA, QLoRA).
//!
//! ```text
//! cargo run --release -p ml-models --example qlora_timing
//! ```

use bench_timing::median_secs;
use candle_core::{Device, Tensor};
use ml_models::models::{Gpt, GptConfig};
use ml_models::qlora::{
    fused_matmul_t, BaseFormat, LayerKind, LoraConfig, Nf4Matrix, QuantizedMatrix,
};
use ml_models::train::{ParamStore, SeededInit, TrainConfig, Trainer};

fn main() -> ml_models::Result<()> {
    let dev = Device::Cpu;
    let (n, k) = (1024usize, 1024usize);
    let mut init = SeededInit::new(5);
    let w: Vec<f32> = init.normal(&[n * k], 0.05, &dev)?.to_vec1()?;
    let q = Nf4Matrix::quantize(&w, n, k, true)?;
    let wt = Tensor::from_vec(w, (n, k), &dev)?;
    println!("| m | fused NF4 ms | dense f32 ms | dequantize+matmul ms |\n|---:|---:|---:|---:|");
    for m in [1usize, 16, 128] {
        let x: Vec<f32> = init.normal(&[m * k], 1.0, &dev)?.to_vec1()?;
        let xt = Tensor::from_vec(x.clone(), (m, k), &dev)?;
        let fused = median_secs(21, || drop(fused_matmul_t(&x, &q)));
        let dense = median_secs(21, || {
            drop(xt.matmul(&wt.t().expect("2-d")).expect("matmul"))
        });
        let deq = median_secs(21, || {
            let d = Tensor::from_vec(q.dequantize(), (n, k), &Device::Cpu).expect("shape");
            drop(xt.matmul(&d.t().expect("2-d")).expect("matmul"))
        });
        println!(
            "| {m} | {:.3} | {:.3} | {:.3} |",
            fused * 1e3,
            dense * 1e3,
            deq * 1e3
        );
    }
    let (batch, seq) = (8usize, 64usize);
    let ids: Vec<u32> = (0..batch * seq).map(|i| (i * 13 % 67) as u32).collect();
    let x = Tensor::from_vec(ids.clone(), (batch, seq), &dev)?;
    println!("\n| mini GPT training | tokens/s |\n|---|---:|");
    for (label, base) in [
        ("full fine-tune", None),
        ("LoRA f32 r=8 all linear", Some(BaseFormat::F32)),
        (
            "QLoRA NF4+DQ r=8 all linear",
            Some(BaseFormat::Nf4 { double_quant: true }),
        ),
    ] {
        let mut store = ParamStore::new();
        let mut gpt = Gpt::new(GptConfig::mini(68), &mut store, &mut init)?;
        if let Some(b) = base {
            let lc = LoraConfig::uniform(&LayerKind::ALL, 8, 16.0, b);
            gpt.apply_lora(&lc, &mut store, &mut init)?;
        }
        let mut tr = Trainer::new(TrainConfig::default(), &store)?;
        let secs = median_secs(7, || {
            tr.step_once(&mut |_| gpt.loss(&x, &x, true)).expect("step");
        });
        println!("| {label} | {:.0} |", (batch * seq) as f64 / secs);
    }
    Ok(())
}
