//! Per-thread scope statistics: the slots other threads may read, and the owner's scope stack.
//!
//! [`ThreadStats`] is shared (behind an `Arc`) with the registry so reporters can read it at
//! any time; it holds one [`Slot`] per call-site id the thread has touched, found through a
//! two-level table of `OnceLock`s (a 256-entry directory of 64-slot pages). Slots are allocated
//! the first time a thread enters a call site and never move; after that the hot path does not
//! allocate. Every write is the owner's, as a relaxed load and store: no locked instruction,
//! and slots are cache-line aligned so threads share no written line.
//!
//! [`Recorder`] is the owner's side: the scope stack (for self time and re-entry), and the
//! reference-clock anchor the clock's anomaly guard uses. It is generic over the [`Counter`] so
//! tests drive it with a fake clock.

use std::cell::{Cell, OnceCell};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use super::hist::{Counts, Hist};
use crate::clock::{check_interval, Bracket, Counter, Ticks, SUSPECT_TICKS};

pub(crate) const PAGE_LEN: usize = 64;
pub(crate) const DIR_LEN: usize = 256;

/// Frames kept inline in every thread's stack; deeper nesting uses a lazily allocated
/// extension, up to [`MAX_DEPTH`].
const INLINE_DEPTH: usize = 64;
/// Scopes nested deeper than this are not recorded; they are counted (`lost_too_deep`) and
/// shown in every report. 4096 covers deep recursive descent while bounding memory.
pub(crate) const MAX_DEPTH: usize = 4096;

/// The anchor of the reference clock is refreshed when it is older than this many ticks. A
/// scope's true start is then known to within this much, which bounds the anomaly guard's
/// window. 2^22 ticks is about 1.4 ms at 3 GHz: one `clock_gettime` per 1.4 ms of scoped
/// execution at most.
const ANCHOR_PERIOD: Ticks = 1 << 22;

/// Adds `v` to an owner-only counter: relaxed load + store, no read-modify-write.
#[inline(always)]
fn add(a: &AtomicU64, v: u64) {
    a.store(a.load(Relaxed).wrapping_add(v), Relaxed);
}

/// One call site's statistics on one thread.
#[repr(align(64))]
pub(crate) struct Slot {
    /// Every entry, re-entries included.
    pub calls: AtomicU64,
    /// Outermost entries: the calls whose time is in `incl`, `min`, `max` and the histogram.
    pub outer: AtomicU64,
    /// Inclusive ticks, added at outermost exits only.
    pub incl: AtomicU64,
    /// Ticks not spent in child scopes.
    pub self_ticks: AtomicU64,
    pub min: AtomicU64,
    pub max: AtomicU64,
    pub clock_errors: AtomicU64,
    /// How many entries of this call site are open on the thread's stack now.
    pub depth: AtomicU32,
    pub hist: Hist,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            calls: AtomicU64::new(0),
            outer: AtomicU64::new(0),
            incl: AtomicU64::new(0),
            self_ticks: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            clock_errors: AtomicU64::new(0),
            depth: AtomicU32::new(0),
            hist: Hist::new(),
        }
    }
}

struct Page([OnceLock<Box<Slot>>; PAGE_LEN]);

/// A thread's statistics, readable from any thread.
pub(crate) struct ThreadStats {
    /// Registration order; unique for the life of the process.
    pub serial: u64,
    /// Kernel thread id.
    pub tid: u64,
    pub name: Option<String>,
    dir: [OnceLock<Box<Page>>; DIR_LEN],
    /// Scopes not recorded because the stack was [`MAX_DEPTH`] deep.
    pub lost_too_deep: AtomicU64,
}

impl ThreadStats {
    pub(crate) fn new(serial: u64, tid: u64, name: Option<String>) -> ThreadStats {
        ThreadStats {
            serial,
            tid,
            name,
            dir: [const { OnceLock::new() }; DIR_LEN],
            lost_too_deep: AtomicU64::new(0),
        }
    }

