//! The histogram of one call site's durations on one thread, for percentiles, over the
//! buckets of [`tickscope_fmt::hist`] (shared with `tickscope report`, so both give the same
//! p50/p99): p50/p90/p99 are good to 1% relative error; reports clamp every percentile to the
//! exact min and max.
//!
//! The full histogram has 2,560 buckets (20 KB at 8 bytes each), yet a call site's durations
//! fill a few dozen of them, plus a handful of outliers (an interrupt, a page fault). So a
//! slot holds only what was hit:
//! - a **window** of `u32` counts over consecutive buckets, allocated on the first record
//!   (16 buckets around it) and doubled toward a value that falls just outside it;
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
//! pairs a window with another window's counts. Memory comes from the thread's [`Pool`]:
//! nothing is freed while the thread lives (a reader may still be reading a replaced window),
//! and replaced windows are reused by the thread's other call sites.

use std::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::Mutex;

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
const _: () = assert!(BUCKETS <= 1 << (32 - COUNT_BITS) && BUCKETS < 1 << 16);

/// The live histogram in a slot.
pub(crate) struct Hist {
    /// The window's first bucket (low 16 bits) and length (high 16 bits); 0: none yet.
    span: AtomicU32,
    /// Even when stable; odd while the owner replaces the window or edits a list.
    version: AtomicU32,
    /// The window: element 0 is its capacity, the counts follow.
    win: AtomicPtr<AtomicU32>,
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
        let i = b.wrapping_sub((span & 0xffff) as usize);
        if i < (span >> 16) as usize {
            // SAFETY: a non-zero length means `win` points at a window of at least that many
            // counts after its capacity word (`span` and `win` change together, and only
            // on this thread): `i + 1` is in bounds of that allocation.
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
        self.record_slow(b, pool);
    }

