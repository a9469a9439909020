//! The capture's index: what the viewer keeps in memory to answer any window quickly.
//!
//! One streaming pass over the capture builds it ([`Index::add_chunk`], for a file or a
//! live connection alike). A capture holds far more scopes than memory can list one by one
//! (the 3 s demo records 133 million), so the index keeps, per thread:
//! - where each of its events chunks is in the capture and the time it covers: a narrow
//!   window is answered by decoding those chunks again ([`query`]);
//! - per depth, the scopes at least one bin long, whole ([`Slice`]): what a wide window draws
//!   one by one;
//! - per depth, the busy time of every bin ([`series`]): what a wide window draws where its
//!   scopes are narrower than a pixel; likewise per bin the frame marks, messages, CPU samples
//!   and counter ranges;
//! - the scopes open now ([`Track`]);
//! - futures' and spans' lives, paired across threads ([`lives`]).
//!
//! Bins are a power of two of counter ticks, about 8 µs to start with; when the index
//! outgrows its memory budget ([`Budget`]: twice the capture's size and 16 MiB) the bin width
//! doubles: bins merge in pairs and the slices shorter than the new width are let go (they
//! are in the bins). A window wider than a bin per pixel is drawn from the index alone; a
//! narrower one spans at most as many bins as pixels, so decoding it reads a bounded part of
//! the capture.
//!
//! The pass is this crate's own loop over the reader's events ([`track`]) rather than the
//! timeline crate's replay, which converts every timestamp to ns and keeps a stack of its own
//! beside the one the index needs: 3.8 s for the demo's 266 M events through the replay.
//! Times in the index are counter ticks; queries convert to ns ([`TimeMap`]).

pub mod lives;
pub mod query;
pub mod series;
pub mod track;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;

use tickscope_timeline::tscap::{ChunkKind, Event, EventKind, Events, Meta, Process, Reader};
use tickscope_timeline::TimeMap;

use series::{Range, Series, FULL};
pub use track::Close;
use track::{Out, Track};

/// About 8 µs: the first bin width, in ns.
const FIRST_BIN_NS: f64 = 8192.0;
/// A busy bin's units: 1/4096 of the bin ([`FULL`]).
const UNIT_BITS: u32 = 12;

/// A scope the index keeps whole: at least one bin long.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Its begin, in ticks.
    pub begin: u64,
    /// Its end, in ticks.
    pub end: u64,
    /// Its scope id.
    pub id: u64,
    /// How it ended.
    pub close: Close,
}

/// Where a chunk is in the capture's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset of its chunk header.
    pub offset: u64,
    /// Header and payload, in bytes.
    pub len: u64,
}

/// One events chunk of a thread.
#[derive(Clone, Copy, Debug)]
pub struct ChunkRef {
    /// Where it is.
    pub span: Span,
    /// Its first and last event, in ticks (its open scopes began earlier).
    pub first: u64,
    /// See `first`.
    pub last: u64,
}

/// One depth of a thread's track.
#[derive(Clone, Debug, Default)]
pub struct Row {
    /// Busy time per bin.
    pub busy: Series<u16>,
    /// The scopes at least a bin long, in time order (they never overlap at one depth).
    pub long: Vec<Slice>,
    /// The busy bin being filled and its busy ticks so far (scopes at one depth end in time
    /// order, so the bins fill in order).
    pending: (u64, u64),
}

/// One thread of the capture.
#[derive(Clone, Debug)]
pub struct Thread {
    /// Its index in the capture.
    pub index: u64,
    /// Its events chunks, in order.
    pub chunks: Vec<ChunkRef>,
    /// Its scopes, by depth (0: outermost).
    pub rows: Vec<Row>,
    /// Frame marks per bin, by marker id.
    pub frames: BTreeMap<u64, Series<u32>>,
    /// Messages per bin.
    pub messages: Series<u32>,
    /// Loss events: (ticks, events dropped).
    pub losses: Vec<(u64, u64)>,
    /// Its first event, in ticks.
    pub first: u64,
    /// Its open scopes, and its last event (`track.last`).
    pub track: Track,
}

