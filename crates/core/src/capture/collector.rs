//! The collector thread: drains every ring, encodes each thread's events into chunks (see
//! [`format`](super::format)), announces call sites, markers and threads before first use, and
//! hands sealed chunks to the sink.

use std::sync::atomic::Ordering::*;
use std::time::{Duration, Instant};

use super::format::{self, chunk, event, meta, put_str, put_svarint, put_varint};
use super::ring::{self, Ring};
use super::sink::{Chunk, Sink};

/// An events chunk is sealed when its streams reach this many bytes (before compression).
/// LZ4's window is 64 KiB; larger chunks add little ratio and delay a live viewer.
const CHUNK_TARGET: usize = 128 << 10;
/// Records read from a ring between two looks at the chunk's size: at most a few bytes
/// each, so a chunk ends within some 64 KiB past [`CHUNK_TARGET`].
const DRAIN_STEP: u64 = 2 * ring::BLOCK;
/// Blocks read that a long drain gives back to the pool at once.
const GIVE_BACK_EVERY: usize = 64;

/// One thread's events being encoded.
struct ThreadEnc {
    ring: &'static Ring,
    index: u64,
    tags: Vec<u8>,
    deltas: Vec<u8>,
    payload: Vec<u8>,
    n: u64,
    base: u64,
    prev: u64,
    pred: Box<[i64; 256]>,
    /// The scopes open now: (id, begin ticks).
    open: Vec<(u32, u64)>,
    /// The scopes open when the current chunk began.
    open_at_start: Vec<(u32, u64)>,
    /// A counter or message header waiting for its payload records.
    partial: Partial,
    /// The ring's drop count when this capture began (rings registered since start at 0).
    dropped_base: u64,
    max_scope: u32,
    max_marker: u32,
    /// Program events encoded so far (not counting `lost` markers).
    events: u64,
    stacks: Stacks,
}

/// The sampler's stacks seen in this capture: their ids in the file (small, from 1), and
/// those not yet described in a metadata entry. Shared by the threads' encoders and the
/// collector (samples are rare: a lock per sample costs nothing that matters).
#[derive(Default)]
pub(crate) struct StackIds {
    ids: std::collections::HashMap<u64, u64>,
    pending: Vec<(u64, u64)>,
}

impl StackIds {
    fn id(&mut self, stack: u64) -> u64 {
        let next = self.ids.len() as u64 + 1;
        *self.ids.entry(stack).or_insert_with(|| {
            self.pending.push((next, stack));
            next
        })
    }
}

type Stacks = std::sync::Arc<std::sync::Mutex<StackIds>>;

enum Partial {
    None,
    Sample {
        ticks: u64,
    },
    Async {
        ticks: u64,
        id: u32,
    },
    Counter {
        ticks: u64,
        id: u32,
    },
    Message {
        ticks: u64,
        len: usize,
        bytes: Vec<u8>,
    },
}

impl ThreadEnc {
    fn new(ring: &'static Ring, index: u64, stacks: Stacks) -> ThreadEnc {
        ThreadEnc {
            ring,
            index,
            tags: Vec::new(),
            deltas: Vec::new(),
            payload: Vec::new(),
            n: 0,
            base: 0,
            prev: 0,
            pred: Box::new([0; 256]),
            open: Vec::new(),
            open_at_start: Vec::new(),
            partial: Partial::None,
            dropped_base: ring.drop_base.load(Relaxed),
            max_scope: 0,
            max_marker: 0,
            events: 0,
            stacks,
        }
    }

    fn raw_len(&self) -> usize {
        self.tags.len() + self.deltas.len() + self.payload.len()
    }

    /// Takes one ring record.
    #[inline(always)]
    fn record(&mut self, ticks: u64, word: u64) {
        if !matches!(self.partial, Partial::None) {
            return self.record_payload(ticks, word);
        }
        let kind = word as u8;
        if kind > event::END {
            return self.record_event(ticks, word);
        }
        // Begins and ends (nearly every record), inlined; the other kinds in `record_event`.
        let id = (word >> 8) as u32;
        self.max_scope = self.max_scope.max(id);
        self.event(ticks, kind, id);
        if kind == event::BEGIN {
            if self.open.len() < format::MAX_OPEN {
                self.open.push((id, ticks));
            }
        } else if self.open.last().is_some_and(|o| o.0 == id) {
            self.open.pop();
        } else if let Some(i) = self.open.iter().rposition(|&(o, _)| o == id) {
            self.open.truncate(i);
        }
    }

