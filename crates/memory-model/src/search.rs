//! Exhaustive search of the parallel configurations that fit a per-device memory budget.

use std::collections::HashMap;

use serde::Serialize;

use crate::breakdown::{estimate_validated, DeviceBreakdown, OperatorLists};
use crate::error::{positive, MemoryError, Result};
use crate::model::ModelConfig;
use crate::setup::{Recompute, TrainingSetup, ZeroStage, MAX_DEVICES};

/// What [`search`] enumerates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSpace {
    /// Devices of the cluster (`dp·tp·pp`, context parallelism fixed at 1).
    pub devices: u64,
    /// Per-device memory budget in bytes.
    pub budget_bytes: u64,
    /// Micro-batch sizes to try. Default `[1, 2, 4, 8]`.
    pub micro_batches: Vec<u64>,
    /// Global batch in sequences; the number of micro-batches is `global / (dp·b)` and
    /// configurations where that is not a whole number are skipped. `None`: `m = pp`.
    pub global_batch: Option<u64>,
    /// Everything else (precision, optimizer, schedule, flash attention, PEFT, overhead …).
    pub base: TrainingSetup,
}

impl SearchSpace {
    /// Search `devices` devices with `budget_bytes` each, other settings from `base`.
    pub fn new(devices: u64, budget_bytes: u64, base: TrainingSetup) -> Self {
        SearchSpace {
            devices,
            budget_bytes,
            micro_batches: vec![1, 2, 4, 8],
            global_batch: None,
            base,
        }
    }
}

/// One configuration that fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// Data-parallel degree.
    pub dp: u64,
    /// Tensor-parallel degree.
    pub tp: u64,
    /// Pipeline-parallel degree.
    pub pp: u64,
    /// Sequence parallelism.
    pub sequence_parallel: bool,
    /// ZeRO stage.
    pub zero: ZeroStage,
    /// Recomputation.
    pub recompute: Recompute,
    /// Micro-batch size.
    pub micro_batch: u64,
    /// Micro-batches per step.
    pub num_microbatches: u64,
    /// Peak device.
    pub per_device: DeviceBreakdown,
}

impl std::fmt::Display for SearchHit {
    /// One line: `dp 8 tp 8 pp 1 sp true Zero1 recompute Selective b 1 × 16`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dp {:>2} tp {} pp {} sp {:<5} {:?} recompute {:?} b {} × {}",
            self.dp,
            self.tp,
            self.pp,
            self.sequence_parallel,
            self.zero,
            self.recompute,
            self.micro_batch,
            self.num_microbatches
        )
    }
}

impl SearchHit {
    /// Sort key, best first: least recomputation, least model parallelism (`tp·pp`), lowest
    /// ZeRO stage (least communication), largest micro-batch, then least memory.
    fn rank(&self) -> (Recompute, u64, ZeroStage, std::cmp::Reverse<u64>, u64) {
        (
            self.recompute,
            self.tp * self.pp,
            self.zero,
            std::cmp::Reverse(self.micro_batch),
            self.per_device.total(),
        )
    }
}

