//! Memory policies of the micro-kernel: software prefetching of the rows of B, and
//! non-temporal (streaming) stores of C.

use crate::SpIndex;

/// `*dst = acc`; with `stream`, when `dst` is whole 64-byte lines (it starts a line and its size
/// is a multiple of one), with non-temporal stores. Other pieces are written with ordinary
/// stores: a streaming store to part of a line makes the write-combining buffer flush a partial
/// line, which is far slower than reading the line for ownership. A tile is streamed whole or
/// not at all, in a loop of a constant trip count, so that the compiler keeps `acc` in
/// registers (a test per 16 bytes, as this function had before, made it store `acc` to the
/// stack and read it back).
#[inline(always)]
pub(super) fn write<T: Copy, const N: usize>(dst: &mut [T; N], acc: [T; N], stream: bool) {
    let bytes = N * std::mem::size_of::<T>();
    #[cfg(target_arch = "x86_64")]
    if stream && bytes.is_multiple_of(64) && (dst.as_ptr() as usize).is_multiple_of(64) {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let (src, out) = (
            acc.as_ptr().cast::<__m128i>(),
            dst.as_mut_ptr().cast::<__m128i>(),
        );
        for j in 0..bytes / 16 {
            // SAFETY: `16 · (j + 1) <= bytes`, the size of both arrays; `out` is 64-byte
            // aligned (checked above), `src` is read unaligned. SSE2 is part of x86-64.
            unsafe { _mm_stream_si128(out.add(j), _mm_loadu_si128(src.add(j))) };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AlignedVec;

    /// `write` stores `acc` whether it streams (a piece of whole lines at a line boundary) or
    /// not (a piece off a line boundary, or shorter than a line), for `f64` and `f32`.
    fn writes_every_offset<T: crate::Scalar, const N: usize>() {
        let acc: [T; N] = std::array::from_fn(|i| T::from_f64(i as f64 + 0.5));
        let per_line = 64 / std::mem::size_of::<T>();
        let mut buffer = AlignedVec::<T>::zeroed(N + 2 * per_line);
        for offset in 0..per_line {
            for stream in [false, true] {
                buffer.fill(T::ZERO);
                let dst: &mut [T; N] = (&mut buffer[offset..offset + N]).try_into().unwrap();
                write(dst, acc, stream);
                fence_streams();
                assert_eq!(
                    &buffer[offset..offset + N],
                    &acc[..],
                    "offset {offset}, {stream}"
                );
                let mut untouched = buffer[..offset].iter().chain(&buffer[offset + N..]);
                assert!(untouched.all(|&x| x == T::ZERO), "offset {offset}");
            }
        }
    }

    #[test]
    fn write_stores_the_accumulators_streamed_or_not() {
        writes_every_offset::<f64, 4>();
        writes_every_offset::<f64, 8>();
        writes_every_offset::<f64, 32>();
        writes_every_offset::<f64, 64>();
        writes_every_offset::<f32, 8>();
        writes_every_offset::<f32, 16>();
        writes_every_offset::<f32, 64>();
    }
}
