//! The histogram of one call site's durations on one thread, for percentiles, over the
//! buckets of [`tickscope_fmt::hist`] (shared with `tickscope report`, so both give the same
//! p50/p99): p50/p90/p99 are good to 1% relative error; reports clamp every percentile to the
//! exact min and max.
//!
//! The full histogram has 2,560 buckets (20 KB at 8 bytes each), yet a call site's durations
//! fill a few dozen of them, plus a handful of outliers (an interrupt, a page fault). So a
//! slot holds only what was hit:
//! - a **window** of counts over consecutive buckets, allocated on the first record (16
//!   buckets around it) and doubled toward a value that falls just outside it. Its counts
//!   are bytes (a call site called a few hundred times, the usual case, costs a byte a
//!   bucket) until one would pass 255: then the window is widened to `u32` counts, once;
//! - a sorted **sparse** list of `(bucket, count)` for values far from the window. When it
//!   holds more than [`SPARSE_MAX`] entries, or one of them grows common, the window is
//!   refitted: the narrowest window that leaves at most a few rare outliers out (the first
//!   calls of a function, often its slowest, do not pin the window where they fell). A window
//!   count that would pass `u32::MAX` moves 2^32 into the list.
//!
//! The record on the exit path is a bucket computation, one compare against the window and a
//! relaxed load and store of its count; everything else is `#[cold]`. Only the owner thread
//! writes. Other threads read at any time under a sequence lock ([`Hist::version`]) that the
//! owner takes only when the window or the list changes (not for a count), so a reader never
//! pairs a window with another window's counts. Memory comes from the thread's [`Pool`]: a
//! window or list the owner replaces is freed at once unless a reader is in (then it is kept
//! for the thread's other call sites), so a call site holds what its values need now, not
//! every size it grew through.

use std::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8,
    Ordering::{Acquire, Relaxed, Release},
};

/// A histogram snapshot: counts over the range of buckets seen; plain, mergeable.
pub(crate) use tickscope_fmt::hist::Window as Counts;
use tickscope_fmt::hist::{bucket, BUCKETS};

/// Buckets of a first window: a quarter of a power of two.
const FIRST_LEN: usize = 16;
/// Entries the sparse list holds before its first refit (enough values to tell the usual
/// ones from the first calls'); after a refit, twice what it kept.
const SPARSE_FIRST: u32 = 32;
/// A window this long is refitted again as its counts grow (at each power of two from 2^16
/// of one bucket): values that made it wide early may be rare later.
const WIDE: usize = 4 * FIRST_LEN;
/// A sparse entry reaching this count, and each power of two above it, makes the window
/// refit: values that common should not all take the cold path.
const REFIT_FROM: u32 = 1 << 10;
/// A sparse entry is a bucket and a count in one `u32`: the count's bits.
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u32 = (1 << COUNT_BITS) - 1;
/// Entries this common always go into the window at a refit (they are near `COUNT_MAX`).
const FORCED: u64 = 1 << (COUNT_BITS - 1);
const _: () = assert!(BUCKETS <= 1 << (32 - COUNT_BITS) && BUCKETS <= BASE_MASK as usize);
/// `span`: the window's first bucket in its low 12 bits, [`NARROW`] when its counts are
/// bytes, its length in the high 16 bits.
const BASE_MASK: u32 = 0xfff;
const NARROW: u32 = 1 << 15;
/// A refit makes a byte window only where no count it takes is above this (room to grow
/// before the widening).
const NARROW_REFIT_MAX: u64 = 127;

/// The live histogram in a slot.
pub(crate) struct Hist {
    /// The window's first bucket, [`NARROW`], and length (see [`BASE_MASK`]); 0: none yet.
    span: AtomicU32,
    /// Even when stable; odd while the owner replaces the window or edits a list.
    version: AtomicU32,
    /// The window of `u32` counts (not [`NARROW`]): element 0 is its capacity, the counts
    /// follow. Null while the window is narrow.
    win: AtomicPtr<AtomicU32>,
    /// The window of byte counts ([`NARROW`]): element 0 is its capacity's log2, the counts
    /// follow. Null while the window is wide.
    win8: AtomicPtr<AtomicU8>,
    /// The sparse list, sorted by bucket: element 0 is its capacity, `sparse_len` entries
    /// `bucket << COUNT_BITS | count` follow.
    sparse: AtomicPtr<AtomicU32>,
    sparse_len: AtomicU32,
    /// Entries the list may hold before the next refit (owner only).
    sparse_limit: AtomicU32,
    /// Window counts that wrapped: element 0 is its capacity, `carry_len` entries
    /// `bucket << 32 | wraps` follow (each wrap is 2^32 values).
    carry: AtomicPtr<AtomicU64>,
    carry_len: AtomicU32,
}

