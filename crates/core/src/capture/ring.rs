//! Per-thread event buffers: the capture's hot path.
//!
//! Each thread that records an event gets a [`Ring`]: a chain of fixed [`Block`]s of 16-byte
//! records (a timestamp and a word), single producer (the thread), single consumer (the
//! collector). The ring is registered once (a lock) and then reached through a
//! destructor-free thread-local. The producer writes a record with two relaxed stores and
//! publishes it with one release store of its head; the collector reads up to the head.
//!
//! **Growing instead of dropping.** When the producer reaches the end of its block it links
//! a new one (the slow path, once per [`BLOCK`] records: a block from the shared pool, or a
//! fresh allocation) and goes on; the collector frees each block it has read past into the
//! pool. So a thread never waits for the collector, and a machine too busy to run the
//! collector costs memory, not events: the collector catches up when it gets a core. All
//! blocks of all threads together are held to the capture's memory budget ([`BUDGET`],
//! `TICKSCOPE_CAPTURE_MEMORY`, 256 MiB by default); a thread that has recorded nothing for a
//! while holds its one current block (32 KiB).
//!
//! **Whole scopes.** Past the budget, a scope's begin is dropped (and counted, with its scope
//! id) and its guard then records no end; a begin is written only with room left in its
//! block for the ends of every scope open on the thread (the begin's depth + 1, up to
//! [`MAX_RESERVE`]), so an end never needs a new block. Should one still find its block full
//! (scopes deeper than the reserve, guards dropped out of order), it takes a block past the
//! budget rather than be dropped: a reader never sees a begin without its end, nor an end
//! paired with another call's begin. Frame marks, counters and messages are dropped and
//! counted past the budget ([`Full::Drop`]), or the thread waits for the collector to free
//! a block ([`Full::Block`]). A dropped run is recorded as a `lost` event as soon as there is
//! room again, so the timeline shows where the gap is.

use std::cell::Cell;
use std::ptr::{self, NonNull};
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*,
};
use std::sync::Mutex;

use super::format::event;

/// What a thread does when the capture's memory budget is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Full {
    /// Drop the event and count it (the default): the program is never slowed. A scope is
    /// dropped whole (its begin and its end).
    #[default]
    Drop,
    /// Wait until the collector frees memory: nothing is dropped while the collector runs,
    /// but the thread may stall (an event that waits 10 s is dropped and counted after all).
    Block,
}

/// With [`Full::Block`], the longest a thread waits for the collector to free a block before
/// the event is dropped and counted after all: a collector that frees nothing for that long
/// has stopped (a stalled sink never holds it: see the module docs of `capture`).
const BLOCK_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// The policy now (0 drop, 1 block), read on the slow path only.
pub(crate) static POLICY: AtomicU8 = AtomicU8::new(0);

/// Records per block: 2,048, 32 KiB. The slow path runs once per block.
pub(crate) const BLOCK: u64 = 2048;
/// The most records a begin keeps free behind it for ends (see the module docs).
pub(crate) const MAX_RESERVE: u64 = BLOCK / 4;
/// The budget by default: 256 MiB, 8,192 blocks (16.7 million records): about half a second
/// of backlog at 35 million events a second.
pub(crate) const DEFAULT_BUDGET: u64 = 256 << 20;
/// The memory budget now (`Builder::memory`, `TICKSCOPE_CAPTURE_MEMORY`).
pub(crate) static BUDGET: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET);
/// Bytes of blocks allocated (in threads' rings and in the pool).
static BYTES: AtomicU64 = AtomicU64::new(0);
/// The most [`BYTES`] reached since the last [`reset_peak`].
static PEAK: AtomicU64 = AtomicU64::new(0);
/// Blocks of the pool kept for reuse (8 MiB); beyond this they are freed, a few per pass.
const POOL_KEEP: usize = 256;
/// Blocks freed per collector pass at most: 2 MiB, so a backlog's memory goes back to the
/// system within a fraction of a second once the collector has caught up.
const TRIM_PER_PASS: usize = 64;

