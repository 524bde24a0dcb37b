//! Bulk copies that step around a slow case of `rep movsb` on AMD processors.
//!
//! glibc's `memcpy` moves mid-sized blocks with `rep movsb`, and on AMD cores that
//! instruction can run about 20× slower when the destination lies 1 to 31 bytes past the source
//! modulo 4096 (the same symptom as microsoft/STL#5658, reported there for Windows and Linux).
//! (Measured on an AMD EPYC with glibc 2.36 for 4–256 KiB copies, none from the L2 size on:
//! benches/README.md, collectives, "Measurements behind code defaults".)
//!
//! Message buffers meet that case all the time: two same-sized heap blocks allocated one after
//! the other lie a multiple of the page size plus glibc's 16-byte chunk header apart, so
//! copying a received message into a buffer allocated next to it lands on the slow path.
//! [`copy_slice`] checks the distance and, when it is in the slow window and the block is in
//! `rep movsb`'s size range on an AMD processor, copies in 2 KiB pieces, which `memcpy` moves
//! with vector loads and stores (about 10–20× the plain copy in that window; the local ring
//! all-reduce gained 3–4× at 64–256 KiB: benches/README.md, collectives, "Measurements behind
//! code defaults"). Every other copy is a plain `copy_from_slice`.

/// Largest piece copied at once on the slow path: below glibc's `rep movsb` threshold, so
/// every piece takes the vector loop (measured at distance 16: 2 KiB pieces 42–63 GB/s for
/// 16–64 KiB blocks, 4032-byte pieces still 2.8–3.0).
pub(crate) const PIECE_BYTES: usize = 2048;

/// Distances `dst - src (mod 4096)` at which `rep movsb` is slow: 1 to 31 bytes.
const SLOW_DISTANCES: std::ops::Range<usize> = 1..32;

/// The longest copy that can take `rep movsb` inside glibc's `memcpy` on this CPU, or `None`
/// where the slow case does not occur (not an AMD x86-64 processor). glibc on AMD stops using
/// `rep movsb` at the L2 size (here: slow at 256 KiB, fast from 512 KiB, the L2 size) and
/// switches to other loops (non-temporal stores for large blocks), which piecewise copies
/// would lose (2 KiB pieces of a 16 MiB block: 7.2 against 13.7 GB/s), so longer copies stay
/// plain. Read once from CPUID (vendor, and the L2 size from leaf `0x8000_0006`; 512 KiB when
/// not reported).
pub(crate) fn rep_movsb_limit() -> Option<usize> {
    static LIMIT: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(amd_l2_bytes)
}

#[cfg(target_arch = "x86_64")]
#[allow(unused_unsafe)] // `__cpuid` is an unsafe fn before Rust 1.89 (rust-version 1.85)
fn amd_l2_bytes() -> Option<usize> {
    use std::arch::x86_64::__cpuid;
    // SAFETY: every x86-64 processor has `cpuid`; leaf 0 and 0x8000_0000 always exist, and
    // 0x8000_0006 is read only when 0x8000_0000 reports it.
    let (vendor, max_extended) = unsafe { (__cpuid(0), __cpuid(0x8000_0000).eax) };
    // "AuthenticAMD" in EBX, EDX, ECX.
    let amd = (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163);
    if !amd {
        return None;
    }
    let l2_kib = if max_extended >= 0x8000_0006 {
        // SAFETY: as above; the leaf is reported.
        let cache = unsafe { __cpuid(0x8000_0006) };
        (cache.ecx >> 16) as usize
    } else {
        0
    };
    Some(if l2_kib == 0 { 512 << 10 } else { l2_kib << 10 })
}

#[cfg(not(target_arch = "x86_64"))]
fn amd_l2_bytes() -> Option<usize> {
    None
}

/// Whether a `bytes`-long copy from address `src` to address `dst` would hit the slow
/// `rep movsb` case on this CPU: the destination 1–31 bytes past the source modulo 4096, and
/// `bytes` between [`PIECE_BYTES`] and [`rep_movsb_limit`].
pub(crate) fn is_slow_distance(dst: usize, src: usize, bytes: usize) -> bool {
    rep_movsb_limit().is_some_and(|limit| bytes > PIECE_BYTES && bytes < limit)
        && SLOW_DISTANCES.contains(&(dst.wrapping_sub(src) % 4096))
}

