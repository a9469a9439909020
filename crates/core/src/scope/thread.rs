//! Per-thread scope statistics: the slots other threads may read, and the owner's stack.
//!
//! [`ThreadStats`] holds one [`Slot`] per call-site id the thread has touched, found through a
//! two-level table of `OnceLock`s (a 256-entry directory of 64-slot pages). Slots are allocated
//! the first time a thread enters a call site and never move; after that the hot path does not
//! allocate. Every write is the owner's, as a relaxed load and store: no locked instruction,
//! and slots are cache-line aligned so threads share no written line. Reporters read them at
//! any time.
//!
//! A `ThreadStats` is `&'static`: allocated once, and when its thread exits, folded into the
//! retired totals, cleared and pooled for the next thread (so memory is bounded by the peak
//! number of live threads, not by how many ever ran). Being `'static` is what lets the hot path
//! keep it in a destructor-free thread-local and lets an open scope's guard carry its slot —
//! the exit then needs no lookup at all.
//!
//! [`Stack`] is the owner's side: child time per open scope (for self time), the depth, and
//! the reference-clock anchor the clock's anomaly guard uses. It is generic over the
//! [`Counter`] so tests drive it with a fake clock.

use std::cell::Cell;
use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::{Mutex, OnceLock};

use super::hist::{Counts, Hist, Pool, Reading};
use crate::clock::{check_interval, Bracket, Counter, Ticks, SUSPECT_TICKS};

pub(crate) mod heap;
mod row;
pub(crate) use row::Row;

pub(crate) const PAGE_LEN: usize = 64;
pub(crate) const DIR_LEN: usize = 256;

/// Open scopes whose child time is kept inline in the thread-local (8 bytes each); deeper
/// nesting uses a pooled extension, up to [`MAX_DEPTH`].
pub(crate) const INLINE_DEPTH: usize = 64;
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

/// One call site's statistics on one thread. `repr(C)` keeps the counters the hot path
/// touches together in the first cache line, with the histogram's handles in the second (its
/// counts live in the thread's [`Pool`]).
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// How many entries of this call site are open on the thread's stack now.
    pub depth: AtomicU32,
    /// Where this call site's allocation counts are kept (`heap`: 0 until its first counted
    /// exit). In the padding after `depth`: the slot stays two cache lines.
    pub heap: AtomicU32,
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
    /// The duration of this call site's latest outermost call on the thread, not in `hist`
    /// yet ([`NONE`] if there is none): the thread's next exit records it (see [`exit`]).
    pub pending: AtomicU64,
    pub hist: Hist,
}

/// [`Slot::pending`]: nothing waiting.
pub(crate) const NONE: u64 = u64::MAX;

impl Slot {
    const fn new() -> Slot {
        Slot {
            calls: AtomicU64::new(0),
            outer: AtomicU64::new(0),
            incl: AtomicU64::new(0),
            self_ticks: AtomicU64::new(0),
            min: AtomicU64::new(u64::MAX),
            max: AtomicU64::new(0),
            clock_errors: AtomicU64::new(0),
            pending: AtomicU64::new(NONE),
            depth: AtomicU32::new(0),
            hist: Hist::new(),
            heap: AtomicU32::new(0),
        }
    }

    /// Clears the slot for reuse by another thread (no reader may be reading it).
    fn reset(&self, pool: &Pool) {
        for a in [
            &self.calls,
            &self.outer,
            &self.incl,
            &self.self_ticks,
            &self.max,
            &self.clock_errors,
        ] {
            a.store(0, Relaxed);
        }
        self.min.store(u64::MAX, Relaxed);
        self.pending.store(NONE, Relaxed);
        self.depth.store(0, Relaxed);
        heap::reset(self);
        self.hist.release(pool);
    }
}

struct Page([OnceLock<Box<Slot>>; PAGE_LEN]);

