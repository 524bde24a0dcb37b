//! Intel MKL's sparse inspector–executor SpMM (`mkl_sparse_?_mm`), called natively for
//! `spmm_compare`: `libmkl_rt` (from the `mkl` PyPI wheel, for example) is loaded at run time
//! with `libloading`, so nothing links against MKL and the published library does not depend
//! on it. The handle is created once per matrix; `mkl_sparse_set_mm_hint` and
//! `mkl_sparse_optimize` run outside the timed calls (MKL's equivalent of LSSM's plan), as
//! MKL's own users call it.
//!
//! LP64 interface (`MKL_INT` = `i32`, `libmkl_rt`'s default), zero-based CSR, row-major B and C.

use sparse_kernels::{CsrMatrix, Scalar};
use std::any::TypeId;
use std::ffi::{c_char, c_int, c_void};
use std::time::Instant;

type Handle = *mut c_void;

/// `struct matrix_descr` of `mkl_spblas.h`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
struct MatrixDescr {
    kind: c_int,
    mode: c_int,
    diag: c_int,
}

const SPARSE_OPERATION_NON_TRANSPOSE: c_int = 10;
const SPARSE_MATRIX_TYPE_GENERAL: c_int = 20;
const SPARSE_FILL_MODE_LOWER: c_int = 40;
const SPARSE_DIAG_NON_UNIT: c_int = 50;
const SPARSE_LAYOUT_ROW_MAJOR: c_int = 101;
const SPARSE_INDEX_BASE_ZERO: c_int = 0;
const GENERAL: MatrixDescr = MatrixDescr {
    kind: SPARSE_MATRIX_TYPE_GENERAL,
    mode: SPARSE_FILL_MODE_LOWER,
    diag: SPARSE_DIAG_NON_UNIT,
};

type CreateCsr<V> = unsafe extern "C" fn(
    *mut Handle,
    c_int,
    i32,
    i32,
    *mut i32,
    *mut i32,
    *mut i32,
    *mut V,
) -> c_int;
type Mm<V> = unsafe extern "C" fn(
    c_int,
    V,
    Handle,
    MatrixDescr,
    c_int,
    *const V,
    i32,
    i32,
    V,
    *mut V,
    i32,
) -> c_int;
type SetMmHint = unsafe extern "C" fn(Handle, c_int, MatrixDescr, c_int, i32, i32) -> c_int;
type OneHandle = unsafe extern "C" fn(Handle) -> c_int;
type SetInterfaceLayer = unsafe extern "C" fn(c_int) -> c_int;
type SetNumThreads = unsafe extern "C" fn(c_int);
type VersionString = unsafe extern "C" fn(*mut c_char, c_int);

/// The entry points of `libmkl_rt` the comparison needs; the library stays loaded while this
/// lives, which keeps the function pointers valid.
pub(crate) struct Mkl {
    _lib: libloading::Library,
    create_d: CreateCsr<f64>,
    create_s: CreateCsr<f32>,
    mm_d: Mm<f64>,
    mm_s: Mm<f32>,
    set_mm_hint: SetMmHint,
    optimize: OneHandle,
    destroy: OneHandle,
    /// MKL's version string (`mkl_get_version_string`).
    pub(crate) version: String,
}

