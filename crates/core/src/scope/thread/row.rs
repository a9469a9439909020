//! A slot's figures read into a row (the summary's and the registry's side: never on a
//! scope's path), and rows merged.

use super::*;

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
    /// Allocations inside it, where they are counted (see [`super::heap`]).
    pub heap: super::heap::HeapRow,
    /// Whether `hist` is kept (per-thread breakdowns keep none).
    with_hist: bool,
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
            heap: [0; 4],
            with_hist: true,
        }
    }

    /// An empty row without a histogram (per-thread breakdowns do not keep one).
    pub(crate) fn light() -> Row {
        Row {
            with_hist: false,
            ..Row::empty()
        }
    }

    /// Reads a live slot (relaxed: may trail the owner by its current exit), a reader of its
    /// thread's pool.
    pub(crate) fn read(slot: &Slot, reading: &Reading<'_>) -> Row {
        let mut row = Row::empty();
        Row::read_into(slot, reading, &mut row);
        row
    }

    /// Adds a live slot into `acc` (its histogram straight into `acc`'s, with no copy of
    /// its own); returns the slot's row without a histogram.
    pub(crate) fn read_into(slot: &Slot, reading: &Reading<'_>, acc: &mut Row) -> Row {
        let (outer, incl) = (slot.outer.load(Relaxed), slot.incl.load(Relaxed));
        let row = Row {
            calls: outer.wrapping_add(slot.nested.load(Relaxed)),
            outer,
            incl,
            self_ticks: super::self_ticks(incl, slot.children.load(Relaxed)),
            min: slot.min.load(Relaxed),
            max: slot.max.load(Relaxed),
            clock_errors: slot.clock_errors.load(Relaxed),
            open: slot.depth.load(Relaxed) as u64,
            hist: Counts::new(),
            heap: super::heap::read(slot),
            with_hist: false,
        };
        acc.merge(&row);
        if acc.with_hist {
            slot.hist.add_to(reading, &mut acc.hist);
            // The latest call, not in the histogram yet (a read racing the owner's next exit
            // may count it twice or not at all: like every relaxed read here, it trails the
            // owner by at most that exit).
            let p = slot.pending.load(Relaxed);
            if p != NONE {
                acc.hist.add(tickscope_fmt::hist::bucket(p), 1);
            }
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
        for (a, b) in self.heap.iter_mut().zip(o.heap) {
            *a += b;
        }
        if self.with_hist {
            self.hist.merge(&o.hist);
        }
    }
}
