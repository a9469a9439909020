//! Wall time per call site, for what lives longer than one entry: a `tracing` span (created →
//! closed) and a profiled future (first poll → ready, or → dropped before it: a
//! cancellation). Its entries (a span's enters, a future's polls) are ordinary scopes of the
//! same call site, so the busy time is the scope's row and the wall time is this one.
//!
//! A wall time is recorded once per span or future, on whatever thread ends it, so the
//! figures are shared atomics (one `fetch_add` each), not a thread's slot. Call sites with a
//! wall time are listed here on their first record, for the reports.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};

use tickscope_fmt::hist::{bucket, Counts, BUCKETS};

use super::callsite::{Callsite, Kind, Name};
use crate::clock::Ticks;

/// A call site measured twice: each entry (a future's poll, a span's enter) a scope of `cs`,
/// each life (first poll to ready; creation to close) a wall time in `wall` and, while a
/// capture runs, an async slice on its timeline. The macros put one in a static (futures);
/// `tracing` spans and `.profiled(name)` make theirs at run time ([`TimedSite::interned`]).
/// Not a stable API.
#[doc(hidden)]
pub struct TimedSite {
    pub(crate) cs: Callsite,
    pub(crate) wall: Wall,
}

impl TimedSite {
    /// A future's call site; `file`, `line` and `module` come from `file!()`, `line!()`,
    /// `module_path!()`.
    pub const fn new(
        name: Name,
        kind: Kind,
        file: &'static str,
        line: u32,
        module: &'static str,
    ) -> TimedSite {
        TimedSite::of(
            WallKind::Future,
            Callsite::new(name, kind, file, line, module),
        )
    }

    /// Call site `cs`, its lives of kind `wall`.
    pub(crate) const fn of(wall: WallKind, cs: Callsite) -> TimedSite {
        TimedSite {
            cs,
            wall: Wall::new(wall),
        }
    }

    /// The site stored under `key` in `map`, made by `make` (and kept for the process's
    /// life) the first time.
    pub(crate) fn interned<K: Hash + Eq>(
        map: &'static Mutex<Option<HashMap<K, &'static TimedSite>>>,
        key: K,
        make: impl FnOnce() -> TimedSite,
    ) -> &'static TimedSite {
        let mut sites = super::lock_within(map, None).expect("no deadline: always locks");
        sites
            .get_or_insert_with(HashMap::new)
            .entry(key)
            .or_insert_with(|| Box::leak(Box::new(make())))
    }
}

/// What a call site's wall time measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WallKind {
    /// A `tracing` span: from its creation to its close; its entries are the busy time.
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    Span,
    /// A future: from its first poll to ready (or to its drop: cancelled); its polls are the
    /// busy time.
    Future,
}

impl WallKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            WallKind::Span => "span",
            WallKind::Future => "future",
        }
    }
}

/// A call site's wall times. `const`-constructible: the macros put one in a static.
#[doc(hidden)]
pub struct Wall {
    kind: WallKind,
    listed: AtomicBool,
    /// Lives cancelled; those done are the histogram's count less these (one locked add
    /// fewer on every life's end: each costs 5-8 ns).
    cancelled: AtomicU64,
    total: AtomicU64,
    min: AtomicU64,
    max: AtomicU64,
    clock_errors: AtomicU64,
    /// Allocated at the first record: in the static, 20 KB per call site would be in every
    /// binary's data whether or not the site ever runs.
    hist: OnceLock<Box<[AtomicU64]>>,
}

impl Wall {
    pub(crate) const fn new(kind: WallKind) -> Wall {
        Wall {
            kind,
            listed: AtomicBool::new(false),
            cancelled: AtomicU64::new(0),
            total: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            clock_errors: AtomicU64::new(0),
            hist: OnceLock::new(),
        }
    }

    /// Records one span's or future's wall time, from `t0` to `t1` (readings of the counter,
    /// perhaps on different threads), for call site `id`. `cancelled`: a future dropped
    /// before it was ready (counted apart; its time to the drop is in the figures too). A
    /// negative time (counters not in step across CPUs) counts a clock error and records 0.
    pub(crate) fn record(&'static self, id: u32, t0: Ticks, t1: Ticks, cancelled: bool) {
        if !self.listed.load(Relaxed) {
            self.list(id);
        }
        let dt = match t1.checked_sub(t0) {
            Some(d) => d,
            None => {
                self.clock_errors.fetch_add(1, Relaxed);
                0
            }
        };
        if cancelled {
            self.cancelled.fetch_add(1, Relaxed);
        }
        self.total.fetch_add(dt, Relaxed);
        // A compare first: most records move neither bound, and a plain load costs no
        // locked instruction.
        if dt < self.min.load(Relaxed) {
            self.min.fetch_min(dt, Relaxed);
        }
        if dt > self.max.load(Relaxed) {
            self.max.fetch_max(dt, Relaxed);
        }
        let hist = self
            .hist
            .get_or_init(|| crate::own::own(|| (0..BUCKETS).map(|_| AtomicU64::new(0)).collect()));
        hist[bucket(dt)].fetch_add(1, Relaxed);
    }

