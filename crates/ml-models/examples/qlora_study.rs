//! The QLoRA key-variables study (Shen et al., CMC 2025) on a small GPT, with measured peak heap
//! memory per variant from a counting global allocator.
//!
//! ```text
//! cargo run --release -p ml-models --example qlora_study -- --quick [--out DIR] [--preset P]
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use ml_models::qlora::plot::plot_rank_sweep;
use ml_models::qlora::study::{run_study, StudyConfig, StudyData, StudyHooks};

/// Counts live heap bytes and their peak.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to the system allocator with the caller's layout unchanged; the
// counters are only statistics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was allocated by `alloc` above with layout `l`.
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Hooks {
    base: usize,
    steps: usize,
}

impl StudyHooks for Hooks {
    fn phase(&mut self, name: &str, steps: usize) {
        eprintln!(
            "[{:>6.1}s] {name} ({steps} steps)",
            START.with(|s| s.elapsed().as_secs_f64())
        );
        self.steps = 0;
    }
    fn step(&mut self) {
        self.steps += 1;
    }
    fn measure_begin(&mut self) {
        self.base = LIVE.load(Ordering::Relaxed);
        PEAK.store(self.base, Ordering::Relaxed);
    }
    fn measure_end(&mut self) -> Option<u64> {
        Some((PEAK.load(Ordering::Relaxed) - self.base) as u64)
    }
}

thread_local! {
    static START: std::time::Instant = std::time::Instant::now();
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    START.with(|_| ());
    let args: Vec<String> = std::env::args().collect();
    let flag = |f: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let mut cfg = if args.iter().any(|a| a == "--quick") {
        StudyConfig::quick()
    } else {
        StudyConfig::full()
    };
    if let Some(p) = flag("--preset") {
        cfg.preset = p;
    }
    let out = PathBuf::from(flag("--out").unwrap_or_else(|| "qlora-study-out".into()));
    std::fs::create_dir_all(&out)?;
    cfg.pretrained_path = Some(out.join(format!("pretrained-{}.safetensors", cfg.preset)));
    let ws = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut roots: Vec<PathBuf> = std::env::var_os("PARDIS_DATA")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    roots.extend([ws.join("datasets/cache"), ws.join("../shared/datasets")]);
    let data = StudyData::load(&roots)?;
    let mut hooks = Hooks { base: 0, steps: 0 };
    let rep = run_study(&cfg, &data, &mut hooks)?;
    println!(
        "model parameters: {}; source ppl {:.3}; target ppl before fine-tuning {:.3}; pretrain {:.0} tokens/s\n",
        rep.model_params, rep.source_perplexity, rep.base_target_perplexity, rep.pretrain_tokens_per_s
    );
    println!("{}", rep.to_markdown());
    let png = out.join("qlora-rank-sweep.png");
    plot_rank_sweep(&rep, &png)?;
    println!("plot: {}", png.display());
    Ok(())
}
