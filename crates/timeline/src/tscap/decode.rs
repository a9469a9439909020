//! Payload decoding: varints, strings, the process, metadata and end records, and events.
//!
//! Every payload is checked completely before anything is taken from it. For an events chunk,
//! [`validate`] walks the three streams once (tags, deltas, payload), so that [`decode_batch`]
//! afterwards runs a tight loop with no error path: a chunk is wholly good or an error, and a
//! salvaged capture never holds half a chunk. Lengths from the file are checked against what
//! remains before anything is allocated for them.

use std::ops::Range;

// The metadata entry tags are `tag` here: `meta` is the definitions' module.
use tickscope_fmt::tscap::{event, meta as tag, what, MAX_OPEN, MAX_STRING};

use super::error::Problem;
use super::meta::{Clock, Marker, MarkerKind, MetaEntry, Scope, ScopeKind, Thread};

/// A payload problem and the payload byte where it is.
pub(crate) type PResult<T> = Result<T, (usize, Problem)>;

/// Events decoded per [`decode_batch`] call: 128 KiB of events, which stays in L2.
pub(crate) const BATCH: usize = 4096;

pub(crate) enum VarintError {
    /// Runs off the end of the buffer.
    Eof,
    /// More than 10 bytes, or over 64 bits.
    Bad,
}

/// Reads an unsigned LEB128 varint at `*pos`, advancing past it.
#[inline]
pub(crate) fn varint_at(b: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    let mut i = *pos;
    let mut shift = 0u32;
    loop {
        let Some(&byte) = b.get(i) else {
            return Err(VarintError::Eof);
        };
        i += 1;
        if shift == 63 {
            // The tenth byte holds bit 63 only, and must end the varint.
            if byte > 1 {
                return Err(VarintError::Bad);
            }
            *pos = i;
            return Ok(v | (byte as u64) << 63);
        }
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            *pos = i;
            return Ok(v);
        }
        shift += 7;
    }
}

/// [`varint_at`] for streams already validated: the one-byte case inline, no error path
/// (a failure, which validation rules out, reads as 0 without advancing).
#[inline(always)]
fn fast_varint(b: &[u8], pos: &mut usize) -> u64 {
    if let Some(&x) = b.get(*pos) {
        if x < 0x80 {
            *pos += 1;
            return x as u64;
        }
    }
    varint_at(b, pos).unwrap_or(0)
}

#[inline(always)]
fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A reading position in a payload, for the records' fields.
pub(crate) struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Cur<'a> {
        Cur { b, pos: 0 }
    }

    fn remain(&self) -> usize {
        self.b.len() - self.pos
    }

    fn varint(&mut self, field: &'static str) -> PResult<u64> {
        let at = self.pos;
        varint_at(self.b, &mut self.pos).map_err(|e| match e {
            VarintError::Eof => (at, Problem::Truncated { field }),
            VarintError::Bad => (at, Problem::BadVarint),
        })
    }

    fn u8(&mut self, field: &'static str) -> PResult<u8> {
        match self.b.get(self.pos) {
            Some(&v) => {
                self.pos += 1;
                Ok(v)
            }
            None => Err((self.pos, Problem::Truncated { field })),
        }
    }

    fn f64(&mut self, field: &'static str) -> PResult<f64> {
        match self.b.get(self.pos..self.pos + 8) {
            Some(s) => {
                self.pos += 8;
                Ok(f64::from_le_bytes(s.try_into().expect("8 bytes")))
            }
            None => Err((self.pos, Problem::Truncated { field })),
        }
    }

    /// A clock rate: a positive finite f64.
    fn rate(&mut self) -> PResult<f64> {
        let at = self.pos;
        let v = self.f64("ticks_per_second")?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err((at, Problem::BadRate { value: v }))
        }
    }

    fn string(&mut self, field: &'static str) -> PResult<&'a str> {
        let at = self.pos;
        let len = self.varint(field)?;
        if len > MAX_STRING as u64 {
            return Err((at, Problem::StringTooLong { len }));
        }
        if len > self.remain() as u64 {
            return Err((
                at,
                Problem::StringBeyondPayload {
                    len,
                    remain: self.remain() as u64,
                },
            ));
        }
        let bytes = &self.b[self.pos..self.pos + len as usize];
        let s = std::str::from_utf8(bytes).map_err(|_| (at, Problem::NotUtf8))?;
        self.pos += len as usize;
        Ok(s)
    }

    fn finish(&self) -> PResult<()> {
        if self.remain() == 0 {
            Ok(())
        } else {
            Err((
                self.pos,
                Problem::Trailing {
                    bytes: self.remain() as u64,
                },
            ))
        }
    }
}

