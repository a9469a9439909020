//! The process, metadata and end records.

// The metadata entry tags are `tag` here: `meta` is the definitions' module.
use tickscope_fmt::tscap::meta as tag;

use super::fields::{Cur, PResult};
use crate::tscap::error::Problem;
use crate::tscap::meta::{Clock, Marker, MarkerKind, MetaEntry, Scope, ScopeKind, Thread};

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
            tag::ALLOCS => MetaEntry::Allocs {
                scope: c.varint("allocs scope id")?,
                counts: [
                    c.varint("allocs count")?,
                    c.varint("allocs bytes")?,
                    c.varint("allocs self count")?,
                    c.varint("allocs self bytes")?,
                ],
            },
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
