//! The global allocator wrapper: every call passed to the allocator it wraps, the sampling
//! around it ([`super`]).

use std::alloc::{GlobalAlloc, Layout};

use super::{allocated, freed};

/// A global allocator that samples the allocations it passes to `A` (see the module docs).
#[derive(Debug, Default)]
pub struct Profiled<A> {
    inner: A,
}

impl<A> Profiled<A> {
    /// Samples the allocations of `inner`.
    pub const fn new(inner: A) -> Profiled<A> {
        Profiled { inner }
    }
}

// SAFETY: every call is passed to `inner` with the arguments it was given, and its result
// returned unchanged; the profiling around it allocates only through this allocator with the
// thread's `BUSY` flag set (not profiled again), and never touches the blocks.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Profiled<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc`, passed on.
        let p = unsafe { self.inner.alloc(layout) };
        if !p.is_null() {
            allocated(p as usize, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        let p = unsafe { self.inner.alloc_zeroed(layout) };
        if !p.is_null() {
            allocated(p as usize, layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        freed(ptr as usize);
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { self.inner.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract for `realloc`, passed on.
        let q = unsafe { self.inner.realloc(ptr, layout, new_size) };
        if !q.is_null() {
            // The old block is gone (or is the new one): a free and an allocation.
            freed(ptr as usize);
            allocated(q as usize, new_size);
        }
        q
    }
}
