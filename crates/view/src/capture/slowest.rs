//! A scope's slowest call: where the summary's `max` was, for the page to go to it.

use std::io;

use tickscope_timeline::tscap::{ChunkKind, Event, Events};

use super::Capture;
use crate::index::track::{Close, Out, Track};

/// A call found: its thread (index), depth, begin and end in ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The thread's index in the capture.
    pub thread: u64,
    /// Its depth on the thread (0: outermost).
    pub depth: usize,
    /// Its begin, ns from the capture's start.
    pub begin_ns: u64,
    /// Its end, likewise.
    pub end_ns: u64,
}

/// The longest call of one scope id that ended normally within `[lo, hi]` ticks, as a
/// [`Track`] reports them.
struct Longest {
    id: u64,
    lo: u64,
    hi: u64,
    /// (duration, depth, begin, end) in ticks.
    best: Option<(u64, usize, u64, u64)>,
}

impl Out for Longest {
    fn slice(&mut self, depth: usize, id: u64, begin: u64, end: u64, close: Close) {
        if id == self.id && close == Close::Normal && begin >= self.lo && end <= self.hi {
            let d = end - begin;
            if self.best.is_none_or(|b| d > b.0) {
                self.best = Some((d, depth, begin, end));
            }
        }
    }

    fn point(&mut self, _: &Events, _: &Event, _: u64) {}
}

impl Capture {
    /// The slowest call of scope `id` that began and ended in `range` (ns; the whole capture:
    /// `None`), as `report` counts calls (ended normally; the summary's `max`): `None` while
    /// indexing, `Ok(None)` when it has none. A call at least a bin long is in the index;
    /// only a scope whose every call is shorter is looked for by decoding the capture again,
    /// chunk by chunk.
    pub fn slowest(&self, id: u64, range: Option<(u64, u64)>) -> Option<io::Result<Option<Call>>> {
        self.with_index(|idx| {
            let (lo, hi) = match range {
                Some((f, u)) => (idx.map.ticks(f), idx.map.ticks(u)),
                None => (0, u64::MAX),
            };
            let call = |thread: u64, depth: usize, b: u64, e: u64| Call {
                thread,
                depth,
                begin_ns: idx.map.ns(b),
                end_ns: idx.map.ns(e),
            };
            // The index's long scopes: the slowest is among them if any call is a bin long.
            let mut best: Option<(u64, Call)> = None;
            for t in &idx.threads {
                for (depth, row) in t.rows.iter().enumerate() {
                    for s in &row.long {
                        if s.id == id && s.close == Close::Normal && s.begin >= lo && s.end <= hi {
                            let d = s.end - s.begin;
                            if best.is_none_or(|b| d > b.0) {
                                best = Some((d, call(t.index, depth, s.begin, s.end)));
                            }
                        }
                    }
                }
            }
            if let Some((_, c)) = best {
                return Ok(Some(c));
            }
            // Every call shorter than a bin: each thread's chunks decoded again, a few at a
            // time (never the whole thread's in memory).
            for t in &idx.threads {
                let first = t.chunks.partition_point(|c| c.last < lo);
                let mut out = Longest {
                    id,
                    lo,
                    hi,
                    best: None,
                };
                let mut track = Track::default();
                let mut events = Events::new();
                for batch in t.chunks[first..]
                    .iter()
                    .take_while(|c| c.first <= hi)
                    .map(|c| c.span)
                    .collect::<Vec<_>>()
                    .chunks(16)
                {
                    let mut reader = self.reader(idx, batch)?;
                    while let Some(kind) = reader.next_chunk().map_err(io::Error::other)? {
                        if kind == ChunkKind::Events {
                            track.chunk(reader.events_info(), &mut out);
                            while reader.decode(&mut events) {
                                track.events(&events, &mut out);
                            }
                        }
                    }
                }
                if let Some((d, depth, b, e)) = out.best {
                    if best.is_none_or(|x| d > x.0) {
                        best = Some((d, call(t.index, depth, b, e)));
                    }
                }
            }
            Ok(best.map(|b| b.1))
        })
    }
}