/// The process record: the first chunk of every capture.
#[derive(Clone, Debug, PartialEq)]
pub struct Process {
    /// Counter ticks per second at the start (a later [`Clock`] entry may refine it).
    pub ticks_per_second: f64,
    /// The counter when capture began.
    pub start_ticks: u64,
    /// The wall clock (ns since the Unix epoch) at that moment.
    pub start_unix_ns: u64,
    /// The process id.
    pub pid: u64,
    /// The program's name.
    pub program: String,
    /// The counter: `"tsc"`, `"cntvct"` or `"monotonic"`.
    pub clock: String,
}

impl Process {
    /// The calibration the process record gives.
    pub fn clock(&self) -> Clock {
        Clock {
            ticks_per_second: self.ticks_per_second,
            ticks: self.start_ticks,
            unix_ns: self.start_unix_ns,
        }
    }
}

pub(crate) fn process(p: &[u8]) -> PResult<Process> {
    let mut c = Cur::new(p);
    let ticks_per_second = c.rate()?;
    let start_ticks = c.varint("start_ticks")?;
    let start_unix_ns = c.varint("start_unix_ns")?;
    let pid = c.varint("pid")?;
    let program = c.string("program")?.to_owned();
    let clock = c.string("clock")?.to_owned();
    c.finish()?;
    Ok(Process {
        ticks_per_second,
        start_ticks,
        start_unix_ns,
        pid,
        program,
        clock,
    })
}

/// Parses a metadata chunk, passing each entry to `f` in order. Entries are not collected:
/// a chunk of millions of small entries costs one entry at a time, and a caller that must
/// not act on half a chunk validates it with a first pass that drops them.
pub(crate) fn meta(p: &[u8], mut f: impl FnMut(MetaEntry)) -> PResult<()> {
    let mut c = Cur::new(p);
    while c.remain() > 0 {
        let at = c.pos;
        let entry = match c.u8("entry tag")? {
            tag::SCOPE => {
                let id = c.varint("scope id")?;
                let kind_at = c.pos;
                let kind = match c.u8("scope kind")? {
                    0 => ScopeKind::Scope,
                    1 => ScopeKind::Group,
                    k => return Err((kind_at, Problem::UnknownScopeKind(k))),
                };
                MetaEntry::Scope(Scope {
                    id,
                    kind,
                    name: c.string("scope name")?.to_owned(),
                    file: c.string("scope file")?.to_owned(),
                    line: c.varint("scope line")?,
                })
            }
            tag::MARKER => {
                let id = c.varint("marker id")?;
                let kind_at = c.pos;
                let kind = match c.u8("marker kind")? {
                    0 => MarkerKind::Frame,
                    1 => MarkerKind::Counter,
                    k => return Err((kind_at, Problem::UnknownMarkerKind(k))),
                };
                MetaEntry::Marker(Marker {
                    id,
                    kind,
                    name: c.string("marker name")?.to_owned(),
                })
            }
            tag::THREAD => MetaEntry::Thread(Thread {
                index: c.varint("thread index")?,
                tid: c.varint("thread tid")?,
                name: c.string("thread name")?.to_owned(),
            }),
            tag::CLOCK => MetaEntry::Clock(Clock {
                ticks_per_second: c.rate()?,
                ticks: c.varint("clock ticks")?,
                unix_ns: c.varint("clock unix_ns")?,
            }),
            tag::SINK_LOSS => MetaEntry::SinkLoss {
                events: c.varint("sink-loss events")?,
                chunks: c.varint("sink-loss chunks")?,
            },
            tag::DROPPED_SCOPES => MetaEntry::DroppedScopes {
                thread: c.varint("dropped-scopes thread")?,
                scope: c.varint("dropped-scopes scope id")?,
                scopes: c.varint("dropped-scopes count")?,
            },
            tag::IN_FLIGHT => MetaEntry::InFlight {
                scope: c.varint("in-flight scope id")?,
                calls: c.varint("in-flight count")?,
            },
            tag::STACK => {
                let id = c.varint("stack id")?;
                let n_at = c.pos;
                let n = c.varint("stack frames")?;
                // Each name takes a byte at least: a count past the payload is damage.
                if n > c.remain() as u64 {
                    return Err((
                        n_at,
                        Problem::Truncated {
                            field: "stack frames",
                        },
                    ));
                }
                let mut frames = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    frames.push(c.string("stack frame")?.to_owned());
                }
                MetaEntry::Stack { id, frames }
            }
            t => return Err((at, Problem::UnknownMetaTag(t))),
        };
        f(entry);
    }
    Ok(())
}

