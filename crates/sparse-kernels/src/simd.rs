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
    #[cfg(target_arch = "x86_64")]
    {
        if avx512_in_use() {
            "avx512"
        } else if pulp::x86::V3::try_new().is_some() {
            "avx2"
        } else {
            "sse2"
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
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
}
