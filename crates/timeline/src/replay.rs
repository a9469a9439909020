//! One replay of every thread's events for the exports: ns timestamps that never go back on a
//! thread, scopes that always nest, every scope closed exactly once.

use std::collections::HashMap;
use std::io::{self, Read};

use super::error::Error;
use super::filter::{Filter, Filtered, LeftOut};
use super::sink::{Close, Instant, Sink};
use super::time::TimeMap;
use crate::tscap::{ChunkKind, EventKind, Events, EventsInfo, IdIndex, Meta, Reader, MAX_OPEN};

struct Open {
    id: u64,
    ticks: u64,
    ns: u64,
}

/// One thread's replay state.
pub(crate) struct Span {
    /// Thread index.
    pub index: u64,
    /// Its first and last timestamps (ns).
    pub first: u64,
    pub last: u64,
    overflow: u64,
}

/// The name of the CPU sampler's thread, which records the samples in a capture.
pub(crate) const SAMPLER_THREAD: &str = "tickscope-sampler";

/// What a replay went through.
pub(crate) struct Replayed {
    /// The threads kept, by index (their first and last timestamps cut to the window).
    pub spans: Vec<Span>,
    /// What the filter left out.
    pub left_out: LeftOut,
}

/// Replays every chunk of `reader` into `sink`, keeping what `filter` keeps.
pub(crate) fn replay<R: Read, S: Sink>(
    reader: &mut Reader<R>,
    map: &TimeMap,
    filter: &Filter,
    sink: &mut S,
) -> Result<Replayed, Error> {
    let (mut spans, mut left_out) = if filter.cuts_events() {
        let mut f = Filtered::new(sink, filter);
        let spans = replay_all(reader, map, filter, &mut f)?;
        (spans, f.left_out)
    } else {
        (replay_all(reader, map, filter, sink)?, LeftOut::default())
    };
    for s in &mut spans {
        s.first = s.first.clamp(filter.from_ns, filter.until_ns);
        s.last = s.last.clamp(s.first, filter.until_ns);
    }
    left_out.threads_kept = spans.len() as u64;
    Ok(Replayed { spans, left_out })
}

/// [`replay`] into the sink given, whatever it is; threads the filter does not keep are
/// skipped (their chunks not decoded).
fn replay_all<R: Read, S: Sink>(
    reader: &mut Reader<R>,
    map: &TimeMap,
    filter: &Filter,
    sink: &mut S,
) -> Result<Vec<Span>, Error> {
    let mut r = Replay::default();
    let mut events = Events::new();
    while let Some(kind) = reader.next_chunk()? {
        if kind != ChunkKind::Events {
            continue;
        }
        let Some(t) = r.thread(reader, map, filter, sink)? else {
            continue;
        };
        r.resume(t, reader.meta(), reader.events_info(), map, sink)?;
        while reader.decode(&mut events) {
            r.batch(t, reader.meta(), &events, map, filter, sink)?;
        }
        r.park(t);
    }
    Ok(r.finish(reader.meta(), sink)?)
}

/// What a replay carries from one events chunk to the next.
#[derive(Default)]
struct Replay {
    /// Thread indexes the filter leaves out.
    skipped: IdIndex,
    /// Whether the filter keeps the samples of a thread, by OS thread id.
    sampled: HashMap<u64, bool>,
    /// Thread index to its place in `threads`.
    index: IdIndex,
    threads: Vec<Span>,
    /// The open scopes of the thread being replayed; those of the others that have any are
    /// parked by thread position (a capture of many threads holds no stack for each).
    stack: Vec<Open>,
    parked: HashMap<usize, Vec<Open>>,
}

impl Replay {
    /// The place of the current events chunk's thread, added on its first chunk; `None` when
    /// the chunk is not replayed (a thread the filter leaves out, or a chunk past the window).
    fn thread<R: Read, S: Sink>(
        &mut self,
        reader: &Reader<R>,
        map: &TimeMap,
        filter: &Filter,
        sink: &mut S,
    ) -> io::Result<Option<usize>> {
        let info = reader.events_info();
        if self.skipped.get(info.thread).is_some() {
            return Ok(None);
        }
        // The sampler's thread records the samples of the others: never skipped.
        if self.index.get(info.thread).is_none()
            && !filter.keeps_thread(reader.meta(), info.thread)
            && reader.meta().thread_name(info.thread) != SAMPLER_THREAD
        {
            self.skipped.get_or_insert(info.thread);
            return Ok(None);
        }
        if filter.until_ns != u64::MAX
            && self.index.get(info.thread).is_some()
            && map.ns(info.base_ticks) > filter.until_ns
        {
            // Every event of this chunk is past the window: not decoded. (The scopes still
            // open there end at the window's end.)
            return Ok(None);
        }
        let (t, new) = self.index.get_or_insert(info.thread);
        if new {
            self.threads.push(Span {
                index: info.thread,
                first: u64::MAX,
                last: 0,
                overflow: 0,
            });
            sink.thread(reader.meta(), info.thread)?;
        }
        Ok(Some(t as usize))
    }

