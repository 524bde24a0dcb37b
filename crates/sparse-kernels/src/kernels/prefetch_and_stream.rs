//! Memory policies of the micro-kernel: software prefetching of the rows of B, and
//! non-temporal (streaming) stores of C.

use crate::SpIndex;

/// `*dst = acc`; with `stream`, the 64-byte lines that lie wholly inside `dst` are written
/// with non-temporal stores and the partial lines at its ends with ordinary ones (a streaming
/// store to part of a line makes the write-combining buffer flush a partial line, which is
/// far slower than reading the line for ownership).
#[inline(always)]
pub(super) fn write<T: Copy, const N: usize>(dst: &mut [T; N], acc: [T; N], stream: bool) {
    let bytes = N * std::mem::size_of::<T>();
    #[cfg(target_arch = "x86_64")]
    if stream && bytes.is_multiple_of(16) && (dst.as_ptr() as usize).is_multiple_of(16) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_stream_si128};
        let (src, out) = (
            acc.as_ptr().cast::<__m128i>(),
            dst.as_mut_ptr().cast::<__m128i>(),
        );
        let (start, end) = (out as usize, out as usize + bytes);
        for j in 0..bytes / 16 {
            let line = (start + 16 * j) & !63;
            // SAFETY: `16 · (j + 1) <= bytes`, the size of both arrays; `out` is 16-byte
            // aligned (checked above), `src` is read unaligned. SSE2 is part of x86-64.
            unsafe {
                let v = _mm_loadu_si128(src.add(j));
                if line >= start && line + 64 <= end {
                    _mm_stream_si128(out.add(j), v);
                } else {
                    _mm_storeu_si128(out.add(j), v);
                }
            }
        }
        return;
    }
    let _ = (bytes, stream);
    *dst = acc;
}

/// Orders this thread's earlier streaming stores before its later stores (x86 `sfence`), so
/// that whoever synchronises with this thread afterwards sees them.
#[inline(always)]
pub(super) fn fence_streams() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no preconditions; SSE is part of x86-64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Prefetches (into L1) the first `k` elements of the rows `cols` of B (leading dimension `ld`).
#[inline(always)]
pub(super) fn prefetch_rows<T, I: SpIndex>(cols: &[I], b: &[T], ld: usize, k: usize) {
    for &c in cols {
        prefetch_span(b.as_ptr().wrapping_add(c.idx() * ld), k);
    }
}

/// Prefetches (into L1) the cache lines of the `len` elements from `start`. The address is only
/// a hint: it need not point into an allocation.
#[inline(always)]
fn prefetch_span<T>(start: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = start.cast::<i8>();
        let end = start.wrapping_add(len * std::mem::size_of::<T>());
        let mut line = start.wrapping_sub(start as usize % 64);
        while line < end {
            // SAFETY: a prefetch is only a hint: it never faults and has no effect on the
            // program's state, whatever the address (`wrapping_*` keeps it defined).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line) };
            line = line.wrapping_add(64);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}