/// Events threads could not record because they had already exited (from thread-local
/// destructors that ran after the capture's own).
pub(crate) static LOST_AFTER_EXIT: AtomicU64 = AtomicU64::new(0);

/// The word of a record that pads the rest of a block (a begin or a group that did not fit
/// moved to the next block). Never a real event: no kind is 0xff, and message bytes (UTF-8)
/// are never 0xff. Internal to the rings, never in a file.
const PAD: u64 = u64::MAX;
/// Bit of a `lost` record's count: an end whose begin was recorded was dropped (only when
/// memory for it could not be allocated at all).
pub(crate) const LOST_END_BIT: u64 = 1 << 55;

/// A block of records. Allocated zeroed (every field is valid as zeros).
#[repr(C, align(64))]
pub(crate) struct Block {
    slots: [AtomicU64; 2 * BLOCK as usize],
    /// The block the producer went on to (null until then).
    next: AtomicPtr<Block>,
}

const BLOCK_BYTES: u64 = std::mem::size_of::<Block>() as u64;

/// A block owned by the pool or on its way there.
pub(crate) struct Free(NonNull<Block>);
// SAFETY: a `Free` block is reachable from nowhere else (no thread writes or reads it): it
// is plain memory moved between threads.
unsafe impl Send for Free {}

static POOL: Mutex<Vec<Free>> = Mutex::new(Vec::new());
/// The pool's length, read without its lock.
static POOLED: AtomicUsize = AtomicUsize::new(0);

fn pool() -> std::sync::MutexGuard<'static, Vec<Free>> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A block for a producer: from the pool, else newly allocated if the budget allows (or
/// always, for an end: `over_budget`). `None` when the budget is spent.
fn take_block(over_budget: bool) -> Option<NonNull<Block>> {
    if POOLED.load(Relaxed) > 0 {
        let mut p = pool();
        if let Some(Free(b)) = p.pop() {
            POOLED.store(p.len(), Relaxed);
            // SAFETY: a pooled block is owned by the pool alone; it becomes this producer's.
            unsafe { b.as_ref() }.next.store(ptr::null_mut(), Relaxed);
            return Some(b);
        }
    }
    let budget = BUDGET.load(Relaxed);
    // With the budget spent, every event of every thread comes here: a plain load first, so
    // that they do not all write the shared counter only to take the write back.
    if !over_budget && BYTES.load(Relaxed) + BLOCK_BYTES > budget {
        return None;
    }
    let now = BYTES.fetch_add(BLOCK_BYTES, Relaxed) + BLOCK_BYTES;
    if now > budget && !over_budget {
        BYTES.fetch_sub(BLOCK_BYTES, Relaxed);
        return None;
    }
    PEAK.fetch_max(now, Relaxed);
    // SAFETY: the layout is the block's own, non-zero in size; zeroed memory is a valid
    // `Block` (zero atomics, a null pointer).
    let b = unsafe { std::alloc::alloc_zeroed(std::alloc::Layout::new::<Block>()) };
    match NonNull::new(b.cast::<Block>()) {
        Some(b) => Some(b),
        None => {
            BYTES.fetch_sub(BLOCK_BYTES, Relaxed);
            None
        }
    }
}

/// Gives drained blocks back to the pool. With `trim`, frees a few of what the pool holds
/// beyond [`POOL_KEEP`] (the collector trims only when it is not behind: freeing and
/// reallocating blocks while a backlog drains would cost it and the threads page faults).
pub(crate) fn give_back(blocks: &mut Vec<Free>, trim: bool) {
    if blocks.is_empty() && !(trim && POOLED.load(Relaxed) > POOL_KEEP) {
        return;
    }
    let mut p = pool();
    p.append(blocks);
    let keep = if trim {
        POOL_KEEP.max(p.len().saturating_sub(TRIM_PER_PASS))
    } else {
        usize::MAX
    };
    while p.len() > keep {
        let Free(b) = p.pop().expect("longer than POOL_KEEP");
        // SAFETY: the pool owned the block alone; it was allocated by `take_block` with this
        // layout.
        unsafe { std::alloc::dealloc(b.as_ptr().cast(), std::alloc::Layout::new::<Block>()) };
        BYTES.fetch_sub(BLOCK_BYTES, Relaxed);
    }
    POOLED.store(p.len(), Relaxed);
}

