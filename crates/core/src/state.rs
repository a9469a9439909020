//! The run-time switches every scope reads: recording on, and a capture running. Both in one
//! byte, so a scope reads them with one load. A leaf: the scopes' implementation reads them,
//! the runtime applies `TICKSCOPE_ENABLED`, the capture sets its bit.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Bit: scopes record.
pub(crate) const ON: u8 = 1;
/// Bit: a capture is running; scopes also record their begin and end into it.
pub(crate) const CAPTURE: u8 = 2;

/// Both switches.
pub(crate) static STATE: AtomicU8 = AtomicU8::new(ON);

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

/// True if and only if scopes are compiled in, a capture is running and scopes are on.
#[inline(always)]
pub(crate) fn capturing() -> bool {
    crate::COMPILED_IN && STATE.load(Relaxed) == ON | CAPTURE
}