/// Copies `src` into `dst` (same length, like `copy_from_slice`), in 2 KiB (`PIECE_BYTES`)
/// pieces when the distance between them would make `memcpy` slow (`is_slow_distance`).
///
/// # Panics
/// If the lengths differ.
pub fn copy_slice<T: Copy>(dst: &mut [T], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    let bytes = std::mem::size_of_val(src);
    if !is_slow_distance(dst.as_ptr() as usize, src.as_ptr() as usize, bytes) {
        dst.copy_from_slice(src);
        return;
    }
    let piece = (PIECE_BYTES / std::mem::size_of::<T>()).max(1);
    for (d, s) in dst.chunks_mut(piece).zip(src.chunks(piece)) {
        // `black_box` keeps the compiler from fusing the pieces back into one `memcpy`.
        d.copy_from_slice(std::hint::black_box(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slow_window_is_one_to_thirty_one_bytes_past_a_page_multiple() {
        let bytes = 64 << 10;
        let Some(limit) = rep_movsb_limit() else {
            assert!(
                !is_slow_distance(0x10_0010, 0x1000, bytes),
                "only AMD x86-64 has the case"
            );
            return;
        };
        assert!(is_slow_distance(0x10_0010, 0x1000, bytes));
        assert!(is_slow_distance(0x1001, 0x1000, bytes));
        assert!(is_slow_distance(0x101f, 0x1000, bytes));
        assert!(!is_slow_distance(0x1020, 0x1000, bytes));
        assert!(!is_slow_distance(0x2000, 0x1000, bytes));
        assert!(
            !is_slow_distance(0x1000, 0x1010, bytes),
            "destination before the source"
        );
        assert!(
            !is_slow_distance(0x1010, 0x1000, PIECE_BYTES),
            "short copies"
        );
        assert!(!is_slow_distance(0x1010, 0x1000, limit), "long copies");
        assert!(limit >= 256 << 10, "an L2 of {limit} bytes");
    }

    proptest! {
        /// Every length and distance (`gap` bytes past a page multiple, the slow window
        /// included), `u8` and `u32` elements, copies exactly.
        #[test]
        fn copies_like_copy_from_slice(len in 0usize..100_000, gap in 0usize..64, shift in 0usize..64) {
            let dist = len.div_ceil(4096) * 4096 + gap;
            let mut bytes: Vec<u8> = (0..shift + dist + len).map(|i| (i * 13 % 253) as u8).collect();
            let (head, tail) = bytes.split_at_mut(shift + dist);
            copy_slice(&mut tail[..len], &head[shift..shift + len]);
            prop_assert_eq!(&tail[..len], &head[shift..shift + len]);
            let words = len / 4;
            let mut ints: Vec<u32> = (0..(dist / 4 + words) as u32).collect();
            let (head, tail) = ints.split_at_mut(dist / 4);
            copy_slice(&mut tail[..words], &head[..words]);
            prop_assert_eq!(&tail[..words], &head[..words]);
        }
    }

    #[test]
    fn consecutive_heap_blocks_take_the_piecewise_path_and_copy_exactly() {
        // The layout that made message copies slow: a buffer exactly 16 bytes past a page
        // multiple after its source (built here inside one allocation).
        let len = 16 << 10;
        let mut bytes: Vec<u8> = (0..3 * len + 4096).map(|i| (i * 7 % 251) as u8).collect();
        let base = bytes.as_ptr().align_offset(4096);
        let (src_at, dst_at) = (base, base + len + 16);
        let expect = bytes[src_at..src_at + len].to_vec();
        let (head, tail) = bytes.split_at_mut(dst_at);
        let src = &head[src_at..src_at + len];
        assert_eq!(
            is_slow_distance(tail.as_ptr() as usize, src.as_ptr() as usize, len),
            rep_movsb_limit().is_some()
        );
        copy_slice(&mut tail[..len], src);
        assert_eq!(&tail[..len], &expect[..]);
    }
}