/// Frees every pooled block (when a capture stops).
pub(crate) fn trim_pool() {
    let mut p = pool();
    for Free(b) in p.drain(..) {
        // SAFETY: as in `give_back`.
        unsafe { std::alloc::dealloc(b.as_ptr().cast(), std::alloc::Layout::new::<Block>()) };
        BYTES.fetch_sub(BLOCK_BYTES, Relaxed);
    }
    POOLED.store(0, Relaxed);
}

/// Bytes the capture's blocks take now, and the most they took since [`reset_peak`].
pub(crate) fn memory() -> (u64, u64) {
    (BYTES.load(Relaxed), PEAK.load(Relaxed))
}

/// Bytes of blocks in threads' rings (not in the pool): the collector's backlog, and the
/// threads' current blocks.
pub(crate) fn backlog() -> u64 {
    BYTES
        .load(Relaxed)
        .saturating_sub(POOLED.load(Relaxed) as u64 * BLOCK_BYTES)
}

/// Starts measuring the peak afresh (a capture's start).
pub(crate) fn reset_peak() {
    PEAK.store(BYTES.load(Relaxed), Relaxed);
}

/// The producer's cache line. Every field is written by the owner thread only.
#[repr(align(64))]
struct Producer {
    /// Records published (an index over the ring's whole life; block `k` of the chain holds
    /// records `k * BLOCK .. (k + 1) * BLOCK`).
    head: AtomicU64,
    /// The fast path writes while `head < limit` (begins: with their reserve below it): the
    /// end of the current block, or the head itself to force the slow path (a `lost` record
    /// to write).
    limit: AtomicU64,
    /// The end of the current block (0 with no block).
    block_end: AtomicU64,
    /// The current block (null before the first, and when the budget gave none).
    cur: AtomicPtr<Block>,
    /// Events dropped, not yet reported by a `lost` record (with [`LOST_END_BIT`]).
    pending_lost: AtomicU64,
    /// Events dropped in total.
    dropped: AtomicU64,
}

/// The collector's cache line.
#[repr(align(64))]
struct Consumer {
    /// Records read.
    tail: AtomicU64,
    /// The block holding record `tail` (or ending at it); set by the producer with its first
    /// block.
    block: AtomicPtr<Block>,
    /// The index of that block's first record.
    start: AtomicU64,
}

/// One thread's ring.
pub(crate) struct Ring {
    prod: Producer,
    cons: Consumer,
    /// The OS thread id of the thread that owns it now.
    pub(crate) tid: AtomicU64,
    /// That thread's name (written at registration, read by the collector).
    pub(crate) name: Mutex<String>,
    /// The owner thread exited: the collector drains it, then pools it.
    pub(crate) retired: AtomicBool,
    /// The collector's index for this thread in the current capture (0: not yet announced).
    pub(crate) index: AtomicU32,
    /// Drops from before the current capture began (a ring registered earlier).
    pub(crate) drop_base: AtomicU64,
    /// Scopes whose begin was dropped, by call-site id, not yet announced by the collector.
    pub(crate) dropped_scopes: Mutex<Vec<(u32, u64)>>,
}

