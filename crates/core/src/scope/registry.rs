//! The global registry of threads: the only lock on the scope side, taken once when a thread
//! first enters a scope, once when it exits, and by reporters.
//!
//! A thread's statistics stay readable for its whole life. When it exits, its slots are folded
//! into the retired totals *under the same lock* that removes it from the live list, so a
//! snapshot sees every call exactly once: a thread that lived one millisecond still counts.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::thread::{DeepStack, Row, ThreadStats};

/// Per-thread breakdowns kept for exited threads; later ones are merged into one entry so a
/// program that starts millions of threads keeps bounded memory. The totals are always exact.
const RETIRED_THREADS_KEPT: usize = 256;

/// What one thread did, for the per-thread breakdown.
#[derive(Clone)]
pub(crate) struct ThreadSnapshot {
    pub serial: u64,
    pub tid: u64,
    pub name: Option<String>,
    pub alive: bool,
    /// Threads merged into this entry (1, or more for the overflow entry).
    pub threads: u64,
    /// Rows by call-site id, without histograms.
    pub rows: BTreeMap<u32, Row>,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub live: Vec<&'static ThreadStats>,
    /// Cleared statistics of exited threads, for the next threads (see `thread.rs`).
    free: Vec<&'static ThreadStats>,
    next_serial: u64,
    /// Rows of exited threads, by call-site id, with histograms.
    pub retired: BTreeMap<u32, Row>,
    pub retired_threads: Vec<ThreadSnapshot>,
    pub retired_count: u64,
    /// Scopes still open on threads when they exited (never closed, so never counted).
    pub unfinished_at_thread_exit: u64,
    /// Scopes lost to the depth limit on exited threads.
    pub retired_lost_too_deep: u64,
    /// Scopes abandoned by out-of-order guards on exited threads.
    pub retired_unbalanced: u64,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

pub(crate) struct RegistryGuard(MutexGuard<'static, Option<Registry>>);

impl std::ops::Deref for RegistryGuard {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        self.0.as_ref().expect("initialised by lock()")
    }
}

impl std::ops::DerefMut for RegistryGuard {
    fn deref_mut(&mut self) -> &mut Registry {
        self.0.as_mut().expect("initialised by lock()")
    }
}

/// Locks the registry (see [`super::lock_within`]).
pub(crate) fn lock() -> RegistryGuard {
    try_lock_within(None).expect("no deadline: always locks")
}

/// Like [`lock`] but gives up after `wait` (for the exit path).
pub(crate) fn try_lock(wait: Duration) -> Option<RegistryGuard> {
    try_lock_within(Some(wait))
}

fn try_lock_within(wait: Option<Duration>) -> Option<RegistryGuard> {
    let mut g = super::lock_within(&REGISTRY, wait)?;
    g.get_or_insert_with(Registry::default);
    Some(RegistryGuard(g))
}

/// Registers the calling thread and returns its statistics.
pub(crate) fn register_current() -> &'static ThreadStats {
    super::first_use();
    let tid = crate::sys::thread::gettid();
    let name = std::thread::current().name().map(str::to_owned);
    let mut reg = lock();
    let serial = reg.next_serial;
    reg.next_serial += 1;
    let stats = reg.free.pop().unwrap_or_else(ThreadStats::leak);
    stats.serial.store(serial, Relaxed);
    stats.tid.store(tid, Relaxed);
    *stats.name.lock().unwrap_or_else(|p| p.into_inner()) = name;
    reg.live.push(stats);
    stats
}

/// Folds an exiting thread into the retired totals, then clears and pools its statistics.
/// `open` is how many scopes were still open on it.
pub(crate) fn retire(stats: &'static ThreadStats, open: usize, deep: Option<&'static DeepStack>) {
    let mut reg = lock();
    let mut rows = BTreeMap::new();
    let reading = stats.pool.reading();
    stats.for_each_slot(|id, slot| {
        let row = Row::read(slot, &reading);
        if row.calls == 0 {
            return; // a slot left over from an earlier thread that used this state
        }
        reg.retired.entry(id).or_insert_with(Row::empty).merge(&row);
        let mut light = Row::light();
        light.merge(&row);
        light.open = 0;
        rows.insert(id, light);
    });
    reg.retired_count += 1;
    reg.unfinished_at_thread_exit += open as u64;
    reg.retired_lost_too_deep += stats.lost_too_deep.load(Relaxed);
    reg.retired_unbalanced += stats.unbalanced.load(Relaxed);
    let snap = ThreadSnapshot {
        serial: stats.serial.load(Relaxed),
        tid: stats.tid.load(Relaxed),
        name: stats.name(),
        alive: false,
        threads: 1,
        rows,
    };
    if reg.retired_threads.len() < RETIRED_THREADS_KEPT {
        reg.retired_threads.push(snap);
    } else {
        // One more entry stands for every thread past the limit.
        if reg.retired_threads.len() == RETIRED_THREADS_KEPT {
            reg.retired_threads.push(ThreadSnapshot {
                serial: u64::MAX,
                tid: 0,
                name: Some("(later exited threads)".into()),
                alive: false,
                threads: 0,
                rows: BTreeMap::new(),
            });
        }
        let last = reg.retired_threads.last_mut().expect("pushed above");
        last.threads += 1;
        for (id, row) in snap.rows {
            last.rows.entry(id).or_insert_with(Row::light).merge(&row);
        }
    }
    reg.live.retain(|t| !std::ptr::eq(*t, stats));
    // Nobody reads it any more (readers hold the lock we hold): clear it for the next thread.
    stats.reset();
    reg.free.push(stats);
    if let Some(d) = deep {
        d.give_back();
    }
}