/// A thread's statistics, readable from any thread.
pub(crate) struct ThreadStats {
    /// Registration order; unique for the life of the process.
    pub serial: AtomicU64,
    /// Kernel thread id.
    pub tid: AtomicU64,
    pub name: Mutex<Option<String>>,
    dir: [OnceLock<Box<Page>>; DIR_LEN],
    /// Where the slots' histograms keep their counts.
    pub pool: Pool,
    /// One past the highest page index allocated, so scans stop early.
    pages: AtomicU32,
    /// Scopes not recorded because the stack was [`MAX_DEPTH`] deep.
    pub lost_too_deep: AtomicU64,
    /// Scopes abandoned because an enclosing scope closed first (their guards were leaked
    /// or dropped out of order): not counted.
    pub unbalanced: AtomicU64,
    /// The reference-clock anchors the anomaly guard checks long scopes against. Only the
    /// owner touches it, and only off the fast path (a refresh every ANCHOR_PERIOD ticks of
    /// scoped execution, a check per scope longer than SUSPECT_TICKS).
    anchors: Mutex<Option<Box<AnchorLog>>>,
}

/// Anchors by epoch: the last 64 exactly, then every 64th and every 4096th epoch, so a scope
/// of any length finds an anchor taken before it began (at 1.4 ms per epoch the coarsest
/// level spans about six minutes of scoped execution; past that, the thread's first anchor).
struct AnchorLog {
    levels: [[(u32, Bracket); 64]; 3],
    first: (u32, Bracket),
}

impl AnchorLog {
    fn record(&mut self, epoch: u32, b: Bracket) {
        for (level, shift) in [0u32, 6, 12].into_iter().enumerate() {
            if epoch & ((1 << shift) - 1) == 0 {
                self.levels[level][((epoch >> shift) % 64) as usize] = (epoch, b);
            }
        }
        if self.first.0 == 0 {
            self.first = (epoch, b);
        }
    }

    /// The newest anchor taken no later than `epoch` began, and whether it is that epoch's
    /// own (then the scope began within one anchor period of it).
    fn find(&self, epoch: u32) -> (Bracket, bool) {
        for (level, shift) in [0u32, 6, 12].into_iter().enumerate() {
            let e = epoch & !((1u32 << shift) - 1);
            let (stored, b) = self.levels[level][((e >> shift) % 64) as usize];
            if e != 0 && stored == e {
                return (b, level == 0);
            }
        }
        (self.first.1, self.first.0 == epoch)
    }
}

