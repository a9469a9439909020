//! Scopes in aggregate mode: call sites, per-thread slots, the registry of threads.
//!
//! The path a `scope!` takes: [`Callsite::id`](callsite::Callsite::id) (one relaxed load), the
//! thread-local [`Recorder`](thread::Recorder) (registered once per thread), then
//! [`Recorder::enter`](thread::Recorder::enter) and, when the guard drops,
//! [`Recorder::exit`](thread::Recorder::exit). No lock, no shared write, no allocation after a
//! thread's first entry of each call site.

pub(crate) mod callsite;
pub(crate) mod hist;
pub(crate) mod registry;
pub(crate) mod thread;

use std::cell::OnceCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::clock::SystemCounter;
use thread::Recorder;

/// The calling thread's recorder. Its destructor folds the thread into the retired totals.
struct Local {
    rec: OnceCell<Recorder>,
}

impl Drop for Local {
    fn drop(&mut self) {
        if let Some(rec) = self.rec.get() {
            registry::retire(rec);
        }
    }
}

thread_local! {
    static LOCAL: Local = const { Local { rec: OnceCell::new() } };
}

/// Scopes entered on a thread after its thread-locals were destroyed (from another
/// thread-local's destructor): they cannot be recorded, so they are counted.
pub(crate) static LOST_AFTER_THREAD_EXIT: AtomicU64 = AtomicU64::new(0);

/// Opens a scope of call site `id` on the calling thread; `None` if it cannot be recorded.
#[inline(always)]
pub(crate) fn enter(id: u32) -> Option<u32> {
    match LOCAL.try_with(|l| {
        l.rec
            .get_or_init(registry::register_current)
            .enter(id, &SystemCounter)
    }) {
        Ok(index) => index,
        Err(_) => lost_after_thread_exit(),
    }
}

#[cold]
#[inline(never)]
fn lost_after_thread_exit() -> Option<u32> {
    LOST_AFTER_THREAD_EXIT.fetch_add(1, Relaxed);
    None
}

/// Closes frame `index` on the calling thread.
#[inline(always)]
pub(crate) fn exit(index: u32) {
    let _ = LOCAL.try_with(|l| {
        if let Some(rec) = l.rec.get() {
            rec.exit(index, &SystemCounter);
        }
    });
}

/// Bytes of scope state the calling thread holds (0 if it never entered a scope).
pub(crate) fn current_thread_bytes() -> usize {
    LOCAL
        .try_with(|l| l.rec.get().map_or(0, |r| r.stats.bytes() + r.stack_bytes()))
        .unwrap_or(0)
}
