//! Mutation fuzzing of every pardis file parser, on stable Rust.
//!
//! Each [`Target`] feeds bytes to one parser of the workspace (Matrix Market and DLMC `.smtx`
//! for SpMM; SNAP, DIMACS and Matrix Market graphs for BFS; Hugging Face `config.json`; the
//! operator-graph and device-mesh JSON of the planner; OP2 Airfoil grids; IDX, `.npy`, `.npz`,
//! CSV and FewRel JSON for the models). A parser may return any error; it must not panic, and
//! it must not allocate by what a header claims (the CI step runs under `ulimit -v`, so such an
//! allocation aborts the run). Inputs start from the committed corpus in `fuzz/corpus/<target>`
//! (small valid files and the hostile cases found so far) and are mutated with a seeded
//! generator: bit flips, interesting bytes and numbers (0, −1, 2³², 2⁶⁴ − 1, 10³⁰⁸, NaN),
//! deleted, duplicated and truncated ranges, and numbers replaced by interesting ones.
//!
//! ```
//! let targets = pardis_fuzz::targets();
//! let mesh = targets.iter().find(|t| t.name == "device-mesh").unwrap();
//! let outcome = pardis_fuzz::fuzz(mesh, &[b"{}".to_vec()], 100, 1);
//! assert!(outcome.failure.is_none());
//! ```

use std::io::Cursor;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Largest input the mutator produces, bytes.
pub const MAX_INPUT_BYTES: usize = 64 << 10;

/// One parser under test.
#[derive(Debug)]
pub struct Target {
    /// Name, also the corpus directory under `fuzz/corpus/`.
    pub name: &'static str,
    /// Feeds one input to the parser (errors are fine; a panic is a failure).
    pub run: fn(&[u8]),
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A file in a directory private to this process, for parsers that read paths.
fn scratch_file(name: &str, bytes: &[u8]) -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("pardis-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(name);
    std::fs::write(&path, bytes).ok()?;
    Some(path)
}

/// Removes the scratch directory of this process (where the targets that read paths write
/// their input).
pub fn remove_scratch() {
    let dir = std::env::temp_dir().join(format!("pardis-fuzz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(dir);
}

/// Every parser target.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "matrix-market",
            run: |b| {
                let _ = sparse_kernels::io::parse_matrix_market::<f64, u32>(Cursor::new(b));
            },
        },
        Target {
            name: "smtx",
            run: |b| {
                let _ = sparse_kernels::io::parse_smtx::<f32, u32>(Cursor::new(b), 1);
            },
        },
        Target {
            name: "snap",
            run: |b| {
                let _ = graph_kernels::io::read_snap(Cursor::new(b), false);
            },
        },
        Target {
            name: "dimacs",
            run: |b| {
                let _ = graph_kernels::io::read_dimacs(Cursor::new(b), true);
            },
        },
        Target {
            name: "graph-matrix-market",
            run: |b| {
                let _ = graph_kernels::io::read_matrix_market(Cursor::new(b), false);
            },
        },
        Target {
            name: "hf-config",
            run: |b| {
                if let Ok(m) = memory_model::ModelConfig::from_hf_config_json(&text(b)) {
                    if m.validate().is_ok() {
                        let _ = m.num_parameters();
                    }
                }
            },
        },
        Target {
            name: "operator-graph",
            run: |b| {
                if let Ok(g) = parallel_plan::ComputationGraph::from_json(&text(b)) {
                    let _ = g.validate();
                }
            },
        },
        Target {
            name: "device-mesh",
            run: |b| {
                let _ = parallel_plan::DeviceMesh::from_json(&text(b));
            },
        },
        Target {
            name: "op2-grid",
            run: |b| {
                let _ = parallel_plan::unstructured::Grid::parse(&text(b), "fuzz");
            },
        },
        Target {
            name: "idx",
            run: |b| {
                let _ = ml_models::data::parse_idx(b, Path::new("fuzz.idx"));
            },
        },
        Target {
            name: "npy",
            run: |b| {
                let _ = ml_models::data::parse_npy(b, Path::new("fuzz.npy"));
            },
        },
        Target {
            name: "npz",
            run: |b| {
                if let Some(p) = scratch_file("input.npz", b) {
                    let _ = ml_models::data::read_npz(&p);
                }
            },
        },
        Target {
            name: "csv",
            run: |b| {
                let _ = ml_models::data::parse_csv(&text(b), Path::new("fuzz.csv"));
            },
        },
        Target {
            name: "fewrel",
            run: |b| {
                if let Some(p) = scratch_file("input.json", b) {
                    let _ = ml_models::data::read_fewrel(&p);
                }
            },
        },
    ]
}