impl ThreadStats {
    /// A new, leaked `ThreadStats` (the registry pools them; see the module docs).
    pub(crate) fn leak() -> &'static ThreadStats {
        Box::leak(Box::new(ThreadStats {
            serial: AtomicU64::new(0),
            tid: AtomicU64::new(0),
            name: Mutex::new(None),
            dir: [const { OnceLock::new() }; DIR_LEN],
            pool: Pool::new(),
            pages: AtomicU32::new(0),
            lost_too_deep: AtomicU64::new(0),
            unbalanced: AtomicU64::new(0),
            anchors: Mutex::new(None),
        }))
    }

    /// Clears every figure, for reuse by another thread.
    pub(crate) fn reset(&self) {
        self.for_each_slot(|_, s| s.reset(&self.pool));
        self.lost_too_deep.store(0, Relaxed);
        self.unbalanced.store(0, Relaxed);
        *self.anchors.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The thread's name, if it had one.
    pub(crate) fn name(&self) -> Option<String> {
        self.name.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The slot of `id`, allocated on the thread's first entry of that call site.
    #[inline(always)]
    pub(crate) fn slot(&self, id: u32) -> &Slot {
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
        let index = (id / PAGE_LEN) % DIR_LEN;
        let page =
            self.dir[index].get_or_init(|| Box::new(Page([const { OnceLock::new() }; PAGE_LEN])));
        self.pages.fetch_max(index as u32 + 1, Release);
        page
    }

    /// Calls `f` with every slot this thread has touched and its id.
    pub(crate) fn for_each_slot(&self, mut f: impl FnMut(u32, &Slot)) {
        let pages = self.pages.load(Acquire) as usize;
        for (p, page) in self.dir[..pages].iter().enumerate() {
            let Some(page) = page.get() else { continue };
            for (s, slot) in page.0.iter().enumerate() {
                if let Some(slot) = slot.get() {
                    f((p * PAGE_LEN + s) as u32, slot);
                }
            }
        }
    }

    /// Bytes this thread's statistics occupy: the fixed part, its pages and slots, the
    /// histograms' memory, and the thread-local stack.
    pub(crate) fn bytes(&self) -> usize {
        let mut n =
            std::mem::size_of::<ThreadStats>() + std::mem::size_of::<Stack>() + self.pool.bytes();
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

/// What an open scope's guard carries: its slot and start, so the exit needs no lookup.
#[derive(Clone, Copy)]
pub(crate) struct Open {
    slot: &'static Slot,
    t0: Ticks,
    /// Depth of this scope on the stack.
    index: u32,
    /// The anchor epoch current when it began (see [`AnchorLog`]).
    epoch: u32,
    /// The call site was already open below this scope (recursion, or a group's API calling
    /// its own public function): count the call, but its time is inside the outer entry's.
    nested: bool,
    /// What the exit does beyond the statistics, one word its exit tests once: the call
    /// site's id when a capture recorded this scope's begin (its end is recorded too), and
    /// [`HEAP_MARK`] when its allocations are counted (`heap::begin` set its mark); 0 for
    /// neither. Fits in the struct's padding.
    pub(crate) captured: u32,
}

/// [`Open::captured`]'s bit: the scope's allocations are counted. Call-site ids stay below it.
pub(crate) const HEAP_MARK: u32 = 1 << 31;

impl Open {
    /// The scope's start reading.
    #[inline(always)]
    pub(crate) fn t0(&self) -> Ticks {
        self.t0
    }

    /// Its depth on the thread's stack (0: outermost).
    #[cfg(feature = "capture")]
    #[inline(always)]
    pub(crate) fn depth(&self) -> u32 {
        self.index
    }

    /// Its depth on the thread's stack (0: outermost), in every build.
    #[inline(always)]
    pub(crate) fn index(&self) -> u32 {
        self.index
    }
}

/// Child time of open scopes past the inline ones; pooled like `ThreadStats`.
pub(crate) struct DeepStack(pub [[AtomicU64; 2]; MAX_DEPTH - INLINE_DEPTH]);

/// Deep-stack extensions of exited threads, for the next threads that nest that deep.
static FREE_DEEP: Mutex<Vec<&'static DeepStack>> = Mutex::new(Vec::new());

impl DeepStack {
    fn leak() -> &'static DeepStack {
        Box::leak(Box::new(DeepStack(
            [const { [const { AtomicU64::new(0) }; 2] }; MAX_DEPTH - INLINE_DEPTH],
        )))
    }

    /// A deep-stack extension for a thread nesting past the inline depth: a pooled one, or
    /// a new one.
    fn take() -> &'static DeepStack {
        let pooled = FREE_DEEP.lock().unwrap_or_else(|p| p.into_inner()).pop();
        pooled.unwrap_or_else(|| crate::own::own(DeepStack::leak))
    }

    /// Pools the extension of an exited thread, for the next thread that nests that deep.
    pub(crate) fn give_back(&'static self) {
        FREE_DEEP
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self);
    }
}

/// Per stack level, two cells: the child time of the scope open there (for self time)…
const CHILD: usize = 0;
/// …and its start reading, which identifies it: a guard whose scope was abandoned cannot
/// close a newer scope that happens to sit at the same level.
const T0: usize = 1;