/// The memory the index may hold, and what it holds.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// The most bytes.
    pub limit: u64,
    /// Bytes held at the last count.
    pub used: u64,
}

impl Budget {
    /// At most `limit` bytes, none held yet.
    pub fn new(limit: u64) -> Budget {
        Budget { limit, used: 0 }
    }

    /// The budget for a capture of `bytes`: twice that and 16 MiB.
    pub fn for_capture(bytes: u64) -> Budget {
        Budget::new(bytes.saturating_mul(2).saturating_add(16 << 20))
    }
}

/// The index of one capture. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct Index {
    /// The process record.
    pub process: Process,
    /// Ticks to ns, at the calibration the index was built with.
    pub map: TimeMap,
    /// Bins are `1 << shift` ticks wide, counted from the capture's start.
    pub shift: u32,
    /// Threads, by order of first appearance.
    pub threads: Vec<Thread>,
    /// Counter values per bin, by marker id.
    pub counters: BTreeMap<u64, Series<Range>>,
    /// CPU samples per bin, by the OS thread id they are of.
    pub samples: HashMap<u64, Series<u32>>,
    /// Futures' and spans' lives.
    pub lives: lives::Lives,
    /// The definitions read so far.
    pub meta: Meta,
    /// The process chunk.
    pub process_chunk: Span,
    /// The metadata chunks, in order.
    pub meta_chunks: Vec<Span>,
    /// The end chunk, once read.
    pub end_chunk: Option<Span>,
    /// The latest event of any thread, in ticks.
    pub last: u64,
    /// Events indexed.
    pub events: u64,
    /// Its memory.
    pub budget: Budget,
    /// Position in `threads` by thread index.
    position: HashMap<u64, usize>,
    /// Events chunks since the budget was last checked.
    unchecked: u32,
    /// A reusable events buffer.
    buf: Events,
}

impl Index {
    /// An empty index for the capture whose process record `reader` has just read,
    /// converting at `map`.
    pub fn new<R: Read>(reader: &Reader<R>, map: TimeMap, budget: Budget) -> Index {
        let (header, stored) = reader.chunk_bytes();
        let ticks_per_bin = FIRST_BIN_NS * reader.process().ticks_per_second / 1e9;
        let shift = (ticks_per_bin.max(1.0).log2().round() as u32).max(UNIT_BITS);
        Index {
            process: reader.process().clone(),
            map,
            shift,
            threads: Vec::new(),
            counters: BTreeMap::new(),
            samples: HashMap::new(),
            lives: lives::Lives::default(),
            meta: reader.meta().clone(),
            process_chunk: Span {
                offset: tickscope_timeline::tscap::HEADER_LEN as u64,
                len: (header.len() + stored.len()) as u64,
            },
            meta_chunks: Vec::new(),
            end_chunk: None,
            last: reader.process().start_ticks,
            events: 0,
            budget,
            position: HashMap::new(),
            unchecked: 0,
            buf: Events::new(),
        }
    }

    /// Indexes every chunk `reader` reads from now on, to the end (or to where salvage
    /// stopped).
    pub fn read_all<R: Read>(
        &mut self,
        reader: &mut Reader<R>,
    ) -> Result<(), tickscope_timeline::tscap::Error> {
        while let Some(kind) = reader.next_chunk()? {
            self.add_chunk(reader, kind);
        }
        self.fit();
        Ok(())
    }

