//! One replay of every thread's events for the exports: ns timestamps that never go back on a
//! thread, scopes that always nest, every scope closed exactly once.

use std::collections::HashMap;
use std::io::Read;

use super::error::Error;
use super::filter::{Filter, Filtered, LeftOut};
use super::sink::{Close, Instant, Sink};
use super::time::TimeMap;
use crate::tscap::{ChunkKind, EventKind, Events, IdIndex, Reader, MAX_OPEN};

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
    // Thread indexes the filter leaves out.
    let mut skipped = IdIndex::default();
    // Whether the filter keeps the samples of a thread, by OS thread id.
    let mut sampled: HashMap<u64, bool> = HashMap::new();
    let mut index = IdIndex::default();
    let mut threads: Vec<Span> = Vec::new();
    // The open scopes of the thread being replayed; those of the others that have any are
    // parked by thread position (a capture of many threads holds no stack for each).
    let mut stack: Vec<Open> = Vec::new();
    let mut parked: HashMap<usize, Vec<Open>> = HashMap::new();
    let mut events = Events::new();
    while let Some(kind) = reader.next_chunk()? {
        if kind != ChunkKind::Events {
            continue;
        }
        let info = reader.events_info();
        if skipped.get(info.thread).is_some() {
            continue;
        }
        // The sampler's thread records the samples of the others: never skipped.
        if index.get(info.thread).is_none()
            && !filter.keeps_thread(reader.meta(), info.thread)
            && reader.meta().thread_name(info.thread) != SAMPLER_THREAD
        {
            skipped.get_or_insert(info.thread);
            continue;
        }
        if filter.until_ns != u64::MAX
            && index.get(info.thread).is_some()
            && map.ns(info.base_ticks) > filter.until_ns
        {
            // Every event of this chunk is past the window: not decoded. (The scopes still
            // open there end at the window's end.)
            continue;
        }
        let (t, new) = index.get_or_insert(info.thread);
        let t = t as usize;
        if new {
            threads.push(Span {
                index: info.thread,
                first: u64::MAX,
                last: 0,
                overflow: 0,
            });
            sink.thread(reader.meta(), info.thread)?;
        }
        stack.clear();
        if let Some(s) = parked.remove(&t) {
            stack = s;
        }
        let th = &mut threads[t];
        let meta = reader.meta();
        // Reconcile the open scopes with the chunk's list (see `collect::Collector::chunk`).
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
        while reader.decode(&mut events) {
            let meta = reader.meta();
            let th = &mut threads[t];
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
                        let keep = *sampled
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
        }
        if !stack.is_empty() {
            parked.insert(t, std::mem::take(&mut stack));
        }
    }
    let meta = reader.meta();
    let mut order: Vec<usize> = (0..threads.len()).collect();
    order.sort_unstable_by_key(|&t| threads[t].index);
    for &t in &order {
        let th = &mut threads[t];
        let mut stack = parked.remove(&t).unwrap_or_default();
        while let Some(s) = stack.pop() {
            sink.end(meta, th.index, s.id, s.ns, th.last, Close::Unfinished)?;
        }
        if th.first == u64::MAX {
            th.first = th.last;
        }
    }
    let last = threads.iter().map(|t| t.last).max().unwrap_or(0);
    sink.finish(reader.meta(), last)?;
    // Indexes are unique: an unstable sort, which needs no buffer.
    threads.sort_unstable_by_key(|t| t.index);
    Ok(threads)
}
