//! Allocations counted by scope, exactly, where `tickscope::alloc::Profiled` is the global
//! allocator (the state's `ALLOCS` bit).
//!
//! The allocator keeps each thread's running count of allocations and bytes (a thread-local
//! add per allocation, `tickscope_sampler::heap::thread_counts`). A scope reads it at its entry
//! and at its exit: the difference is what was allocated inside it, on its thread — for a
//! future or a span, inside the poll or the entry, on whichever thread ran it. Self is that
//! less what its child scopes took: the thread also keeps the running sum of what scopes that
//! ended took (`CHILDREN`), and each exit folds its children's part of that sum into its own
//! total, so its parent sees its direct children only.
//!
//! The marks (each open scope's readings) are kept by depth in a thread-local vector, off the
//! scope's own stack: with counting off, a scope pays nothing for them (its entry already
//! tests the state byte for the capture). A mark is checked against the scope's start
//! reading, and an exit drops the marks above it, so a late exit of an abandoned scope (its
//! guard dropped after its parent's) records nothing here either, as in its other figures.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{
    AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::OnceLock;

use super::{add, Open, Slot};
use crate::clock::Ticks;

use crate::own::own;
#[cfg(feature = "sampler")]
use tickscope_sampler::heap::thread_counts;

#[cfg(not(feature = "sampler"))]
fn thread_counts() -> (u64, u64) {
    (0, 0)
}

/// Counts kept per page of [`TABLE`].
const PAGE: usize = 1024;

/// The counts of every slot that counted an allocation, by the index in its `heap` field (a
/// `u32` in the slot's padding, where the counts themselves would have made every slot a
/// cache line larger, counted or not): pages made as needed, never freed (a slot is pooled
/// with its thread's statistics and keeps its counts, reset). 4,096 pages: 4 M call sites
/// × threads, past which a slot's allocations are counted in [`uncounted`] instead.
static TABLE: [OnceLock<Box<[HeapCounts]>>; 4096] = [const { OnceLock::new() }; 4096];

/// The next index of [`TABLE`] to hand out (0 is "none").
static NEXT: AtomicU32 = AtomicU32::new(1);

/// Allocations inside scopes whose counts found no room in [`TABLE`].
static UNCOUNTED: AtomicU64 = AtomicU64::new(0);

/// Allocations inside scopes that could not be counted by scope (more call sites × threads
/// than the table holds): said in the summary's footer.
pub(crate) fn uncounted() -> u64 {
    UNCOUNTED.load(Relaxed)
}

/// The counts at `index` of [`TABLE`] (0: none).
fn at(index: u32) -> Option<&'static HeapCounts> {
    let i = index as usize;
    let page = TABLE.get(i / PAGE)?.get()?;
    Some(&page[i % PAGE])
}

/// `slot`'s counts, given a place at its first counted exit (the owner's thread).
fn counts_of(slot: &Slot) -> Option<&'static HeapCounts> {
    match slot.heap.load(Acquire) {
        0 => {
            if NEXT.load(Relaxed) as usize >= TABLE.len() * PAGE {
                return None;
            }
            let i = NEXT.fetch_add(1, Relaxed);
            let page = TABLE
                .get(i as usize / PAGE)?
                .get_or_init(|| own(|| (0..PAGE).map(|_| HeapCounts::new()).collect()));
            slot.heap.store(i, Release);
            Some(&page[i as usize % PAGE])
        }
        i => at(i),
    }
}

/// `slot`'s counts, read (zeros where it counted none).
pub(crate) fn read(slot: &Slot) -> HeapRow {
    at(slot.heap.load(Acquire)).map_or([0; 4], HeapCounts::read)
}

/// Clears `slot`'s counts, for its reuse by another thread.
pub(crate) fn reset(slot: &Slot) {
    if let Some(c) = at(slot.heap.load(Acquire)) {
        c.reset();
    }
}

/// A call site's allocations on one thread: inside its outermost calls (`allocs`, `bytes`,
/// as its total time) and not inside its child scopes (`self_*`, every call).
pub(crate) struct HeapCounts {
    allocs: AtomicU64,
    bytes: AtomicU64,
    self_allocs: AtomicU64,
    self_bytes: AtomicU64,
}