    /// A payload record (a counter's value, a message's bytes) of the pending event.
    #[cold]
    fn record_payload(&mut self, ticks: u64, word: u64) {
        match std::mem::replace(&mut self.partial, Partial::None) {
            Partial::None => {}
            Partial::Sample { ticks: t } => {
                let id = self
                    .stacks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .id(word);
                self.event(t, event::SAMPLE, 0);
                put_varint(&mut self.payload, ticks);
                put_varint(&mut self.payload, id);
            }
            Partial::Async { ticks: t, id } => {
                self.event(t, event::ASYNC, id);
                put_varint(&mut self.payload, ticks);
                self.payload.push(word as u8);
            }
            Partial::Counter { ticks: t, id } => {
                self.event(t, event::COUNTER, id);
                self.payload.extend_from_slice(&ticks.to_le_bytes());
            }
            Partial::Message {
                ticks: t,
                len,
                mut bytes,
            } => {
                bytes.extend_from_slice(&ticks.to_le_bytes());
                bytes.extend_from_slice(&word.to_le_bytes());
                if bytes.len() < len {
                    self.partial = Partial::Message {
                        ticks: t,
                        len,
                        bytes,
                    };
                } else {
                    bytes.truncate(len);
                    self.event(t, event::MESSAGE, 0);
                    put_str(&mut self.payload, &String::from_utf8_lossy(&bytes));
                }
            }
        }
    }

    /// A record of any kind but a begin or an end (those are [`ThreadEnc::record`]'s).
    #[inline(never)]
    fn record_event(&mut self, ticks: u64, word: u64) {
        let kind = (word & 0xff) as u8;
        let x = word >> 8;
        match kind {
            event::FRAME => {
                let id = x as u32;
                self.max_marker = self.max_marker.max(id);
                self.event(ticks, kind, id);
            }
            event::COUNTER => {
                let id = x as u32;
                self.max_marker = self.max_marker.max(id);
                self.partial = Partial::Counter { ticks, id };
            }
            event::MESSAGE => {
                let len = x as usize;
                if len == 0 {
                    self.event(ticks, kind, 0);
                    put_str(&mut self.payload, "");
                } else {
                    self.partial = Partial::Message {
                        ticks,
                        len,
                        bytes: Vec::with_capacity(len.next_multiple_of(16)),
                    };
                }
            }
            event::SAMPLE => {
                self.partial = Partial::Sample { ticks };
            }
            event::ASYNC => {
                let id = x as u32;
                self.max_scope = self.max_scope.max(id);
                self.partial = Partial::Async { ticks, id };
            }
            event::LOST => {
                self.event(ticks, kind, 0);
                let end_lost = x & (ring::LOST_END_BIT) != 0;
                put_varint(&mut self.payload, x & !ring::LOST_END_BIT);
                put_varint(&mut self.payload, u64::from(end_lost));
            }
            _ => {}
        }
    }

    #[inline(always)]
    fn event(&mut self, ticks: u64, kind: u8, id: u32) {
        if self.n == 0 {
            self.base = ticks;
            self.prev = ticks;
            self.pred.fill(0);
            self.open_at_start.clone_from(&self.open);
        }
        let tag = kind as u64 | (id as u64) << 3;
        put_varint(&mut self.tags, tag);
        let delta = ticks.wrapping_sub(self.prev) as i64;
        let ctx = (tag & 255) as usize;
        put_svarint(&mut self.deltas, delta.wrapping_sub(self.pred[ctx]));
        self.pred[ctx] = delta;
        self.prev = ticks;
        self.n += 1;
        self.events += u64::from(kind != event::LOST);
    }

    /// The chunk's payload; resets the streams for the next chunk.
    fn take_payload(&mut self, out: &mut Vec<u8>) -> u64 {
        out.clear();
        put_varint(out, self.index);
        put_varint(out, self.n);
        put_varint(out, self.base);
        put_varint(out, self.open_at_start.len() as u64);
        for &(id, t) in &self.open_at_start {
            put_varint(out, id as u64);
            put_varint(out, t);
        }
        put_varint(out, self.tags.len() as u64);
        put_varint(out, self.deltas.len() as u64);
        put_varint(out, self.payload.len() as u64);
        out.extend_from_slice(&self.tags);
        out.extend_from_slice(&self.deltas);
        out.extend_from_slice(&self.payload);
        let n = self.n;
        self.tags.clear();
        self.deltas.clear();
        self.payload.clear();
        self.n = 0;
        n
    }
}