/// The end record: the last chunk of a complete capture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct End {
    /// Events the threads recorded.
    pub events: u64,
    /// Events dropped because a ring was full.
    pub dropped: u64,
    /// Events in chunks this sink could not take.
    pub undelivered: u64,
    /// Events a flight recorder let go of past its window (not a loss: its purpose).
    pub evicted: u64,
    /// The counter when capture ended.
    pub end_ticks: u64,
    /// The wall clock then (ns since the Unix epoch).
    pub end_unix_ns: u64,
    /// Per thread: (thread index, events it dropped).
    pub threads: Vec<(u64, u64)>,
}

pub(crate) fn end(p: &[u8]) -> PResult<End> {
    let mut c = Cur::new(p);
    let mut e = End {
        events: c.varint("events")?,
        dropped: c.varint("dropped")?,
        undelivered: c.varint("undelivered")?,
        evicted: c.varint("evicted")?,
        end_ticks: c.varint("end_ticks")?,
        end_unix_ns: c.varint("end_unix_ns")?,
        threads: Vec::new(),
    };
    let at = c.pos;
    let t = c.varint("thread count")?;
    // Each pair takes at least two bytes: refuse a count the payload cannot hold before
    // reserving anything for it.
    if t > c.remain() as u64 / 2 {
        return Err((
            at,
            Problem::CountTooLarge {
                field: "thread count",
                count: t,
                remain: c.remain() as u64,
            },
        ));
    }
    e.threads.reserve(t as usize);
    for _ in 0..t {
        let index = c.varint("thread index")?;
        let dropped = c.varint("thread dropped")?;
        e.threads.push((index, dropped));
    }
    c.finish()?;
    Ok(e)
}

/// A scope open on a thread when an events chunk begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenScope {
    /// The scope id.
    pub id: u64,
    /// When it began.
    pub ticks: u64,
}

/// The header of an events chunk.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventsInfo {
    /// The thread index.
    pub thread: u64,
    /// Events in the chunk.
    pub events: u64,
    /// The timestamp deltas' base.
    pub base_ticks: u64,
    /// Scopes open on the thread when the chunk begins, outermost first.
    pub open: Vec<OpenScope>,
}

/// Where an events chunk's streams lie in its payload.
#[derive(Clone, Debug, Default)]
pub(crate) struct Layout {
    /// Version 2 or later (a `lost` event carries flags).
    v2: bool,
    /// Version 3 or later (async events).
    v3: bool,
    tags: Range<usize>,
    deltas: Range<usize>,
    payload: Range<usize>,
}