/// [`HeapCounts`] read: allocations, bytes, self allocations, self bytes.
pub(crate) type HeapRow = [u64; 4];

impl HeapCounts {
    const fn new() -> HeapCounts {
        HeapCounts {
            allocs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            self_allocs: AtomicU64::new(0),
            self_bytes: AtomicU64::new(0),
        }
    }

    fn reset(&self) {
        for a in [
            &self.allocs,
            &self.bytes,
            &self.self_allocs,
            &self.self_bytes,
        ] {
            a.store(0, Relaxed);
        }
    }

    fn read(&self) -> HeapRow {
        [
            self.allocs.load(Relaxed),
            self.bytes.load(Relaxed),
            self.self_allocs.load(Relaxed),
            self.self_bytes.load(Relaxed),
        ]
    }
}

/// An open scope's readings at its entry: its start (which identifies it), the thread's
/// counts and the running sum of what ended scopes took.
#[derive(Clone, Copy, Default)]
struct Mark {
    t0: Ticks,
    at: (u64, u64),
    children: (u64, u64),
}

thread_local! {
    /// What the scopes that ended on this thread took, less what their children took
    /// within them: allocations, bytes.
    static CHILDREN: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
    /// The open scopes' marks, by depth.
    static MARKS: RefCell<Vec<Mark>> = const { RefCell::new(Vec::new()) };
}

/// A scope begins at depth `index`, its start reading `t0`: its mark is set. Returns whether
/// it was (not during the thread's teardown): the guard's `HEAP_MARK`. Takes values, not the
/// guard: a reference to it would keep the guard in memory on the scope's path.
#[inline(never)]
pub(crate) fn begin(t0: Ticks, index: u32) -> bool {
    let mark = Mark {
        t0,
        at: thread_counts(),
        children: CHILDREN.try_with(Cell::get).unwrap_or_default(),
    };
    let i = index as usize;
    MARKS
        .try_with(|m| {
            let Ok(mut m) = m.try_borrow_mut() else {
                return false;
            };
            if m.len() <= i {
                if m.capacity() <= i {
                    // Not the program's allocation: neither profiled nor counted.
                    let more = (i + 1).max(16) - m.len();
                    own(|| m.reserve(more));
                }
                m.resize(i + 1, Mark::default());
            }
            m[i] = mark;
            true
        })
        .unwrap_or(false)
}

/// The scope `open` (marked `HEAP_MARK`) ended, and its exit was recorded: its allocations
/// go to its slot.
#[inline(never)]
pub(crate) fn end(open: &Open) {
    end_at(open, open.index);
}

/// [`end`], its mark at depth `index` of the thread's marks (the summary's overhead probe,
/// whose scopes sit above the thread's open ones, uses its own depth).
#[inline(always)]
pub(crate) fn end_at(open: &Open, index: u32) {
    let now = thread_counts();
    let i = index as usize;
    let _ = MARKS.try_with(|m| {
        let Ok(mut m) = m.try_borrow_mut() else {
            return;
        };
        let Some(mark) = m.get(i).copied() else {
            return;
        };
        // The marks above this one are of scopes that ended, or were abandoned with it.
        m.truncate(i);
        if mark.t0 != open.t0 {
            return;
        }
        let Ok(children) = CHILDREN.try_with(Cell::get) else {
            return;
        };
        let total = (now.0.wrapping_sub(mark.at.0), now.1.wrapping_sub(mark.at.1));
        let inside = (
            children.0.wrapping_sub(mark.children.0),
            children.1.wrapping_sub(mark.children.1),
        );
        match counts_of(open.slot) {
            Some(h) => {
                add(&h.self_allocs, total.0.wrapping_sub(inside.0));
                add(&h.self_bytes, total.1.wrapping_sub(inside.1));
                // A re-entered call site's inner calls are inside its outer call's total.
                if !open.nested() {
                    add(&h.allocs, total.0);
                    add(&h.bytes, total.1);
                }
            }
            None => {
                UNCOUNTED.fetch_add(total.0.wrapping_sub(inside.0), Relaxed);
            }
        }
        let _ = CHILDREN.try_with(|c| {
            c.set((
                mark.children.0.wrapping_add(total.0),
                mark.children.1.wrapping_add(total.1),
            ))
        });
    });
}