/// The collector's state.
pub(crate) struct Collector {
    sink: Sink,
    encs: Vec<ThreadEnc>,
    meta: Vec<u8>,
    scopes_announced: u32,
    markers_announced: u32,
    next_thread: u64,
    payload: Vec<u8>,
    sealed: Vec<u8>,
    /// Per exited thread: (index, events dropped).
    exited_drops: Vec<(u64, u64)>,
    /// Blocks drained in this pass, for the pool.
    freed: Vec<ring::Free>,
    /// Scopes dropped whole, in total.
    dropped_scopes: u64,
    /// The threads' blocks hold more than an eighth of the memory budget: the collector is
    /// behind, and seals chunks uncompressed (LZ4 is a quarter of its time) until it has
    /// caught up. A busy machine then costs file size for a while, not events.
    behind: bool,
    /// The program's allocation counts by call site when the capture started (where it
    /// counts them), for the allocations entries written at its end.
    allocs: Option<super::allocs::Base>,
    /// The sampler's stacks the samples use.
    stacks: Stacks,
    /// Names for the sampler's frames, made when a stack is first described.
    #[cfg(feature = "sampler")]
    names: Names,
    last_flush: Instant,
    flush_every: Duration,
}

impl Collector {
    /// Empties the rings left from an earlier capture (their records are stale). Before a
    /// capture's collector starts.
    pub(crate) fn forget_earlier_records() {
        for r in ring::live() {
            r.skip();
            r.index.store(0, Relaxed);
            r.drop_base.store(r.dropped(), Relaxed);
            r.dropped_scopes
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
        }
    }

    pub(crate) fn new(sink: Sink, flush_every: Duration) -> Collector {
        let mut c = Collector {
            sink,
            encs: Vec::new(),
            meta: Vec::new(),
            scopes_announced: 0,
            markers_announced: 0,
            next_thread: 1,
            payload: Vec::new(),
            sealed: Vec::new(),
            exited_drops: Vec::new(),
            freed: Vec::new(),
            dropped_scopes: 0,
            behind: false,
            allocs: None,
            stacks: Stacks::default(),
            #[cfg(feature = "sampler")]
            names: Names::default(),
            last_flush: Instant::now(),
            flush_every,
        };
        c.process_chunk();
        c
    }

    fn process_chunk(&mut self) {
        let mut p = Vec::new();
        p.extend_from_slice(&crate::clock::rate().to_le_bytes());
        put_varint(&mut p, crate::clock::now());
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        put_varint(&mut p, unix_ns);
        put_varint(&mut p, std::process::id() as u64);
        let program = std::env::args().next().unwrap_or_default();
        put_str(&mut p, &program);
        put_str(&mut p, crate::clock::source().name());
        self.put(chunk::PROCESS, &p, 0);
    }

    fn put(&mut self, kind: u8, payload: &[u8], events: u64) {
        format::seal_with(kind, payload, &mut self.sealed, !self.behind);
        super::STATS.chunks.fetch_add(1, Relaxed);
        self.sink.put(Chunk {
            bytes: &self.sealed,
            kind,
            events,
        });
    }

