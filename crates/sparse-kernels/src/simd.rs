//! Which SIMD level the kernels run on.
//!
//! The micro-kernel shared by every parallel kernel is compiled for several instruction-set
//! levels and picks one at run time: AVX-512 (x86-64-v4, with 512-byte register tiles) where
//! the CPU has it, else what [`pulp::Arch`] detects (x86-64-v3 AVX2+FMA, NEON, or the scalar
//! baseline). All levels give the same bits. [`set_simd_limit`] caps the choice for the whole
//! process — for CPUs that lower their clock under 512-bit instructions, and for measuring one
//! level against the other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The widest SIMD level the kernels may use ([`set_simd_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SimdLimit {
    /// The widest level this CPU has (the default).
    #[default]
    Widest,
    /// At most AVX2 (x86-64-v3): never the AVX-512 path.
    Avx2,
}

static AVX2_ONLY: AtomicBool = AtomicBool::new(false);

/// Caps the SIMD level of every kernel, process-wide, from the next kernel call on. Results do
/// not change, only speed.
pub fn set_simd_limit(limit: SimdLimit) {
    AVX2_ONLY.store(limit == SimdLimit::Avx2, Ordering::Relaxed);
}

/// The limit set by [`set_simd_limit`].
pub fn simd_limit() -> SimdLimit {
    if AVX2_ONLY.load(Ordering::Relaxed) {
        SimdLimit::Avx2
    } else {
        SimdLimit::Widest
    }
}

/// Rows of C of at most this many bytes (K = 8 `f64`, 16 `f32`) run on the AVX2 tiles even
/// where AVX-512 is in use: one 64-byte tile is one `zmm` accumulator per row, one chain of
/// dependent multiply-adds, against two `ymm` ones. On an AMD EPYC (Zen 4) VM at K = 8 `f64`,
/// 2 threads, the AVX2 tiles were 1.02–1.36× faster on 9 of 10 matrices (`kron:16` 1.01×;
/// benches/README.md, sparse, "Narrow rows on AVX-512"). The bits do not change.
pub const AVX2_ROW_BYTES: usize = 64;

/// Whether this CPU has what the AVX-512 path is compiled for (AVX-512F and VL, AVX2, FMA);
/// detected once.
pub fn cpu_has_avx512() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vl")
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Whether the kernels run their AVX-512 path now: [`cpu_has_avx512`] and no
/// [`SimdLimit::Avx2`] limit.
pub fn avx512_in_use() -> bool {
    cpu_has_avx512() && !AVX2_ONLY.load(Ordering::Relaxed)
}

/// The SIMD level the kernels run on now, for reports: `"avx512"`, `"avx2"` (x86-64-v3:
/// AVX2 + FMA), `"sse2"` (the x86-64 baseline), or on other architectures `"native"` (what
/// pulp picks there: NEON on aarch64, else scalar).
pub fn simd_level() -> &'static str {
    simd_level_for_row_bytes(usize::MAX)
}

/// The SIMD level the kernels run on now for rows of C of `row_bytes` bytes (K times the
/// element size): as [`simd_level`], but `"avx2"` for rows of at most [`AVX2_ROW_BYTES`].
pub fn simd_level_for_row_bytes(row_bytes: usize) -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_in_use() && row_bytes > AVX2_ROW_BYTES {
            "avx512"
        } else if pulp::x86::V3::try_new().is_some() {
            "avx2"
        } else {
            "sse2"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = row_bytes;
        "native"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_switches_the_avx512_path_off_and_on() {
        // Other tests may run kernels meanwhile: any level gives the same bits.
        set_simd_limit(SimdLimit::Avx2);
        assert_eq!(simd_limit(), SimdLimit::Avx2);
        assert!(!avx512_in_use());
        assert_ne!(simd_level(), "avx512");
        set_simd_limit(SimdLimit::Widest);
        assert_eq!(avx512_in_use(), cpu_has_avx512());
    }

    #[test]
    fn narrow_rows_are_reported_on_avx2_tiles() {
        assert_ne!(simd_level_for_row_bytes(AVX2_ROW_BYTES), "avx512");
        assert_ne!(simd_level_for_row_bytes(8), "avx512");
        // A wide row gets what `simd_level` reports, whatever the limit is now.
        let (wide, level) = (simd_level_for_row_bytes(AVX2_ROW_BYTES + 1), simd_level());
        assert!(
            wide == level || [wide, level].contains(&"avx512"),
            "{wide} {level}"
        );
    }
}