/// Parses an events chunk's header into `info` and checks its streams, every event included.
pub(crate) fn events(p: &[u8], info: &mut EventsInfo, version: u16) -> PResult<Layout> {
    let mut c = Cur::new(p);
    info.thread = c.varint("thread")?;
    let n_at = c.pos;
    info.events = c.varint("event count")?;
    info.base_ticks = c.varint("base_ticks")?;
    let k_at = c.pos;
    let k = c.varint("open-scope count")?;
    if k > MAX_OPEN as u64 {
        return Err((k_at, Problem::TooManyOpen { count: k }));
    }
    info.open.clear();
    for _ in 0..k {
        let id = c.varint("open scope id")?;
        let ticks = c.varint("open scope ticks")?;
        info.open.push(OpenScope { id, ticks });
    }
    let tags = c.varint("tags_len")?;
    let deltas = c.varint("deltas_len")?;
    let payload = c.varint("payload_len")?;
    let remain = c.remain() as u64;
    let sum = tags
        .checked_add(deltas)
        .and_then(|s| s.checked_add(payload));
    if sum != Some(remain) {
        return Err((
            c.pos,
            Problem::StreamSizes {
                tags,
                deltas,
                payload,
                remain,
            },
        ));
    }
    // Every event takes at least one byte in each of the tag and delta streams.
    if info.events > tags || info.events > deltas {
        return Err((
            n_at,
            Problem::TooManyEvents {
                count: info.events,
                tags,
                deltas,
            },
        ));
    }
    let t0 = c.pos;
    let layout = Layout {
        v2: version >= 2,
        v3: version >= 3,
        tags: t0..t0 + tags as usize,
        deltas: t0 + tags as usize..t0 + (tags + deltas) as usize,
        payload: t0 + (tags + deltas) as usize..p.len(),
    };
    validate(p, &layout, info.events)?;
    Ok(layout)
}

/// Walks every event once: each tag and delta a well-formed varint inside its stream, no
/// reserved kind, every payload inside the payload stream, and no stream with bytes left.
fn validate(p: &[u8], l: &Layout, n: u64) -> PResult<()> {
    let tags = &p[..l.tags.end];
    let deltas = &p[..l.deltas.end];
    let payload = &p[..l.payload.end];
    let (mut tp, mut dp, mut pp) = (l.tags.start, l.deltas.start, l.payload.start);
    let stream_err = |at: usize, e: VarintError, field: &'static str| match e {
        VarintError::Eof => (at, Problem::Truncated { field }),
        VarintError::Bad => (at, Problem::BadVarint),
    };
    for index in 0..n {
        let tag_at = tp;
        let t = varint_at(tags, &mut tp).map_err(|e| stream_err(tag_at, e, "tag stream"))?;
        let delta_at = dp;
        varint_at(deltas, &mut dp).map_err(|e| stream_err(delta_at, e, "delta stream"))?;
        match (t & 7) as u8 {
            event::BEGIN | event::END | event::FRAME => {}
            event::COUNTER => {
                if payload.len() - pp < 8 {
                    return Err((
                        pp,
                        Problem::Truncated {
                            field: "counter value",
                        },
                    ));
                }
                pp += 8;
            }
            event::MESSAGE => {
                let mut c = Cur {
                    b: payload,
                    pos: pp,
                };
                c.string("message")?;
                pp = c.pos;
            }
            event::SAMPLE if l.v2 => {
                for field in ["sample tid", "sample stack"] {
                    let at = pp;
                    varint_at(payload, &mut pp).map_err(|e| stream_err(at, e, field))?;
                }
            }
            event::ASYNC if l.v3 => {
                let at = pp;
                varint_at(payload, &mut pp).map_err(|e| stream_err(at, e, "async id"))?;
                match payload.get(pp) {
                    Some(&w) if w <= what::CANCELLED => pp += 1,
                    Some(&w) => return Err((pp, Problem::BadAsyncWhat { what: w, index })),
                    None => {
                        return Err((
                            pp,
                            Problem::Truncated {
                                field: "async what",
                            },
                        ))
                    }
                }
            }
            event::LOST => {
                let at = pp;
                varint_at(payload, &mut pp).map_err(|e| stream_err(at, e, "lost count"))?;
                if l.v2 {
                    let at = pp;
                    varint_at(payload, &mut pp).map_err(|e| stream_err(at, e, "lost flags"))?;
                }
            }
            kind => return Err((tag_at, Problem::ReservedEventKind { kind, index })),
        }
    }
    for (stream, pos, end) in [
        ("tag", tp, l.tags.end),
        ("delta", dp, l.deltas.end),
        ("payload", pp, l.payload.end),
    ] {
        if pos != end {
            return Err((
                pos,
                Problem::StreamLeftover {
                    stream,
                    bytes: (end - pos) as u64,
                },
            ));
        }
    }
    Ok(())
}