    /// The slot of `id`, allocated on the thread's first entry of that call site.
    #[inline(always)]
    fn slot(&self, id: u32) -> &Slot {
        let id = id as usize;
        let page = match self.dir[(id / PAGE_LEN) % DIR_LEN].get() {
            Some(p) => p,
            None => self.new_page(id),
        };
        match page.0[id % PAGE_LEN].get() {
            Some(s) => s,
            None => new_slot(page, id),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_page(&self, id: usize) -> &Page {
        self.dir[(id / PAGE_LEN) % DIR_LEN]
            .get_or_init(|| Box::new(Page([const { OnceLock::new() }; PAGE_LEN])))
    }

    /// Calls `f` with every slot this thread has touched and its id.
    pub(crate) fn for_each_slot(&self, mut f: impl FnMut(u32, &Slot)) {
        for (p, page) in self.dir.iter().enumerate() {
            let Some(page) = page.get() else { continue };
            for (s, slot) in page.0.iter().enumerate() {
                if let Some(slot) = slot.get() {
                    f((p * PAGE_LEN + s) as u32, slot);
                }
            }
        }
    }

    /// Bytes this thread's statistics occupy: the fixed part plus its pages and slots.
    pub(crate) fn bytes(&self) -> usize {
        let mut n = std::mem::size_of::<ThreadStats>();
        for page in self.dir.iter().filter_map(|p| p.get()) {
            n += std::mem::size_of::<Page>();
            n += page.0.iter().filter(|s| s.get().is_some()).count() * std::mem::size_of::<Slot>();
        }
        n
    }
}

#[cold]
#[inline(never)]
fn new_slot(page: &Page, id: usize) -> &Slot {
    page.0[id % PAGE_LEN].get_or_init(|| Box::new(Slot::new()))
}

/// A snapshot of one slot (or of many merged).
#[derive(Clone)]
pub(crate) struct Row {
    pub calls: u64,
    pub outer: u64,
    pub incl: u64,
    pub self_ticks: u64,
    pub min: u64,
    pub max: u64,
    pub clock_errors: u64,
    /// Entries open right now (not yet in the other figures).
    pub open: u64,
    pub hist: Counts,
}

impl Row {
    pub(crate) fn empty() -> Row {
        Row {
            calls: 0,
            outer: 0,
            incl: 0,
            self_ticks: 0,
            min: u64::MAX,
            max: 0,
            clock_errors: 0,
            open: 0,
            hist: Counts::new(),
        }
    }

    /// An empty row without a histogram (per-thread breakdowns do not keep one).
    pub(crate) fn light() -> Row {
        Row {
            hist: Counts(Box::new([])),
            ..Row::empty()
        }
    }

    /// Reads a live slot (relaxed: may trail the owner by its current exit).
    pub(crate) fn read(slot: &Slot, with_hist: bool) -> Row {
        let mut row = Row {
            calls: slot.calls.load(Relaxed),
            outer: slot.outer.load(Relaxed),
            incl: slot.incl.load(Relaxed),
            self_ticks: slot.self_ticks.load(Relaxed),
            min: slot.min.load(Relaxed),
            max: slot.max.load(Relaxed),
            clock_errors: slot.clock_errors.load(Relaxed),
            open: slot.depth.load(Relaxed) as u64,
            hist: if with_hist {
                Counts::new()
            } else {
                Counts(Box::new([]))
            },
        };
        if with_hist {
            slot.hist.add_to(&mut row.hist);
        }
        row
    }

    pub(crate) fn merge(&mut self, o: &Row) {
        self.calls += o.calls;
        self.outer += o.outer;
        self.incl += o.incl;
        self.self_ticks += o.self_ticks;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.clock_errors += o.clock_errors;
        self.open += o.open;
        if self.hist.0.len() == o.hist.0.len() {
            self.hist.merge(&o.hist);
        }
    }
}

/// One open scope on the owner's stack.
#[derive(Clone, Copy, Default)]
struct Frame {
    id: u32,
    /// The call site was already open below this frame (recursion, or a group's API calling
    /// its own public function): count the call, but its time is inside the outer entry's.
    nested: bool,
    t0: Ticks,
    /// Inclusive ticks of child scopes, for self time.
    child: Ticks,
    /// The reference clock bracketing the anchor this frame started after…
    anchor_before_ns: u64,
    anchor_after_ns: u64,
    /// …and how many ticks after it.
    lag: Ticks,
}

/// The owner thread's recorder.
pub(crate) struct Recorder {
    pub stats: Arc<ThreadStats>,
    inline: Box<[Cell<Frame>; INLINE_DEPTH]>,
    deep: OnceCell<Box<[Cell<Frame>]>>,
    depth: Cell<usize>,
    anchor: Cell<Bracket>,
}

impl Recorder {
    pub(crate) fn new(stats: Arc<ThreadStats>) -> Recorder {
        Recorder {
            stats,
            inline: Box::new([const { Cell::new(Frame::ZERO) }; INLINE_DEPTH]),
            deep: OnceCell::new(),
            depth: Cell::new(0),
            // Ticks 0: the first entry refreshes the anchor.
            anchor: Cell::new(Bracket::default()),
        }
    }

    /// Bytes of the owner-side stack.
    pub(crate) fn stack_bytes(&self) -> usize {
        std::mem::size_of::<Recorder>()
            + std::mem::size_of::<[Cell<Frame>; INLINE_DEPTH]>()
            + self.deep.get().map_or(0, |d| std::mem::size_of_val(&**d))
    }

    /// Open scopes on the stack.
    pub(crate) fn depth(&self) -> usize {
        self.depth.get()
    }

    #[inline(always)]
    fn frame(&self, i: usize) -> &Cell<Frame> {
        if i < INLINE_DEPTH {
            &self.inline[i]
        } else {
            self.deep_frame(i)
        }
    }

    #[cold]
    #[inline(never)]
    fn deep_frame(&self, i: usize) -> &Cell<Frame> {
        let deep = self.deep.get_or_init(|| {
            (0..MAX_DEPTH - INLINE_DEPTH)
                .map(|_| Cell::new(Frame::ZERO))
                .collect()
        });
        &deep[i - INLINE_DEPTH]
    }

    /// Opens a scope of call site `id`. Returns the frame's index, to be passed to
    /// [`Recorder::exit`], or `None` when the stack is full (counted as lost).
    #[inline(always)]
    pub(crate) fn enter(&self, id: u32, clock: &impl Counter) -> Option<u32> {
        let d = self.depth.get();
        if d >= MAX_DEPTH {
            add(&self.stats.lost_too_deep, 1);
            return None;
        }
        let slot = self.stats.slot(id);
        let open = slot.depth.load(Relaxed);
        slot.depth.store(open + 1, Relaxed);
        let frame = self.frame(d);
        self.depth.set(d + 1);
        // Read the clock last, so the bookkeeping above is not in the scope's time.
        let mut t0 = clock.ticks();
        let mut anchor = self.anchor.get();
        let mut lag = t0.wrapping_sub(anchor.ticks);
        if lag > ANCHOR_PERIOD {
            anchor = self.refresh_anchor(clock);
            (t0, lag) = (anchor.ticks, 0);
        }
        frame.set(Frame {
            id,
            nested: open > 0,
            t0,
            child: 0,
            anchor_before_ns: anchor.before_ns,
            anchor_after_ns: anchor.after_ns,
            lag,
        });
        Some(d as u32)
    }

    #[cold]
    #[inline(never)]
    fn refresh_anchor(&self, clock: &impl Counter) -> Bracket {
        let b = Bracket::read(clock);
        self.anchor.set(b);
        b
    }

    /// Closes the scope opened as frame `index`. Frames above it that were not closed (their
    /// guards leaked or dropped out of order) are closed at the same instant.
    #[inline(always)]
    pub(crate) fn exit(&self, index: u32, clock: &impl Counter) {
        // Read the clock first, so the bookkeeping below is not in the scope's time.
        let t1 = clock.ticks();
        let index = index as usize;
        let d = self.depth.get();
        if d != index + 1 {
            return self.exit_unordered(index, t1, clock);
        }
        self.close(index, t1, clock);
        self.depth.set(index);
    }

    #[cold]
    #[inline(never)]
    fn exit_unordered(&self, index: usize, t1: Ticks, clock: &impl Counter) {
        let d = self.depth.get();
        if index >= d {
            return; // already closed by an outer guard
        }
        for i in (index..d).rev() {
            self.close(i, t1, clock);
        }
        self.depth.set(index);
    }

    #[inline(always)]
    fn close(&self, i: usize, t1: Ticks, clock: &impl Counter) {
        let f = self.frame(i).get();
        let mut dt = t1.wrapping_sub(f.t0);
        let mut error = false;
        if dt > SUSPECT_TICKS {
            (dt, error) = self.check_long(&f, t1, clock);
        }
        let slot = self.stats.slot(f.id);
        slot.depth
            .store(slot.depth.load(Relaxed).wrapping_sub(1), Relaxed);
        add(&slot.calls, 1);
        add(&slot.self_ticks, dt.saturating_sub(f.child));
        if !f.nested {
            add(&slot.outer, 1);
            add(&slot.incl, dt);
            if dt < slot.min.load(Relaxed) {
                slot.min.store(dt, Relaxed);
            }
            if dt > slot.max.load(Relaxed) {
                slot.max.store(dt, Relaxed);
            }
            slot.hist.record(dt);
        }
        if error {
            add(&slot.clock_errors, 1);
        }
        if i > 0 {
            let parent = self.frame(i - 1);
            let mut p = parent.get();
            p.child += dt;
            parent.set(p);
        }
    }

    /// The anomaly guard for a long (or negative) delta: compare with the reference clock,
    /// read now bracketing a fresh counter reading.
    #[cold]
    #[inline(never)]
    fn check_long(&self, f: &Frame, t1: Ticks, clock: &impl Counter) -> (Ticks, bool) {
        let rate = clock.rate();
        let end = Bracket::read(clock);
        let anchor = Bracket {
            before_ns: f.anchor_before_ns,
            ticks: f.t0.wrapping_sub(f.lag),
            after_ns: f.anchor_after_ns,
        };
        let lag_ns = (f.lag as f64 * 1e9 / rate) as u64;
        let max_lag_ns = if f.lag == 0 {
            0
        } else {
            (ANCHOR_PERIOD as f64 * 1e9 / rate) as u64
        };
        let c = check_interval(&anchor, f.t0, lag_ns, max_lag_ns, &end, rate);
        if c.error {
            (c.ticks, true)
        } else {
            // The clocks agree; keep the reading taken when the scope ended.
            (t1.wrapping_sub(f.t0), false)
        }
    }
}

impl Frame {
    const ZERO: Frame = Frame {
        id: 0,
        nested: false,
        t0: 0,
        child: 0,
        anchor_before_ns: 0,
        anchor_after_ns: 0,
        lag: 0,
    };
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::tests::FakeCounter;
    use crate::scope::callsite::{Callsite, Kind, Name};

    pub(crate) fn recorder() -> Recorder {
        Recorder::new(Arc::new(ThreadStats::new(0, 1, Some("test".into()))))
    }

    pub(crate) fn row(r: &Recorder, cs: &'static Callsite) -> Row {
        let mut out = Row::empty();
        let id = cs.id();
        r.stats.for_each_slot(|i, s| {
            if i == id {
                out = Row::read(s, true);
            }
        });
        out
    }

    static OUTER: Callsite = Callsite::new(Name::Static("outer"), Kind::Scope, "t.rs", 1, "t");
    static INNER: Callsite = Callsite::new(Name::Static("inner"), Kind::Scope, "t.rs", 2, "t");
    static REC: Callsite = Callsite::new(Name::Static("rec"), Kind::Scope, "t.rs", 3, "t");
    static API_A: Callsite = Callsite::new(Name::Static("thread-api"), Kind::Group, "t.rs", 4, "t");
    static API_B: Callsite = Callsite::new(Name::Static("thread-api"), Kind::Group, "t.rs", 5, "t");

    #[test]
    fn nested_scopes_split_inclusive_and_self_time() {
        let (r, c) = (recorder(), FakeCounter::new());
        let o = r.enter(OUTER.id(), &c).unwrap();
        c.advance_ns(100);
        for _ in 0..3 {
            let i = r.enter(INNER.id(), &c).unwrap();
            c.advance_ns(50);
            r.exit(i, &c);
        }
        c.advance_ns(10);
        r.exit(o, &c);
        let (outer, inner) = (row(&r, &OUTER), row(&r, &INNER));
        assert_eq!((outer.calls, outer.incl, outer.self_ticks), (1, 260, 110));
        assert_eq!((inner.calls, inner.incl, inner.self_ticks), (3, 150, 150));
        assert_eq!((inner.min, inner.max), (50, 50));
        assert_eq!(r.depth(), 0);
    }

    #[test]
    fn recursive_scope_counts_outermost_time_once() {
        fn fib(n: u32, r: &Recorder, c: &FakeCounter) {
            let g = r.enter(REC.id(), c).unwrap();
            c.advance_ns(10);
            if n > 1 {
                fib(n - 1, r, c);
                fib(n - 2, r, c);
            }
            r.exit(g, c);
        }
        let (r, c) = (recorder(), FakeCounter::new());
        fib(5, &r, &c); // 15 calls, 10 ns each
        let rec = row(&r, &REC);
        assert_eq!(rec.calls, 15);
        assert_eq!(rec.outer, 1);
        assert_eq!(
            rec.incl, 150,
            "inclusive time counted once, not once per level"
        );
        assert_eq!(
            rec.self_ticks, 150,
            "self time of all levels adds up to the whole"
        );
        let p50 = rec.hist.quantile(0.5).unwrap();
        assert!(
            p50.abs_diff(150) <= 3,
            "one outermost call of 150 ticks: p50 {p50}"
        );
    }

    #[test]
    fn group_entered_through_its_own_api_counts_calls_but_time_once() {
        let (r, c) = (recorder(), FakeCounter::new());
        // realloc() -> alloc(): both public functions of one API group.
        let a = r.enter(API_A.id(), &c).unwrap();
        c.advance_ns(30);
        let b = r.enter(API_B.id(), &c).unwrap();
        c.advance_ns(20);
        r.exit(b, &c);
        r.exit(a, &c);
        let g = row(&r, &API_A);
        assert_eq!(API_A.id(), API_B.id());
        assert_eq!((g.calls, g.outer, g.incl, g.self_ticks), (2, 1, 50, 50));
    }

    #[test]
    fn out_of_order_guards_close_inner_frames_too() {
        let (r, c) = (recorder(), FakeCounter::new());
        let o = r.enter(OUTER.id(), &c).unwrap();
        let i = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(40);
        r.exit(o, &c); // the outer guard goes first: inner closes at the same instant
        r.exit(i, &c); // and its own late exit is ignored
        assert_eq!(row(&r, &INNER).calls, 1);
        assert_eq!(row(&r, &OUTER).incl, 40);
        assert_eq!(r.depth(), 0);
    }

    #[test]
    fn counter_jumps_inside_scopes_are_clock_errors_replaced_by_reference_time() {
        static JUMPY: Callsite = Callsite::new(Name::Static("jumpy"), Kind::Scope, "t.rs", 9, "t");
        let (r, c) = (recorder(), FakeCounter::new());
        // Forward: 5 ms of real time, the counter leaps 3 s.
        let g = r.enter(JUMPY.id(), &c).unwrap();
        c.advance_ns(5_000_000);
        c.jump_ticks(3_000_000_000);
        r.exit(g, &c);
        // Backward: 2 ms of real time, the counter falls back 4 s.
        let g = r.enter(JUMPY.id(), &c).unwrap();
        c.advance_ns(2_000_000);
        c.jump_ticks(-4_000_000_000);
        r.exit(g, &c);
        // Sane: a long scope the clocks agree on.
        let g = r.enter(JUMPY.id(), &c).unwrap();
        c.advance_ns(8_000_000);
        r.exit(g, &c);
        let row = row(&r, &JUMPY);
        assert_eq!(row.clock_errors, 2);
        assert_eq!(row.calls, 3);
        // Each replaced delta is the reference clock's (exact here: every scope began at a
        // fresh anchor, since each counter jump also made the anchor stale).
        assert_eq!(
            (row.min, row.max, row.incl),
            (2_000_000, 8_000_000, 15_000_000)
        );
    }

    #[test]
    fn stack_deeper_than_the_limit_is_counted_not_recorded() {
        let (r, c) = (recorder(), FakeCounter::new());
        let mut frames = Vec::new();
        for _ in 0..MAX_DEPTH + 5 {
            frames.push(r.enter(REC.id(), &c));
        }
        assert_eq!(frames.iter().filter(|f| f.is_none()).count(), 5);
        assert_eq!(r.stats.lost_too_deep.load(Relaxed), 5);
        for f in frames.into_iter().rev().flatten() {
            r.exit(f, &c);
        }
        assert_eq!(row(&r, &REC).calls, MAX_DEPTH as u64);
    }
}
