//! Scopes in aggregate mode: call sites, per-thread slots, the registry of threads.
//!
//! The path a `scope!` takes: the call site's per-thread slot cache (one thread-local load;
//! [`Callsite::id`](callsite::Callsite::id), one relaxed load, on a miss), the thread's
//! statistics in a destructor-free thread-local ([`ThreadStats`], registered once per
//! thread), then [`thread::enter_fast`] over the thread-local stack ([`TlsStack`]) and, when
//! the guard drops, [`thread::exit_fast`] — or, whenever the switches are not exactly "on"
//! (a capture, allocations counted, the OS clock) or the scope is nested or too deep,
//! [`thread::enter_slot`] and [`thread::exit`], which handle every case. No lock, no shared write, no allocation after a
//! thread's first entry of each call site. (Tests drive the same functions over a plain
//! [`thread::Stack`] with a fake clock.)

pub(crate) mod callsite;
#[allow(unsafe_code)] // the histograms' windows: pool memory published through atomic pointers
pub(crate) mod hist;
pub(crate) mod registry;
pub(crate) mod thread;
pub(crate) mod wall;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use std::thread::LocalKey;

use crate::clock::{CpuCounter, SystemCounter, Ticks};
use callsite::Callsite;
pub(crate) use thread::heap;
use thread::{DeepStack, Open, Slot, StackStore, ThreadStats, INLINE_DEPTH};

// The calling thread's hot-path state, in one thread-local without a destructor:
// `thread_local!` compiles each access to a plain `%fs`-relative address, with no
// "initialised / destroyed" check, and each field is reached through a tiny closure, so every
// access inlines. One `repr(C)` block, cache-line aligned: the scalars every scope touches
// share one line, the stack levels follow, and their places do not depend on how the linker
// orders a program's thread-locals.
#[repr(C, align(64))]
struct Hot {
    /// `None` before the thread's first scope and after its exit hook ran.
    stats: Cell<Option<&'static ThreadStats>>,
    /// The slot whose latest duration waits for the next exit (see `thread::exit`).
    pending: Cell<Option<&'static Slot>>,
    anchor: Cell<(Ticks, u32)>,
    deep: Cell<Option<&'static DeepStack>>,
    depth: Cell<u32>,
    /// The exit hook ran: scopes from later thread-local destructors cannot be recorded.
    exited: Cell<bool>,
    /// Per open scope: its children's time and its start reading (see `thread.rs`), from
    /// the second cache line on.
    levels: [[Cell<Ticks>; 2]; INLINE_DEPTH],
    /// Slots of call sites entered by id (spans, futures, `__private::enter`), by the id's
    /// low bits: one load where the directory walk is four dependent ones (see
    /// [`SlotCache`]). Valid while `stats` is: a thread keeps its statistics for its life.
    by_id: [Cell<(u32, Option<&'static Slot>)>; BY_ID],
}

/// Entries of [`Hot::by_id`].
const BY_ID: usize = 16;

thread_local! {
    static HOT: Hot = const {
        Hot {
            stats: Cell::new(None),
            pending: Cell::new(None),
            anchor: Cell::new((0, 0)),
            deep: Cell::new(None),
            depth: Cell::new(0),
            exited: Cell::new(false),
            levels: [const { [const { Cell::new(0) }; 2] }; INLINE_DEPTH],
            by_id: [const { Cell::new((0, None)) }; BY_ID],
        }
    };
}

/// The calling thread's stack, in the thread-locals above.
struct TlsStack;

impl StackStore for TlsStack {
    #[inline(always)]
    fn depth(&self) -> u32 {
        HOT.with(|h| h.depth.get())
    }
    #[inline(always)]
    fn set_depth(&self, d: u32) {
        HOT.with(|h| h.depth.set(d))
    }
    #[inline(always)]
    fn inline(&self, i: usize, k: usize) -> Ticks {
        HOT.with(|h| h.levels[i][k].get())
    }
    #[inline(always)]
    fn set_inline(&self, i: usize, k: usize, v: Ticks) {
        HOT.with(|h| h.levels[i][k].set(v))
    }
    fn deep(&self) -> Option<&'static DeepStack> {
        HOT.with(|h| h.deep.get())
    }
    fn set_deep(&self, d: Option<&'static DeepStack>) {
        HOT.with(|h| h.deep.set(d))
    }
    #[inline(always)]
    fn anchor(&self) -> (Ticks, u32) {
        HOT.with(|h| h.anchor.get())
    }
    fn set_anchor(&self, ticks: Ticks, epoch: u32) {
        HOT.with(|h| h.anchor.set((ticks, epoch)))
    }
    #[inline(always)]
    fn pending(&self) -> Option<&'static Slot> {
        HOT.with(|h| h.pending.get())
    }
    #[inline(always)]
    fn set_pending(&self, slot: Option<&'static Slot>) {
        HOT.with(|h| h.pending.set(slot))
    }
}

