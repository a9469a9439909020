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

mod anchor;
pub(crate) mod heap;
mod row;
mod stack;
use anchor::{check_long, refresh_anchor, AnchorLog};
pub(crate) use row::Row;
pub(crate) use stack::{depth, DeepStack, Stack, StackStore};
use stack::{get, set, CHILD, T0};

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
    /// Re-entries: calls made while the call site was open on the thread already (a
    /// row's calls are `outer + nested`; the common exit adds to `outer` alone).
    pub nested: AtomicU64,
    /// Outermost entries: the calls whose time is in `incl`, `min`, `max` and the histogram.
    pub outer: AtomicU64,
    /// Inclusive ticks, added at outermost exits only.
    pub incl: AtomicU64,
    /// Ticks of outermost calls spent in child scopes, less the self time (ticks not in
    /// child scopes) of nested calls, modulo 2^64: a call site's self time is
    /// `incl - children` (see [`self_ticks`]). An outermost exit then adds one reading of
    /// its stack level, where a self time per exit was a subtraction and a clamp more.
    pub children: AtomicU64,
    pub min: AtomicU64,
    pub max: AtomicU64,
    pub clock_errors: AtomicU64,
    /// The duration of this call site's latest outermost call on the thread, not in `hist`
    /// yet ([`NONE`] if there is none): the thread's next exit records it (see [`exit`]).
    pub pending: AtomicU64,
    pub hist: Hist,
}

/// A call site's self time from its inclusive time and [`Slot::children`]: 0 where a clock
/// anomaly (a child longer than its parent, after the guard's corrections) or a read between
/// an exit's two adds would make it negative.
pub(crate) fn self_ticks(incl: u64, children: u64) -> u64 {
    let v = incl.wrapping_sub(children);
    if (v as i64) < 0 {
        0
    } else {
        v
    }
}

/// [`Slot::pending`]: nothing waiting.
pub(crate) const NONE: u64 = u64::MAX;