    /// One pass over every ring. Returns the records drained and whether any ring was more
    /// than an eighth full (the collector is behind: no pause before the next pass).
    pub(crate) fn pass(&mut self, flush_all: bool) -> (u64, bool) {
        let mut drained = 0;
        let mut behind = false;
        self.behind = ring::backlog() > ring::BUDGET.load(Relaxed) / 8;
        for r in ring::live() {
            let i = match self.encs.iter().position(|e| std::ptr::eq(e.ring, r)) {
                Some(i) => i,
                None => {
                    let index = self.next_thread;
                    self.next_thread += 1;
                    r.index.store(index as u32, Relaxed);
                    self.meta.push(meta::THREAD);
                    put_varint(&mut self.meta, index);
                    put_varint(&mut self.meta, r.tid.load(Relaxed));
                    put_str(
                        &mut self.meta,
                        &r.name.lock().unwrap_or_else(|p| p.into_inner()),
                    );
                    self.encs
                        .push(ThreadEnc::new(r, index, self.stacks.clone()));
                    self.encs.len() - 1
                }
            };
            let retired = r.retired.load(Acquire);
            let before = self.encs[i].events;
            let n = self.drain_ring(i);
            let enc = &self.encs[i];
            drained += enc.events - before;
            behind |= n > 4 * ring::BLOCK;
            let (index, seal) = (enc.index, retired && enc.n > 0);
            self.note_dropped_scopes(r, index);
            if seal {
                self.seal(i);
            }
            if retired {
                let enc = self.encs.swap_remove(i);
                self.exited_drops
                    .push((enc.index, r.dropped().wrapping_sub(enc.dropped_base)));
                ring::recycle(r);
            }
        }
        ring::give_back(&mut self.freed, !self.behind);
        super::STATS.events.fetch_add(drained, Relaxed);
        if flush_all || self.last_flush.elapsed() >= self.flush_every {
            self.flush();
        }
        self.sink.poll();
        super::STATS.evicted.store(self.sink.evicted(), Relaxed);
        (drained, behind)
    }

    /// Drains the ring of `encs[i]` up to its head as it was when the drain began (a thread
    /// that records faster than the collector reads does not keep it from the others),
    /// [`DRAIN_STEP`] records at a time: a chunk is sealed as soon as it reaches
    /// [`CHUNK_TARGET`], however large the backlog (a collector that fell behind by 40 MiB
    /// of records once encoded them all into one chunk, past [`format::MAX_CHUNK`]), and the
    /// blocks read are given back as it goes, for threads that wait for one
    /// ([`ring::Full::Block`]). Returns the records read.
    fn drain_ring(&mut self, i: usize) -> u64 {
        let r = self.encs[i].ring;
        let backlog = r.unread();
        let mut n = 0;
        loop {
            let enc = &mut self.encs[i];
            let k = r.drain(|t, w| enc.record(t, w), &mut self.freed, DRAIN_STEP);
            n += k;
            if enc.raw_len() >= CHUNK_TARGET {
                self.seal(i);
            }
            if self.freed.len() >= GIVE_BACK_EVERY {
                ring::give_back(&mut self.freed, false);
            }
            if k < DRAIN_STEP || n >= backlog {
                return n;
            }
        }
    }

    /// Announces the scopes thread `index` dropped whole since the last look.
    fn note_dropped_scopes(&mut self, r: &Ring, index: u64) {
        let mut d = r.dropped_scopes.lock().unwrap_or_else(|p| p.into_inner());
        for (id, n) in d.drain(..) {
            self.dropped_scopes += n;
            self.meta.push(meta::DROPPED_SCOPES);
            put_varint(&mut self.meta, index);
            put_varint(&mut self.meta, id as u64);
            put_varint(&mut self.meta, n);
        }
        super::STATS
            .dropped_scopes
            .store(self.dropped_scopes, Relaxed);
    }

    /// Announces the scopes open on threads when the capture started (by call site), and
    /// reads the allocation counts by call site it will take its own from at its end.
    pub(crate) fn in_flight_at_start(&mut self, open: &[(u32, u64)]) {
        self.allocs = super::allocs::base();
        for &(id, n) in open {
            self.meta.push(meta::IN_FLIGHT);
            put_varint(&mut self.meta, id as u64);
            put_varint(&mut self.meta, n);
        }
    }

    /// Seals every non-empty encoder (and pending metadata).
    pub(crate) fn flush(&mut self) {
        for i in 0..self.encs.len() {
            if self.encs[i].n > 0 {
                self.seal(i);
            }
        }
        self.announce(u32::MAX, u32::MAX);
        self.last_flush = Instant::now();
    }

    fn seal(&mut self, i: usize) {
        let (max_scope, max_marker) = (self.encs[i].max_scope, self.encs[i].max_marker);
        self.announce(max_scope, max_marker);
        let mut payload = std::mem::take(&mut self.payload);
        let n = self.encs[i].take_payload(&mut payload);
        self.put(chunk::EVENTS, &payload, n);
        self.payload = payload;
    }

