//! [`TimeMap`]: counter ticks to ns since the start of capture, the conversion every export
//! and the replay share.

use crate::tscap::{Clock, Process};

/// Converts counter ticks to ns since the start of capture, at one calibration.
#[derive(Clone, Copy, Debug)]
pub struct TimeMap {
    origin: u64,
    ns_per_tick: f64,
}

impl TimeMap {
    /// Ticks from `process`'s start, at `clock`'s rate.
    pub fn new(process: &Process, clock: Clock) -> TimeMap {
        TimeMap {
            origin: process.start_ticks,
            ns_per_tick: 1e9 / clock.ticks_per_second,
        }
    }

    /// The counter reading `ns` after the start of capture (the inverse of [`ns`](Self::ns),
    /// saturating).
    pub fn ticks(&self, ns: u64) -> u64 {
        let d = (ns as f64 / self.ns_per_tick).round();
        self.origin.saturating_add(if d >= u64::MAX as f64 {
            u64::MAX
        } else {
            d as u64
        })
    }

    /// ns since the start of capture; readings before it are 0. Non-decreasing in `ticks`
    /// (within 2^63 ticks of the start), so intervals keep their nesting.
    #[inline]
    pub fn ns(&self, ticks: u64) -> u64 {
        let d = ticks.wrapping_sub(self.origin) as i64;
        if d <= 0 {
            0
        } else {
            // Rounded half up (the value is positive): as `round()`, without its libm call.
            (d as f64 * self.ns_per_tick + 0.5) as u64
        }
    }
}