/// Where a thread's stack lives: plain cells for tests, small thread-locals for real threads
/// (each accessed through a tiny closure, which the compiler always inlines; one big
/// `LocalKey::with` closure was not inlined, costing a call per enter and exit).
pub(crate) trait StackStore {
    fn depth(&self) -> u32;
    fn set_depth(&self, d: u32);
    /// Cell `k` ([`CHILD`] or [`T0`]) of inline level `i < INLINE_DEPTH`.
    fn inline(&self, i: usize, k: usize) -> Ticks;
    fn set_inline(&self, i: usize, k: usize, v: Ticks);
    fn deep(&self) -> Option<&'static DeepStack>;
    fn set_deep(&self, d: Option<&'static DeepStack>);
    /// The current anchor's counter reading and epoch.
    fn anchor(&self) -> (Ticks, u32);
    fn set_anchor(&self, ticks: Ticks, epoch: u32);
    /// The slot whose [`Slot::pending`] duration waits for the thread's next exit.
    fn pending(&self) -> Option<&'static Slot>;
    fn set_pending(&self, slot: Option<&'static Slot>);
}

/// A stack in plain cells (tests and the overhead probe).
pub(crate) struct Stack {
    depth: Cell<u32>,
    levels: [[Cell<Ticks>; 2]; INLINE_DEPTH],
    deep: Cell<Option<&'static DeepStack>>,
    anchor: Cell<(Ticks, u32)>,
    pending: Cell<Option<&'static Slot>>,
}

impl Stack {
    pub(crate) const fn new() -> Stack {
        Stack {
            depth: Cell::new(0),
            levels: [const { [const { Cell::new(0) }; 2] }; INLINE_DEPTH],
            deep: Cell::new(None),
            // Ticks 0: the first entry refreshes the anchor.
            anchor: Cell::new((0, 0)),
            pending: Cell::new(None),
        }
    }
}

impl StackStore for Stack {
    #[inline(always)]
    fn depth(&self) -> u32 {
        self.depth.get()
    }
    #[inline(always)]
    fn set_depth(&self, d: u32) {
        self.depth.set(d)
    }
    #[inline(always)]
    fn inline(&self, i: usize, k: usize) -> Ticks {
        self.levels[i][k].get()
    }
    #[inline(always)]
    fn set_inline(&self, i: usize, k: usize, v: Ticks) {
        self.levels[i][k].set(v)
    }
    fn deep(&self) -> Option<&'static DeepStack> {
        self.deep.get()
    }
    fn set_deep(&self, d: Option<&'static DeepStack>) {
        self.deep.set(d)
    }
    #[inline(always)]
    fn anchor(&self) -> (Ticks, u32) {
        self.anchor.get()
    }
    fn set_anchor(&self, ticks: Ticks, epoch: u32) {
        self.anchor.set((ticks, epoch))
    }
    fn pending(&self) -> Option<&'static Slot> {
        self.pending.get()
    }
    fn set_pending(&self, slot: Option<&'static Slot>) {
        self.pending.set(slot)
    }
}

/// Open scopes on a stack.
pub(crate) fn depth(s: &impl StackStore) -> usize {
    s.depth() as usize
}

/// Cell `k` of level `i`, inline or in the deep extension.
#[inline(always)]
fn get(s: &impl StackStore, i: usize, k: usize) -> Ticks {
    if i < INLINE_DEPTH {
        s.inline(i, k)
    } else {
        deep_cell(s, i, k).load(Relaxed)
    }
}

#[inline(always)]
fn set(s: &impl StackStore, i: usize, k: usize, v: Ticks) {
    if i < INLINE_DEPTH {
        s.set_inline(i, k, v)
    } else {
        deep_cell(s, i, k).store(v, Relaxed)
    }
}

#[cold]
#[inline(never)]
fn deep_cell(s: &impl StackStore, i: usize, k: usize) -> &'static AtomicU64 {
    let deep = match s.deep() {
        Some(d) => d,
        None => {
            let d = DeepStack::take();
            s.set_deep(Some(d));
            d
        }
    };
    &deep.0[i - INLINE_DEPTH][k]
}