impl Mkl {
    /// Loads `path` (a `libmkl_rt.so`) and sets MKL's thread count to `threads`.
    pub(crate) fn load(path: &str, threads: usize) -> Result<Mkl, String> {
        // SAFETY: loading libmkl_rt runs its initialisers, which have no preconditions; the
        // library is an ordinary shared object of Intel's distribution.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{path}: {e}"))?;
        /// Copies a function pointer out of the library.
        ///
        /// # Safety
        /// `F` is the C signature of `name` in MKL's headers (LP64).
        unsafe fn sym<F: Copy>(lib: &libloading::Library, name: &str) -> Result<F, String> {
            // SAFETY: the caller states that `F` is the symbol's signature.
            unsafe { lib.get::<F>(name.as_bytes()) }
                .map(|s| *s)
                .map_err(|e| format!("{name}: {e}"))
        }
        // The LP64 interface (MKL_INT = i32) is selected explicitly before any other call, so
        // an `MKL_INTERFACE_LAYER=ILP64` in the environment cannot change the integer width.
        // SAFETY: `MKL_Set_Interface_Layer(int)` returns the layer in effect (mkl_service.h).
        let set_layer: SetInterfaceLayer = unsafe { sym(&lib, "MKL_Set_Interface_Layer")? };
        // SAFETY: as above; 0 is MKL_INTERFACE_LP64.
        let layer = unsafe { set_layer(0) };
        if layer != 0 {
            return Err(format!(
                "{path}: MKL kept interface layer {layer}, not LP64"
            ));
        }
        // SAFETY: every signature below is transcribed from mkl_spblas.h / mkl_service.h with
        // MKL_INT = i32 (the LP64 interface selected above) and enums as c_int.
        let (mkl, set_threads, version) = unsafe {
            let mkl = Mkl {
                create_d: sym(&lib, "mkl_sparse_d_create_csr")?,
                create_s: sym(&lib, "mkl_sparse_s_create_csr")?,
                mm_d: sym(&lib, "mkl_sparse_d_mm")?,
                mm_s: sym(&lib, "mkl_sparse_s_mm")?,
                set_mm_hint: sym(&lib, "mkl_sparse_set_mm_hint")?,
                optimize: sym(&lib, "mkl_sparse_optimize")?,
                destroy: sym(&lib, "mkl_sparse_destroy")?,
                version: String::new(),
                _lib: lib,
            };
            let set_threads: SetNumThreads = sym(&mkl._lib, "MKL_Set_Num_Threads")?;
            let version: VersionString = sym(&mkl._lib, "MKL_Get_Version_String")?;
            (mkl, set_threads, version)
        };
        let mut buf = vec![0 as c_char; 256];
        // SAFETY: MKL writes at most `len` bytes into `buf` (one fewer than it holds, so the
        // last byte stays 0 whatever MKL does); the thread count is a plain int.
        unsafe {
            version(buf.as_mut_ptr(), (buf.len() - 1) as c_int);
            set_threads(threads as c_int);
        }
        let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
        let version = std::ffi::CStr::from_bytes_until_nul(&bytes)
            .map(|t| t.to_string_lossy().trim().to_string())
            .unwrap_or_default();
        Ok(Mkl { version, ..mkl })
    }
}

/// One matrix inside MKL: the CSR arrays MKL reads (it keeps pointers to them, so they live
/// here as long as the handle), the handle, hinted and optimised for `k` columns.
pub(crate) struct MklMatrix<'m, T> {
    mkl: &'m Mkl,
    handle: Handle,
    rows: i32,
    cols: i32,
    k: i32,
    _offsets: Vec<i32>,
    _indices: Vec<i32>,
    _values: Vec<T>,
    /// Seconds spent in create + `set_mm_hint` + `optimize` (the inspector).
    pub(crate) inspector_s: f64,
}

fn check(what: &str, status: c_int) -> Result<(), String> {
    if status == 0 {
        Ok(())
    } else {
        Err(format!("{what} returned sparse_status_t {status}"))
    }
}