impl Ring {
    pub(crate) fn new() -> Ring {
        Ring {
            prod: Producer {
                head: AtomicU64::new(0),
                limit: AtomicU64::new(0),
                block_end: AtomicU64::new(0),
                cur: AtomicPtr::new(ptr::null_mut()),
                pending_lost: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            },
            cons: Consumer {
                tail: AtomicU64::new(0),
                block: AtomicPtr::new(ptr::null_mut()),
                start: AtomicU64::new(0),
            },
            tid: AtomicU64::new(0),
            name: Mutex::new(String::new()),
            retired: AtomicBool::new(false),
            index: AtomicU32::new(0),
            drop_base: AtomicU64::new(0),
            dropped_scopes: Mutex::new(Vec::new()),
        }
    }

    /// Writes a record at `h`, inside the current block. Producer only.
    #[inline(always)]
    fn put(&self, h: u64, ticks: u64, word: u64) {
        let b = self.prod.cur.load(Relaxed);
        let i = ((h % BLOCK) * 2) as usize;
        // SAFETY: callers write only below `block_end`, and `h < block_end` implies a current
        // block covering `block_end - BLOCK .. block_end` (`limit` and `block_end` are 0
        // while `cur` is null). The collector frees a block only once the head has moved
        // past it into a later one, so `cur` is live; slot `i` is in bounds (`h % BLOCK`).
        let slots = unsafe { &(*b).slots };
        slots[i].store(ticks, Relaxed);
        slots[i + 1].store(word, Relaxed);
    }

    /// Appends an end (or any lone record). Producer only.
    #[inline(always)]
    pub(crate) fn push(&self, ticks: u64, word: u64) {
        let h = self.prod.head.load(Relaxed);
        if h >= self.prod.limit.load(Relaxed) {
            self.push_slow(&[(ticks, word)], 0);
            return;
        }
        self.put(h, ticks, word);
        self.prod.head.store(h + 1, Release);
    }

    /// Appends a scope begin at stack depth `depth` (0 outermost) if it fits with room for
    /// the ends of the scopes open above it; false if it was dropped (its end must not be
    /// recorded). Producer only.
    #[inline(always)]
    pub(crate) fn push_begin(&self, ticks: u64, word: u64, depth: u32) -> bool {
        let h = self.prod.head.load(Relaxed);
        let reserve = (depth as u64 + 1).min(MAX_RESERVE);
        if h + reserve >= self.prod.limit.load(Relaxed) {
            return self.push_slow(&[(ticks, word)], reserve);
        }
        self.put(h, ticks, word);
        self.prod.head.store(h + 1, Release);
        true
    }

    /// Appends records that belong together (an event and its payload): all or none, with
    /// room left for `reserve` ends. Producer only; not the scope hot path.
    pub(crate) fn push_group(&self, recs: &[(u64, u64)], reserve: u64) -> bool {
        let h = self.prod.head.load(Relaxed);
        if h + recs.len() as u64 + reserve > self.prod.limit.load(Relaxed) {
            return self.push_slow(recs, reserve);
        }
        self.write(h, recs);
        true
    }

    fn write(&self, h: u64, recs: &[(u64, u64)]) {
        for (k, &(t, w)) in recs.iter().enumerate() {
            self.put(h + k as u64, t, w);
        }
        self.prod.head.store(h + recs.len() as u64, Release);
    }

    #[cold]
    #[inline(never)]
    fn push_slow(&self, recs: &[(u64, u64)], reserve: u64) -> bool {
        crate::own::own(|| self.push_slow_unowned(recs, reserve))
    }

