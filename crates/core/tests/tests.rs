//! Integration tests of the `tickscope` crate: one binary, one module per area.

/// Tests that compile (nested cargo builds, trybuild) or keep the cores busy (capture) hold
/// this for reading; the sampler's
/// CPU-share tests hold it for writing. Their shares rest on a periodic sampler sweeping a
/// periodic workload evenly, which holds when the two worker threads have the two cores, and
/// not while a compiler runs beside them (measured: 3:1 came out as 0.80 under a build).
pub(crate) static CPU_HEAVY: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held by the capture tests and by every other test that enters scopes in this process (or
/// switches recording off): a capture records every thread's scopes, and the capture tests
/// count their own exactly (another test's 29 scopes once made 200,058 events of 200,000).
pub(crate) static SCOPES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A turn at [`SCOPES`].
pub(crate) fn scopes_turn() -> std::sync::MutexGuard<'static, ()> {
    SCOPES.lock().unwrap_or_else(|p| p.into_inner())
}

// Timeline capture: loss accounting, ring policies, sinks that fail or vanish, flight recorder.
#[cfg(all(feature = "capture", feature = "enabled"))]
mod capture;
// Exit summaries of real processes on every exit path (the examples as child processes).
mod exit;
// `#[profile]` and `scope!` through the public API, and compile errors (trybuild).
mod macros;
// Futures (`.profiled`, `#[profile] async fn`) on a multi-thread runtime, and `tracing` spans
// through the layer: busy and wall time against what the tests measure themselves.
#[cfg(feature = "enabled")]
mod timed;
// The sampler: exact CPU time, threads, fork, signals, and `go tool pprof` on its output.
#[cfg(feature = "sampler")]
mod sampler;
// The heap profiler: estimates within the sampling error, frees found, `go tool pprof`.
#[cfg(feature = "sampler")]
mod heap;
// Push to a loopback receiver: exact windows, Pyroscope's request, retries and drops.
#[cfg(feature = "push")]
mod push;

/// Counts allocations made inside the sampler's signal handler (there must be none); every
/// allocation is passed on to the system allocator.
#[cfg(feature = "sampler")]
struct CountingAllocator;

/// A bump arena for the blocks a signal handler of the heap tests allocates: the system
/// allocator is not safe to call from a handler, so whatever such a test finds (a hang, a
/// crash) is the profiler's. Never freed; 16 MiB of `.bss`, touched only by that test.
#[cfg(feature = "sampler")]
pub(crate) mod arena {
    use std::cell::{Cell, UnsafeCell};
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    const SIZE: usize = 16 << 20;
    #[repr(align(4096))]
    struct Bytes(UnsafeCell<[u8; SIZE]>);
    // SAFETY: each block of the arena is handed out once (an atomic bump) and used only by
    // the code it was handed to.
    unsafe impl Sync for Bytes {}
    static BYTES: Bytes = Bytes(UnsafeCell::new([0; SIZE]));
    static NEXT: AtomicUsize = AtomicUsize::new(0);

    thread_local! {
        /// This thread is in a test's signal handler: its blocks come from the arena.
        pub(crate) static IN_HANDLER: Cell<bool> = const { Cell::new(false) };
    }

    /// A block of the arena, or null when it is spent.
    pub(crate) fn alloc(layout: std::alloc::Layout) -> *mut u8 {
        let align = layout.align().max(16);
        let size = (layout.size() + align - 1) & !(align - 1);
        let at = NEXT.fetch_add(size + align, Relaxed);
        if at + size + align > SIZE {
            return std::ptr::null_mut();
        }
        let base = BYTES.0.get() as *mut u8;
        let start = (base as usize + at + align - 1) & !(align - 1);
        start as *mut u8
    }

    /// Whether `p` is a block of the arena.
    pub(crate) fn owns(p: *mut u8) -> bool {
        let base = BYTES.0.get() as usize;
        (base..base + SIZE).contains(&(p as usize))
    }

    pub(crate) fn in_handler() -> bool {
        IN_HANDLER.with(|h| h.get())
    }
}

#[cfg(feature = "sampler")]
// SAFETY: forwards every call to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if tickscope::sampler::in_signal_handler() {
            sampler::ALLOCS_IN_HANDLER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if arena::in_handler() {
            return arena::alloc(layout);
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        if tickscope::sampler::in_signal_handler() {
            sampler::ALLOCS_IN_HANDLER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if arena::owns(ptr) {
            return;
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    // Forwarded, not left to the default (alloc, then zero every byte): calloc's fresh pages
    // cost no memory until written, which the capture's memory test relies on.
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if tickscope::sampler::in_signal_handler() {
            sampler::ALLOCS_IN_HANDLER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if arena::in_handler() {
            // The arena's blocks are zero until handed out once.
            return arena::alloc(layout);
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        if tickscope::sampler::in_signal_handler() {
            sampler::ALLOCS_IN_HANDLER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let (handler, owned) = (arena::in_handler(), arena::owns(ptr));
        if handler || owned {
            let to = std::alloc::Layout::from_size_align(new, layout.align()).unwrap();
            let q = if handler {
                arena::alloc(to)
            } else {
                // SAFETY: a valid layout of non-zero size (the caller's contract).
                unsafe { std::alloc::System.alloc(to) }
            };
            if !q.is_null() {
                // SAFETY: both blocks are valid for the smaller size and do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new)) };
            }
            return q;
        }
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.realloc(ptr, layout, new) }
    }
}

/// Every test of this binary runs under the heap profiler too, at its default rate (the
/// `heap` tests, in processes of their own, at the rates they set).
#[cfg(feature = "sampler")]
#[global_allocator]
static ALLOCATOR: tickscope::alloc::Profiled<CountingAllocator> =
    tickscope::alloc::Profiled::new(CountingAllocator);

/// The licence files at the repository root are the licences Cargo.toml declares.
#[test]
fn licence_files_match_the_declared_licence() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"MIT OR Apache-2.0\""),
        "the workspace declares another licence: update LICENSE-*"
    );
    for (file, title) in [
        (
            "LICENSE-MIT",
            "Permission is hereby granted, free of charge",
        ),
        (
            "LICENSE-APACHE",
            "Apache License\n                           Version 2.0",
        ),
    ] {
        let text = std::fs::read_to_string(root.join(file))
            .unwrap_or_else(|e| panic!("{file} at the repository root: {e}"));
        assert!(text.contains(title), "{file} is not the standard text");
    }
    let mit = std::fs::read_to_string(root.join("LICENSE-MIT")).unwrap();
    assert!(mit.contains("Copyright (c) The tickscope developers"));
}

/// An error as anyhow's `{:#}` prints it: the message, then each source after a colon.
#[cfg(any(feature = "sampler", all(feature = "capture", feature = "enabled")))]
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut chain = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        chain += &format!(": {s}");
        next = s.source();
    }
    chain
}
