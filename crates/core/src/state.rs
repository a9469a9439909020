//! The run-time switches every scope reads: recording on, a capture running, allocations
//! counted, and whether the clock is the CPU counter. All in one byte, so a scope reads them
//! with one load, and takes its shortest path when the byte is exactly [`ON`]. A leaf: the scopes'
//! implementation reads them, the runtime applies `TICKSCOPE_ENABLED` and turns allocation
//! counting on where `tickscope::alloc::Profiled` is the global allocator, the capture sets
//! its bit.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Bit: scopes record.
pub(crate) const ON: u8 = 1;
/// Bit: a capture is running; scopes also record their begin and end into it.
pub(crate) const CAPTURE: u8 = 2;

/// Bit: `tickscope::alloc::Profiled` is the global allocator; scopes count the allocations
/// made inside them (`scope::heap`).
pub(crate) const ALLOCS: u8 = 4;

/// Bit: the clock is not the CPU counter (not chosen yet, or the OS clock): scopes take the
/// path that asks the clock which source it reads. Cleared once, when the counter is chosen
/// (the choice is final): a scope that finds `STATE == ON` reads the counter directly, and
/// so does its exit.
pub(crate) const SLOW_CLOCK: u8 = 8;

/// The switches.
pub(crate) static STATE: AtomicU8 = AtomicU8::new(ON | SLOW_CLOCK);

/// The clock chose the CPU counter, for the life of the process.
pub(crate) fn clock_is_counter() {
    STATE.fetch_and(!SLOW_CLOCK, Relaxed);
}

/// Turns recording on or off.
pub(crate) fn set_enabled(on: bool) {
    if on {
        STATE.fetch_or(ON, Relaxed);
    } else {
        STATE.fetch_and(!ON, Relaxed);
    }
}

/// True if and only if scopes are compiled in and recorded now.
pub(crate) fn is_enabled() -> bool {
    crate::COMPILED_IN && STATE.load(Relaxed) & ON != 0
}

/// Turns the capture bit on or off (the capture module's start and stop).
#[cfg(feature = "capture")]
pub(crate) fn set_capture(on: bool) {
    if on {
        STATE.fetch_or(CAPTURE, Relaxed);
    } else {
        STATE.fetch_and(!CAPTURE, Relaxed);
    }
}

/// Turns allocation counting on (once the global allocator is known to be ours).
#[cfg(feature = "sampler")]
pub(crate) fn set_allocs() {
    STATE.fetch_or(ALLOCS, Relaxed);
}

/// True if and only if scopes count allocations (and are on).
pub(crate) fn counting_allocs() -> bool {
    crate::COMPILED_IN && STATE.load(Relaxed) & (ON | ALLOCS) == ON | ALLOCS
}

/// True if and only if scopes are compiled in, a capture is running and scopes are on.
#[inline(always)]
pub(crate) fn capturing() -> bool {
    crate::COMPILED_IN && STATE.load(Relaxed) & (ON | CAPTURE) == ON | CAPTURE
}