    #[inline(never)]
    fn push_slow_unowned(&self, recs: &[(u64, u64)], reserve: u64) -> bool {
        let n = recs.len() as u64;
        let kind = (recs[0].1 & 0xff) as u8;
        // An end (the only lone record pushed with no reserve that must never be lost once
        // its begin is in): written whatever the budget.
        let is_end = kind == event::END && n == 1;
        let mut spins = 0u32;
        let mut waiting_since: Option<std::time::Instant> = None;
        loop {
            let h = self.prod.head.load(Relaxed);
            let end = self.prod.block_end.load(Relaxed);
            let pending = self.prod.pending_lost.load(Relaxed);
            // The `lost` record goes first if it fits; an end does not wait for it.
            let with_lost = pending > 0 && h + 1 + n + reserve <= end;
            if h + n + reserve <= end && (pending == 0 || with_lost || is_end) {
                let mut h = h;
                if with_lost {
                    let word = event::LOST as u64 | (pending & ((1 << 56) - 1)) << 8;
                    self.write(h, &[(recs[0].0, word)]);
                    self.prod.pending_lost.store(0, Relaxed);
                    h += 1;
                }
                self.write(h, recs);
                let still = self.prod.pending_lost.load(Relaxed) > 0;
                self.prod.limit.store(if still { 0 } else { end }, Relaxed);
                return true;
            }
            if n + reserve + 1 > BLOCK {
                self.drop_records(recs);
                return false;
            }
            if let Some(b) = take_block(is_end) {
                self.link(h, end, b);
                continue;
            }
            let waited_too_long = waiting_since.is_some_and(|t| t.elapsed() > BLOCK_WAIT_MAX);
            if is_end || POLICY.load(Relaxed) == 0 || !super::running() || waited_too_long {
                self.drop_records(recs);
                return false;
            }
            // A moment's spin (the collector's pass may be ending), then short sleeps: a
            // thread that spun and yielded handed its CPU to whatever else was runnable for
            // a whole time slice at each yield, and on a machine busy with other work the
            // collector it waited for hardly ran (`the_block_policy_loses_nothing` beside two
            // busy loops: the waiting thread 50 % of a CPU, the collector 0.3 %, for minutes).
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                waiting_since.get_or_insert_with(std::time::Instant::now);
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Moves the producer to block `b`, padding the rest of the current one. Producer only.
    fn link(&self, h: u64, end: u64, b: NonNull<Block>) {
        let cur = self.prod.cur.load(Relaxed);
        let base = if cur.is_null() {
            // The first block: it holds records from `h` (0, or the head of a ring whose
            // budget gave it no block so far, always a multiple of BLOCK).
            self.cons.start.store(h, Relaxed);
            self.cons.block.store(b.as_ptr(), Release);
            h
        } else {
            if h < end {
                self.put(h, 0, PAD);
            }
            // SAFETY: `cur` is the producer's live block (see `put`).
            unsafe { &*cur }.next.store(b.as_ptr(), Release);
            end
        };
        self.prod.cur.store(b.as_ptr(), Relaxed);
        self.prod.block_end.store(base + BLOCK, Relaxed);
        // A `lost` record still to write keeps the fast path closed.
        let forced = self.prod.pending_lost.load(Relaxed) > 0;
        self.prod
            .limit
            .store(if forced { 0 } else { base + BLOCK }, Relaxed);
        // Publishes the padding (and the link before it).
        self.prod.head.store(base, Release);
    }

    fn drop_records(&self, recs: &[(u64, u64)]) {
        let kind = (recs[0].1 & 0xff) as u8;
        let (events, flag) = match kind {
            // A begin takes its end with it.
            event::BEGIN => {
                let id = (recs[0].1 >> 8) as u32;
                let mut d = self
                    .dropped_scopes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                match d.iter_mut().find(|x| x.0 == id) {
                    Some(x) => x.1 += 1,
                    None => d.push((id, 1)),
                }
                (2, 0)
            }
            event::END => (1, LOST_END_BIT),
            // One event, whatever its payload records (a counter's value, a message's text).
            _ => (1, 0),
        };
        let pending = self.prod.pending_lost.load(Relaxed);
        let count = (pending & !LOST_END_BIT) + events;
        self.prod
            .pending_lost
            .store(count | (pending & LOST_END_BIT) | flag, Relaxed);
        self.prod
            .dropped
            .store(self.prod.dropped.load(Relaxed) + events, Relaxed);
        // Force the slow path until the `lost` record is written.
        self.prod.limit.store(0, Relaxed);
    }

    /// Events dropped so far (any thread may read it).
    pub(crate) fn dropped(&self) -> u64 {
        self.prod.dropped.load(Relaxed)
    }

    /// Records published and not yet read (padding included). Collector only.
    pub(crate) fn unread(&self) -> u64 {
        self.prod.head.load(Acquire) - self.cons.tail.load(Relaxed)
    }

    /// Reads published records, in order, `max` at most; the blocks read past go to
    /// `freed`. Collector only. Returns the records read.
    pub(crate) fn drain(
        &self,
        mut f: impl FnMut(u64, u64),
        freed: &mut Vec<Free>,
        max: u64,
    ) -> u64 {
        let head = self.prod.head.load(Acquire);
        let mut tail = self.cons.tail.load(Relaxed);
        if tail >= head {
            return 0;
        }
        let mut start = self.cons.start.load(Relaxed);
        let mut b = self.cons.block.load(Acquire);
        let mut n = 0;
        while tail < head && n < max {
            if tail == start + BLOCK {
                // SAFETY: the producer linked the next block before publishing a record in
                // it (release store of the head, acquired above); `b` is the block the
                // collector holds, which no one frees but the collector.
                let next = unsafe { &*b }.next.load(Acquire);
                if let Some(old) = NonNull::new(b) {
                    freed.push(Free(old));
                }
                b = next;
                start += BLOCK;
            }
            let i = ((tail - start) * 2) as usize;
            // SAFETY: `tail < head`, so the record is published and its block linked; `b`
            // holds records `start .. start + BLOCK`.
            let slots = unsafe { &(*b).slots };
            let (t, w) = (slots[i].load(Relaxed), slots[i + 1].load(Relaxed));
            if w == PAD {
                tail = start + BLOCK;
                continue;
            }
            f(t, w);
            tail += 1;
            n += 1;
        }
        self.cons.block.store(b, Relaxed);
        self.cons.start.store(start, Relaxed);
        self.cons.tail.store(tail, Relaxed);
        n
    }

    /// Forgets what is in the ring (records left over from an earlier capture). Collector only.
    pub(crate) fn skip(&self) {
        let mut freed = Vec::new();
        self.drain(|_, _| {}, &mut freed, u64::MAX);
        give_back(&mut freed, false);
    }

    /// Frees every block of a drained ring whose owner exited. Collector only.
    pub(crate) fn release_blocks(&self) {
        let mut freed = Vec::new();
        let mut b = self.cons.block.swap(ptr::null_mut(), Relaxed);
        while let Some(nb) = NonNull::new(b) {
            // SAFETY: the owner exited and the ring is drained: its chain is the collector's.
            b = unsafe { nb.as_ref() }.next.load(Acquire);
            freed.push(Free(nb));
        }
        self.prod.cur.store(ptr::null_mut(), Relaxed);
        give_back(&mut freed, false);
    }
}

/// Live and pooled rings.
struct Rings {
    live: Vec<&'static Ring>,
    pool: Vec<&'static Ring>,
}

static RINGS: Mutex<Rings> = Mutex::new(Rings {
    live: Vec::new(),
    pool: Vec::new(),
});

fn rings() -> std::sync::MutexGuard<'static, Rings> {
    RINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The rings of live threads and of exited threads not yet drained.
pub(crate) fn live() -> Vec<&'static Ring> {
    rings().live.clone()
}

/// Puts a drained ring of an exited thread back in the pool, its blocks freed. Collector
/// only.
pub(crate) fn recycle(ring: &'static Ring) {
    ring.release_blocks();
    let mut r = rings();
    r.live.retain(|x| !std::ptr::eq(*x, ring));
    r.pool.push(ring);
}

thread_local! {
    /// The calling thread's ring; `None` before its first event and after its exit hook.
    static RING: Cell<Option<&'static Ring>> = const { Cell::new(None) };
    static EXITED: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread's ring retired when the thread exits.
struct ExitHook;

impl Drop for ExitHook {
    fn drop(&mut self) {
        EXITED.set(true);
        if let Some(ring) = RING.take() {
            ring.retired.store(true, Release);
        }
    }
}

thread_local! {
    static EXIT_HOOK: ExitHook = const { ExitHook };
}

/// The calling thread's ring, registering it on first use.
#[inline(always)]
fn ring() -> Option<&'static Ring> {
    match RING.get() {
        Some(r) => Some(r),
        None => register(),
    }
}

/// Appends one record (an end, a frame mark) to the calling thread's ring.
#[inline(always)]
pub(crate) fn push(ticks: u64, word: u64) {
    if let Some(r) = ring() {
        r.push(ticks, word)
    }
}

/// Appends a scope begin at stack depth `depth`; false if it was dropped.
#[inline(always)]
pub(crate) fn push_begin(ticks: u64, word: u64, depth: u32) -> bool {
    match ring() {
        Some(r) => r.push_begin(ticks, word, depth),
        None => false,
    }
}

/// Appends records that belong together, with room left for the ends of the `open` scopes
/// open on the thread.
pub(crate) fn push_group(recs: &[(u64, u64)], open: u32) {
    if let Some(r) = ring() {
        r.push_group(recs, (open as u64).min(MAX_RESERVE));
    }
}

/// [`push_group`] where the calling thread has a ring already, else nothing: what the heap
/// counter records from inside an allocation, which may be the library's own, made under
/// the lock a new ring's registration takes.
#[cfg(feature = "sampler")]
pub(crate) fn push_group_if_registered(recs: &[(u64, u64)], open: u32) {
    if let Some(r) = RING.get() {
        r.push_group(recs, (open as u64).min(MAX_RESERVE));
    }
}

#[cold]
#[inline(never)]
fn register() -> Option<&'static Ring> {
    crate::own::own(register_unowned)
}

