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

/// OP2's Airfoil loops in plain C (`benches/c/airfoil.c`, built with -O3 by the build script),
/// the reference the `mesh` bench times pardis's sequential backend against.
pub mod airfoil_c {
    use pardis::plan::unstructured::Grid;

    #[cfg(pardis_c_airfoil)]
    extern "C" {
        fn pardis_airfoil_c(
            ncell: usize,
            nedge: usize,
            nbedge: usize,
            cell: *const u32,
            edge: *const u32,
            ecell: *const u32,
            bedge: *const u32,
            becell: *const u32,
            bound: *const i64,
            x: *const f64,
            qinf: *const f64,
            q: *mut f64,
            qold: *mut f64,
            adt: *mut f64,
            res: *mut f64,
            niter: usize,
        ) -> f64;
    }

    /// Whether the C reference was built (a C compiler was found).
    pub fn available() -> bool {
        cfg!(pardis_c_airfoil)
    }

    /// Runs `iterations` Airfoil iterations from the free stream `qinf` in C; returns the flow
    /// state `q` (4 per cell) and the last rms residual sum, or `None` when the C reference
    /// was not built or the grid's maps point outside it.
    pub fn run(grid: &Grid, qinf: [f64; 4], iterations: usize) -> Option<(Vec<f64>, f64)> {
        let (nnode, ncell) = (grid.nnode(), grid.ncell());
        let in_range = |m: &[u32], n: usize| m.iter().all(|&v| (v as usize) < n);
        if !(in_range(&grid.cell, nnode)
            && in_range(&grid.edge, nnode)
            && in_range(&grid.bedge, nnode)
            && in_range(&grid.ecell, ncell)
            && in_range(&grid.becell, ncell)
            && grid.cell.len() == 4 * ncell
            && grid.ecell.len() == grid.edge.len()
            && grid.becell.len() * 2 == grid.bedge.len()
            && grid.bound.len() == grid.becell.len())
        {
            return None;
        }
        let mut q = qinf.repeat(ncell);
        let mut qold = vec![0.0; 4 * ncell];
        let mut adt = vec![0.0; ncell];
        let mut res = vec![0.0; 4 * ncell];
        #[cfg(pardis_c_airfoil)]
        {
            // SAFETY: every pointer is to a live slice of the length the C code indexes: maps
            // checked in range of their target sets above, `cell` 4 per cell, `edge`/`ecell` 2
            // per edge, `bedge` 2 and `becell`/`bound` 1 per boundary edge, `x` 2 per node,
            // `q`/`qold`/`res` 4 and `adt` 1 per cell; the C code keeps no pointer.
            let rms = unsafe {
                pardis_airfoil_c(
                    ncell,
                    grid.nedge(),
                    grid.nbedge(),
                    grid.cell.as_ptr(),
                    grid.edge.as_ptr(),
                    grid.ecell.as_ptr(),
                    grid.bedge.as_ptr(),
                    grid.becell.as_ptr(),
                    grid.bound.as_ptr(),
                    grid.x.as_ptr(),
                    qinf.as_ptr(),
                    q.as_mut_ptr(),
                    qold.as_mut_ptr(),
                    adt.as_mut_ptr(),
                    res.as_mut_ptr(),
                    iterations,
                )
            };
            Some((q, rms))
        }
        #[cfg(not(pardis_c_airfoil))]
        {
            let _ = (&mut q, &mut qold, &mut adt, &mut res, iterations);
            None
        }
    }
}
