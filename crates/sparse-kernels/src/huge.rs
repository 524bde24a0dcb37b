//! Opt-in allocation of large dense operands on transparent huge pages (Linux).
//!
//! Random gathers of rows of B (power-law graphs) put nearly every access on a different 4 KiB
//! page, so address translation costs as much as the data; on 2 MiB pages the same gathers
//! need 512× fewer translations. Measured with `examples/panel_study.rs --hugepages` (paired
//! rounds, 2 threads, K = 64 `f64`, unpanelled plans, B here vs B in a `Vec`; shared machine,
//! load 4–6.6): 2026-12-03 10:52 UTC (the example's own `madvise` code, the same as this)
//! `kron:18` 1.11–1.12×, `uniform:262144:16` 1.20–1.22×, `stencil27:64` 1.07–1.11×; 10:54 UTC
//! (this function) `kron:18` 1.03–1.11×, `uniform:262144:16` 1.02–1.04×. The kernel's
//! `thp_fault_alloc` counter rose by 64 huge pages (B of `kron:18`, 128 MiB) per run.

use crate::Scalar;

/// Bytes of a transparent huge page on x86-64 and (4 KiB-granule) AArch64 Linux.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// A vector of `len` zeros whose whole 2 MiB-aligned pages the kernel is asked
/// (`madvise(MADV_HUGEPAGE)`, Linux) to back with transparent huge pages before they are first
/// written; for B (or C) of [`crate::DenseRef`] / [`crate::DenseMut`] views. The request is
/// only advice: with transparent huge pages disabled, on other systems, or if `madvise`
/// fails, this is an ordinary zeroed vector. The capacity is up to 2 MiB larger than `len`
/// (room to align), and the part before the first 2 MiB boundary stays on ordinary pages.
pub fn zeroed_on_huge_pages<T: Scalar>(len: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    let mut v: Vec<T> = Vec::with_capacity(len + HUGE_PAGE_BYTES / size);
    advise_huge_pages(v.as_mut_ptr().cast::<u8>(), v.capacity() * size);
    v.resize(len, T::ZERO);
    v
}

/// Asks the kernel to back the whole 2 MiB pages of `start..start + bytes` with huge pages.
#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, bytes: usize) {
    extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    const MADV_HUGEPAGE: i32 = 14;
    let first = (start as usize).next_multiple_of(HUGE_PAGE_BYTES);
    let end = (start as usize + bytes) / HUGE_PAGE_BYTES * HUGE_PAGE_BYTES;
    if end > first {
        // SAFETY: `first..end` lies inside the allocation `start..start + bytes` (rounded
        // inwards to whole huge pages); MADV_HUGEPAGE only changes how the kernel backs pages
        // not yet touched, never their contents, and a failure (return value) is harmless.
        let _ = unsafe { madvise(first as *mut std::ffi::c_void, end - first, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _bytes: usize) {}
