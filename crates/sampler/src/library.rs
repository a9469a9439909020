//! What the sampler asks of the library it is part of (`tickscope`, which installs it as it
//! loads): the calibrated clock, the scopes open on the interrupted thread, and a running
//! timeline capture. The sampler depends on none of them by name, so it sits below them.
//! Without a library (the crate used on its own) the clock is `CLOCK_MONOTONIC` in ns, no
//! scope is open and no capture runs.

use std::sync::OnceLock;

/// The library's side, as plain functions: those marked "signal context" are called from
/// the sampler's signal handler and must not allocate or lock.
#[derive(Clone, Copy)]
pub struct Library {
    /// The clock's reading, in its ticks.
    pub now: fn() -> u64,
    /// The clock's reading, in signal context.
    pub now_in_signal: fn() -> u64,
    /// The clock's ticks per second, if known without waiting for a calibration.
    pub rate_without_waiting: fn() -> Option<f64>,
    /// The ids of the scopes open on the calling thread, outermost first, into `out`;
    /// returns how many. Signal context.
    pub active_scopes: fn(out: &mut [u32]) -> usize,
    /// True while a timeline capture runs. Signal context.
    pub capturing: fn() -> bool,
    /// Gives the running capture stack `id`'s frames (leaf first), before its samples.
    pub define_stack: fn(id: u64, frames: &[u64]),
    /// One sample on the running capture: its time (the clock's ticks), thread and stack.
    pub sample: fn(ticks: u64, tid: u32, stack: u64),
    /// A scope id's name.
    pub scope_name: fn(id: u32) -> Option<String>,
    /// The heap profiler's estimate of the bytes in use moved to `bytes` (a sampled block
    /// allocated or freed): a counter on a running capture. Called on the thread that
    /// allocated or freed, with its allocations unprofiled; it must not take a lock that
    /// code allocating under it may hold.
    pub heap_in_use: fn(bytes: f64),
}

static LIBRARY: OnceLock<&'static Library> = OnceLock::new();

/// The sampler alone: the monotonic clock, no scopes, no capture.
static ALONE: Library = Library {
    now: crate::sys::clock::monotonic_ns,
    now_in_signal: crate::sys::clock::monotonic_ns,
    rate_without_waiting: || Some(1e9),
    active_scopes: |_| 0,
    capturing: || false,
    define_stack: |_, _| {},
    sample: |_, _, _| {},
    scope_name: |_| None,
    heap_in_use: |_| {},
};

/// Installs the library's side (the first installation stays). `tickscope` does it from an
/// `.init_array` entry, before any of the program's code runs.
pub fn install(library: &'static Library) {
    let _ = LIBRARY.set(library);
}

/// The library's side, or the sampler alone's. Signal context: one atomic load.
#[inline]
pub(crate) fn get() -> &'static Library {
    LIBRARY.get().copied().unwrap_or(&ALONE)
}
