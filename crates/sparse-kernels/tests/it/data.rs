//! Real matrices from the shared data sets (SuiteSparse Matrix Market and DLMC `.smtx`),
//! skipped with a message when the directory is absent.

use crate::common::{matrices_dir, reference, rel_err, tolerance};
use sparse_kernels::io::read_matrix;
use sparse_kernels::{gen, CsrMatrix, DenseMut, DenseRef, Kernel, Par};
use std::path::{Path, PathBuf};

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, ext, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

fn check_file(path: &Path, k: usize) {
    let a: CsrMatrix<f64, u32> =
        read_matrix(path, 1).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let b_data = gen::dense::<f64>(a.ncols(), k, 3);
    let b = DenseRef::contiguous(&b_data, a.ncols(), k);
    let r = reference(&a, b);
    for kernel in Kernel::ALL {
        let mut c = vec![0.0; a.nrows() * k];
        kernel
            .run(
                &a,
                b,
                DenseMut::contiguous(&mut c, a.nrows(), k),
                Par::Threads(2),
            )
            .unwrap();
        let err = rel_err(&c, &r, a.nrows(), k);
        assert!(
            err <= tolerance::<f64>(),
            "{kernel} on {}: error {err}",
            path.display()
        );
    }
}

/// The files with extension `ext` under `matrices/<sub>`, or `None` (with a message saying why
/// the test is skipped) when there are none.
fn shared_files(sub: &str, ext: &str) -> Option<Vec<PathBuf>> {
    let Some(dir) = matrices_dir() else {
        eprintln!(
            "skipping: no matrices directory ($PARDIS_DATA, datasets/cache, ../shared/datasets)"
        );
        return None;
    };
    let mut files = Vec::new();
    files_under(&dir.join(sub), ext, &mut files);
    if files.is_empty() {
        eprintln!(
            "skipping: no .{ext} files under {}",
            dir.join(sub).display()
        );
        return None;
    }
    Some(files)
}

#[test]
fn suitesparse_matrices() {
    let Some(files) = shared_files("suitesparse", "mtx") else {
        return;
    };
    for f in &files {
        check_file(f, 6);
    }
    // Spot checks of the parsed structure against the files' size lines.
    if let Some(arrow) = files.iter().find(|f| f.ends_with("arrow.mtx")) {
        let a: CsrMatrix<f64, u32> = read_matrix(arrow, 0).unwrap();
        assert_eq!((a.nrows(), a.ncols(), a.nnz()), (46_500, 46_500, 139_498));
    }
}

#[test]
fn dlmc_matrices() {
    let Some(files) = shared_files("dlmc", "smtx") else {
        return;
    };
    for f in &files {
        check_file(f, 5);
    }
}