impl<'m, T: Scalar> MklMatrix<'m, T> {
    /// Hands `a` to MKL and runs the inspector for `k` columns of B (`expected_calls` hinted);
    /// with `expected_calls == 0` no hint is given and `mkl_sparse_optimize` is not called (MKL
    /// then runs its plain CSR kernel, for studies of what the inspector buys).
    pub(crate) fn new(
        mkl: &'m Mkl,
        a: &CsrMatrix<T, u32>,
        k: usize,
        expected_calls: usize,
    ) -> Result<Self, String> {
        let small = |x: usize, what: &str| {
            i32::try_from(x).map_err(|_| format!("{what} = {x} does not fit MKL's LP64 MKL_INT"))
        };
        let (rows, cols) = (small(a.nrows(), "rows")?, small(a.ncols(), "cols")?);
        small(a.nnz(), "nnz")?;
        let k = small(k, "K")?;
        let mut offsets: Vec<i32> = a.offsets().iter().map(|&o| o as i32).collect();
        let mut indices: Vec<i32> = a.indices().iter().map(|&c| c as i32).collect();
        let mut values: Vec<T> = a.values().to_vec();
        let start = Instant::now();
        let mut handle: Handle = std::ptr::null_mut();
        let (ptr, idx, val) = (
            offsets.as_mut_ptr(),
            indices.as_mut_ptr(),
            values.as_mut_ptr(),
        );
        // SAFETY: `ptr` has rows + 1 entries (rows_start = ptr, rows_end = ptr + 1), `idx` and
        // `val` have nnz entries, all kept alive in the returned value as long as the handle;
        // `val` points to f64 or f32 exactly when the typed entry point called expects it.
        let status = unsafe {
            if TypeId::of::<T>() == TypeId::of::<f32>() {
                (mkl.create_s)(
                    &mut handle,
                    SPARSE_INDEX_BASE_ZERO,
                    rows,
                    cols,
                    ptr,
                    ptr.add(1),
                    idx,
                    val.cast(),
                )
            } else {
                (mkl.create_d)(
                    &mut handle,
                    SPARSE_INDEX_BASE_ZERO,
                    rows,
                    cols,
                    ptr,
                    ptr.add(1),
                    idx,
                    val.cast(),
                )
            }
        };
        check("mkl_sparse_?_create_csr", status)?;
        let mut matrix = MklMatrix {
            mkl,
            handle,
            rows,
            cols,
            k,
            _offsets: offsets,
            _indices: indices,
            _values: values,
            inspector_s: 0.0,
        };
        if expected_calls == 0 {
            matrix.inspector_s = start.elapsed().as_secs_f64();
            return Ok(matrix);
        }
        // SAFETY: `handle` is the valid handle just created.
        unsafe {
            check(
                "mkl_sparse_set_mm_hint",
                (mkl.set_mm_hint)(
                    handle,
                    SPARSE_OPERATION_NON_TRANSPOSE,
                    GENERAL,
                    SPARSE_LAYOUT_ROW_MAJOR,
                    k,
                    expected_calls.min(i32::MAX as usize) as i32,
                ),
            )?;
            check("mkl_sparse_optimize", (mkl.optimize)(handle))?;
        }
        matrix.inspector_s = start.elapsed().as_secs_f64();
        Ok(matrix)
    }

    /// C = A·B with row-major `b` (cols × k) and `c` (rows × k), C overwritten (beta = 0).
    pub(crate) fn mm(&self, b: &[T], c: &mut [T]) -> Result<(), String> {
        let k = self.k as usize;
        if b.len() != self.cols as usize * k || c.len() != self.rows as usize * k {
            return Err("B or C has the wrong size".into());
        }
        // SAFETY: `b` holds cols × k and `c` rows × k elements (checked above), row-major with
        // leading dimension k; T is f32 exactly when the single-precision entry point is called.
        let status = unsafe {
            if TypeId::of::<T>() == TypeId::of::<f32>() {
                (self.mkl.mm_s)(
                    SPARSE_OPERATION_NON_TRANSPOSE,
                    1.0,
                    self.handle,
                    GENERAL,
                    SPARSE_LAYOUT_ROW_MAJOR,
                    b.as_ptr().cast(),
                    self.k,
                    self.k,
                    0.0,
                    c.as_mut_ptr().cast(),
                    self.k,
                )
            } else {
                (self.mkl.mm_d)(
                    SPARSE_OPERATION_NON_TRANSPOSE,
                    1.0,
                    self.handle,
                    GENERAL,
                    SPARSE_LAYOUT_ROW_MAJOR,
                    b.as_ptr().cast(),
                    self.k,
                    self.k,
                    0.0,
                    c.as_mut_ptr().cast(),
                    self.k,
                )
            }
        };
        check("mkl_sparse_?_mm", status)
    }
}

impl<T> Drop for MklMatrix<'_, T> {
    fn drop(&mut self) {
        // SAFETY: the handle was created by MKL and is destroyed once, before the arrays it
        // points to are dropped (fields drop after this body).
        unsafe {
            (self.mkl.destroy)(self.handle);
        }
    }
}
