//! Opt-in allocation of large dense operands on transparent huge pages (Linux).
//!
//! Random gathers of rows of B (power-law graphs) put nearly every access on a different 4 KiB
//! page, so address translation costs as much as the data; on 2 MiB pages the same gathers
//! need 512× fewer translations (1.02–1.22× faster in paired runs of
//! `examples/panel_study.rs --hugepages`; benches/README.md, sparse, "Measurements behind
//! code defaults").

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
