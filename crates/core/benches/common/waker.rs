//! A waker that does nothing, for polling a future by hand in a benchmark's loop.

use std::task::{RawWaker, RawWakerVTable, Waker};

/// A waker whose every function ignores its data pointer.
pub fn noop_waker() -> Waker {
    const VTABLE: RawWakerVTable =
        RawWakerVTable::new(|p| RawWaker::new(p, &VTABLE), |_| {}, |_| {}, |_| {});
    // SAFETY: every function of the vtable ignores the data pointer, which is never read.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}