    /// Describes, in one metadata chunk, the call sites and markers registered so far that the
    /// stream has not seen (looking only when an id above those seen is about to be used:
    /// `u32::MAX` always looks), and any new threads.
    fn announce(&mut self, max_scope: u32, max_marker: u32) {
        if max_scope > self.scopes_announced {
            let table = crate::scope::callsite::table();
            while self.scopes_announced + 1 < table.len() {
                self.scopes_announced += 1;
                let id = self.scopes_announced;
                if let Some(info) = table.get(id) {
                    self.meta.push(meta::SCOPE);
                    put_varint(&mut self.meta, id as u64);
                    self.meta
                        .push(u8::from(info.kind == crate::scope::callsite::Kind::Group));
                    put_str(&mut self.meta, info.name);
                    put_str(&mut self.meta, info.file);
                    put_varint(&mut self.meta, info.line as u64);
                }
            }
        }
        if max_marker > self.markers_announced {
            let markers = super::markers();
            while (self.markers_announced as usize) < markers.len() {
                let (name, kind) = markers[self.markers_announced as usize];
                self.markers_announced += 1;
                self.meta.push(meta::MARKER);
                put_varint(&mut self.meta, self.markers_announced as u64);
                self.meta.push(kind);
                put_str(&mut self.meta, name);
            }
        }
        #[cfg(feature = "sampler")]
        self.describe_stacks();
        if !self.meta.is_empty() {
            let m = std::mem::take(&mut self.meta);
            self.put(chunk::META, &m, 0);
            self.meta = m;
            self.meta.clear();
        }
    }

    /// A metadata entry for each stack of the sampler that samples began to use: its frames'
    /// function names, leaf first.
    #[cfg(feature = "sampler")]
    fn describe_stacks(&mut self) {
        let pending = std::mem::take(
            &mut self
                .stacks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pending,
        );
        for (id, stack) in pending {
            let frames = super::stack_frames(stack).unwrap_or_default();
            let mut names = Vec::new();
            for (k, &addr) in frames.iter().enumerate() {
                // Return addresses point past their call: look up the call itself.
                let at = if k == 0 { addr } else { addr.saturating_sub(1) };
                names.extend(self.names.of(at).iter().cloned());
            }
            self.meta.push(meta::STACK);
            put_varint(&mut self.meta, id);
            put_varint(&mut self.meta, names.len() as u64);
            for n in &names {
                put_str(&mut self.meta, n);
            }
        }
    }

    /// Drains everything, seals it, writes the end chunk and closes the sink.
    pub(crate) fn finish(&mut self, deadline: Instant) {
        self.pass(true);
        if let Some(base) = self.allocs.take() {
            base.entries(&mut self.meta);
            self.announce(u32::MAX, u32::MAX);
        }
        let end = self.end_chunk();
        self.sink.finish(&end, deadline);
        ring::trim_pool();
    }

    /// The end chunk as it would be now.
    fn end_chunk(&mut self) -> Vec<u8> {
        let mut drops = self.exited_drops.clone();
        for e in &self.encs {
            drops.push((e.index, e.ring.dropped().wrapping_sub(e.dropped_base)));
        }
        drops.sort_unstable();
        let dropped: u64 = drops.iter().map(|d| d.1).sum();
        super::STATS.dropped.store(dropped, Relaxed);
        let mut p = Vec::new();
        put_varint(&mut p, super::STATS.events.load(Relaxed));
        put_varint(&mut p, dropped);
        put_varint(&mut p, super::STATS.undelivered.load(Relaxed));
        put_varint(&mut p, self.sink.evicted());
        put_varint(&mut p, crate::clock::now());
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        put_varint(&mut p, unix_ns);
        let with_drops: Vec<_> = drops.iter().filter(|d| d.1 > 0).collect();
        put_varint(&mut p, with_drops.len() as u64);
        for (i, d) in with_drops {
            put_varint(&mut p, *i);
            put_varint(&mut p, *d);
        }
        let mut out = Vec::new();
        format::seal(chunk::END, &p, &mut out);
        out
    }

    /// Writes what a flight recorder holds to `path` (after draining and sealing everything);
    /// `None` if this capture does not use the flight recorder.
    pub(crate) fn dump(&mut self, path: &std::path::Path) -> Option<std::io::Result<u64>> {
        if !matches!(self.sink, Sink::Flight(_)) {
            return None;
        }
        self.pass(true);
        let end = self.end_chunk();
        match &self.sink {
            Sink::Flight(f) => Some(f.dump(path, &end)),
            _ => None,
        }
    }

