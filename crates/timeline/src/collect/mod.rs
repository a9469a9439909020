//! The exit-summary table computed from a timeline: per scope calls, inclusive and self time,
//! mean/min/p50/p99/max and clock errors, with the in-process summary's semantics; frame,
//! counter and message statistics; and every loss, counted.
//!
//! [`Collector`] is fed one events batch at a time (it is also what `capture listen` keeps
//! live); [`summarize`] drives it over a whole [`Reader`]. The hot loop does no allocation and
//! no hashing once a scope is warm: scope ids and thread indexes map to dense rows through
//! flat arrays, each thread's open scopes are a stack, and a scope's open count (for
//! re-entry) lives in its row.
//!
//! Memory follows the input: a row exists once its scope is called, and its duration
//! histogram grows with its calls (the full ~11 KB one from its 512th); a thread's
//! per-scope rows (`--per-thread`) are found through a table that stays flat only while it
//! is dense. Scopes only declared cost the reader's metadata record alone.
//!
//! Semantics, as `tickscope`'s own summary: every end counts a call; a scope re-entered while
//! open on the same thread adds inclusive time only at its outermost exit (its inner calls'
//! time is inside the outer one's), and only outermost calls enter mean/min/percentiles/max;
//! self time excludes the time of child scopes that ended inside it; a negative duration (the
//! counter went backwards) is a clock error and counts as zero. An end whose scope is not the
//! innermost one closes that scope and abandons the ones above it (not counted, like a leaked
//! guard); an end matching no open scope is unmatched. Scopes still open when the capture ends
//! are not counted, and are reported.

mod finish;
mod lives;
mod rows;

use std::io::Read;

use super::hist::Dist;
pub use super::summary::{
    CounterRow, FrameRow, Losses, Message, Range, ScopeRow, Summary, ThreadRow, WallRow,
};
use crate::tscap::{
    ChunkKind, End, Error, EventKind, Events, EventsInfo, IdIndex, Meta, Process, Reader,
    ScopeKind, MAX_OPEN,
};
use lives::Asyncs;
use rows::{close, Frame, LightRow, Row, ThreadState};

/// What to compute besides the totals.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Also keep a row per scope and thread.
    pub per_thread: bool,
    /// Only a time range, `(from, until)` in counter ticks: the calls that begin and end
    /// in it, the marks, values and messages in it. Calls that cross its edges are counted
    /// apart ([`Range::crossing`](super::summary::Range::crossing)), not in the rows.
    pub range: Option<(u64, u64)>,
}

/// Messages kept verbatim; the rest are counted.
const FIRST_MESSAGES: usize = 5;

#[derive(Clone)]
struct MarkerStat {
    id: u64,
    marks: u64,
    frames: u64,
    sum: u64,
    min: u64,
    max: u64,
    hist: Dist,
    values: u64,
    vmin: f64,
    vmax: f64,
    last: f64,
    last_ticks: u64,
}

/// Accumulates the summary from events, batch by batch.
pub struct Collector {
    per_thread: bool,
    range: Option<(u64, u64)>,
    /// Calls crossing the range's start (begun before it, ended in it).
    crossing: u64,
    index: IdIndex,
    rows: Vec<Row>,
    tindex: IdIndex,
    threads: Vec<ThreadState>,
    cur: usize,
    mindex: IdIndex,
    markers: Vec<MarkerStat>,
    messages: u64,
    /// CPU samples the sampler recorded into the capture.
    samples: u64,
    first_messages: Vec<(u64, u64, u64, String)>,
    events: u64,
    loss_markers: u64,
    event_chunks: u64,
    abandoned: u64,
    unmatched: u64,
    cut: u64,
    /// Scopes open across a loss that breaks pairs (see [`Event::lost_breaks_pairs`]).
    cut_at_losses: u64,
    too_deep: u64,
    /// Futures' and spans' lives, their halves paired by async id.
    asyncs: Asyncs,
}

