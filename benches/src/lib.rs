//! Shared helpers for the pardis benches: the thread pool every bench runs in and data lookup.

use std::path::PathBuf;

/// The pool a bench runs its parallel kernels in: `$PARDIS_BENCH_THREADS` threads, or rayon's
/// default (one per core) when unset or unparsable.
pub fn bench_pool() -> rayon::ThreadPool {
    let threads = std::env::var("PARDIS_BENCH_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("thread pool")
}

/// A file at `rel` under the data roots (`$PARDIS_DATA`, `datasets/cache/`,
/// `../shared/datasets/`), or `None` after printing why the bench skips it.
pub fn data_file(rel: &str) -> Option<PathBuf> {
    let found = pardis_datasets::DataRoots::from_env()
        .locate_path(rel)
        .map(|located| located.path);
    if found.is_none() {
        eprintln!("skipping {rel}: not found (set PARDIS_DATA)");
    }
    found
}