/// Opens a scope of call site `id` on the thread whose statistics are `stats`. Returns what
/// its guard keeps, or `None` when the stack is full (counted as lost). The tests' way in;
/// the library's finds the slot through a cache first (`scope::enter`).
#[cfg(test)]
#[inline(always)]
pub(crate) fn enter(
    s: &impl StackStore,
    stats: &'static ThreadStats,
    id: u32,
    clock: &impl Counter,
) -> Option<Open> {
    enter_slot(s, stats, stats.slot(id), clock)
}

/// [`enter`] with the slot already found (the macros cache it per call site and thread).
#[inline(always)]
pub(crate) fn enter_slot(
    s: &impl StackStore,
    stats: &'static ThreadStats,
    slot: &'static Slot,
    clock: &impl Counter,
) -> Option<Open> {
    let d = s.depth() as usize;
    if d >= MAX_DEPTH {
        add(&stats.lost_too_deep, 1);
        return None;
    }
    set(s, d, CHILD, 0);
    let open = slot.depth.load(Relaxed);
    slot.depth.store(open + 1, Relaxed);
    s.set_depth(d as u32 + 1);
    // Read the clock last, so the bookkeeping above is not in the scope's time.
    let mut t0 = clock.ticks();
    let (anchor_ticks, mut epoch) = s.anchor();
    if t0.wrapping_sub(anchor_ticks) > ANCHOR_PERIOD {
        (t0, epoch) = refresh_anchor(s, stats, epoch, clock);
    }
    set(s, d, T0, t0);
    Some(Open {
        slot,
        t0,
        index: d as u32,
        epoch,
        nested: open > 0,
        captured: 0,
    })
}

/// Takes a new anchor (a counter reading bracketed by the reference clock); returns its
/// reading, which becomes the scope's start, and its epoch.
#[cold]
#[inline(never)]
fn refresh_anchor(
    s: &impl StackStore,
    stats: &ThreadStats,
    epoch: u32,
    clock: &impl Counter,
) -> (Ticks, u32) {
    let b = Bracket::read(clock);
    // Epoch 0 means "none"; wrapping after 2^32 anchors (two months of scoped execution) only
    // makes the oldest anchors unreachable, which the log treats as "use the first one".
    let epoch = epoch.wrapping_add(1).max(1);
    let mut log = stats.anchors.lock().unwrap_or_else(|p| p.into_inner());
    let log = log.get_or_insert_with(|| {
        crate::own::own(|| {
            Box::new(AnchorLog {
                levels: [[(0, Bracket::default()); 64]; 3],
                first: (0, Bracket::default()),
            })
        })
    });
    log.record(epoch, b);
    s.set_anchor(b.ticks, epoch);
    (b.ticks, epoch)
}

/// Closes the scope `o`. If scopes opened inside it are still open (their guards were leaked,
/// or dropped out of order), they are abandoned and counted as `unbalanced`; if `o` itself was
/// abandoned that way, its late exit only undoes its nesting mark.
#[inline(always)]
pub(crate) fn exit(
    s: &impl StackStore,
    stats: &ThreadStats,
    o: &Open,
    clock: &impl Counter,
) -> Ticks {
    // Read the clock first, so the bookkeeping below is not in the scope's time.
    let t1 = clock.ticks();
    let index = o.index as usize;
    if (s.depth() as usize != index + 1 || get(s, index, T0) != o.t0) && !unwind_to(s, stats, o) {
        return t1;
    }
    let slot = o.slot;
    let mut dt = t1.wrapping_sub(o.t0);
    if dt > SUSPECT_TICKS {
        dt = check_long(stats, o, t1, clock);
    }
    slot.depth
        .store(slot.depth.load(Relaxed).wrapping_sub(1), Relaxed);
    add(&slot.calls, 1);
    add(&slot.self_ticks, dt.saturating_sub(get(s, index, CHILD)));
    if !o.nested {
        add(&slot.outer, 1);
        add(&slot.incl, dt);
        if dt < slot.min.load(Relaxed) {
            slot.min.store(dt, Relaxed);
        }
        if dt > slot.max.load(Relaxed) {
            slot.max.store(dt, Relaxed);
        }
        // The histogram takes the thread's previous outermost duration, not this one: its
        // bucket, window compare and count update form the longest chain of work hanging
        // off the clock reading, and the next reading waits for that chain (measured: the
        // whole cost of a scope above the floor). The previous duration was stored an exit
        // ago, so this work runs beside the reading instead of after it. This one waits in
        // the slot, where readers count it too.
        record_pending(s, stats);
        slot.pending.store(dt, Relaxed);
        s.set_pending(Some(slot));
    }
    if index > 0 {
        set(
            s,
            index - 1,
            CHILD,
            get(s, index - 1, CHILD).wrapping_add(dt),
        );
    }
    s.set_depth(index as u32);
    t1
}