impl Collector {
    /// An empty collector.
    pub fn new(opts: Options) -> Collector {
        Collector {
            per_thread: opts.per_thread,
            range: opts.range,
            crossing: 0,
            index: IdIndex::default(),
            rows: Vec::new(),
            tindex: IdIndex::default(),
            threads: Vec::new(),
            cur: usize::MAX,
            mindex: IdIndex::default(),
            markers: Vec::new(),
            messages: 0,
            samples: 0,
            first_messages: Vec::new(),
            events: 0,
            loss_markers: 0,
            event_chunks: 0,
            abandoned: 0,
            unmatched: 0,
            cut: 0,
            cut_at_losses: 0,
            too_deep: 0,
            asyncs: Asyncs::default(),
        }
    }

    /// Events seen so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Events the threads reported dropped so far (loss events).
    pub fn lost(&self) -> u64 {
        self.threads.iter().fold(0, |a, t| a.saturating_add(t.lost))
    }

    /// Inclusive ticks per scope id so far (outermost calls), in row order (stable: a row
    /// keeps its position as more are added).
    pub fn scope_ticks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.rows.iter().map(|r| (r.id, r.incl))
    }

    /// The row of scope `id` (its position in [`scope_ticks`](Self::scope_ticks)), if it
    /// has one.
    pub(crate) fn row_of(&self, id: u64) -> Option<usize> {
        self.index.get(id).map(|r| r as usize)
    }

    fn row(&mut self, id: u64) -> u32 {
        let (r, new) = self.index.get_or_insert(id);
        if new {
            self.rows.push(Row {
                id,
                calls: 0,
                outer: 0,
                incl: 0,
                self_ticks: 0,
                min: u64::MAX,
                max: 0,
                clock_errors: 0,
                open: 0,
                hist: Dist::default(),
            });
        }
        r
    }

    /// Makes thread `t` the active one: rows' open counts describe the active thread's stack.
    fn switch(&mut self, t: usize) {
        if t == self.cur {
            return;
        }
        if let Some(old) = self.threads.get_mut(self.cur) {
            for f in &old.stack {
                self.rows[f.row as usize].open -= 1;
            }
            // A thread between scopes holds no stack: a capture of many threads would
            // otherwise keep a few frames' room for each.
            if old.stack.is_empty() {
                old.stack = Vec::new();
            }
        }
        for f in &self.threads[t].stack {
            self.rows[f.row as usize].open += 1;
        }
        self.cur = t;
    }

    /// Starts an events chunk: selects its thread and reconciles the thread's open scopes
    /// with the chunk's list (equal unless chunks are missing: scopes that ended in the gap
    /// are dropped and counted as cut; scopes that began in it are taken from the list).
    pub fn chunk(&mut self, info: &EventsInfo) {
        self.event_chunks += 1;
        let (t, new) = self.tindex.get_or_insert(info.thread);
        if new {
            self.threads.push(ThreadState {
                index: info.thread,
                past: false,
                stack: Vec::new(),
                overflow: 0,
                events: 0,
                lost: 0,
                last: 0,
                seen: false,
                rows: None,
            });
        }
        self.switch(t as usize);
        let th = &self.threads[t as usize];
        if th.past {
            return;
        }
        let common = th
            .stack
            .iter()
            .zip(&info.open)
            .take_while(|(f, o)| f.id == o.id && f.begin == o.ticks)
            .count();
        let th = &mut self.threads[t as usize];
        while th.stack.len() > common {
            let f = th.stack.pop().expect("non-empty");
            self.rows[f.row as usize].open -= 1;
            self.cut += 1;
        }
        th.overflow = 0;
        for o in &info.open[common..] {
            if self.threads[t as usize].stack.len() >= MAX_OPEN {
                break;
            }
            let row = self.row(o.id);
            let trow = self.trow(t as usize, row);
            let r = &mut self.rows[row as usize];
            let nested = r.open > 0;
            r.open += 1;
            let outside = self.range.is_some_and(|(from, _)| o.ticks < from);
            self.threads[t as usize].stack.push(Frame {
                id: o.id,
                begin: o.ticks,
                child: 0,
                row,
                trow,
                nested,
                outside,
            });
        }
    }

    /// Thread `t`'s light row for global row `row`.
    fn trow(&mut self, t: usize, row: u32) -> u32 {
        if !self.per_thread {
            return 0;
        }
        let th = self.threads[t].rows.get_or_insert_with(Default::default);
        if let Some(r) = th.trows.get(row) {
            return r;
        }
        let r = th.light.len() as u32;
        th.trows.insert(row, r);
        th.light.push(LightRow {
            id: self.rows[row as usize].id,
            ..LightRow::default()
        });
        r
    }

    fn marker(&mut self, id: u64) -> usize {
        let (m, new) = self.mindex.get_or_insert(id);
        if new {
            self.markers.push(MarkerStat {
                id,
                marks: 0,
                frames: 0,
                sum: 0,
                min: u64::MAX,
                max: 0,
                hist: Dist::default(),
                values: 0,
                vmin: f64::INFINITY,
                vmax: f64::NEG_INFINITY,
                last: 0.0,
                last_ticks: 0,
            });
        }
        m as usize
    }

    /// Adds one batch of the current events chunk (after [`chunk`](Self::chunk)).
    pub fn add(&mut self, batch: &Events) {
        let t = self.cur;
        if t >= self.threads.len() {
            return;
        }
        if let Some((from, until)) = self.range {
            return self.add_range(t, batch, from, until);
        }
        let list = batch.as_slice();
        self.events += list.len() as u64;
        for e in list {
            self.event(t, batch, e, false);
        }
        if let Some(last) = list.last() {
            let th = &mut self.threads[t];
            th.last = last.ticks;
            th.seen = true;
            th.events += list.len() as u64;
        }
    }

    /// [`add`](Self::add) with [`Options::range`]: events before the range keep the stack
    /// (their scopes are marked outside), events after it are passed over.
    fn add_range(&mut self, t: usize, batch: &Events, from: u64, until: u64) {
        if self.threads[t].past {
            return;
        }
        let mut kept = 0;
        for e in batch.as_slice() {
            if e.ticks > until {
                self.threads[t].past = true;
                break;
            }
            let outside = e.ticks < from;
            if outside && !matches!(e.kind, EventKind::Begin | EventKind::End) {
                continue;
            }
            if !outside {
                kept += 1;
                if e.kind == EventKind::End
                    && self.threads[t]
                        .stack
                        .last()
                        .is_some_and(|f| f.id == e.id && f.outside)
                {
                    self.crossing += 1;
                }
            }
            self.event(t, batch, e, outside);
        }
        self.events += kept;
        // The thread's last reading, kept or not: the capture's length bounds the range.
        if let Some(last) = batch.as_slice().last() {
            let th = &mut self.threads[t];
            th.last = last.ticks;
            th.seen = true;
            th.events += kept;
        }
    }

    /// One event of thread `t`; `outside`: a begin or end before the range.
    #[inline(always)]
    fn event(&mut self, t: usize, batch: &Events, e: &crate::tscap::Event, outside: bool) {
        match e.kind {
            EventKind::Begin => {
                let th = &mut self.threads[t];
                if th.stack.len() >= MAX_OPEN {
                    th.overflow += 1;
                    self.too_deep += 1;
                    return;
                }
                let row = match self.index.get(e.id) {
                    Some(r) => r,
                    None => self.row(e.id),
                };
                let trow = if self.per_thread {
                    self.trow(t, row)
                } else {
                    0
                };
                let r = &mut self.rows[row as usize];
                let nested = r.open > 0;
                r.open += 1;
                self.threads[t].stack.push(Frame {
                    id: e.id,
                    begin: e.ticks,
                    child: 0,
                    row,
                    trow,
                    nested,
                    outside,
                });
            }
            EventKind::End => {
                let th = &mut self.threads[t];
                if th.overflow > 0 {
                    th.overflow -= 1;
                    return;
                }
                match th.stack.last() {
                    Some(f) if f.id == e.id => {
                        let f = th.stack.pop().expect("non-empty");
                        close(&mut self.rows, th, f, e.ticks, self.per_thread);
                    }
                    _ => self.end_slow(t, e.id, e.ticks),
                }
            }
            _ => self.other(t, batch, e),
        }
    }

    /// An end that does not close the innermost scope.
    #[cold]
    fn end_slow(&mut self, t: usize, id: u64, ticks: u64) {
        let open = self
            .index
            .get(id)
            .is_some_and(|r| self.rows[r as usize].open > 0);
        if !open {
            self.unmatched += 1;
            return;
        }
        let th = &mut self.threads[t];
        while let Some(f) = th.stack.pop() {
            if f.id == id {
                close(&mut self.rows, th, f, ticks, self.per_thread);
                return;
            }
            self.rows[f.row as usize].open -= 1;
            self.abandoned += 1;
        }
    }

    fn other(&mut self, t: usize, batch: &Events, e: &crate::tscap::Event) {
        match e.kind {
            EventKind::Frame => {
                let m = self.marker(e.id);
                let th = self.threads[t].rows.get_or_insert_with(Default::default);
                let prev = match th.frame_last.iter_mut().find(|(k, _)| *k == m as u32) {
                    Some((_, last)) => Some(std::mem::replace(last, e.ticks)),
                    None => {
                        th.frame_last.push((m as u32, e.ticks));
                        None
                    }
                };
                let s = &mut self.markers[m];
                s.marks += 1;
                if let Some(prev) = prev {
                    let dt = e.ticks.wrapping_sub(prev);
                    let dt = if (dt as i64) < 0 { 0 } else { dt };
                    s.frames += 1;
                    s.sum = s.sum.saturating_add(dt);
                    s.min = s.min.min(dt);
                    s.max = s.max.max(dt);
                    s.hist.record(dt);
                }
            }
            EventKind::Counter => {
                let v = e.counter_value().unwrap_or(0.0);
                let m = self.marker(e.id);
                let s = &mut self.markers[m];
                s.values += 1;
                s.vmin = s.vmin.min(v);
                s.vmax = s.vmax.max(v);
                if s.values == 1 || e.ticks >= s.last_ticks {
                    s.last = v;
                    s.last_ticks = e.ticks;
                }
            }
            EventKind::Message => {
                self.messages += 1;
                let key = (e.ticks, self.threads[t].index, self.messages);
                let full = self.first_messages.len() >= FIRST_MESSAGES;
                if !full
                    || self
                        .first_messages
                        .last()
                        .is_some_and(|m| key < (m.0, m.1, m.2))
                {
                    let text = batch.message(e).unwrap_or_default().to_owned();
                    let at = self
                        .first_messages
                        .partition_point(|m| (m.0, m.1, m.2) < key);
                    self.first_messages.insert(at, (key.0, key.1, key.2, text));
                    self.first_messages.truncate(FIRST_MESSAGES);
                }
            }
            EventKind::Lost => {
                let n = e.lost_count().unwrap_or(0);
                self.loss_markers += 1;
                let th = &mut self.threads[t];
                th.lost = th.lost.saturating_add(n);
                if e.lost_breaks_pairs() {
                    // An end after this point may belong to a call whose begin was lost:
                    // the scopes open across it are discarded, never paired.
                    while let Some(f) = th.stack.pop() {
                        self.rows[f.row as usize].open -= 1;
                        self.cut_at_losses += 1;
                    }
                    th.overflow = 0;
                }
            }
            EventKind::Sample => self.samples += 1,
            EventKind::Async => self.asyncs.half(e),
            EventKind::Begin | EventKind::End => {}
        }
    }
}

/// Largest total first; ties by name, then id. (Ids are unique among the rows sorted, so
/// the order is total and an unstable sort, which needs no buffer, gives it.)
fn sort_rows(rows: &mut [ScopeRow]) {
    rows.sort_unstable_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then_with(|| a.name.cmp(&b.name))
            .then(a.id.cmp(&b.id))
    });
}

/// Reads every chunk of `reader` and summarises it.
pub fn summarize<R: Read>(reader: &mut Reader<R>, opts: Options) -> Result<Summary, Error> {
    let mut c = Collector::new(opts);
    let mut events = Events::new();
    while let Some(kind) = reader.next_chunk()? {
        if kind == ChunkKind::Events {
            c.chunk(reader.events_info());
            while reader.decode(&mut events) {
                c.add(&events);
            }
        }
    }
    let mut r = c.finish(reader.name(), reader.process(), reader.meta(), reader.end());
    r.warnings = reader.warnings();
    Ok(r)
}