    /// Indexes the chunk `reader` has just read.
    pub fn add_chunk<R: Read>(&mut self, reader: &mut Reader<R>, kind: ChunkKind) {
        let (header, stored) = reader.chunk_bytes();
        let span = Span {
            offset: reader.chunk_offset(),
            len: (header.len() + stored.len()) as u64,
        };
        match kind {
            ChunkKind::Meta => {
                self.meta_chunks.push(span);
                self.meta = reader.meta().clone();
            }
            ChunkKind::End => self.end_chunk = Some(span),
            ChunkKind::Events => {
                let info = reader.events_info();
                let t = self.thread(info.thread);
                let shift = self.shift;
                let origin = self.process.start_ticks;
                let mut buf = std::mem::take(&mut self.buf);
                let th = &mut self.threads[t];
                let mut sink = Build {
                    shift,
                    origin,
                    rows: &mut th.rows,
                    frames: &mut th.frames,
                    messages: &mut th.messages,
                    losses: &mut th.losses,
                    counters: &mut self.counters,
                    samples: &mut self.samples,
                    lives: &mut self.lives,
                };
                th.track.chunk(info, &mut sink);
                let mut first = u64::MAX;
                let mut n = 0;
                while reader.decode(&mut buf) {
                    if first == u64::MAX {
                        first = buf
                            .as_slice()
                            .first()
                            .map_or(u64::MAX, |e| e.ticks.max(th.track.last));
                    }
                    n += buf.len() as u64;
                    th.track.events(&buf, &mut sink);
                }
                self.buf = buf;
                let last = th.track.last;
                if first != u64::MAX {
                    th.first = th.first.min(first);
                    th.chunks.push(ChunkRef { span, first, last });
                }
                self.events += n;
                self.last = self.last.max(last);
                self.unchecked += 1;
                // The budget is counted every 64 chunks (a few MB of capture).
                if self.unchecked >= 64 {
                    self.fit();
                }
            }
        }
    }

    /// Bin width in ticks.
    pub fn bin_ticks(&self) -> u64 {
        1 << self.shift
    }

    /// The bin of `ticks`.
    #[inline]
    pub fn bin(&self, ticks: u64) -> u64 {
        ticks.saturating_sub(self.process.start_ticks) >> self.shift
    }

    /// Thread `index`'s position in [`threads`](Self::threads).
    pub fn position(&self, index: u64) -> Option<usize> {
        self.position.get(&index).copied()
    }

    /// The bytes held now (counted again).
    pub fn bytes(&self) -> u64 {
        let mut b = 0usize;
        for t in &self.threads {
            b += t.chunks.capacity() * std::mem::size_of::<ChunkRef>();
            b += t.rows.capacity() * std::mem::size_of::<Row>();
            for r in &t.rows {
                b += r.busy.bytes() + r.long.capacity() * std::mem::size_of::<Slice>();
            }
            b += t.frames.values().map(Series::bytes).sum::<usize>();
            b += t.messages.bytes() + t.losses.capacity() * 16 + t.track.stack.capacity() * 16;
        }
        b += self.counters.values().map(Series::bytes).sum::<usize>();
        b += self.samples.values().map(Series::bytes).sum::<usize>();
        b += self.lives.bytes();
        b as u64
    }

    /// Doubles the bin width until the index fits its budget.
    pub fn fit(&mut self) {
        self.unchecked = 0;
        self.budget.used = self.bytes();
        while self.budget.used > self.budget.limit && self.shift < 48 {
            self.coarsen();
            self.budget.used = self.bytes();
        }
    }

    /// Doubles the bin width: bins merge in pairs, slices shorter than a bin go.
    fn coarsen(&mut self) {
        let shift = self.shift;
        let min = 1u64 << (shift + 1);
        for t in &mut self.threads {
            for r in &mut t.rows {
                r.flush(shift);
                r.busy.coarsen();
                r.pending = (r.pending.0 / 2, 0);
                r.long.retain(|s| s.end - s.begin >= min);
                r.long.shrink_to_fit();
            }
            t.frames.values_mut().for_each(Series::coarsen);
            t.messages.coarsen();
        }
        self.counters.values_mut().for_each(Series::coarsen);
        self.samples.values_mut().for_each(Series::coarsen);
        self.lives.coarsen(shift + 1, self.process.start_ticks);
        self.shift += 1;
    }

    /// Writes every row's pending bin (before a query reads the bins).
    pub fn flush(&mut self) {
        let shift = self.shift;
        for t in &mut self.threads {
            for r in &mut t.rows {
                r.flush(shift);
            }
        }
    }