impl Hist {
    pub(crate) const fn new() -> Hist {
        Hist {
            span: AtomicU32::new(0),
            version: AtomicU32::new(0),
            win: AtomicPtr::new(std::ptr::null_mut()),
            win8: AtomicPtr::new(std::ptr::null_mut()),
            sparse: AtomicPtr::new(std::ptr::null_mut()),
            sparse_len: AtomicU32::new(0),
            sparse_limit: AtomicU32::new(SPARSE_FIRST),
            carry: AtomicPtr::new(std::ptr::null_mut()),
            carry_len: AtomicU32::new(0),
        }
    }

    /// Records one value. Owner thread only.
    #[inline(always)]
    pub(crate) fn record(&self, v: u64, pool: &Pool) {
        let b = bucket(v);
        let span = self.span.load(Relaxed);
        let i = b.wrapping_sub((span & BASE_MASK) as usize);
        if i < (span >> 16) as usize {
            if span & NARROW != 0 {
                // SAFETY: a non-zero length with NARROW means `win8` points at a byte window
                // of at least that many counts after its capacity byte (`span` and the
                // pointers change together, and only on this thread): `i + 1` is in bounds.
                let cell = unsafe { self.win8.load(Relaxed).add(i + 1) };
                // SAFETY: in bounds (above), and pool memory is never freed.
                let c = unsafe { &*cell };
                let n = c.load(Relaxed).wrapping_add(1);
                // The 256th value of a bucket takes the cold path: the window is widened.
                if n != 0 {
                    c.store(n, Relaxed);
                    return;
                }
            } else {
                // SAFETY: as above, for `win`, a window of `u32` counts.
                let cell = unsafe { self.win.load(Relaxed).add(i + 1) };
                // SAFETY: in bounds (above), and pool memory is never freed.
                let c = unsafe { &*cell };
                let n = c.load(Relaxed).wrapping_add(1);
                // Every 2^16th value of a bucket takes the cold path: a wrap, or a refit.
                if n & 0xffff != 0 {
                    c.store(n, Relaxed);
                    return;
                }
            }
        }
        self.record_slow(b, pool);
    }

    /// A value outside the window, or a count at a multiple of 2^16.
    #[cold]
    #[inline(never)]
    fn record_slow(&self, b: usize, pool: &Pool) {
        crate::own::own(|| self.record_slow_unowned(b, pool))
    }

    #[inline(never)]
    fn record_slow_unowned(&self, b: usize, pool: &Pool) {
        let mut p = pool.lock();
        let v = self.version.load(Relaxed);
        self.version.store(v.wrapping_add(1), Relaxed);
        fence(Release);
        let (base, len) = self.window();
        if (base..base + len).contains(&b) && self.narrow() {
            // A byte count at 255: the window takes `u32` counts from now on.
            self.widen(&mut p);
            let c = &self.cells(&self.win)[b - base];
            c.store(c.load(Relaxed) + 1, Relaxed);
        } else if (base..base + len).contains(&b) {
            let c = &self.cells(&self.win)[b - base];
            let n = c.load(Relaxed).wrapping_add(1);
            c.store(n, Relaxed);
            if n == 0 {
                // The count wrapped: 2^32 values move to the carry list.
                self.carry_one(&mut p, b);
            } else if n.is_power_of_two() && len >= WIDE {
                self.refit(&mut p);
            }
        } else if len == 0 {
            let base = b.saturating_sub(FIRST_LEN / 2).min(BUCKETS - FIRST_LEN);
            self.set_window(&mut p, base, FIRST_LEN, true);
            self.cells8()[b - base].store(1, Relaxed);
        } else {
            let n = self.sparse_add(&mut p, b, 1);
            if self.sparse_len.load(Relaxed) > self.sparse_limit.load(Relaxed)
                || (n >= REFIT_FROM && n.is_power_of_two())
                || n == COUNT_MAX
            {
                self.refit(&mut p);
            }
        }
        self.version.store(v.wrapping_add(2), Release);
    }

    fn window(&self) -> (usize, usize) {
        let span = self.span.load(Relaxed);
        ((span & BASE_MASK) as usize, (span >> 16) as usize)
    }