/// Registered (by first access) when a thread registers; its destructor folds the thread
/// into the retired totals when the thread exits.
struct ExitHook;

impl Drop for ExitHook {
    fn drop(&mut self) {
        HOT.with(|h| h.exited.set(true));
        if let Some(stats) = HOT.with(|h| h.stats.take()) {
            // The thread's last outermost duration joins its histogram before the fold.
            thread::record_pending(&TlsStack, stats);
            HOT.with(|h| h.pending.set(None));
            registry::retire(stats, thread::depth(&TlsStack), HOT.with(|h| h.deep.take()));
        }
    }
}

thread_local! {
    static EXIT_HOOK: ExitHook = const { ExitHook };
}

/// First use of tickscope in the process (a call site registering, a thread's first scope,
/// a capture starting): applies the settings ([`crate::runtime::ensure_init`]). The one
/// edge from the layers that record up to the runtime that sits above them
/// (docs/ARCHITECTURE.md).
#[inline]
pub(crate) fn first_use() {
    crate::runtime::ensure_init()
}

/// Exits of a `tracing` span on a thread where that span was not entered (they record
/// nothing): counted by the layer, shown by the summary.
pub(crate) static FOREIGN_SPAN_EXITS: AtomicU64 = AtomicU64::new(0);

/// Scopes entered on a thread after its exit hook ran (from another thread-local's
/// destructor): they cannot be recorded, so they are counted.
pub(crate) static LOST_AFTER_THREAD_EXIT: AtomicU64 = AtomicU64::new(0);

/// Whether the calling thread's statistics are registered (its first scope registers them,
/// and with them, in a process's first scope, reads the environment and may start a
/// capture). The same thread-local load [`enter`] makes next.
#[inline(always)]
pub(crate) fn registered() -> bool {
    HOT.with(|h| h.stats.get()).is_some()
}

/// Opens a scope of call site `id` on the calling thread; `None` if it cannot be recorded.
/// `fast`: the switches were exactly `ON` (the clock is the CPU counter, nothing but
/// statistics to record), and the scope takes [`thread::enter_fast`].
#[inline(always)]
pub(crate) fn enter(id: u32, fast: bool) -> Option<Open> {
    let stats = match HOT.with(|h| h.stats.get()) {
        Some(s) => s,
        None => register()?,
    };
    let slot = match HOT.with(|h| h.by_id[id as usize % BY_ID].get()) {
        (k, Some(slot)) if k == id => slot,
        _ => fill_by_id(stats, id),
    };
    enter_slot(stats, slot, fast)
}

/// [`thread::enter_fast`] over the CPU counter, or [`thread::enter_slot`] over the clock.
#[inline(always)]
fn enter_slot(stats: &'static ThreadStats, slot: &'static Slot, fast: bool) -> Option<Open> {
    if fast {
        thread::enter_fast(&TlsStack, stats, slot, &CpuCounter)
    } else {
        thread::enter_slot(&TlsStack, stats, slot, &SystemCounter)
    }
}

#[cold]
#[inline(never)]
fn fill_by_id(stats: &'static ThreadStats, id: u32) -> &'static Slot {
    // A new slot (or page) is the library's allocation, not the program's.
    let slot = crate::own::own(|| stats.slot(id));
    HOT.with(|h| h.by_id[id as usize % BY_ID].set((id, Some(slot))));
    slot
}

/// A call site's slot on the calling thread, cached in a thread-local of the call site's own
/// (the macros declare one per call site: 8 bytes of TLS each). A hit is one `%fs`-relative
/// load, where the directory walk is four dependent loads — on the critical path, since the
/// nesting check updates the slot before the clock is read. Not a stable API.
#[doc(hidden)]
pub struct SlotCache(Cell<Option<&'static Slot>>);

impl SlotCache {
    /// An empty cache.
    #[allow(clippy::new_without_default)]
    pub const fn new() -> SlotCache {
        SlotCache(Cell::new(None))
    }
}

/// [`enter`] through the call site's slot cache.
#[inline(always)]
pub(crate) fn enter_cached(
    cs: &'static Callsite,
    cache: &'static LocalKey<SlotCache>,
    fast: bool,
) -> Option<Open> {
    let stats = match HOT.with(|h| h.stats.get()) {
        Some(s) => s,
        None => register()?,
    };
    // The cache is only read while the thread's statistics are live (checked just above), and
    // a thread keeps the same statistics for its whole life, so a cached slot is its own.
    let slot = match cache.with(|c| c.0.get()) {
        Some(slot) => slot,
        None => fill_cache(cs, cache, stats),
    };
    enter_slot(stats, slot, fast)
}

#[cold]
#[inline(never)]
fn fill_cache(
    cs: &'static Callsite,
    cache: &'static LocalKey<SlotCache>,
    stats: &'static ThreadStats,
) -> &'static Slot {
    let slot = crate::own::own(|| stats.slot(cs.id()));
    cache.with(|c| c.0.set(Some(slot)));
    slot
}

#[cold]
#[inline(never)]
fn register() -> Option<&'static ThreadStats> {
    crate::own::own(register_unowned)
}