/// Decoding state within an events chunk, across batches.
pub(crate) struct Cursor {
    layout: Layout,
    tp: usize,
    dp: usize,
    pp: usize,
    left: u64,
    prev: u64,
    pred: [i64; 256],
}

impl Cursor {
    pub(crate) fn new() -> Cursor {
        Cursor {
            layout: Layout::default(),
            tp: 0,
            dp: 0,
            pp: 0,
            left: 0,
            prev: 0,
            pred: [0; 256],
        }
    }

    /// Starts a validated chunk.
    pub(crate) fn start(&mut self, layout: Layout, info: &EventsInfo) {
        self.tp = layout.tags.start;
        self.dp = layout.deltas.start;
        self.pp = layout.payload.start;
        self.layout = layout;
        self.left = info.events;
        self.prev = info.base_ticks;
        self.pred = [0; 256];
    }

    /// No events left.
    pub(crate) fn clear(&mut self) {
        self.left = 0;
    }
}

/// Decodes the next batch (up to [`BATCH`] events) of a validated chunk into `out`; false
/// when the chunk has no events left.
pub(crate) fn decode_batch(p: &[u8], c: &mut Cursor, out: &mut Events) -> bool {
    out.list.clear();
    out.text.clear();
    if c.left == 0 {
        return false;
    }
    let n = c.left.min(BATCH as u64) as usize;
    c.left -= n as u64;
    let l = &c.layout;
    let (Some(tags), Some(deltas), Some(payload)) = (
        p.get(..l.tags.end),
        p.get(..l.deltas.end),
        p.get(..l.payload.end),
    ) else {
        c.left = 0;
        return false;
    };
    let v2 = l.v2;
    let (mut tp, mut dp, mut prev) = (c.tp, c.dp, c.prev);
    let pred = &mut c.pred;
    out.list.reserve(n);
    for _ in 0..n {
        let tag = fast_varint(tags, &mut tp);
        let residual = unzigzag(fast_varint(deltas, &mut dp));
        // Timestamps: each delta predicted from the last one with the same tag byte.
        let ctx = tag as u8 as usize;
        let delta = pred[ctx].wrapping_add(residual);
        pred[ctx] = delta;
        prev = prev.wrapping_add(delta as u64);
        let kind = EventKind::from_low_bits(tag);
        let data = if (kind as u8) < EventKind::Counter as u8 {
            0
        } else {
            event_payload(kind, payload, &mut c.pp, &mut out.text, v2)
        };
        out.list.push(Event {
            ticks: prev,
            id: tag >> 3,
            kind,
            data,
        });
    }
    c.tp = tp;
    c.dp = dp;
    c.prev = prev;
    true
}