    /// The thread at `index`, created at its first appearance.
    fn thread(&mut self, index: u64) -> usize {
        let next = self.threads.len();
        let pos = *self.position.entry(index).or_insert(next);
        if pos == next {
            self.threads.push(Thread {
                index,
                chunks: Vec::new(),
                rows: Vec::new(),
                frames: BTreeMap::new(),
                messages: Series::default(),
                losses: Vec::new(),
                first: u64::MAX,
                track: Track::default(),
            });
        }
        pos
    }
}

impl Row {
    /// Adds `ticks` of busy time to bin `bin` (bins come in order).
    #[inline]
    fn add(&mut self, shift: u32, bin: u64, ticks: u64) {
        if self.pending.0 != bin {
            self.flush(shift);
            self.pending.0 = bin;
        }
        self.pending.1 += ticks;
    }

    /// Writes the pending bin into the series.
    fn flush(&mut self, shift: u32) {
        let (bin, ticks) = self.pending;
        if ticks > 0 {
            let v = self.busy.at(bin);
            let units = (ticks >> (shift - UNIT_BITS)).min(FULL as u64) as u16;
            *v = v.saturating_add(units).min(FULL);
            self.pending.1 = 0;
        }
    }

    /// Adds the scope `[begin, end)` (ticks from the capture's start) to the busy bins.
    #[inline]
    fn cover(&mut self, shift: u32, begin: u64, end: u64) {
        let (b0, b1) = (begin >> shift, end >> shift);
        if b0 == b1 {
            self.add(shift, b0, end - begin);
            return;
        }
        self.add(shift, b0, ((b0 + 1) << shift) - begin);
        self.flush(shift);
        for b in b0 + 1..b1 {
            *self.busy.at(b) = FULL;
        }
        self.add(shift, b1, end - (b1 << shift));
    }
}

/// What the pass does with a thread's scopes and other events.
struct Build<'a> {
    shift: u32,
    origin: u64,
    rows: &'a mut Vec<Row>,
    frames: &'a mut BTreeMap<u64, Series<u32>>,
    messages: &'a mut Series<u32>,
    losses: &'a mut Vec<(u64, u64)>,
    counters: &'a mut BTreeMap<u64, Series<Range>>,
    samples: &'a mut HashMap<u64, Series<u32>>,
    lives: &'a mut lives::Lives,
}

impl Out for Build<'_> {
    #[inline]
    fn slice(&mut self, depth: usize, id: u64, begin: u64, end: u64, close: Close) {
        if self.rows.len() <= depth {
            self.rows.resize_with(depth + 1, Row::default);
        }
        let row = &mut self.rows[depth];
        let (b, e) = (
            begin.saturating_sub(self.origin),
            end.saturating_sub(self.origin),
        );
        row.cover(self.shift, b, e);
        if e - b >= 1 << self.shift {
            row.long.push(Slice {
                begin,
                end,
                id,
                close,
            });
        }
    }

    fn point(&mut self, _batch: &Events, e: &Event, ticks: u64) {
        let bin = ticks.saturating_sub(self.origin) >> self.shift;
        match e.kind {
            EventKind::Frame => *self.frames.entry(e.id).or_default().at(bin) += 1,
            EventKind::Message => *self.messages.at(bin) += 1,
            EventKind::Counter => {
                let r = self.counters.entry(e.id).or_default().at(bin);
                *r = r.with(e.counter_value().unwrap_or(0.0) as f32);
            }
            EventKind::Sample => {
                let (tid, _) = e.sample().unwrap_or_default();
                *self.samples.entry(tid).or_default().at(bin) += 1;
            }
            EventKind::Lost => self.losses.push((ticks, e.lost_count().unwrap_or(0))),
            EventKind::Async => {
                if let Some((id, what)) = e.async_event() {
                    self.lives
                        .event(self.shift, self.origin, e.id, id, what, ticks);
                }
            }
            EventKind::Begin | EventKind::End => {}
        }
    }
}
