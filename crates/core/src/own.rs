//! The library's own allocations (a new slot, a histogram's window, a capture block, a
//! site's record): neither counted in any scope's allocations nor sampled into the heap
//! profile, where `tickscope::alloc::Profiled` is the global allocator. A leaf.

/// Runs `f`, the library's own work, with its allocations neither counted nor sampled.
#[inline]
pub(crate) fn own<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(feature = "sampler")]
    return tickscope_sampler::heap::unprofiled(f);
    #[cfg(not(feature = "sampler"))]
    f()
}
