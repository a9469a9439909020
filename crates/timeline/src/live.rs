//! Recording a capture that arrives over a connection (`tickscope capture listen`): every
//! chunk is checked as it arrives (the reader's framing, CRC and payload checks) and written
//! through unchanged, so the file is always a valid capture up to its last complete chunk;
//! the events are summarised as they come, for a status line per second.

use std::io::{Read, Write};
use std::sync::Mutex;

use super::collect::{Collector, Options};
use super::error::Error;
use super::format::{count_si, duration};
use crate::tscap::{ChunkKind, Events, MetaEntry, Reader};

/// What a connection has delivered so far, for the status lines. It keeps the names of the
/// scopes called so far only, not a copy of the metadata: a capture may declare millions.
pub struct Live {
    name: String,
    collector: Collector,
    /// The latest calibration's ns per tick; `None` until the capture header has arrived.
    ns_per_tick: Option<f64>,
    /// Events the sink reported it could not send.
    sink_lost: u64,
    /// Per collector row: its scope's name.
    names: Names,
    prev_ticks: Vec<u64>,
    prev_events: u64,
}

impl Live {
    /// Nothing received yet; `name` starts every status line.
    pub fn new(name: impl Into<String>) -> Live {
        Live {
            name: name.into(),
            collector: Collector::new(Options::default()),
            ns_per_tick: None,
            sink_lost: 0,
            names: Names::default(),
            prev_ticks: Vec::new(),
            prev_events: 0,
        }
    }

    /// Events received so far.
    pub fn events(&self) -> u64 {
        self.collector.events()
    }

    /// The status line for the `secs` seconds since the previous call: events per second,
    /// events dropped so far (by the threads, and chunks the sender could not send), and the
    /// three scopes with the most time ending in that interval (outermost calls' inclusive
    /// time, attributed when a call ends).
    pub fn tick(&mut self, secs: f64) -> String {
        let events = self.collector.events();
        let rate = (events - self.prev_events) as f64 / secs.max(1e-9);
        self.prev_events = events;
        let mut top: Vec<(u64, usize)> = Vec::new();
        for (i, (_, ticks)) in self.collector.scope_ticks().enumerate() {
            if self.prev_ticks.len() <= i {
                self.prev_ticks.push(0);
            }
            let d = ticks.wrapping_sub(self.prev_ticks[i]);
            self.prev_ticks[i] = ticks;
            if d > 0 {
                top.push((d, i));
            }
        }
        let Some(ns_per_tick) = self.ns_per_tick else {
            return format!("{}: waiting for the capture header", self.name);
        };
        let names = &self.names;
        let name = |row: usize| names.get(row);
        top.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| name(a.1).cmp(name(b.1))));
        let top: Vec<String> = top
            .iter()
            .take(3)
            .map(|&(d, row)| format!("{} {}", name(row), duration(d as f64 * ns_per_tick)))
            .collect();
        let dropped = self.collector.lost().saturating_add(self.sink_lost);
        format!(
            "{}: {} events/s · {} dropped so far · top: {}",
            self.name,
            count_si(rate),
            dropped,
            if top.is_empty() {
                "-".to_owned()
            } else {
                top.join(", ")
            }
        )
    }
}

/// Strings by row, in one buffer (a name is a few bytes; a `String` each would cost more
/// than the bytes that declared it). A renamed row's new name is appended.
#[derive(Default)]
struct Names {
    bytes: String,
    /// Per row: where its name lies in `bytes`.
    at: Vec<(usize, usize)>,
}

impl Names {
    fn len(&self) -> usize {
        self.at.len()
    }

    fn get(&self, row: usize) -> &str {
        self.at.get(row).map_or("", |&(a, b)| &self.bytes[a..b])
    }

    fn push(&mut self, name: &str) {
        let a = self.bytes.len();
        self.bytes.push_str(name);
        self.at.push((a, self.bytes.len()));
    }

    fn set(&mut self, row: usize, name: &str) {
        if self.get(row) != name {
            let a = self.bytes.len();
            self.bytes.push_str(name);
            self.at[row] = (a, self.bytes.len());
        }
    }
}

/// How a recorded connection ended.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Bytes written: the file header and every complete chunk.
    pub bytes: u64,
    /// Complete chunks written.
    pub chunks: u64,
    /// Events in them.
    pub events: u64,
    /// Returns true if and only if the capture's end record arrived.
    pub complete: bool,
    /// Where and why the stream stopped early (a peer gone mid-chunk, a damaged chunk), if it
    /// did: the file holds everything before that point.
    pub stopped: Option<String>,
    /// The reader's warnings (the same, or a missing end record).
    pub warnings: Vec<String>,
}

fn lock(live: &Mutex<Live>) -> std::sync::MutexGuard<'_, Live> {
    live.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads a capture from `input` (named `name` in messages), checking each chunk as it
/// arrives, writes it through to `out` unchanged, and keeps `live` up to date. A stream that
/// is not a capture fails before anything is written; one that breaks off or turns bad later
/// ends the recording there, with every complete chunk before it written.
pub fn record<R: Read, W: Write>(
    input: R,
    name: &str,
    mut out: W,
    live: &Mutex<Live>,
) -> Result<Recorded, Error> {
    let mut reader = Reader::new(input, name)?.salvage(true);
    // Each chunk goes out in one write, so a listener killed between two writes leaves whole
    // chunks only.
    let mut frame = reader.header_bytes().to_vec();
    let (h, p) = reader.chunk_bytes();
    frame.extend_from_slice(h);
    frame.extend_from_slice(p);
    out.write_all(&frame)?;
    lock(live).ns_per_tick = Some(1e9 / reader.meta().clock().ticks_per_second);
    let mut events = Events::new();
    let mut n = 0;
    while let Some(kind) = reader.next_chunk()? {
        let (h, p) = reader.chunk_bytes();
        frame.clear();
        frame.extend_from_slice(h);
        frame.extend_from_slice(p);
        out.write_all(&frame)?;
        match kind {
            ChunkKind::Meta => {
                let mut l = lock(live);
                let meta = reader.meta();
                l.ns_per_tick = Some(1e9 / meta.clock().ticks_per_second);
                l.sink_lost = meta.sink_loss().0;
                // A scope already called may be (re)named by a later definition.
                let Live {
                    collector, names, ..
                } = &mut *l;
                reader.each_meta_entry(|e| {
                    if let MetaEntry::Scope(s) = e {
                        if let Some(row) = collector.row_of(s.id) {
                            names.set(row, &s.name);
                        }
                    }
                });
            }
            ChunkKind::Events => {
                let mut l = lock(live);
                l.collector.chunk(reader.events_info());
                while reader.decode(&mut events) {
                    n += events.len() as u64;
                    l.collector.add(&events);
                }
                let Live {
                    collector, names, ..
                } = &mut *l;
                for (id, _) in collector.scope_ticks().skip(names.len()) {
                    names.push(&reader.meta().scope_name(id));
                }
            }
            ChunkKind::End => {}
        }
    }
    out.flush()?;
    Ok(Recorded {
        bytes: reader.valid_len(),
        chunks: reader.chunks(),
        events: n,
        complete: reader.end().is_some(),
        stopped: reader.stopped().map(|e| e.to_string()),
        warnings: reader.warnings(),
    })
}