/// Records the duration waiting in the thread's pending slot, if any, into its histogram.
#[inline(always)]
pub(crate) fn record_pending(s: &impl StackStore, stats: &ThreadStats) {
    if let Some(p) = s.pending() {
        let dt = p.pending.load(Relaxed);
        p.pending.store(NONE, Relaxed);
        p.hist.record(dt, &stats.pool);
    }
}

/// The stack does not end with `o`'s scope. If that scope is still open lower down, abandon
/// the scopes above it (counted as `unbalanced`) and return true: the exit proceeds. If it was
/// itself abandoned, undo its nesting mark on its slot and return false.
#[cold]
#[inline(never)]
fn unwind_to(s: &impl StackStore, stats: &ThreadStats, o: &Open) -> bool {
    let (d, index) = (s.depth() as usize, o.index as usize);
    if d > index && get(s, index, T0) == o.t0 {
        add(&stats.unbalanced, (d - index - 1) as u64);
        s.set_depth(index as u32 + 1);
        return true;
    }
    o.slot
        .depth
        .store(o.slot.depth.load(Relaxed).wrapping_sub(1), Relaxed);
    false
}

/// The anomaly guard for a long (or negative) delta: compare with the reference clock, read
/// now bracketing a fresh counter reading, from the anchor the scope began after. Returns
/// the delta to record; a clock error is counted in the scope's slot here.
#[cold]
#[inline(never)]
fn check_long(stats: &ThreadStats, o: &Open, t1: Ticks, clock: &impl Counter) -> Ticks {
    let (dt, error) = check_long_inner(stats, o, t1, clock);
    if error {
        add(&o.slot.clock_errors, 1);
    }
    dt
}

fn check_long_inner(
    stats: &ThreadStats,
    o: &Open,
    t1: Ticks,
    clock: &impl Counter,
) -> (Ticks, bool) {
    let rate = clock.rate();
    let end = Bracket::read(clock);
    let found = stats
        .anchors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(|l| l.find(o.epoch));
    let Some((anchor, exact)) = found else {
        return (t1.wrapping_sub(o.t0), false); // no anchor: nothing to check against
    };
    // With the scope's own anchor, it began at most one anchor period after it; with an older
    // one, how long after is unknown, so only the upper bound (and the sign) can be checked.
    let lag = o.t0.wrapping_sub(anchor.ticks);
    let lag_ns = if lag > 1 << 62 {
        0
    } else {
        (lag as f64 * 1e9 / rate) as u64
    };
    let max_lag_ns = match (exact, lag) {
        (true, 0) => 0,
        (true, _) => (ANCHOR_PERIOD as f64 * 1e9 / rate) as u64,
        (false, _) => u64::MAX,
    };
    let c = check_interval(&anchor, o.t0, lag_ns, max_lag_ns, &end, rate);
    if !c.error && o.t0 <= t1 && t1 <= end.ticks {
        // The clocks agree, and the reading taken when the scope ended lies between its start
        // and the check's reading: keep it.
        (t1 - o.t0, false)
    } else {
        (c.ticks, c.error)
    }
}

