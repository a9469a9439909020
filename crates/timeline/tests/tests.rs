//! Integration tests of `tickscope-timeline`: one binary, one module per area.

// Test support: the spec-following capture encoder, a protobuf decoder, sample captures.
mod support;

// The reader: round trips, chunk boundaries, every bad input, salvage.
mod read;

// The summary: exact numbers on hand-built captures, text and JSON.
mod report;

// Chrome, Perfetto, speedscope and folded exports: structure and numbers.
mod export;

// Recording a capture from a stream (`capture listen`'s logic).
mod live;

// The version-1 fixture, read forever.
mod fixture;

/// Records the largest single allocation each thread asks for, so tests can show that a
/// length field is refused before anything is allocated for it.
pub mod alloc {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Tracking;

    thread_local! {
        static LARGEST: Cell<usize> = const { Cell::new(0) };
    }

    // SAFETY: every call is forwarded to the system allocator unchanged; the thread-local is
    // a const-initialised `Cell`, which neither allocates nor panics (`try_with` tolerates
    // thread teardown).
    unsafe impl GlobalAlloc for Tracking {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(layout.size())));
            // SAFETY: forwarded with the caller's layout, as `GlobalAlloc::alloc` requires.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            let _ = LARGEST.try_with(|l| l.set(l.get().max(new_size)));
            // SAFETY: `ptr` came from `System` with `layout`, as the caller guarantees.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Tracking = Tracking;

    /// Runs `f` and returns its result with the largest allocation it made on this thread.
    pub fn largest<T>(f: impl FnOnce() -> T) -> (T, usize) {
        LARGEST.with(|l| l.set(0));
        let r = f();
        (r, LARGEST.with(|l| l.get()))
    }
}