#[inline(never)]
fn register_unowned() -> Option<&'static Ring> {
    if EXITED.get() || EXIT_HOOK.try_with(|_| ()).is_err() {
        EXITED.set(true);
        LOST_AFTER_EXIT.fetch_add(1, Relaxed);
        return None;
    }
    let ring = {
        let mut r = rings();
        let ring = match r.pool.pop() {
            Some(ring) => ring,
            None => Box::leak(Box::new(Ring::new())),
        };
        // A pooled ring is drained and holds no block; start it afresh. The collector does
        // not look at it until it is in the live list again.
        ring.retired.store(false, Relaxed);
        ring.index.store(0, Relaxed);
        ring.prod.pending_lost.store(0, Relaxed);
        ring.prod.dropped.store(0, Relaxed);
        ring.drop_base.store(0, Relaxed);
        ring.dropped_scopes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        for a in [
            &ring.prod.head,
            &ring.prod.limit,
            &ring.prod.block_end,
            &ring.cons.tail,
            &ring.cons.start,
        ] {
            a.store(0, Relaxed);
        }
        ring.prod.cur.store(ptr::null_mut(), Relaxed);
        ring.cons.block.store(ptr::null_mut(), Relaxed);
        ring.tid.store(crate::sys::thread::gettid(), Relaxed);
        *ring.name.lock().unwrap_or_else(|p| p.into_inner()) = thread_name();
        r.live.push(ring);
        ring
    };
    // The first block (else the first push tries again, on its slow path).
    if let Some(b) = take_block(false) {
        ring.link(0, 0, b);
    }
    RING.set(Some(ring));
    Some(ring)
}