/// Divisors of `n` in increasing order, in `O(√n)`.
fn divisors(n: u64) -> Vec<u64> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1;
    while d * d <= n {
        if n.is_multiple_of(d) {
            small.push(d);
            if d * d != n {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// Configurations [`search`] examined and did not report, counted by reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// Why, without the configuration's numbers (e.g. "tp does not divide num_heads").
    pub reason: String,
    /// Configurations rejected for it.
    pub count: u64,
    /// The first such configuration and its full error message.
    pub example: String,
}

/// What [`search`] found: the configurations that fit, best first, and why the others did not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchOutcome {
    /// Configurations that fit the budget, best first (see [`SearchHit`]'s ordering).
    pub hits: Vec<SearchHit>,
    /// Distinct configurations examined (fitting or not).
    pub examined: u64,
    /// The others, by reason, most frequent first.
    pub rejected: Vec<Rejection>,
}

/// The reason of a rejection without the configuration's own numbers.
fn reason(e: &MemoryError) -> String {
    match e {
        MemoryError::NotDivisible {
            what, dimension, ..
        } => format!("{what} does not divide {dimension}"),
        MemoryError::TooManyStages { .. } => "more pipeline stages than layers".into(),
        MemoryError::NonPositive { field, .. } => format!("{field} is zero"),
        other => {
            let text = other.to_string();
            match text.find(" (") {
                Some(i) => text[..i].to_string(),
                None => text,
            }
        }
    }
}

#[derive(Default)]
struct Rejections(Vec<Rejection>);

impl Rejections {
    fn add(&mut self, reason: String, example: impl FnOnce() -> String) {
        match self.0.iter_mut().find(|r| r.reason == reason) {
            Some(r) => r.count += 1,
            None => self.0.push(Rejection {
                reason,
                count: 1,
                example: example(),
            }),
        }
    }
}

/// Every `(dp, tp, pp, sp, zero, recompute, micro-batch)` with `dp·tp·pp = devices`, split into
/// those whose peak device fits the budget, best first (see [`SearchHit`]'s ordering: least
/// recomputation, then least model parallelism, lowest ZeRO stage, largest micro-batch, least
/// memory), and the others counted by reason: over the budget, global batch not divisible,
/// rejected by the setup's validation (tp not dividing the heads, more stages than layers, …).
/// Equivalent spellings (sequence parallelism at tp 1, ZeRO at dp 1, ZeRO-3 with pp > 1, which
/// no framework runs) are not enumerated.
///
/// # Errors
/// [`crate::MemoryError`] when the model is invalid or `devices`/`budget` are zero.
pub fn search(model: &ModelConfig, space: &SearchSpace) -> Result<SearchOutcome> {
    model.validate()?;
    positive("devices", space.devices)?;
    positive("budget", space.budget_bytes)?;
    if space.devices > MAX_DEVICES {
        return Err(MemoryError::InvalidInput(format!(
            "{} devices; search handles at most {MAX_DEVICES}",
            space.devices
        )));
    }
    let mut hits = Vec::new();
    let mut rejected = Rejections::default();
    let mut examined = 0u64;
    let mut lists: HashMap<(u64, bool), OperatorLists> = HashMap::new();
    let zeros = [
        ZeroStage::Zero0,
        ZeroStage::Zero1,
        ZeroStage::Zero2,
        ZeroStage::Zero3,
    ];
    let recomputes = [
        Recompute::None,
        Recompute::Selective,
        Recompute::Pointwise,
        Recompute::Full,
    ];
    for tp in divisors(space.devices) {
        for pp in divisors(space.devices / tp) {
            let dp = space.devices / (tp * pp);
            for &mb in &space.micro_batches {
                for sp in [false, true] {
                    if sp && tp == 1 {
                        continue;
                    }
                    for zero in zeros
                        .iter()
                        .copied()
                        .filter(|&z| z != ZeroStage::Zero3 || pp == 1)
                    {
                        if zero != ZeroStage::Zero0 && dp == 1 {
                            continue;
                        }
                        for recompute in recomputes {
                            examined += 1;
                            let m = match space.global_batch {
                                Some(g) if g % (dp * mb) != 0 => {
                                    rejected.add(
                                        "global batch not divisible by dp × micro-batch".into(),
                                        || {
                                            format!(
                                                "dp {dp} × micro-batch {mb} does not divide {g}"
                                            )
                                        },
                                    );
                                    continue;
                                }
                                Some(g) => g / (dp * mb),
                                None => pp,
                            };
                            let mut setup = space.base.clone();
                            setup.micro_batch = mb;
                            setup.num_microbatches = m;
                            setup.recompute = recompute;
                            let par = &mut setup.parallel;
                            (
                                par.dp,
                                par.tp,
                                par.pp,
                                par.cp,
                                par.sequence_parallel,
                                par.zero,
                            ) = (dp, tp, pp, 1, sp, zero);
                            if let Err(e) = setup.validate(model, Some(space.devices)) {
                                rejected.add(reason(&e), || {
                                    format!("dp {dp} tp {tp} pp {pp} b {mb}: {e}")
                                });
                                continue;
                            }
                            let key = (mb, model.tied_embeddings && pp > 1);
                            let ops = lists
                                .entry(key)
                                .or_insert_with(|| OperatorLists::new(model, &setup));
                            let report = estimate_validated(model, &setup, ops)?;
                            let hit = SearchHit {
                                dp,
                                tp,
                                pp,
                                sequence_parallel: sp,
                                zero,
                                recompute,
                                micro_batch: mb,
                                num_microbatches: m,
                                per_device: report.per_device,
                            };
                            if report.fits(space.budget_bytes) {
                                hits.push(hit);
                            } else {
                                rejected.add("over the memory budget".into(), || {
                                    format!("{hit}: {} bytes", hit.per_device.total())
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    hits.sort_by_key(SearchHit::rank);
    let mut rejected = rejected.0;
    rejected.sort_by_key(|r| std::cmp::Reverse(r.count));
    Ok(SearchOutcome {
        hits,
        examined,
        rejected,
    })
}