/// Reads one event's payload; returns its `data` word.
#[inline(never)]
fn event_payload(
    kind: EventKind,
    payload: &[u8],
    pp: &mut usize,
    text: &mut String,
    v2: bool,
) -> u64 {
    match kind {
        EventKind::Counter => match payload.get(*pp..pp.saturating_add(8)) {
            Some(b) => {
                *pp += 8;
                u64::from_le_bytes(b.try_into().expect("8 bytes"))
            }
            None => 0,
        },
        EventKind::Message => {
            let len = fast_varint(payload, pp) as usize;
            let bytes = payload.get(*pp..pp.saturating_add(len)).unwrap_or_default();
            *pp += bytes.len();
            let start = text.len();
            text.push_str(&String::from_utf8_lossy(bytes));
            ((start as u64) << 32) | (text.len() - start) as u64
        }
        EventKind::Sample => {
            let tid = fast_varint(payload, pp).min(u32::MAX as u64);
            let stack = fast_varint(payload, pp).min(u32::MAX as u64);
            tid | stack << 32
        }
        EventKind::Async => {
            // The async id (saturated: ids count futures and spans, far below 2^62) and what.
            let id = fast_varint(payload, pp).min((1 << 62) - 1);
            let what = payload.get(*pp).copied().unwrap_or(0).min(what::CANCELLED) as u64;
            *pp += 1;
            id << 2 | what
        }
        EventKind::Lost => {
            // The count (saturated below the flag's bit: no capture drops 2^63 events).
            let n = fast_varint(payload, pp).min(BREAKS_PAIRS - 1);
            // Version 1 never promised whole scopes: any loss breaks the pairs across it.
            let breaks = !v2 || fast_varint(payload, pp) & 1 != 0;
            n | if breaks { BREAKS_PAIRS } else { 0 }
        }
        _ => 0,
    }
}

/// The bit of a loss event's `data` that says it breaks pairs (the count is below it). Kept
/// in `data` rather than its own field: the decoding loop stays as tight as before.
const BREAKS_PAIRS: u64 = 1 << 63;

/// What an event is: the low 3 bits of its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EventKind {
    /// A scope begins; the id is a scope id.
    Begin = event::BEGIN,
    /// The innermost open scope with this id ends.
    End = event::END,
    /// A frame mark; the id is a marker id.
    Frame = event::FRAME,
    /// A counter value; the id is a marker id.
    Counter = event::COUNTER,
    /// A message.
    Message = event::MESSAGE,
    /// Events the thread dropped just before this point (the memory budget was spent).
    Lost = event::LOST,
    /// A CPU sample of a thread, recorded by the sampler's thread (version 2).
    Sample = event::SAMPLE,
    /// A future's or span's life begins or ends (version 3); the id is its scope id.
    Async = event::ASYNC,
}

impl EventKind {
    #[inline(always)]
    fn from_low_bits(tag: u64) -> EventKind {
        // A table, not a match: a match cost the decoding loop a quarter of its speed.
        // Validation refuses 7 before version 3 (and 6 in version 1).
        const KINDS: [EventKind; 8] = [
            EventKind::Begin,
            EventKind::End,
            EventKind::Frame,
            EventKind::Counter,
            EventKind::Message,
            EventKind::Lost,
            EventKind::Sample,
            EventKind::Async,
        ];
        KINDS[(tag & 7) as usize]
    }
}

/// What an async event says of its future or span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncWhat {
    /// Its life begins: a future's first poll, a span's creation.
    Begin,
    /// It ends: a future ready, a span closed.
    End,
    /// A future dropped before it was ready.
    Cancelled,
}

/// One decoded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The counter reading.
    pub ticks: u64,
    /// The scope or marker id (0 for messages and losses).
    pub id: u64,
    /// What it is.
    pub kind: EventKind,
    /// The payload: a counter's f64 bits, a message's place in [`Events`]' text, a loss count.
    pub(crate) data: u64,
}

impl Event {
    /// A counter event's value.
    pub fn counter_value(&self) -> Option<f64> {
        (self.kind == EventKind::Counter).then(|| f64::from_bits(self.data))
    }

    /// A CPU sample's thread (its OS thread id) and stack id (see
    /// [`Meta::stack`](super::Meta::stack)).
    pub fn sample(&self) -> Option<(u64, u64)> {
        (self.kind == EventKind::Sample).then_some((self.data & 0xffff_ffff, self.data >> 32))
    }