    fn narrow(&self) -> bool {
        self.span.load(Relaxed) & NARROW != 0
    }

    /// The byte window's counts. Owner only.
    fn cells8(&self) -> &[AtomicU8] {
        let p = self.win8.load(Relaxed);
        if p.is_null() {
            return &[];
        }
        // SAFETY: a non-null byte window came from `take`; its counts follow element 0.
        let w = unsafe { whole(p) };
        &w[1..=self.window().1]
    }

    /// The window's non-zero counts, by bucket. Owner only.
    fn window_counts(&self) -> Vec<(usize, u64)> {
        let base = self.window().0;
        let c8 = self.cells8().iter().map(|c| c.load(Relaxed) as u64);
        let c32 = self.cells(&self.win).iter().map(|c| c.load(Relaxed) as u64);
        c8.chain(c32)
            .enumerate()
            .filter(|&(_, n)| n > 0)
            .map(|(i, n)| (base + i, n))
            .collect()
    }

    /// Replaces the byte window with a `u32` one over the same buckets and counts (inside a
    /// write).
    fn widen(&self, p: &mut PoolInner) {
        let (base, len) = self.window();
        let counts = self.window_counts();
        self.set_window(p, base, len, false);
        let win = self.cells(&self.win);
        for (b, n) in counts {
            win[b - base].store(n as u32, Relaxed);
        }
    }

    /// The used part of the window (`win`, `span`'s length) or of the sparse list (`sparse`,
    /// `sparse_len`). Owner only.
    fn cells<'a>(&'a self, which: &'a AtomicPtr<AtomicU32>) -> &'a [AtomicU32] {
        let p = which.load(Relaxed);
        if p.is_null() {
            return &[];
        }
        let n = if std::ptr::eq(which, &self.win) {
            self.window().1
        } else {
            self.sparse_len.load(Relaxed) as usize
        };
        // SAFETY: the capacity word is element 0 of every window and list.
        let first = unsafe { p.add(1) };
        // SAFETY: a non-null window or list holds at least `n` entries after its capacity
        // word (the owner sets both, on this thread); pool memory is never freed.
        unsafe { std::slice::from_raw_parts(first, n) }
    }

    /// Adds `n` at bucket `b` in the sparse list (inside a write); returns its count now.
    fn sparse_add(&self, p: &mut PoolInner, b: usize, n: u32) -> u32 {
        let e = self.cells(&self.sparse);
        match e.binary_search_by_key(&b, |x| (x.load(Relaxed) >> COUNT_BITS) as usize) {
            Ok(i) => {
                let x = e[i].load(Relaxed) + n;
                e[i].store(x, Relaxed);
                x & COUNT_MAX
            }
            Err(at) => {
                let len = e.len();
                let list = grown(p, &self.sparse, len + 1);
                for i in (at..len).rev() {
                    list[i + 1].store(list[i].load(Relaxed), Relaxed);
                }
                list[at].store((b as u32) << COUNT_BITS | n, Relaxed);
                self.sparse_len.store(len as u32 + 1, Relaxed);
                n
            }
        }
    }

    /// Counts one wrap of window bucket `b` (inside a write).
    fn carry_one(&self, p: &mut PoolInner, b: usize) {
        let len = self.carry_len.load(Relaxed) as usize;
        let list = grown(p, &self.carry, len + 1);
        match list[..len]
            .iter()
            .find(|x| (x.load(Relaxed) >> 32) as usize == b)
        {
            Some(x) => {
                x.store(x.load(Relaxed) + 1, Relaxed);
            }
            None => {
                list[len].store((b as u64) << 32 | 1, Relaxed);
                self.carry_len.store(len as u32 + 1, Relaxed);
            }
        }
    }