    /// Takes up thread `t`'s open scopes again and reconciles them with the chunk's list
    /// (see `collect::Collector::chunk`): those the list no longer has are cut, those it
    /// adds begin.
    fn resume<S: Sink>(
        &mut self,
        t: usize,
        meta: &Meta,
        info: &EventsInfo,
        map: &TimeMap,
        sink: &mut S,
    ) -> io::Result<()> {
        let stack = &mut self.stack;
        stack.clear();
        if let Some(s) = self.parked.remove(&t) {
            *stack = s;
        }
        let th = &mut self.threads[t];
        let common = stack
            .iter()
            .zip(&info.open)
            .take_while(|(s, o)| s.id == o.id && s.ticks == o.ticks)
            .count();
        while stack.len() > common {
            let s = stack.pop().expect("non-empty");
            sink.end(meta, th.index, s.id, s.ns, th.last, Close::Cut)?;
        }
        th.overflow = 0;
        for o in &info.open[common..] {
            if stack.len() >= MAX_OPEN {
                break;
            }
            let ns = map.ns(o.ticks).max(th.last);
            th.last = ns;
            th.first = th.first.min(ns);
            stack.push(Open {
                id: o.id,
                ticks: o.ticks,
                ns,
            });
            sink.begin(meta, th.index, o.id, ns)?;
        }
        Ok(())
    }

    /// Replays one batch of thread `t`'s events into `sink`.
    fn batch<S: Sink>(
        &mut self,
        t: usize,
        meta: &Meta,
        events: &Events,
        map: &TimeMap,
        filter: &Filter,
        sink: &mut S,
    ) -> io::Result<()> {
        let stack = &mut self.stack;
        let th = &mut self.threads[t];
        for e in events.as_slice() {
            let ns = map.ns(e.ticks).max(th.last);
            th.last = ns;
            th.first = th.first.min(ns);
            match e.kind {
                EventKind::Begin => {
                    if stack.len() >= MAX_OPEN {
                        th.overflow += 1;
                        continue;
                    }
                    stack.push(Open {
                        id: e.id,
                        ticks: e.ticks,
                        ns,
                    });
                    sink.begin(meta, th.index, e.id, ns)?;
                }
                EventKind::End => {
                    if th.overflow > 0 {
                        th.overflow -= 1;
                        continue;
                    }
                    let Some(pos) = stack.iter().rposition(|s| s.id == e.id) else {
                        continue; // unmatched: nothing to close
                    };
                    while stack.len() > pos + 1 {
                        let s = stack.pop().expect("non-empty");
                        sink.end(meta, th.index, s.id, s.ns, ns, Close::Abandoned)?;
                    }
                    let s = stack.pop().expect("non-empty");
                    sink.end(meta, th.index, s.id, s.ns, ns, Close::Normal)?;
                }
                EventKind::Frame => {
                    sink.instant(meta, th.index, ns, Instant::Frame(e.id))?;
                }
                EventKind::Counter => {
                    let v = e.counter_value().unwrap_or(0.0);
                    sink.counter(meta, th.index, e.id, ns, v)?;
                }
                EventKind::Message => {
                    let text = events.message(e).unwrap_or_default();
                    sink.instant(meta, th.index, ns, Instant::Message(text))?;
                }
                EventKind::Sample => {
                    let (tid, stack) = e.sample().unwrap_or_default();
                    let keep = *self
                        .sampled
                        .entry(tid)
                        .or_insert_with(|| filter.keeps_tid(meta, tid));
                    if keep {
                        sink.sample(meta, th.index, ns, tid, stack)?;
                    }
                }
                EventKind::Lost => {
                    let n = e.lost_count().unwrap_or(0);
                    if e.lost_breaks_pairs() {
                        // An end after this may be another call's: the scopes open
                        // across it end here (see `collect`).
                        while let Some(s) = stack.pop() {
                            sink.end(meta, th.index, s.id, s.ns, ns, Close::Cut)?;
                        }
                        th.overflow = 0;
                    }
                    sink.instant(meta, th.index, ns, Instant::Lost(n))?;
                }
                EventKind::Async => {
                    if let Some((aid, what)) = e.async_event() {
                        let a = Instant::Async(e.id, aid, what);
                        sink.instant(meta, th.index, ns, a)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Sets thread `t`'s open scopes aside until its next chunk.
    fn park(&mut self, t: usize) {
        if !self.stack.is_empty() {
            self.parked.insert(t, std::mem::take(&mut self.stack));
        }
    }

    /// Ends the scopes still open at their thread's last timestamp (unfinished) and the
    /// replay at the last thread's; returns the threads, by index.
    fn finish<S: Sink>(mut self, meta: &Meta, sink: &mut S) -> io::Result<Vec<Span>> {
        let threads = &mut self.threads;
        let mut order: Vec<usize> = (0..threads.len()).collect();
        order.sort_unstable_by_key(|&t| threads[t].index);
        for &t in &order {
            let th = &mut threads[t];
            let mut stack = self.parked.remove(&t).unwrap_or_default();
            while let Some(s) = stack.pop() {
                sink.end(meta, th.index, s.id, s.ns, th.last, Close::Unfinished)?;
            }
            if th.first == u64::MAX {
                th.first = th.last;
            }
        }
        let last = threads.iter().map(|t| t.last).max().unwrap_or(0);
        sink.finish(meta, last)?;
        // Indexes are unique: an unstable sort, which needs no buffer.
        threads.sort_unstable_by_key(|t| t.index);
        Ok(self.threads)
    }
}