    /// An async event: the future's or span's async id (pairing its begin and end, across
    /// threads) and what happened.
    pub fn async_event(&self) -> Option<(u64, AsyncWhat)> {
        (self.kind == EventKind::Async).then(|| {
            let what = match (self.data & 3) as u8 {
                what::BEGIN => AsyncWhat::Begin,
                what::END => AsyncWhat::End,
                _ => AsyncWhat::Cancelled,
            };
            (self.data >> 2, what)
        })
    }

    /// A loss event's count of dropped events.
    pub fn lost_count(&self) -> Option<u64> {
        (self.kind == EventKind::Lost).then_some(self.data & !BREAKS_PAIRS)
    }

    /// A loss event after which an end may belong to a call other than the open scope it
    /// names (a version 1 capture, or a version 2 one that lost an end): the scopes open
    /// across it must not be paired.
    pub fn lost_breaks_pairs(&self) -> bool {
        self.kind == EventKind::Lost && self.data & BREAKS_PAIRS != 0
    }
}

/// A reusable buffer of decoded events: one batch of one events chunk (see
/// [`Reader::decode`](super::Reader::decode)).
#[derive(Clone, Debug, Default)]
pub struct Events {
    list: Vec<Event>,
    text: String,
}

impl Events {
    /// An empty buffer.
    pub fn new() -> Events {
        Events::default()
    }

    /// The events, in the order the thread recorded them.
    pub fn as_slice(&self) -> &[Event] {
        &self.list
    }

    /// How many events.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Returns true if and only if the buffer holds no event.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// A message event's text (an event from this buffer).
    pub fn message(&self, e: &Event) -> Option<&str> {
        if e.kind != EventKind::Message {
            return None;
        }
        let start = (e.data >> 32) as usize;
        let len = (e.data & 0xffff_ffff) as usize;
        self.text.get(start..start + len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(bytes: &[u8]) -> Result<(u64, usize), &'static str> {
        let mut pos = 0;
        match varint_at(bytes, &mut pos) {
            Ok(x) => Ok((x, pos)),
            Err(VarintError::Eof) => Err("eof"),
            Err(VarintError::Bad) => Err("bad"),
        }
    }

    #[test]
    fn varints_decode_and_reject_overlong_or_overflowing_ones() {
        assert_eq!(v(&[0]), Ok((0, 1)));
        assert_eq!(v(&[0x7f]), Ok((127, 1)));
        assert_eq!(v(&[0x80, 0x01]), Ok((128, 2)));
        assert_eq!(v(&[0xac, 0x02, 0xff]), Ok((300, 2)));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(v(&max), Ok((u64::MAX, 10)));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(v(&over), Err("bad"));
        assert_eq!(v(&[0x80; 11]), Err("bad"));
        assert_eq!(v(&[0x80, 0x80]), Err("eof"));
        assert_eq!(v(&[]), Err("eof"));
    }

    #[test]
    fn zigzag_round_trips() {
        for x in [0i64, 1, -1, 2, -2, i64::MAX, i64::MIN, 12345, -98765] {
            let z = ((x << 1) ^ (x >> 63)) as u64;
            assert_eq!(unzigzag(z), x);
        }
    }

    #[test]
    fn strings_are_bounded_by_the_limit_and_the_payload() {
        let mut c = Cur::new(&[3, b'a', b'b']);
        assert_eq!(
            c.string("s"),
            Err((0, Problem::StringBeyondPayload { len: 3, remain: 2 }))
        );
        let mut c = Cur::new(&[0xff, 0xff, 0x04]);
        assert_eq!(
            c.string("s"),
            Err((0, Problem::StringTooLong { len: 81_919 }))
        );
        let mut c = Cur::new(&[2, 0xff, 0xfe]);
        assert_eq!(c.string("s"), Err((0, Problem::NotUtf8)));
    }
}