impl Slot {
    const fn new() -> Slot {
        Slot {
            nested: AtomicU64::new(0),
            outer: AtomicU64::new(0),
            incl: AtomicU64::new(0),
            children: AtomicU64::new(0),
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
            &self.nested,
            &self.outer,
            &self.incl,
            &self.children,
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
    /// What the exit must do beyond the common case, one word it tests once: 0 where
    /// [`exit_fast`] may close the scope. Bits: [`HEAP_MARK`], [`NESTED`], [`SLOW`], and
    /// below them ([`SITE_MASK`]) the call site's id when a capture recorded this scope's
    /// begin (its end is recorded too).
    pub(crate) flags: u32,
}

/// [`Open::flags`]' bit: the scope's allocations are counted (`heap::begin` set its mark).
pub(crate) const HEAP_MARK: u32 = 1 << 31;
/// [`Open::flags`]' bit: the call site was already open below this scope (recursion, or a
/// group's API calling its own public function): count the call, but its time is inside the
/// outer entry's.
pub(crate) const NESTED: u32 = 1 << 30;
/// [`Open::flags`]' bit: opened by [`enter_slot`], the path for every other case (the OS
/// clock, a level past the inline ones, a capture, allocations counted): closed by [`exit`].
pub(crate) const SLOW: u32 = 1 << 29;
/// [`Open::flags`]' low bits: a captured scope's call-site id (ids stay far below [`SLOW`]).
pub(crate) const SITE_MASK: u32 = SLOW - 1;

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

    /// Its call site was open below it already (see [`NESTED`]).
    #[inline(always)]
    pub(crate) fn nested(&self) -> bool {
        self.flags & NESTED != 0
    }

    /// Its fields, to pass in registers (a guard's drop to its out-of-line exit: a struct
    /// this size would be passed through memory, and the guard then kept in memory too).
    #[inline(always)]
    pub(crate) fn into_parts(self) -> OpenParts {
        (self.slot, self.t0, self.index, self.epoch, self.flags)
    }

    /// The scope [`Open::into_parts`] took apart.
    #[inline(always)]
    pub(crate) fn from_parts(p: OpenParts) -> Open {
        let (slot, t0, index, epoch, flags) = p;
        Open {
            slot,
            t0,
            index,
            epoch,
            flags,
        }
    }
}

/// An [`Open`] as its fields: slot, start reading, index, epoch, flags.
pub(crate) type OpenParts = (&'static Slot, Ticks, u32, u32, u32);

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

/// [`enter`] with the slot already found (the macros cache it per call site and thread): the
/// path for every case, closed by [`exit`]. [`enter_fast`] is the common one's.
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
    let set_cell = |k, v| set(s, d, k, v);
    Some(open_level(s, stats, slot, clock, d, set_cell, SLOW))
}

/// Opens a scope as [`enter_slot`] does, in the common case: a level of the inline stack,
/// read by `clock`, which the caller knows to be the one its exit will read. The scope's
/// flags are 0 unless it is nested, and then [`exit_fast`] closes it.
#[inline(always)]
pub(crate) fn enter_fast(
    s: &impl StackStore,
    stats: &'static ThreadStats,
    slot: &'static Slot,
    clock: &impl Counter,
) -> Option<Open> {
    let d = s.depth() as usize;
    if d >= INLINE_DEPTH {
        return enter_deep(s, stats, slot, clock);
    }
    let set_cell = |k, v| s.set_inline(d, k, v);
    Some(open_level(s, stats, slot, clock, d, set_cell, 0))
}

/// Opens level `d` of the stack for `slot` (its cells written by `set_cell(k, v)`): what
/// [`enter_slot`] and [`enter_fast`] share once they know the level is theirs.
#[inline(always)]
fn open_level(
    s: &impl StackStore,
    stats: &'static ThreadStats,
    slot: &'static Slot,
    clock: &impl Counter,
    d: usize,
    set_cell: impl Fn(usize, Ticks),
    flags: u32,
) -> Open {
    set_cell(CHILD, 0);
    let open = slot.depth.load(Relaxed);
    slot.depth.store(open + 1, Relaxed);
    s.set_depth(d as u32 + 1);
    // Read the clock last, so the bookkeeping above is not in the scope's time.
    let mut t0 = clock.ticks();
    let (anchor_ticks, mut epoch) = s.anchor();
    if t0.wrapping_sub(anchor_ticks) > ANCHOR_PERIOD {
        (t0, epoch) = refresh_anchor(s, stats, epoch, clock);
    }
    set_cell(T0, t0);
    Open {
        slot,
        t0,
        index: d as u32,
        epoch,
        flags: flags | if open > 0 { NESTED } else { 0 },
    }
}

/// [`enter_fast`] past the inline levels: the general path.
#[cold]
#[inline(never)]
fn enter_deep(
    s: &impl StackStore,
    stats: &'static ThreadStats,
    slot: &'static Slot,
    clock: &impl Counter,
) -> Option<Open> {
    enter_slot(s, stats, slot, clock)
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
    exit_at(s, stats, o, clock, t1)
}

/// [`exit`] once the clock was read (`t1`).
#[inline(always)]
fn exit_at(
    s: &impl StackStore,
    stats: &ThreadStats,
    o: &Open,
    clock: &impl Counter,
    t1: Ticks,
) -> Ticks {
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
    let child = get(s, index, CHILD);
    if o.nested() {
        add(&slot.nested, 1);
        add(&slot.children, dt.saturating_sub(child).wrapping_neg());
    } else {
        add(&slot.outer, 1);
        add(&slot.children, child);
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

/// Closes the scope `o` as [`exit`] does, in the common case: its flags are 0 (opened by
/// [`enter_fast`], outermost for its call site, nothing captured or counted), the stack ends
/// with it, its time is short enough to need no check. Anything else goes to [`exit`]'s
/// path with the reading taken. Fewer instructions than [`exit`]: no stack level past the
/// inline ones, no nesting test, no `calls` count (a row's calls are `outer + nested`),
/// and the histogram's rare slow path last, where it needs nothing kept after it.
#[inline(always)]
pub(crate) fn exit_fast(
    s: &impl StackStore,
    stats: &ThreadStats,
    o: &Open,
    clock: &impl Counter,
) -> Ticks {
    // Read the clock first, so the bookkeeping below is not in the scope's time.
    let t1 = clock.ticks();
    // Below INLINE_DEPTH already (enter_fast opened it there); the mask tells the compiler.
    let index = o.index as usize % INLINE_DEPTH;
    let dt = t1.wrapping_sub(o.t0);
    if s.depth() as usize != index + 1 || s.inline(index, T0) != o.t0 || dt > SUSPECT_TICKS {
        return exit_after(s, stats, o.slot, o.t0, o.index, o.epoch, clock, t1);
    }
    let slot = o.slot;
    slot.depth
        .store(slot.depth.load(Relaxed).wrapping_sub(1), Relaxed);
    add(&slot.children, s.inline(index, CHILD));
    add(&slot.outer, 1);
    add(&slot.incl, dt);
    if dt < slot.min.load(Relaxed) {
        slot.min.store(dt, Relaxed);
    }
    if dt > slot.max.load(Relaxed) {
        slot.max.store(dt, Relaxed);
    }
    if index > 0 {
        let parent = (index - 1) % INLINE_DEPTH;
        s.set_inline(parent, CHILD, s.inline(parent, CHILD).wrapping_add(dt));
    }
    s.set_depth(index as u32);
    // As in `exit`: this duration waits in its slot, the previous one goes to its histogram.
    let prev = s.pending().map(|p| {
        let v = p.pending.load(Relaxed);
        p.pending.store(NONE, Relaxed);
        (p, v)
    });
    slot.pending.store(dt, Relaxed);
    s.set_pending(Some(slot));
    if let Some((p, v)) = prev {
        p.hist.record(v, &stats.pool);
    }
    t1
}

/// [`exit_fast`]'s other cases: [`exit`] with the reading taken. The scope comes as its
/// fields (its flags are 0): a struct would be passed through memory, and the common path
/// would keep the scope there for this call.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)] // registers, not a struct in memory: see above
fn exit_after(
    s: &impl StackStore,
    stats: &ThreadStats,
    slot: &'static Slot,
    t0: Ticks,
    index: u32,
    epoch: u32,
    clock: &impl Counter,
    t1: Ticks,
) -> Ticks {
    exit_at(
        s,
        stats,
        &Open::from_parts((slot, t0, index, epoch, 0)),
        clock,
        t1,
    )
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

/// A thread's statistics and stack together: what tests drive directly with a fake clock.
/// `general`: every scope takes [`enter_slot`] and [`exit`]; otherwise each takes the path a
/// real scope takes when the switches are only "on" ([`enter_fast`], and [`exit_fast`] when
/// its flags are 0).
#[cfg(test)]
pub(crate) struct Recorder {
    pub stats: &'static ThreadStats,
    pub stack: Box<Stack>,
    pub general: bool,
}

#[cfg(test)]
impl Recorder {
    pub(crate) fn enter(&self, id: u32, clock: &impl Counter) -> Option<Open> {
        match self.general {
            true => enter(&*self.stack, self.stats, id, clock),
            false => enter_fast(&*self.stack, self.stats, self.stats.slot(id), clock),
        }
    }
    pub(crate) fn exit(&self, o: Open, clock: &impl Counter) {
        match o.flags {
            0 => exit_fast(&*self.stack, self.stats, &o, clock),
            _ => exit(&*self.stack, self.stats, &o, clock),
        };
    }
    pub(crate) fn depth(&self) -> usize {
        depth(&*self.stack)
    }
}

#[cfg(test)]
pub(crate) mod tests;
