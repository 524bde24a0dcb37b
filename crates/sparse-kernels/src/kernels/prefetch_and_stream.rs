//! Memory policies of the micro-kernel: software prefetching of the rows of B, and
//! non-temporal (streaming) stores of C.

use crate::SpIndex;

/// `*dst = acc`; with `stream`, when `dst` is whole 64-byte lines (it starts a line and its size
/// is a multiple of one), with non-temporal stores. Other pieces are written with ordinary
/// stores: a streaming store to part of a line makes the write-combining buffer flush a partial
/// line, which is far slower than reading the line for ownership. A tile is streamed whole or
/// not at all, in a loop of a constant trip count, so that the compiler keeps `acc` in
/// registers (a test per 16 bytes, as this function had before, made it store `acc` to the
/// stack and read it back). The streaming stores are as wide as the registers of the SIMD level
/// the caller runs on (`vector_bytes`, [`vector_bytes`]): 16-byte stores read the accumulators
/// in 16-byte pieces, and LLVM then kept them in 16-byte registers through the whole tile loop
/// (half the width of AVX2, spilling; benches/README.md, sparse, "Streaming stores as wide as
/// the registers").
#[inline(always)]
pub(super) fn write<T: Copy, const N: usize>(
    dst: &mut [T; N],
    acc: [T; N],
    stream: bool,
    vector_bytes: usize,
) {
    let bytes = N * std::mem::size_of::<T>();
    #[cfg(target_arch = "x86_64")]
    if stream && bytes.is_multiple_of(64) && (dst.as_ptr() as usize).is_multiple_of(64) {
        // SAFETY: `dst` is whole 64-byte lines at a line boundary (checked above); the wide
        // stores run only where the caller's level has the instructions (`vector_bytes`).
        unsafe {
            match vector_bytes {
                64 => stream_512(dst, &acc),
                32 => stream_256(dst, &acc),
                _ => stream_128(dst, &acc),
            }
        }
        return;
    }
    let _ = (bytes, stream, vector_bytes);
    *dst = acc;
}

/// The widest streaming store [`write`] may use where the code runs on the AVX-512 tiles
/// (`WIDE`: 64 bytes) or on a level with fused multiply-adds (`fma`: AVX2 on x86-64, 32 bytes);
/// else 16 (SSE2, part of x86-64).
#[inline(always)]
pub(super) fn vector_bytes<const WIDE: bool>(fma: bool) -> usize {
    match (WIDE, fma) {
        (true, _) => 64,
        (false, true) => 32,
        (false, false) => 16,
    }
}

/// `dst = src` with 16-byte non-temporal stores.
///
/// # Safety
/// `dst` starts a 64-byte line and its size is a multiple of 64 bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_128<T, const N: usize>(dst: &mut [T; N], src: &[T; N]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
    let (src, out) = (
        src.as_ptr().cast::<__m128i>(),
        dst.as_mut_ptr().cast::<__m128i>(),
    );
    for j in 0..N * std::mem::size_of::<T>() / 16 {
        // SAFETY: `16 · (j + 1)` bytes are within both arrays; `out` is 64-byte aligned
        // (caller), `src` is read unaligned. SSE2 is part of x86-64.
        unsafe { _mm_stream_si128(out.add(j), _mm_loadu_si128(src.add(j))) };
    }
}

/// `dst = src` with 32-byte non-temporal stores.
///
/// # Safety
/// As [`stream_128`], and the CPU has AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
unsafe fn stream_256<T, const N: usize>(dst: &mut [T; N], src: &[T; N]) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256, _mm256_stream_si256};
    let (src, out) = (
        src.as_ptr().cast::<__m256i>(),
        dst.as_mut_ptr().cast::<__m256i>(),
    );
    for j in 0..N * std::mem::size_of::<T>() / 32 {
        // SAFETY: `32 · (j + 1)` bytes are within both arrays (a multiple of 64 bytes); `out`
        // is 64-byte aligned, `src` is read unaligned; the CPU has AVX (caller).
        unsafe { _mm256_stream_si256(out.add(j), _mm256_loadu_si256(src.add(j))) };
    }
}

/// `dst = src` with 64-byte non-temporal stores.
///
/// # Safety
/// As [`stream_128`], and the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn stream_512<T, const N: usize>(dst: &mut [T; N], src: &[T; N]) {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_stream_si512};
    let (src, out) = (
        src.as_ptr().cast::<__m512i>(),
        dst.as_mut_ptr().cast::<__m512i>(),
    );
    for j in 0..N * std::mem::size_of::<T>() / 64 {
        // SAFETY: `64 · (j + 1)` bytes are within both arrays; `out` is 64-byte aligned,
        // `src` is read unaligned; the CPU has AVX-512F (caller).
        unsafe { _mm512_stream_si512(out.add(j), _mm512_loadu_si512(src.add(j))) };
    }
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
                write(dst, acc, stream, 16);
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