/// A thread's statistics and stack together: what tests drive directly with a fake clock.
#[cfg(test)]
pub(crate) struct Recorder {
    pub stats: &'static ThreadStats,
    pub stack: Box<Stack>,
}

#[cfg(test)]
impl Recorder {
    pub(crate) fn enter(&self, id: u32, clock: &impl Counter) -> Option<Open> {
        enter(&*self.stack, self.stats, id, clock)
    }
    pub(crate) fn exit(&self, o: Open, clock: &impl Counter) {
        exit(&*self.stack, self.stats, &o, clock);
    }
    pub(crate) fn depth(&self) -> usize {
        depth(&*self.stack)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::tests::FakeCounter;
    use crate::scope::callsite::{Callsite, Kind, Name};

    pub(crate) fn recorder() -> Recorder {
        Recorder {
            stats: ThreadStats::leak(),
            stack: Box::new(Stack::new()),
        }
    }

    pub(crate) fn row(r: &Recorder, cs: &'static Callsite) -> Row {
        let mut out = Row::empty();
        let id = cs.id();
        let reading = r.stats.pool.reading();
        r.stats.for_each_slot(|i, s| {
            if i == id {
                out = Row::read(s, &reading);
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

    /// The histogram takes each outermost duration at the thread's next exit; until then
    /// the duration waits in its slot, and a read counts it either way, exactly once.
    #[test]
    fn the_latest_duration_waits_in_its_slot_and_is_read_once() {
        static WAIT: Callsite = Callsite::new(Name::Static("wait"), Kind::Scope, "t.rs", 21, "t");
        let (r, c) = (recorder(), FakeCounter::new());
        let o = r.enter(WAIT.id(), &c).unwrap();
        c.advance_ns(100);
        r.exit(o, &c);
        let slot = r.stats.slot(WAIT.id());
        assert_eq!(slot.pending.load(Relaxed), 100);
        let mut in_hist = super::super::hist::Counts::new();
        slot.hist.add_to(&r.stats.pool.reading(), &mut in_hist);
        assert_eq!(in_hist.quantile(0.5), None, "not in the histogram yet");
        assert_eq!(row(&r, &WAIT).hist.quantile(0.5), Some(100), "but read");
        // The next exit (of any scope) moves it in; the new one waits.
        let i = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(7);
        r.exit(i, &c);
        assert_eq!(slot.pending.load(Relaxed), NONE);
        let mut in_hist = super::super::hist::Counts::new();
        slot.hist.add_to(&r.stats.pool.reading(), &mut in_hist);
        assert_eq!(in_hist.quantile(1.0), Some(100));
        assert_eq!(row(&r, &WAIT).hist.quantile(1.0), Some(100), "counted once");
        assert_eq!(row(&r, &INNER).hist.quantile(0.5), Some(7));
        // Nested calls add no duration of their own (their time is in the outer call's).
        let a = r.enter(WAIT.id(), &c).unwrap();
        let b = r.enter(WAIT.id(), &c).unwrap();
        c.advance_ns(50);
        r.exit(b, &c);
        r.exit(a, &c);
        let w = row(&r, &WAIT);
        assert_eq!((w.calls, w.outer), (3, 2));
        assert_eq!(
            (w.hist.quantile(0.0), w.hist.quantile(1.0)),
            (Some(50), Some(100))
        );
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
    fn out_of_order_guards_abandon_inner_scopes_and_count_them() {
        let (r, c) = (recorder(), FakeCounter::new());
        let o = r.enter(OUTER.id(), &c).unwrap();
        let i = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(40);
        r.exit(o, &c); // the outer guard goes first: inner is abandoned, and counted
        r.exit(i, &c); // and its own late exit is ignored
        assert_eq!(row(&r, &INNER).calls, 0);
        assert_eq!(r.stats.unbalanced.load(Relaxed), 1);
        assert_eq!(row(&r, &OUTER).incl, 40);
        assert_eq!(r.depth(), 0);
        let o = r.enter(OUTER.id(), &c).unwrap();
        r.exit(o, &c);
        assert_eq!(row(&r, &OUTER).calls, 2, "the stack is usable again");
    }

    #[test]
    fn scopes_longer_than_many_anchor_periods_are_still_checked() {
        static LONG: Callsite = Callsite::new(Name::Static("long"), Kind::Scope, "t.rs", 11, "t");
        let (r, c) = (recorder(), FakeCounter::new());
        // 100 anchors first, so the long scope's own epoch is not the thread's first one.
        for _ in 0..100 {
            c.advance_ns(5_000_000);
            let i = r.enter(INNER.id(), &c).unwrap();
            r.exit(i, &c);
        }
        let g = r.enter(LONG.id(), &c).unwrap();
        // 500 inner scopes, each a few anchor periods apart: the outer scope's own anchor
        // is long gone from the exact ring when it ends.
        for _ in 0..500 {
            c.advance_ns(5_000_000);
            let i = r.enter(INNER.id(), &c).unwrap();
            r.exit(i, &c);
        }
        c.jump_ticks(60_000_000_000); // and then the counter leaps a minute
        r.exit(g, &c);
        let long = row(&r, &LONG);
        assert_eq!(long.clock_errors, 1);
        // Replaced by the reference time, measured from an older anchor (epoch 64).
        assert!(long.incl <= 2_600_000_000, "{}", long.incl);
        assert!(long.incl >= 2_400_000_000, "{}", long.incl);
        assert_eq!(row(&r, &INNER).clock_errors, 0);
    }

    #[test]
    fn an_abandoned_scope_does_not_stay_open_forever() {
        // Two interleaved tasks on one thread (scopes held across an await): a opens, b
        // opens, a closes (abandoning b), then b's guard drops late.
        let (r, c) = (recorder(), FakeCounter::new());
        let a = r.enter(OUTER.id(), &c).unwrap();
        let b = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(10);
        r.exit(a, &c);
        r.exit(b, &c);
        // The next entry of INNER is an outermost call again, with its time counted.
        let b = r.enter(INNER.id(), &c).unwrap();
        c.advance_ns(30);
        r.exit(b, &c);
        let inner = row(&r, &INNER);
        assert_eq!(
            (inner.calls, inner.outer, inner.incl, inner.open),
            (1, 1, 30, 0)
        );
    }

    #[test]
    fn a_late_guard_cannot_close_a_newer_scope_at_its_level() {
        let (r, c) = (recorder(), FakeCounter::new());
        let a = r.enter(OUTER.id(), &c).unwrap();
        let b = r.enter(INNER.id(), &c).unwrap(); // level 1
        r.exit(a, &c); // b abandoned
        c.advance_ns(5);
        let c0 = r.enter(REC.id(), &c).unwrap(); // level 0
        let d1 = r.enter(OUTER.id(), &c).unwrap(); // level 1, where b was
        c.advance_ns(20);
        r.exit(b, &c); // ignored: level 1 is d1 now
        assert_eq!(r.depth(), 2, "d1 is still open");
        r.exit(d1, &c);
        r.exit(c0, &c);
        let rec = row(&r, &REC);
        assert_eq!(
            (rec.calls, rec.incl, rec.self_ticks),
            (1, 20, 0),
            "d1 is c0's child"
        );
        assert_eq!(row(&r, &INNER).calls, 0);
        assert_eq!(r.stats.unbalanced.load(Relaxed), 1);
    }

    #[test]
    fn a_reset_thread_state_is_empty_for_its_next_thread() {
        let (r, c) = (recorder(), FakeCounter::new());
        let o = r.enter(OUTER.id(), &c).unwrap();
        c.advance_ns(40);
        r.exit(o, &c);
        r.stats.reset();
        let row = row(&r, &OUTER);
        assert_eq!((row.calls, row.incl, row.min, row.max), (0, 0, u64::MAX, 0));
        assert_eq!(row.hist.quantile(0.5), None);
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