    /// Moves the window to where the values are (inside a write). It takes the window that
    /// costs least memory (4 bytes a bucket in the window, 4 an entry left in the list) among
    /// those leaving out at most 1/64 of the values (the cold path's share), never an entry
    /// near its count's limit. The first calls of a function are often its slowest: a window
    /// placed around them follows the values that came after.
    fn refit(&self, p: &mut PoolInner) {
        let mut seen: Vec<(usize, u64)> = self
            .window_counts()
            .into_iter()
            .chain(self.cells(&self.sparse).iter().map(|x| {
                let x = x.load(Relaxed);
                ((x >> COUNT_BITS) as usize, (x & COUNT_MAX) as u64)
            }))
            .collect();
        // A bucket is in the window or in the list, never both.
        seen.sort_unstable();
        let m = seen.len();
        let mut prefix = vec![0u64; m + 1];
        for (i, e) in seen.iter().enumerate() {
            prefix[i + 1] = prefix[i] + e.1;
        }
        let total = prefix[m];
        let forced = seen.iter().position(|e| e.1 >= FORCED);
        let forced_last = seen.iter().rposition(|e| e.1 >= FORCED);
        // A window of bytes while no count is near 255, of `u32` counts after; 4 bytes an
        // entry left in the list.
        let narrow = seen.iter().all(|e| e.1 <= NARROW_REFIT_MAX);
        let cell = if narrow { 1 } else { 4 };
        let cost = |l: usize, r: usize| {
            cell * (seen[r - 1].0 - seen[l].0 + 1)
                .next_power_of_two()
                .max(FIRST_LEN)
                + 4 * (m - (r - l))
        };
        let mut best = (0, m);
        for l in 0..=forced.unwrap_or(m - 1) {
            for r in (l + 1).max(forced_last.map_or(0, |f| f + 1))..=m {
                let out = prefix[l] + (total - prefix[r]);
                if out <= total / 64 && cost(l, r) < cost(best.0, best.1) {
                    best = (l, r);
                }
            }
        }
        let (lo, hi) = (seen[best.0].0, seen[best.1 - 1].0 + 1);
        let len = (hi - lo).next_power_of_two().clamp(FIRST_LEN, BUCKETS);
        let base = lo.saturating_sub((len - (hi - lo)) / 2).min(BUCKETS - len);
        self.set_window(p, base, len, narrow);
        // A list as long as what it keeps (often nothing), not as long as it grew.
        let list = self.sparse.swap(std::ptr::null_mut(), Release);
        if !list.is_null() {
            // SAFETY: from `take`.
            p.give(unsafe { whole(list) });
        }
        self.sparse_len.store(0, Relaxed);
        for (b, n) in seen {
            let i = b.wrapping_sub(base);
            match (narrow, i < len) {
                (true, true) => self.cells8()[i].store(n as u8, Relaxed),
                (false, true) => self.cells(&self.win)[i].store(n as u32, Relaxed),
                _ => {
                    self.sparse_add(p, b, n as u32);
                }
            }
        }
        let kept = self.sparse_len.load(Relaxed);
        self.sparse_limit
            .store((2 * kept).max(SPARSE_FIRST), Relaxed);
    }

    /// Puts in a zeroed window of `len` counts from bucket `base`, of bytes if `narrow`
    /// (inside a write), giving the old one back to the pool.
    fn set_window(&self, p: &mut PoolInner, base: usize, len: usize, narrow: bool) {
        let (old8, old) = if narrow {
            let new = p.take::<AtomicU8>(len);
            (
                self.win8.swap(new.as_ptr() as *mut AtomicU8, Release),
                self.win.swap(std::ptr::null_mut(), Release),
            )
        } else {
            let new = p.take::<AtomicU32>(len);
            (
                self.win8.swap(std::ptr::null_mut(), Release),
                self.win.swap(new.as_ptr() as *mut AtomicU32, Release),
            )
        };
        let flag = if narrow { NARROW } else { 0 };
        self.span
            .store((len as u32) << 16 | flag | base as u32, Relaxed);
        if !old8.is_null() {
            // SAFETY: `old8` came from `take`, with its capacity in element 0.
            p.give(unsafe { whole(old8) });
        }
        if !old.is_null() {
            // SAFETY: as above.
            p.give(unsafe { whole(old) });
        }
    }