    /// Records dropped so far by every ring of this capture.
    pub(crate) fn dropped(&self) -> u64 {
        let live: u64 = self
            .encs
            .iter()
            .map(|e| e.ring.dropped().wrapping_sub(e.dropped_base))
            .sum();
        live + self.exited_drops.iter().map(|d| d.1).sum::<u64>()
    }
}

/// Function names for addresses in this process, through the sampler's symbolizer (made on
/// first use; its mappings read again for an address they do not cover), cached by address.
#[cfg(feature = "sampler")]
#[derive(Default)]
struct Names {
    symbolizer: Option<crate::symbolize::Symbolizer>,
    /// When the mappings were last read: an address outside them reads them again, at most
    /// once a second (addresses in no file, JIT code say, would otherwise read them each).
    read_at: Option<Instant>,
    cache: std::collections::HashMap<u64, Vec<String>>,
}

#[cfg(feature = "sampler")]
impl Names {
    /// The function at `addr` (from the symbol tables: DWARF would cost the collector
    /// seconds of a debug build's time); its address when none is known.
    fn of(&mut self, addr: u64) -> &[String] {
        if !self.cache.contains_key(&addr) {
            let found = self.lookup(addr);
            self.cache.insert(addr, found);
        }
        &self.cache[&addr]
    }

    fn lookup(&mut self, addr: u64) -> Vec<String> {
        let covered = self
            .symbolizer
            .as_ref()
            .is_some_and(|s| s.module_of(addr).is_some());
        let stale = self
            .read_at
            .map_or(true, |t| t.elapsed() >= Duration::from_secs(1));
        if !covered && stale {
            self.read_at = Some(Instant::now());
            if let Some(s) = crate::symbolize::Symbolizer::of_this_process() {
                self.symbolizer = Some(s);
            }
        }
        let name = self
            .symbolizer
            .as_mut()
            .and_then(|s| s.function(addr))
            .filter(|n| !n.is_empty());
        vec![name.unwrap_or_else(|| format!("{addr:#x}"))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backlog of many chunks' worth of records (a collector that could not run for a
    /// while) is encoded into chunks of about the target size, not into one: a collector
    /// once drained 40 MiB of records into one chunk, past `MAX_CHUNK`, and died.
    #[test]
    fn a_backlog_is_sealed_in_chunks_of_the_target_size() {
        let ring: &'static Ring = Box::leak(Box::new(Ring::new()));
        const SCOPES: u64 = 300_000;
        for k in 0..SCOPES {
            ring.push(1_000 * k, event::BEGIN as u64 | 1 << 8);
            ring.push(1_000 * k + 137 + k % 1_000, event::END as u64 | 1 << 8);
        }
        assert_eq!(ring.dropped(), 0, "the memory budget took records");
        let path = std::env::temp_dir().join(format!(
            "tickscope-collector-backlog-{}.tscap",
            std::process::id()
        ));
        let mut c = Collector::new(Sink::file(&path).unwrap(), Duration::from_secs(3600));
        c.encs.push(ThreadEnc::new(ring, 1, c.stacks.clone()));
        let read = c.drain_ring(0);
        assert_eq!(read, 2 * SCOPES);
        assert_eq!(c.encs[0].events, 2 * SCOPES);
        assert!(
            c.freed.len() < GIVE_BACK_EVERY,
            "blocks given back as it went"
        );
        c.flush();
        let bytes = std::fs::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let mut at = format::HEADER_LEN;
        let (mut chunks, mut raw_total) = (0, 0);
        while at < bytes.len() {
            let h = &bytes[at..at + format::CHUNK_HEADER_LEN];
            let stored = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
            let raw = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
            if h[0] == chunk::EVENTS {
                assert!(
                    raw <= CHUNK_TARGET + (64 << 10),
                    "events chunk {chunks} holds {raw} bytes"
                );
                chunks += 1;
                raw_total += raw;
            }
            at += format::CHUNK_HEADER_LEN + stored;
        }
        assert!(
            raw_total > 8 * CHUNK_TARGET,
            "the backlog is {raw_total} bytes"
        );
        assert!(
            chunks >= raw_total / (CHUNK_TARGET + (64 << 10)),
            "{chunks} chunks"
        );
        ring.release_blocks();
    }
}
