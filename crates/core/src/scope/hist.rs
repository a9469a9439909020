//! A log-linear histogram of durations in ticks, for percentiles, over the buckets of
//! [`tickscope_fmt::hist`] (shared with `tickscope report`, so both give the same p50/p99):
//! p50/p90/p99 are good to 2% relative error; reports clamp every percentile to the exact max.
//!
//! The owner thread records with a relaxed load and store of one bucket; other threads read it
//! at any time (a concurrent read may miss the latest record, never sees a torn value).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A histogram snapshot: plain counts, mergeable.
pub(crate) use tickscope_fmt::hist::Counts;
use tickscope_fmt::hist::{bucket, BUCKETS};

/// The live histogram in a slot.
pub(crate) struct Hist {
    buckets: [AtomicU64; BUCKETS],
}

impl Hist {
    pub(crate) const fn new() -> Hist {
        Hist {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
        }
    }

    /// Clears every bucket.
    pub(crate) fn reset(&self) {
        self.buckets.iter().for_each(|b| b.store(0, Relaxed));
    }

    /// Records one value. Owner thread only (relaxed load + store, no locked instruction).
    #[inline(always)]
    pub(crate) fn record(&self, v: u64) {
        let b = &self.buckets[bucket(v)];
        b.store(b.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Adds a snapshot of this histogram into `into`.
    pub(crate) fn add_to(&self, into: &mut Counts) {
        for (dst, src) in into.0.iter_mut().zip(self.buckets.iter()) {
            *dst += src.load(Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The live histogram counts what the shared one counts (whose buckets and percentiles
    /// `tickscope_fmt` tests), and `reset` empties it.
    #[test]
    fn live_records_match_plain_counts_and_reset_clears() {
        let live = Hist::new();
        let mut plain = Counts::new();
        for v in (0..200_000u64).map(|i| i * i % 9_999_991) {
            live.record(v);
            plain.record(v);
        }
        let mut snap = Counts::new();
        live.add_to(&mut snap);
        assert_eq!(snap, plain);
        live.reset();
        let mut empty = Counts::new();
        live.add_to(&mut empty);
        assert_eq!(empty.quantile(0.5), None);
    }
}
