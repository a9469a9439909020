//! An events chunk: its header, then its three streams (tags, deltas, payload) checked whole
//! by [`validate`] before anything is taken from them, so that [`decode_batch`] afterwards
//! runs a tight loop with no error path, batch by batch.

use std::ops::Range;

use tickscope_fmt::tscap::{event, what, MAX_OPEN};

use super::event::{Event, EventKind, Events, BREAKS_PAIRS};
use super::fields::{fast_varint, unzigzag, varint_at, Cur, PResult, VarintError};
use crate::tscap::error::Problem;

/// Events decoded per [`decode_batch`] call: 128 KiB of events, which stays in L2.
pub(crate) const BATCH: usize = 4096;

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
            // A range, not `BEGIN | END | FRAME`: the or-pattern made reading and decoding a
            // fifth slower (`cargo bench -p tickscope-timeline --bench decode`).
            event::BEGIN..=event::FRAME => {}
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
