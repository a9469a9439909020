//! The rows calls are counted into: one per scope ([`Row`]), one per scope and thread with
//! `--per-thread` ([`LightRow`], found through a thread's [`RowMap`]), each thread's stack of
//! open calls ([`Frame`], [`ThreadState`]), and [`close`], which counts a call when it ends.

use std::collections::HashMap;

use crate::hist::Dist;

/// One scope's calls, over every thread.
#[derive(Clone)]
pub(super) struct Row {
    pub(super) id: u64,
    pub(super) calls: u64,
    pub(super) outer: u64,
    pub(super) incl: u64,
    pub(super) self_ticks: u64,
    pub(super) min: u64,
    pub(super) max: u64,
    pub(super) clock_errors: u64,
    /// Entries open on the active thread (see [`Collector::switch`](super::Collector::switch)).
    pub(super) open: u32,
    /// Outermost calls' durations: nothing until the first ends, small until many have.
    pub(super) hist: Dist,
}

/// One scope's calls on one thread (`--per-thread`): no distribution.
#[derive(Clone, Default)]
pub(super) struct LightRow {
    pub(super) id: u64,
    pub(super) calls: u64,
    pub(super) outer: u64,
    pub(super) incl: u64,
    pub(super) self_ticks: u64,
    pub(super) max: u64,
}

/// A thread's light row per global row. Flat while the rows it uses are a good part of
/// those below the highest it uses; a map otherwise, so that many threads each calling a few
/// of many scopes do not each hold a table of them all.
#[derive(Default)]
pub(super) struct RowMap {
    /// By row; `u32::MAX`: none (or in `sparse`).
    pub(super) dense: Vec<u32>,
    /// Rows that were past `dense` when inserted.
    pub(super) sparse: HashMap<u32, u32>,
    pub(super) len: usize,
}

impl RowMap {
    #[inline]
    pub(super) fn get(&self, row: u32) -> Option<u32> {
        match self.dense.get(row as usize) {
            Some(&r) if r != u32::MAX => Some(r),
            _ if self.sparse.is_empty() => None,
            _ => self.sparse.get(&row).copied(),
        }
    }

    pub(super) fn insert(&mut self, row: u32, r: u32) {
        self.len += 1;
        let i = row as usize;
        if i >= self.dense.len() && i < 4 * self.len + 64 {
            self.dense.resize(i + 1, u32::MAX);
        }
        match self.dense.get_mut(i) {
            Some(slot) => *slot = r,
            None => {
                self.sparse.insert(row, r);
            }
        }
    }
}

/// An open call on a thread's stack.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    pub(super) id: u64,
    pub(super) begin: u64,
    /// Time of child scopes that ended inside this one.
    pub(super) child: u64,
    pub(super) row: u32,
    pub(super) trow: u32,
    pub(super) nested: bool,
    /// Begun before the range (with [`Options::range`](super::Options::range)): not counted when it ends.
    pub(super) outside: bool,
}

/// A thread's stack of open calls and its counts.
pub(super) struct ThreadState {
    pub(super) index: u64,
    /// With [`Options::range`](super::Options::range): an event past the range's end was seen; the thread's later
    /// chunks are passed over (their open lists would replace the stack the range ended with).
    pub(super) past: bool,
    pub(super) stack: Vec<Frame>,
    /// Begins past [`MAX_OPEN`](crate::tscap::MAX_OPEN) deep, not on the stack; the next ends are theirs.
    pub(super) overflow: u64,
    pub(super) events: u64,
    pub(super) lost: u64,
    pub(super) last: u64,
    pub(super) seen: bool,
    /// Its own rows (with `per_thread`) and frame marks, once it has any: boxed, so that a
    /// capture of many threads costs a pointer each without them.
    pub(super) rows: Option<Box<ThreadRows>>,
}

/// A thread's own rows and frame marks.
#[derive(Default)]
pub(super) struct ThreadRows {
    /// Per global row: this thread's light row.
    pub(super) trows: RowMap,
    pub(super) light: Vec<LightRow>,
    /// Per frame marker (its marker row): the last mark's ticks.
    pub(super) frame_last: Vec<(u32, u64)>,
}

/// Closes frame `f` (popped from `th`'s stack) at `end`.
#[inline(always)]
pub(super) fn close(rows: &mut [Row], th: &mut ThreadState, f: Frame, end: u64, per_thread: bool) {
    let d = end.wrapping_sub(f.begin) as i64;
    let (dt, error) = if d < 0 { (0, true) } else { (d as u64, false) };
    let r = &mut rows[f.row as usize];
    r.open -= 1;
    if f.outside {
        // Begun before the range: not a call of it (its time is still its parent's child
        // time, so that a parent outside too stays consistent).
        if let Some(parent) = th.stack.last_mut() {
            parent.child = parent.child.wrapping_add(dt);
        }
        return;
    }
    r.calls += 1;
    r.self_ticks = r.self_ticks.wrapping_add(dt.saturating_sub(f.child));
    r.clock_errors += error as u64;
    if !f.nested {
        r.outer += 1;
        r.incl = r.incl.wrapping_add(dt);
        r.min = r.min.min(dt);
        r.max = r.max.max(dt);
        r.hist.record(dt);
    }
    if per_thread {
        if let Some(l) = th
            .rows
            .as_mut()
            .and_then(|r| r.light.get_mut(f.trow as usize))
        {
            l.calls += 1;
            l.self_ticks = l.self_ticks.wrapping_add(dt.saturating_sub(f.child));
            if !f.nested {
                l.outer += 1;
                l.incl = l.incl.wrapping_add(dt);
                l.max = l.max.max(dt);
            }
        }
    }
    if let Some(parent) = th.stack.last_mut() {
        parent.child = parent.child.wrapping_add(dt);
    }
}
