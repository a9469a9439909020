//! One thread's scopes as its events come: the stack of open scopes, and each scope closed
//! exactly once, with the same pairing rules as `tickscope report` and the exports (the
//! timeline crate's collector and replay): an end closes the innermost open scope of its id
//! and abandons those above it; an end matching no open scope is passed over; an events
//! chunk's list of open scopes is the truth where it disagrees (scopes missing from it were
//! cut by missing chunks); a loss that breaks pairs cuts every open scope; begins deeper
//! than the format's limit are not kept, nor their ends.
//!
//! Timestamps are counter ticks, made non-decreasing per thread (a counter that stepped back
//! would otherwise unnest scopes). The index and the window queries share this, so a window
//! decoded again shows exactly the scopes the index counted.

use tickscope_timeline::tscap::{Event, EventKind, Events, EventsInfo, MAX_OPEN};

/// How a scope was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// By its own end.
    Normal,
    /// By the end of a scope it is nested in (a leaked or out-of-order guard).
    Abandoned,
    /// Its end is missing: chunks missing from the capture, or a loss after which its end
    /// cannot be told from another call's. Closed at the thread's last timestamp before.
    Cut,
    /// Still open (at the capture's end, or now for a live capture).
    Open,
}

impl Close {
    /// The word the viewer shows for a scope closed other than by its own end.
    pub fn label(self) -> Option<&'static str> {
        match self {
            Close::Normal => None,
            Close::Abandoned => Some("abandoned"),
            Close::Cut => Some("cut"),
            Close::Open => Some("unfinished"),
        }
    }

    /// A small number for the wire.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// What a [`Track`] reports.
pub trait Out {
    /// A scope closed: at `depth` (0 outermost), `[begin, end]` in ticks.
    fn slice(&mut self, depth: usize, id: u64, begin: u64, end: u64, close: Close);
    /// Any event other than a begin or an end, at `ticks` (non-decreasing).
    fn point(&mut self, batch: &Events, e: &Event, ticks: u64);
}

/// One thread's open scopes.
#[derive(Clone, Debug, Default)]
pub struct Track {
    /// (scope id, begin ticks), outermost first.
    pub stack: Vec<(u64, u64)>,
    /// Begins past [`MAX_OPEN`] deep, not on the stack; the next ends are theirs.
    overflow: u64,
    /// The latest timestamp.
    pub last: u64,
    /// Returns true if and only if the thread has had an event.
    pub seen: bool,
}

impl Track {
    /// An events chunk begins: its open scopes are the truth.
    pub fn chunk(&mut self, info: &EventsInfo, out: &mut impl Out) {
        let common = self
            .stack
            .iter()
            .zip(&info.open)
            .take_while(|(s, o)| s.0 == o.id && s.1 == o.ticks)
            .count();
        while self.stack.len() > common {
            let (id, begin) = self.stack.pop().expect("non-empty");
            out.slice(
                self.stack.len(),
                id,
                begin,
                self.last.max(begin),
                Close::Cut,
            );
        }
        self.overflow = 0;
        for o in &info.open[common..] {
            if self.stack.len() >= MAX_OPEN {
                break;
            }
            // A scope begun before the thread's last timestamp (a later chunk after a gap)
            // begins there, to keep the nesting.
            self.stack.push((o.id, o.ticks.max(self.last)));
        }
    }

    /// The events of one batch.
    #[inline]
    pub fn events(&mut self, batch: &Events, out: &mut impl Out) {
        let list = batch.as_slice();
        if list.is_empty() {
            return;
        }
        self.seen = true;
        for e in list {
            let t = e.ticks.max(self.last);
            self.last = t;
            match e.kind {
                EventKind::Begin => {
                    if self.stack.len() >= MAX_OPEN {
                        self.overflow += 1;
                    } else {
                        self.stack.push((e.id, t));
                    }
                }
                EventKind::End => {
                    if self.overflow > 0 {
                        self.overflow -= 1;
                        continue;
                    }
                    match self.stack.last() {
                        Some(&(id, begin)) if id == e.id => {
                            self.stack.pop();
                            out.slice(self.stack.len(), id, begin, t, Close::Normal);
                        }
                        _ => self.end_slow(e.id, t, out),
                    }
                }
                EventKind::Lost if e.lost_breaks_pairs() => {
                    while let Some((id, begin)) = self.stack.pop() {
                        out.slice(self.stack.len(), id, begin, t, Close::Cut);
                    }
                    self.overflow = 0;
                    out.point(batch, e, t);
                }
                _ => out.point(batch, e, t),
            }
        }
    }

    /// An end that does not close the innermost scope.
    #[cold]
    fn end_slow(&mut self, id: u64, t: u64, out: &mut impl Out) {
        let Some(pos) = self.stack.iter().rposition(|s| s.0 == id) else {
            return; // unmatched: nothing to close
        };
        while self.stack.len() > pos + 1 {
            let (id, begin) = self.stack.pop().expect("non-empty");
            out.slice(self.stack.len(), id, begin, t, Close::Abandoned);
        }
        let (id, begin) = self.stack.pop().expect("non-empty");
        out.slice(self.stack.len(), id, begin, t, Close::Normal);
    }
}
