//! Peak heap per phase of one LoRA training step over an f32 base and over an NF4 (+ DQ) base,
//! measured with the counting global allocator: where the f32-base run spends the bytes the
//! NF4-base run does not.
//!
//! ```text
//! cargo run --release -p ml-models --example lora_memory -- [--preset mini|tiny] [--rank 8]
//! ```
//!
//! Phases: `build` (model, pretrained weights, adapters, freezing/quantizing the base), `forward`
//! (loss with the autograd graph), `backward` (`loss.backward()`; the gradient store is alive at
//! the end, and its tensor count and bytes are printed), `step` (AdamW update; the first step
//! allocates the moments), `eval` (one detached forward pass). "peak" is the highest live heap
//! above the live bytes at the start of the variant; "live" is what is still allocated after
//! the phase.

use candle_core::{Device, Tensor};
use ml_models::models::{Gpt, GptConfig};
use ml_models::qlora::split_config;
use ml_models::qlora::BaseFormat;
use ml_models::train::{AdamW, AdamWConfig, CountingAllocator, ParamStore, SeededInit};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[global_allocator]
static HEAP: CountingAllocator = CountingAllocator::new();

const MIB: f64 = 1048576.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let preset = flag("--preset").unwrap_or_else(|| "mini".into());
    let rank: usize = flag("--rank").map(|r| r.parse()).transpose()?.unwrap_or(8);
    let (batch, seq, vocab) = (8usize, 64usize, 96usize);
    let mcfg = match preset.as_str() {
        "tiny" => GptConfig::tiny(vocab),
        _ => GptConfig::mini(vocab),
    };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let ids: Vec<u32> = (0..batch * (seq + 1))
        .map(|_| rng.random_range(0..vocab as u32))
        .collect();
    let rows: Vec<&[u32]> = ids.chunks(seq + 1).collect();
    let x: Vec<u32> = rows.iter().flat_map(|r| r[..seq].to_vec()).collect();
    let y: Vec<u32> = rows.iter().flat_map(|r| r[1..].to_vec()).collect();
    let x = Tensor::from_vec(x, (batch, seq), &Device::Cpu)?;
    let y = Tensor::from_vec(y, (batch, seq), &Device::Cpu)?;
    let pretrained = {
        let mut store = ParamStore::new();
        Gpt::new(mcfg, &mut store, &mut SeededInit::new(1))?;
        store.snapshot()?
    };
    println!(
        "preset {preset}, r = {rank} on attention and MLP, α = 16, batch {batch} × {seq}; MiB above the start"
    );
    println!("| base | phase | peak MiB | live after MiB |");
    println!("|---|---|---:|---:|");
    for (label, base) in [
        ("f32", BaseFormat::F32),
        (
            "nf4",
            BaseFormat::Nf4 {
                double_quant: false,
            },
        ),
        ("nf4-dq", BaseFormat::Nf4 { double_quant: true }),
    ] {
        HEAP.reset_peak();
        let start = HEAP.live();
        let phase = |name: &str| {
            println!(
                "| {label} | {name} | {:.2} | {:.2} |",
                HEAP.peak_since_reset() as f64 / MIB,
                (HEAP.live() as f64 - start as f64) / MIB
            );
        };
        let mut store = ParamStore::new();
        let mut gpt = Gpt::new(mcfg, &mut store, &mut SeededInit::new(1))?;
        store.restore(&pretrained)?;
        let lc = split_config(rank, rank, 16.0, base, 0..mcfg.n_layers);
        gpt.apply_lora(&lc, &mut store, &mut SeededInit::new(2))?;
        let mut opt = AdamW::new(&store, AdamWConfig::default())?;
        phase("build");
        for step in 0..2 {
            let loss = gpt.loss(&x, &y, true)?;
            phase(&format!("forward {step}"));
            let grads = loss.backward()?;
            phase(&format!("backward {step}"));
            let ids: Vec<_> = grads.get_ids().copied().collect();
            let held: usize = ids
                .iter()
                .filter_map(|&id| grads.get_id(id))
                .map(|t| t.elem_count() * t.dtype().size_in_bytes())
                .sum();
            println!(
                "| {label} | gradient store: {} tensors | {:.2} | |",
                ids.len(),
                held as f64 / MIB
            );
            opt.step(&grads, 1e-3, Some(0.3))?;
            phase(&format!("step {step}"));
        }
        let l = gpt.detached().loss(&x, &y, false)?;
        drop(l);
        phase("eval");
    }
    Ok(())
}