    /// A value outside the window, or a count at a multiple of 2^16.
    #[cold]
    #[inline(never)]
    fn record_slow(&self, b: usize, pool: &Pool) {
        let mut p = pool.lock();
        let v = self.version.load(Relaxed);
        self.version.store(v.wrapping_add(1), Relaxed);
        fence(Release);
        let (base, len) = self.window();
        if (base..base + len).contains(&b) {
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
            self.set_window(&mut p, base, FIRST_LEN);
            self.cells(&self.win)[b - base].store(1, Relaxed);
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
        ((span & 0xffff) as usize, (span >> 16) as usize)
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
        let (base, _) = self.window();
        let mut seen: Vec<(usize, u64)> = self
            .cells(&self.win)
            .iter()
            .enumerate()
            .map(|(i, c)| (base + i, c.load(Relaxed) as u64))
            .filter(|&(_, n)| n > 0)
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
        let cost = |l: usize, r: usize| {
            (seen[r - 1].0 - seen[l].0 + 1)
                .next_power_of_two()
                .max(FIRST_LEN)
                + (m - (r - l))
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
        self.set_window(p, base, len);
        self.sparse_len.store(0, Relaxed);
        let win = self.cells(&self.win);
        for (b, n) in seen {
            match b.checked_sub(base).and_then(|i| win.get(i)) {
                Some(c) => c.store(n as u32, Relaxed),
                None => {
                    self.sparse_add(p, b, n as u32);
                }
            }
        }
        let kept = self.sparse_len.load(Relaxed);
        self.sparse_limit
            .store((2 * kept).max(SPARSE_FIRST), Relaxed);
    }

    /// Puts in a zeroed window of `len` counts from bucket `base` (inside a write), giving
    /// the old one back to the pool.
    fn set_window(&self, p: &mut PoolInner, base: usize, len: usize) {
        let new = p.take::<AtomicU32>(len);
        let old = self.win.swap(new.as_ptr() as *mut AtomicU32, Release);
        self.span.store((len as u32) << 16 | base as u32, Relaxed);
        if !old.is_null() {
            // SAFETY: `old` came from `take`, with its capacity in element 0.
            p.give(unsafe { whole(old) });
        }
    }

    /// Adds a snapshot of this histogram into `into`. Any thread; retries while the owner
    /// replaces the window or edits a list.
    pub(crate) fn add_to(&self, into: &mut Counts) {
        let mut seen: Vec<(usize, u64)> = Vec::new();
        loop {
            seen.clear();
            let v = self.version.load(Acquire);
            if v & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let (base, len) = self.window();
            let w = self.win.load(Acquire);
            if !w.is_null() {
                // SAFETY: `w` came from the pool (never freed), published with Release after
                // its capacity word was written; reading at most that capacity stays in it.
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
        for (b, n) in seen {
            into.add(b.min(BUCKETS - 1), n);
        }
    }

    /// Gives the window and lists back to the pool and empties the histogram. Only while no
    /// other thread reads it (the registry's lock held, the owner gone).
    pub(crate) fn release(&self, pool: &Pool) {
        let mut p = pool.lock();
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

/// The atomic words windows and lists are made of: `u32` counts and entries, `u64` carries.
trait Word: Sync + Sized + 'static {
    fn new(v: u64) -> Self;
    fn get(&self) -> u64;
    fn set(&self, v: u64);
    /// The pool's free allocations of this word, by capacity class.
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>>;
}

impl Word for AtomicU32 {
    fn new(v: u64) -> Self {
        AtomicU32::new(v as u32)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed) as u64
    }
    fn set(&self, v: u64) {
        self.store(v as u32, Relaxed)
    }
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>> {
        &mut p.free32
    }
}

impl Word for AtomicU64 {
    fn new(v: u64) -> Self {
        AtomicU64::new(v)
    }
    fn get(&self) -> u64 {
        self.load(Relaxed)
    }
    fn set(&self, v: u64) {
        self.store(v, Relaxed)
    }
    fn free(p: &mut PoolInner) -> &mut Vec<Vec<&'static [Self]>> {
        &mut p.free64
    }
}

/// The entries of the list at `at` (after its capacity word), with room for `need` of them:
/// the list itself, or a copy twice as large (the old one back to the pool). Inside a write.
fn grown<T: Word>(p: &mut PoolInner, at: &AtomicPtr<T>, need: usize) -> &'static [T] {
    let old = at.load(Relaxed);
    // SAFETY: a non-null list came from `take`.
    let old = (!old.is_null()).then(|| unsafe { whole(old) });
    match old {
        Some(o) if o.len() > need => &o[1..],
        _ => {
            let new = p.take::<T>((2 * need).max(4));
            if let Some(o) = old {
                for (d, s) in new[1..].iter().zip(&o[1..]) {
                    d.set(s.get());
                }
                p.give(o);
            }
            at.store(new.as_ptr() as *mut T, Release);
            &new[1..]
        }
    }
}

/// The whole allocation behind a window's or list's pointer: its capacity word and entries.
///
/// # Safety
/// `p` must have come from [`PoolInner::take`].
unsafe fn whole<T: Word>(p: *mut T) -> &'static [T] {
    // SAFETY: the caller's promise: element 0 holds the capacity.
    let cap = unsafe { &*p }.get() as usize;
    // SAFETY: the allocation holds the capacity word and `cap` entries, and is leaked (never
    // freed), so `'static`.
    unsafe { std::slice::from_raw_parts(p, cap + 1) }
}

/// A thread's histogram memory: windows and lists by capacity, allocated once and reused
/// (never freed: the thread's statistics are pooled too). Only the owner's cold path, and
/// the clearing of an exited thread's statistics, take its lock.
pub(crate) struct Pool {
    inner: Mutex<PoolInner>,
}

pub(crate) struct PoolInner {
    /// Free windows by capacity, a power of two (index: its log2).
    free32: Vec<Vec<&'static [AtomicU32]>>,
    free64: Vec<Vec<&'static [AtomicU64]>>,
    /// Bytes allocated, in use or free.
    bytes: usize,
}

impl Pool {
    pub(crate) const fn new() -> Pool {
        Pool {
            inner: Mutex::new(PoolInner {
                free32: Vec::new(),
                free64: Vec::new(),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes allocated for histograms, in use or free.
    pub(crate) fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl PoolInner {
    /// A zeroed window or list of `len` entries (rounded up to a power of two), its capacity
    /// in element 0.
    fn take<T: Word>(&mut self, len: usize) -> &'static [T] {
        let cap = len.next_power_of_two();
        let class = cap.trailing_zeros() as usize;
        if let Some(w) = T::free(self).get_mut(class).and_then(Vec::pop) {
            return w;
        }
        let w: Box<[T]> = (0..=cap).map(|_| T::new(0)).collect();
        w[0].set(cap as u64);
        self.bytes += std::mem::size_of::<T>() * (cap + 1);
        Box::leak(w)
    }

    /// Takes back a window or list, zeroed for its next use.
    fn give<T: Word>(&mut self, w: &'static [T]) {
        let class = (w.len() - 1).trailing_zeros() as usize;
        let free = T::free(self);
        if free.len() <= class {
            free.resize_with(class + 1, Vec::new);
        }
        w[1..].iter().for_each(|c| c.set(0));
        free[class].push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tickscope_fmt::hist::Counts as Dense;

    fn snapshot(h: &Hist) -> Counts {
        let mut c = Counts::new();
        h.add_to(&mut c);
        c
    }

    /// Values from a fixed-seed generator: xorshift.
    fn rng(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Shapes of durations in ticks: tight, skewed (log-normal-like), bimodal, each with rare
    /// outliers three to five powers of two out (an interrupt), and one spread everywhere.
    fn shapes() -> Vec<(&'static str, Vec<u64>)> {
        let mut next = rng(0x2545_f491_4f6c_dd1d);
        let mut out = Vec::new();
        for name in ["tight", "skewed", "bimodal", "log-uniform"] {
            let values = (0..200_000)
                .map(|i| {
                    let r = next();
                    let u = (r >> 11) as f64 / (1u64 << 53) as f64;
                    let v = match name {
                        "tight" => 40_000 + r % 800,
                        // exp of a sum of uniforms: a long right tail.
                        "skewed" => {
                            (2_000.0
                                * (3.0 * (u + (next() >> 11) as f64 / (1u64 << 53) as f64)).exp())
                                as u64
                        }
                        "bimodal" if r % 10 == 0 => 5_000_000 + r % 100_000,
                        "bimodal" => 20_000 + r % 2_000,
                        _ => (1u64 << (r % 36)) | ((r >> 40) % 64),
                    };
                    if name != "log-uniform" && i % 5_000 == 17 {
                        v << (3 + r % 3)
                    } else {
                        v
                    }
                })
                .collect();
            out.push((name, values));
        }
        out
    }

    /// The live histogram answers exactly as the full one over the same buckets, and both
    /// are within 1% of the exact percentiles.
    #[test]
    fn percentiles_match_the_full_histogram_and_the_exact_values_within_one_percent() {
        for (name, mut values) in shapes() {
            let (pool, live, mut dense) = (Pool::new(), Hist::new(), Dense::new());
            for &v in &values {
                live.record(v, &pool);
                dense.record(v);
            }
            let got = snapshot(&live);
            values.sort_unstable();
            for q in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
                assert_eq!(got.quantile(q), dense.quantile(q), "{name} q{q}");
                let exact = values[((q * values.len() as f64).ceil() as usize).max(1) - 1];
                let est = got.quantile(q).unwrap();
                let rel = (est as f64 - exact as f64).abs() / exact as f64;
                assert!(
                    rel <= 0.01,
                    "{name} p{q}: exact {exact}, got {est} ({rel:.4})"
                );
            }
        }
    }

    /// A call site's usual durations cost a window of a few dozen counts and a short list of
    /// outliers, not the full 20 KB histogram.
    #[test]
    fn memory_follows_the_values_seen_not_the_range_of_buckets() {
        let mut next = rng(7);
        let (pool, h) = (Pool::new(), Hist::new());
        h.record(1_000, &pool);
        assert_eq!(
            pool.bytes(),
            4 * (FIRST_LEN + 1),
            "one value: the first window"
        );
        // ±10% around a value, with an outlier every 5,000 calls up to 32 times longer.
        for i in 0..1_000_000u64 {
            let v = 9_000 + next() % 2_000;
            h.record(if i % 5_000 == 0 { v << (1 + i % 5) } else { v }, &pool);
        }
        let (base, len) = h.window();
        assert!(len <= 64, "window of {len} buckets from {base}");
        assert!(pool.bytes() <= 512, "{} bytes", pool.bytes());
        // Slow first calls (a cold cache), then fast ones: the window follows the fast ones.
        let (pool2, warm) = (Pool::new(), Hist::new());
        (0..1_000).for_each(|_| warm.record(50_000 + next() % 5_000, &pool2));
        (0..3_000_000).for_each(|_| warm.record(500 + next() % 50, &pool2));
        let (base, len) = warm.window();
        assert!(
            len <= 64 && base <= bucket(500),
            "window of {len} buckets from {base}"
        );
        let mut c = Counts::new();
        warm.add_to(&mut c);
        assert_eq!(c.total(), 3_001_000);
        // The full range still works, at the cost of a wide window.
        let wide = Hist::new();
        (0..40).for_each(|e| (0..200).for_each(|_| wide.record(1 << e, &pool)));
        assert_eq!(
            snapshot(&wide).quantile(1.0),
            Dense::new().tap(|d| d.record(1 << 39)).quantile(1.0)
        );
    }

    /// A count about to wrap moves 2^32 into the list, and nothing is lost.
    #[test]
    fn a_count_past_u32_max_carries_into_the_list() {
        let (pool, h) = (Pool::new(), Hist::new());
        h.record(500, &pool);
        let b = bucket(500) - h.window().0;
        h.cells(&h.win)[b].store(u32::MAX - 1, Relaxed);
        h.record(500, &pool); // u32::MAX
        h.record(500, &pool); // wraps: 0 in the window, 2^32 in the list
        h.record(500, &pool);
        let c = snapshot(&h);
        assert_eq!(c.total(), (1u64 << 32) + 1);
    }

    /// Readers on another thread, while the owner stretches its window and fills its list,
    /// never see more values than were recorded, nor fewer than before.
    #[test]
    fn a_reader_never_sees_a_torn_window() {
        let (pool, h) = (
            Box::leak(Box::new(Pool::new())),
            Box::leak(Box::new(Hist::new())),
        );
        let done = std::sync::atomic::AtomicBool::new(false);
        let recorded = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut next = rng(99);
                for i in 0..300_000u64 {
                    h.record(next() % (1 << (4 + i % 30)), pool);
                    recorded.store(i + 1, Release);
                }
                done.store(true, Release);
            });
            let mut last = 0;
            while !done.load(Acquire) {
                let before = recorded.load(Acquire);
                let n = snapshot(h).total();
                let after = recorded.load(Acquire);
                assert!(
                    n >= before.max(last) && n <= after + 1,
                    "{before} <= {n} <= {after}"
                );
                last = n;
            }
        });
        assert_eq!(snapshot(h).total(), 300_000);
    }

    #[test]
    fn released_memory_is_reused_and_empty() {
        let (pool, h) = (Pool::new(), Hist::new());
        (0..1000u64).for_each(|v| h.record(v * 997, &pool));
        let bytes = pool.bytes();
        h.release(&pool);
        assert_eq!(snapshot(&h).quantile(0.5), None);
        (0..1000u64).for_each(|v| h.record(v * 997, &pool));
        assert_eq!(pool.bytes(), bytes, "the same windows again");
        let mut d = Dense::new();
        (0..1000u64).for_each(|v| d.record(v * 997));
        assert_eq!(snapshot(&h).quantile(0.5), d.quantile(0.5));
    }

    trait Tap: Sized {
        fn tap(mut self, f: impl FnOnce(&mut Self)) -> Self {
            f(&mut self);
            self
        }
    }
    impl Tap for Dense {}
}