/// Reads the corpus of `target` from `dir/<name>` (sorted by file name); empty when missing.
pub fn corpus(dir: &Path, target: &Target) -> Vec<Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir.join(target.name)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

/// xorshift64*: a small seeded generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Numbers that break parsers: zero, negative, just past 32 and 64 bits, overflowing floats.
const NUMBERS: [&str; 12] = [
    "0",
    "-1",
    "1",
    "2147483648",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "1e308",
    "-1e309",
    "NaN",
    "inf",
];

/// Bytes with meaning in the formats: separators, comments, brackets, quotes, signs.
const BYTES: [u8; 16] = [
    0, 0xff, b'0', b'9', b'-', b' ', b'\t', b'\n', b'%', b'#', b'{', b'}', b'[', b'"', b',', b'.',
];

/// One to four random mutations of `input`.
fn mutate(input: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = v.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                v[i] = BYTES[rng.below(BYTES.len())];
            }
            2 => {
                let i = rng.below(len + 1);
                let n = NUMBERS[rng.below(NUMBERS.len())].as_bytes();
                v.splice(i..i, n.iter().copied());
            }
            3 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(64)).min(len);
                v.drain(a..b);
            }
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + 1 + rng.below(256)).min(len);
                let copy: Vec<u8> = v[a..b].to_vec();
                let at = rng.below(len + 1);
                v.splice(at..at, copy);
            }
            5 if len > 0 => v.truncate(rng.below(len)),
            _ => {
                // Replace a run of digits with an interesting number.
                let digits: Vec<usize> = (0..len).filter(|&i| v[i].is_ascii_digit()).collect();
                if let Some(&start) = digits.get(rng.below(digits.len().max(1))) {
                    let mut end = start;
                    while end < len && v[end].is_ascii_digit() {
                        end += 1;
                    }
                    let n = NUMBERS[rng.below(NUMBERS.len())].as_bytes();
                    v.splice(start..end, n.iter().copied());
                }
            }
        }
        v.truncate(MAX_INPUT_BYTES);
    }
    v
}

/// A failing input.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The input.
    pub input: Vec<u8>,
    /// The panic message.
    pub message: String,
}

/// What a fuzzing run did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Inputs fed to the parser (corpus included).
    pub inputs: u64,
    /// The slowest input's time.
    pub slowest: Duration,
    /// The first input that panicked, if any.
    pub failure: Option<Failure>,
}

/// Feeds `target` every corpus input, then `mutations` mutated ones (seeded by `seed`), until
/// the first panic.
pub fn fuzz(target: &Target, corpus: &[Vec<u8>], mutations: u64, seed: u64) -> Outcome {
    fuzz_until(target, corpus, mutations, None, seed)
}

/// [`fuzz`] that also stops after `budget` of wall time (the corpus always runs whole).
pub fn fuzz_until(
    target: &Target,
    corpus: &[Vec<u8>],
    mutations: u64,
    budget: Option<Duration>,
    seed: u64,
) -> Outcome {
    let start = Instant::now();
    let mut rng = Rng(seed | 1);
    let mut out = Outcome {
        inputs: 0,
        slowest: Duration::ZERO,
        failure: None,
    };
    let empty = [Vec::new()];
    let seeds: &[Vec<u8>] = if corpus.is_empty() { &empty } else { corpus };
    let feed = |input: Vec<u8>, out: &mut Outcome| -> bool {
        let t = Instant::now();
        let r = catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        out.slowest = out.slowest.max(t.elapsed());
        out.inputs += 1;
        if let Err(payload) = r {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            out.failure = Some(Failure { input, message });
            return false;
        }
        true
    };
    for input in seeds {
        if !feed(input.clone(), &mut out) {
            return out;
        }
    }
    for _ in 0..mutations {
        if budget.is_some_and(|b| start.elapsed() >= b) {
            break;
        }
        let base = &seeds[rng.below(seeds.len())];
        let input = mutate(base, &mut rng);
        if !feed(input, &mut out) {
            break;
        }
    }
    out
}