    #[cold]
    #[inline(never)]
    fn list(&'static self, id: u32) {
        let mut l = LISTED.lock().unwrap_or_else(|p| p.into_inner());
        if !self.listed.swap(true, Relaxed) {
            crate::own::own(|| l.push((id, self)));
        }
    }

    /// A snapshot (relaxed reads: may trail a record in progress).
    pub(crate) fn read(&self) -> WallRow {
        let mut hist = Counts::new();
        if let Some(h) = self.hist.get() {
            for (dst, src) in hist.0.iter_mut().zip(h.iter()) {
                *dst = src.load(Relaxed);
            }
        }
        // Every life's end adds to the histogram, a cancelled one to `cancelled` first.
        let cancelled = self.cancelled.load(Relaxed);
        let lives: u64 = hist.0.iter().sum();
        WallRow {
            kind: self.kind,
            done: lives.saturating_sub(cancelled),
            cancelled,
            total: self.total.load(Relaxed),
            min: self.min.load(Relaxed),
            max: self.max.load(Relaxed),
            clock_errors: self.clock_errors.load(Relaxed),
            hist,
        }
    }
}

/// Call sites with wall times, by id, in the order of their first record.
static LISTED: Mutex<Vec<(u32, &'static Wall)>> = Mutex::new(Vec::new());

/// Every call site's wall times now, by id. With `wait`, gives up (`None`) if the list's
/// lock stays busy that long (the exit path).
pub(crate) fn snapshot(wait: Option<std::time::Duration>) -> Option<Vec<(u32, WallRow)>> {
    let l = super::lock_within(&LISTED, wait)?;
    Some(l.iter().map(|(id, w)| (*id, w.read())).collect())
}

/// A call site's wall times, read at one moment.
#[derive(Clone, Debug)]
pub(crate) struct WallRow {
    pub kind: WallKind,
    /// Spans closed; futures that returned ready.
    pub done: u64,
    /// Futures dropped before they were ready.
    pub cancelled: u64,
    /// Ticks, over done and cancelled.
    pub total: u64,
    pub min: u64,
    pub max: u64,
    pub clock_errors: u64,
    pub hist: Counts,
}

impl WallRow {
    /// Spans or futures ended, either way.
    pub(crate) fn count(&self) -> u64 {
        self.done + self.cancelled
    }

    /// The `q` quantile, within the exact min and max.
    pub(crate) fn quantile(&self, q: f64) -> Option<u64> {
        if self.count() == 0 {
            return None;
        }
        self.hist.quantile(q).map(|v| v.clamp(self.min, self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wall_times_count_done_and_cancelled_apart_and_sum_both() {
        static W: Wall = Wall::new(WallKind::Future);
        // 1, 2, ..., 100 ticks done; 1000 and 3000 cancelled; one negative (clock error).
        for i in 1..=100u64 {
            W.record(9_001, 500, 500 + i, false);
        }
        W.record(9_001, 0, 1000, true);
        W.record(9_001, 10, 3010, true);
        W.record(9_001, 20, 10, false);
        let r = W.read();
        assert_eq!((r.done, r.cancelled, r.count()), (101, 2, 103));
        assert_eq!(r.total, 5050 + 4000);
        assert_eq!((r.min, r.max), (0, 3000));
        assert_eq!(r.clock_errors, 1);
        let p50 = r.quantile(0.5).unwrap() as f64;
        assert!((p50 - 51.0).abs() <= 51.0 * 0.02 + 1.0, "{p50}");
        // Within the bucket's 1%, and never past the exact max.
        let top = r.quantile(1.0).unwrap();
        assert!((2940..=3000).contains(&top), "{top}");
        let listed = snapshot(None).unwrap();
        assert_eq!(listed.iter().filter(|(id, _)| *id == 9_001).count(), 1);
    }
}