/// The calling thread's name: its Rust name, else the OS's (`comm`), else empty.
fn thread_name() -> String {
    if let Some(name) = std::thread::current().name() {
        return name.to_owned();
    }
    std::fs::read_to_string("/proc/thread-self/comm")
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> Ring {
        let r = Ring::new();
        r.link(0, 0, take_block(true).expect("memory"));
        r
    }

    fn drain_all(r: &Ring) -> Vec<(u64, u64)> {
        let mut seen = Vec::new();
        let mut freed = Vec::new();
        r.drain(|t, w| seen.push((t, w)), &mut freed, u64::MAX);
        give_back(&mut freed, false);
        seen
    }

    const BEGIN: u64 = event::BEGIN as u64 | 7 << 8;
    const END: u64 = event::END as u64 | 7 << 8;

    #[test]
    fn records_cross_blocks_in_order_and_drained_blocks_are_freed() {
        let r = ring();
        let mut next = 0u64;
        for round in 0..10u64 {
            for k in 0..3 * BLOCK / 2 {
                r.push(round * BLOCK * 2 + k, k);
            }
            let mut freed = Vec::new();
            r.drain(
                |t, w| {
                    assert_eq!(w, next % (3 * BLOCK / 2), "record {next}");
                    assert_eq!(t % (BLOCK * 2), w);
                    next += 1;
                },
                &mut freed,
                u64::MAX,
            );
            assert!(freed.len() <= 2, "only blocks read past are freed");
            give_back(&mut freed, false);
        }
        assert_eq!(next, 10 * 3 * BLOCK / 2);
        assert_eq!(r.dropped(), 0);
        r.release_blocks();
    }

    /// A begin near the end of its block moves to the next one when the ends of the scopes
    /// open above it might not fit: ends then never need a block of their own.
    #[test]
    fn a_begin_keeps_room_for_the_ends_of_the_scopes_open_under_it() {
        let r = ring();
        for t in 0..BLOCK - 4 {
            r.push(t, 1);
        }
        // Depth 5: this begin and the five scopes under it need 1 + 6 records; 4 are left.
        assert!(r.push_begin(10_000, BEGIN, 5));
        assert_eq!(
            r.prod.block_end.load(Relaxed),
            2 * BLOCK,
            "the begin went to a new block"
        );
        let seen = drain_all(&r);
        assert_eq!(
            seen.len() as u64,
            BLOCK - 4 + 1,
            "the padding is not an event"
        );
        assert_eq!(seen.last(), Some(&(10_000, BEGIN)));
        // Ends fill the reserve without a new block.
        for k in 0..6 {
            r.push(20_000 + k, END);
        }
        assert_eq!(r.prod.block_end.load(Relaxed), 2 * BLOCK);
        assert_eq!(drain_all(&r).len(), 6);
        r.release_blocks();
    }

    #[test]
    fn groups_are_written_whole_in_one_block() {
        let r = ring();
        for t in 0..BLOCK - 1 {
            r.push(t, 1);
        }
        assert!(r.push_group(&[(1, 3), (2, 4), (3, 5)], 0));
        let seen = drain_all(&r);
        assert_eq!(&seen[seen.len() - 3..], &[(1, 3), (2, 4), (3, 5)]);
        assert_eq!(seen.len() as u64, BLOCK - 1 + 3);
        r.release_blocks();
    }

    /// A dropped begin counts its end too, by call site, and the next record says where.
    #[test]
    fn a_dropped_begin_is_counted_with_its_end_and_marked_in_the_stream() {
        let r = Ring::new();
        // As a spent budget does (the budget is process-wide: not changed by a unit test).
        r.drop_records(&[(5, BEGIN)]);
        assert_eq!(r.dropped(), 2);
        assert_eq!(*r.dropped_scopes.lock().unwrap(), vec![(7, 1)]);
        r.link(0, 0, take_block(true).expect("memory"));
        assert!(r.push_begin(6, BEGIN, 0));
        let seen = drain_all(&r);
        assert_eq!(
            seen,
            vec![(6, event::LOST as u64 | 2 << 8), (6, BEGIN)],
            "the lost count comes first, stamped at the next event"
        );
        r.release_blocks();
    }
}