    /// Adds a snapshot of this histogram into `into`. Any thread counted in as a reader of
    /// the owner's pool (`_reading`); retries while the owner replaces the window or edits a
    /// list.
    pub(crate) fn add_to(&self, _reading: &Reading<'_>, into: &mut Counts) {
        thread_local! {
            /// The snapshot being taken, kept between calls (a summary reads tens of
            /// thousands of histograms).
            static SEEN: std::cell::RefCell<Vec<(usize, u64)>> = const {
                std::cell::RefCell::new(Vec::new())
            };
        }
        let mut seen = SEEN
            .try_with(|s| s.try_borrow_mut().map(|mut s| std::mem::take(&mut *s)).ok())
            .ok()
            .flatten()
            .unwrap_or_default();
        loop {
            seen.clear();
            let v = self.version.load(Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let (base, len) = self.window();
            let w8 = self.win8.load(Acquire);
            if self.narrow() && !w8.is_null() {
                // SAFETY: as for the `u32` window below.
                let win = unsafe { whole(w8) };
                let n = len.min(win.len() - 1);
                for (i, c) in win[1..=n].iter().enumerate() {
                    let n = c.load(Relaxed);
                    if n != 0 {
                        seen.push((base + i, n as u64));
                    }
                }
            }
            let w = self.win.load(Acquire);
            if !self.narrow() && !w.is_null() {
                // SAFETY: `w` came from the pool, published with Release after its capacity
                // word was written, and is not freed while a reader is in (`_reading`); reading at most that capacity stays in it.
                // A window replaced meanwhile is caught by the version check below.
                let win = unsafe { whole(w) };
                let n = len.min(win.len() - 1);
                for (i, c) in win[1..=n].iter().enumerate() {
                    let n = c.load(Relaxed);
                    if n != 0 {
                        seen.push((base + i, n as u64));
                    }
                }
            }
            let s = self.sparse.load(Acquire);
            if !s.is_null() {
                // SAFETY: as for the window.
                let list = unsafe { whole(s) };
                let n = (self.sparse_len.load(Relaxed) as usize).min(list.len() - 1);
                for x in &list[1..=n] {
                    let x = x.load(Relaxed);
                    seen.push(((x >> COUNT_BITS) as usize, (x & COUNT_MAX) as u64));
                }
            }
            let c = self.carry.load(Acquire);
            if !c.is_null() {
                // SAFETY: as for the window.
                let list = unsafe { whole(c) };
                let n = (self.carry_len.load(Relaxed) as usize).min(list.len() - 1);
                for x in &list[1..=n] {
                    let x = x.load(Relaxed);
                    seen.push(((x >> 32) as usize, (x & 0xffff_ffff) << 32));
                }
            }
            fence(Acquire);
            if self.version.load(Relaxed) == v {
                break;
            }
        }
        // Cover the range first, so that the adds below do not grow it one bucket at a time.
        let lo = seen.iter().map(|e| e.0).min();
        let hi = seen.iter().map(|e| e.0).max();
        if let (Some(lo), Some(hi)) = (lo, hi) {
            into.add(lo.min(BUCKETS - 1), 0);
            into.add(hi.min(BUCKETS - 1), 0);
        }
        for &(b, n) in &seen {
            into.add(b.min(BUCKETS - 1), n);
        }
        let _ = SEEN.try_with(|s| {
            if let Ok(mut s) = s.try_borrow_mut() {
                *s = seen;
            }
        });
    }

    /// Bytes of the window and lists in use now (owner only; for tests).
    #[cfg(test)]
    pub(crate) fn live_bytes(&self) -> usize {
        fn bytes<T: pool::Word>(p: *mut T) -> usize {
            if p.is_null() {
                return 0;
            }
            // SAFETY: a non-null pointer came from `take`.
            let w = unsafe { whole(p) };
            std::mem::size_of_val(w)
        }
        bytes(self.win8.load(Relaxed))
            + bytes(self.win.load(Relaxed))
            + bytes(self.sparse.load(Relaxed))
            + bytes(self.carry.load(Relaxed))
    }

    /// Gives the window and lists back to the pool and empties the histogram. Only while no
    /// other thread reads it (the registry's lock held, the owner gone).
    pub(crate) fn release(&self, pool: &Pool) {
        let mut p = pool.lock();
        let w8 = self.win8.swap(std::ptr::null_mut(), Relaxed);
        if !w8.is_null() {
            // SAFETY: from `take`.
            p.give(unsafe { whole(w8) });
        }
        for a in [&self.win, &self.sparse] {
            let w = a.swap(std::ptr::null_mut(), Relaxed);
            if !w.is_null() {
                // SAFETY: from `take`.
                p.give(unsafe { whole(w) });
            }
        }
        let c = self.carry.swap(std::ptr::null_mut(), Relaxed);
        if !c.is_null() {
            // SAFETY: from `take`.
            p.give(unsafe { whole(c) });
        }
        self.span.store(0, Relaxed);
        self.sparse_len.store(0, Relaxed);
        self.sparse_limit.store(SPARSE_FIRST, Relaxed);
        self.carry_len.store(0, Relaxed);
    }
}

mod pool;
use pool::{grown, whole, PoolInner};
pub(crate) use pool::{Pool, Reading};
#[cfg(test)]
mod tests;
