//! A counting global allocator for measuring the peak heap bytes of a training step.
//!
//! The library never installs it; a binary opts in with
//! `#[global_allocator] static A: CountingAllocator = CountingAllocator::new();` and reads
//! [`CountingAllocator::peak_since_reset`] around the code it measures. It counts every heap
//! allocation of the process (candle's tensor storage included), not resident pages.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator plus live and peak byte counters.
#[derive(Debug)]
pub struct CountingAllocator {
    live: AtomicUsize,
    peak: AtomicUsize,
    base: AtomicUsize,
}

impl CountingAllocator {
    /// Counters at zero.
    pub const fn new() -> Self {
        Self {
            live: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            base: AtomicUsize::new(0),
        }
    }

    /// Bytes currently allocated.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Starts a measurement: the peak is set to the current live bytes.
    pub fn reset_peak(&self) {
        let now = self.live();
        self.base.store(now, Ordering::Relaxed);
        self.peak.store(now, Ordering::Relaxed);
    }

    /// Highest live bytes since [`CountingAllocator::reset_peak`], minus the live bytes at the
    /// reset (what the measured code added at its peak).
    pub fn peak_since_reset(&self) -> usize {
        self.peak
            .load(Ordering::Relaxed)
            .saturating_sub(self.base.load(Ordering::Relaxed))
    }
}

impl Default for CountingAllocator {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call forwards to the system allocator with the caller's pointer and layout
// unchanged; the counters are statistics only and never affect the returned memory.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = self.live.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` was returned by `alloc` above (i.e. by `System`) with layout `l`.
        unsafe { System.dealloc(p, l) };
        self.live.fetch_sub(l.size(), Ordering::Relaxed);
    }
}