#[inline(never)]
fn register_unowned() -> Option<&'static ThreadStats> {
    if HOT.with(|h| h.exited.get()) || EXIT_HOOK.try_with(|_| ()).is_err() {
        HOT.with(|h| h.exited.set(true));
        LOST_AFTER_THREAD_EXIT.fetch_add(1, Relaxed);
        return None;
    }
    let stats = registry::register_current();
    HOT.with(|h| h.stats.set(Some(stats)));
    // Registration read the environment: TICKSCOPE_ENABLED=0 applies to this first scope too.
    if !crate::state::is_enabled() {
        return None;
    }
    Some(stats)
}

/// Closes `open` on the calling thread; returns the end reading (`None` if the thread's
/// statistics are gone, during thread teardown).
#[inline(always)]
pub(crate) fn exit(open: &Open) -> Option<Ticks> {
    let stats = HOT.with(|h| h.stats.get())?;
    Some(thread::exit(&TlsStack, stats, open, &SystemCounter))
}

/// [`exit`] for a scope whose flags are 0 ([`thread::exit_fast`]: opened by
/// [`thread::enter_fast`], which read the CPU counter).
#[inline(always)]
pub(crate) fn exit_fast(open: &Open) -> Option<Ticks> {
    let stats = HOT.with(|h| h.stats.get())?;
    Some(thread::exit_fast(&TlsStack, stats, open, &CpuCounter))
}

/// Locks `m`, taking over a poisoned lock (our code never panics while holding one, and the
/// data is consistent between statements). With `wait`, gives up after that long instead of
/// blocking: the exit path must never deadlock, even on a lock held by a stopped thread.
pub(crate) fn lock_within<T>(
    m: &'static std::sync::Mutex<T>,
    wait: Option<std::time::Duration>,
) -> Option<std::sync::MutexGuard<'static, T>> {
    use std::sync::TryLockError;
    let Some(wait) = wait else {
        return Some(m.lock().unwrap_or_else(|p| p.into_inner()));
    };
    let deadline = std::time::Instant::now() + wait;
    loop {
        match m.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// How many scopes are open on the calling thread.
pub(crate) fn open_depth() -> u32 {
    HOT.with(|h| h.depth.get())
}

/// Per call-site id, the allocations counted by scope so far on every thread, live or
/// exited (`heap::HeapRow`): what a capture's allocations entries are the difference of.
#[cfg(feature = "capture")]
pub(crate) fn heap_by_site() -> std::collections::BTreeMap<u32, heap::HeapRow> {
    let reg = registry::lock();
    let mut by = std::collections::BTreeMap::new();
    let mut add = |id: u32, row: heap::HeapRow| {
        if row != [0; 4] {
            let to: &mut heap::HeapRow = by.entry(id).or_default();
            for (a, b) in to.iter_mut().zip(row) {
                *a = a.wrapping_add(b);
            }
        }
    };
    for t in &reg.live {
        t.for_each_slot(|id, slot| add(id, heap::read(slot)));
    }
    for (&id, row) in &reg.retired {
        add(id, row.heap);
    }
    by
}

/// Per call-site id, how many entries are open now on all live threads (the scopes in
/// flight when a capture starts).
#[cfg(feature = "capture")]
pub(crate) fn open_everywhere() -> Vec<(u32, u64)> {
    let reg = registry::lock();
    let mut open = std::collections::BTreeMap::new();
    for t in &reg.live {
        t.for_each_slot(|id, slot| {
            let d = slot.depth.load(Relaxed);
            if d > 0 {
                *open.entry(id).or_insert(0u64) += u64::from(d);
            }
        });
    }
    open.into_iter().collect()
}

/// Bytes of scope state the calling thread holds (0 if it never entered a scope).
pub(crate) fn current_thread_bytes() -> usize {
    HOT.with(|h| h.stats.get()).map_or(0, |s| s.bytes())
}

/// The calling thread's open scopes, as call-site (row) ids in ascending order, written into
/// `out`; returns how many. The sampler attaches them to each sample.
///
/// Signal context (the sampler's handler calls it): no allocation, no lock. It reads only the
/// thread's own slots — atomics and `OnceLock::get`, itself one atomic load.
#[cfg(feature = "sampler")]
pub(crate) fn active_scopes(out: &mut [u32]) -> usize {
    let Some(stats) = HOT.with(|h| h.stats.get()) else {
        return 0;
    };
    let mut n = 0;
    stats.for_each_slot(|id, slot| {
        if n < out.len() && slot.depth.load(Relaxed) > 0 {
            out[n] = id;
            n += 1;
        }
    });
    n
}

/// The row name of call-site id `id` (a scope's name, or its group's).
#[cfg(feature = "sampler")]
pub(crate) fn scope_name(id: u32) -> Option<String> {
    callsite::table().get(id).map(|i| i.name.to_string())
}
