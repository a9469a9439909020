//! Perfetto's native protobuf trace: a `Trace` of `TracePacket`s, read by the Perfetto UI and
//! `trace_processor`.
//!
//! The packets, all on trusted sequence 1: a `TrackDescriptor` for the process (its pid and
//! program name), one per thread (`ThreadDescriptor` with pid, OS tid and name) and one per
//! counter (a `CounterDescriptor` track under the process); then `TrackEvent`s in timestamp
//! order (ns since the start of capture; each thread's events are gathered apart, spilling to
//! a temporary file past 32 MiB, and merged at the end): `TYPE_SLICE_BEGIN` (name
//! inline) and `TYPE_SLICE_END` per scope on its thread's track, `TYPE_INSTANT` for frame marks
//! (category `frame`), messages (`message`) and losses (`lost`, with a `dropped` debug
//! annotation), and `TYPE_COUNTER` with `double_counter_value` on counter tracks. A scope closed
//! other than by its own end gets a debug annotation (`unfinished`, `abandoned` or `cut` =
//! true) on its end event.
//!
//! Field numbers, from Perfetto's `protos/perfetto/trace/`: `Trace.packet` 1; `TracePacket`:
//! `timestamp` 8, `trusted_packet_sequence_id` 10, `track_event` 11, `sequence_flags` 13,
//! `track_descriptor` 60; `TrackDescriptor`: `uuid` 1, `name` 2, `process` 3, `thread` 4,
//! `parent_uuid` 5, `counter` 8; `ProcessDescriptor`: `pid` 1, `process_name` 6;
//! `ThreadDescriptor`: `pid` 1, `tid` 2, `thread_name` 5; `TrackEvent`: `debug_annotations` 4,
//! `type` 9, `track_uuid` 11, `categories` 22, `name` 23, `double_counter_value` 44;
//! `DebugAnnotation`: `bool_value` 2, `uint_value` 3, `name` 10.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::{self, Read, Write};

use super::protobuf::{varint, Message};
use super::replay::{replay, Close, Instant, Sink};
use super::spill::Spill;
use super::{Error, TimeMap};
use crate::tscap::{Clock, IdIndex, Meta, Reader};

/// Field numbers (see the module docs).
pub(crate) mod field {
    pub const TRACE_PACKET: u32 = 1;

    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_SEQUENCE_FLAGS: u32 = 13;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;

    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PROCESS: u32 = 3;
    pub const TRACK_THREAD: u32 = 4;
    pub const TRACK_PARENT_UUID: u32 = 5;
    pub const TRACK_COUNTER: u32 = 8;

    pub const PROCESS_PID: u32 = 1;
    pub const PROCESS_NAME: u32 = 6;

    pub const THREAD_PID: u32 = 1;
    pub const THREAD_TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;

    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    pub const EVENT_TYPE: u32 = 9;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const EVENT_CATEGORIES: u32 = 22;
    pub const EVENT_NAME: u32 = 23;
    pub const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;

    pub const ANNOTATION_BOOL: u32 = 2;
    pub const ANNOTATION_UINT: u32 = 3;
    pub const ANNOTATION_NAME: u32 = 10;
}

/// `TrackEvent.Type` values.
pub(crate) mod kind {
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
}

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
/// The trusted sequence every packet is on.
const SEQUENCE: u64 = 1;
/// Track uuids: the process, then threads and counters in their own ranges, numbered in order
/// of first appearance (deterministic).
const PROCESS_TRACK: u64 = 1;
const THREAD_TRACKS: u64 = 1 << 32;
const COUNTER_TRACKS: u64 = 2 << 32;
/// Threads without a usable OS tid (unknown, or one an earlier thread of the capture already
/// used) get a synthetic one from here.
const SYNTHETIC_TID: u64 = 0x4000_0000;

/// Appends a packet to a `Trace`: field 1, length-delimited.
fn frame(out: &mut Vec<u8>, packet: &[u8]) {
    varint(out, (field::TRACE_PACKET as u64) << 3 | 2);
    varint(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

struct Perfetto {
    /// Descriptor packets, framed: written first.
    descriptors: Vec<u8>,
    /// Per thread (by first appearance): event records `[ts u64 LE][len u32 LE][packet]`.
    events: Spill,
    record: Vec<u8>,
    pid: i64,
    threads: IdIndex,
    thread_count: usize,
    counters: IdIndex,
    tids: BTreeSet<u64>,
}

impl Perfetto {
    fn descriptor(&mut self, p: &Message) {
        frame(&mut self.descriptors, &p.0);
    }

    fn event(&mut self, thread: u64, ns: u64, f: impl FnOnce(&mut Message)) -> io::Result<()> {
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, ns)
            .uint(field::PACKET_SEQUENCE_ID, SEQUENCE)
            .message(field::PACKET_TRACK_EVENT, f);
        self.record.clear();
        self.record.extend_from_slice(&ns.to_le_bytes());
        self.record
            .extend_from_slice(&(p.0.len() as u32).to_le_bytes());
        self.record.extend_from_slice(&p.0);
        let k = self.threads.get(thread).unwrap_or(0) as usize;
        self.events.push(k, &self.record)
    }

    fn track(&self, thread: u64) -> u64 {
        THREAD_TRACKS + self.threads.get(thread).unwrap_or(0) as u64
    }

    /// Writes the descriptors, then every thread's events merged in timestamp order (ties:
    /// thread order of first appearance, then each thread's own order).
    fn finish(mut self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.descriptors)?;
        let n = self.thread_count;
        let mut cursors: Vec<_> = (0..n).map(|k| self.events.cursor(k)).collect();
        let mut heap = BinaryHeap::new();
        for (k, c) in cursors.iter_mut().enumerate() {
            if let Some(ts) = self.peek(c)? {
                heap.push(Reverse((ts, k)));
            }
        }
        let mut buf = Vec::new();
        while let Some(Reverse((_, k))) = heap.pop() {
            let c = &mut cursors[k];
            let len = u32::from_le_bytes(self.events.bytes(c)[8..12].try_into().expect("4 bytes"))
                as usize;
            self.events.fill(c, 12 + len)?;
            frame(&mut buf, &self.events.bytes(c)[12..12 + len]);
            c.consume(12 + len);
            if buf.len() >= FLUSH {
                out.write_all(&buf)?;
                buf.clear();
            }
            if let Some(ts) = self.peek(c)? {
                heap.push(Reverse((ts, k)));
            }
        }
        out.write_all(&buf)
    }

    /// The timestamp of the cursor's next record, its header buffered.
    fn peek(&mut self, c: &mut super::spill::Cursor) -> io::Result<Option<u64>> {
        if !self.events.fill(c, 12)? {
            return Ok(None);
        }
        Ok(Some(u64::from_le_bytes(
            self.events.bytes(c)[..8].try_into().expect("8 bytes"),
        )))
    }
}

const FLUSH: usize = 1 << 16;

fn annotation(e: &mut Message, name: &str, f: impl FnOnce(&mut Message)) {
    e.message(field::EVENT_DEBUG_ANNOTATIONS, |a| {
        a.string(field::ANNOTATION_NAME, name);
        f(a);
    });
}

impl Sink for Perfetto {
    fn thread(&mut self, meta: &Meta, thread: u64) -> io::Result<()> {
        let (ord, new) = self.threads.get_or_insert(thread);
        if !new {
            return Ok(());
        }
        self.thread_count += 1;
        let def = meta.thread(thread);
        let mut tid = def.map_or(0, |d| d.tid);
        if tid == 0 || tid > i32::MAX as u64 || !self.tids.insert(tid) {
            tid = SYNTHETIC_TID + thread % SYNTHETIC_TID;
        }
        let name = meta.thread_name(thread);
        let pid = self.pid;
        let mut p = Message::new();
        p.uint(field::PACKET_SEQUENCE_ID, SEQUENCE)
            .message(field::PACKET_TRACK_DESCRIPTOR, |d| {
                d.uint(field::TRACK_UUID, THREAD_TRACKS + ord as u64)
                    .message(field::TRACK_THREAD, |t| {
                        t.int(field::THREAD_PID, pid)
                            .int(field::THREAD_TID, tid as i64)
                            .string(field::THREAD_NAME, &name);
                    });
            });
        self.descriptor(&p);
        Ok(())
    }

    fn begin(&mut self, meta: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        let track = self.track(thread);
        self.event(thread, ns, |e| {
            e.uint(field::EVENT_TYPE, kind::SLICE_BEGIN)
                .uint(field::EVENT_TRACK_UUID, track)
                .string(field::EVENT_NAME, &meta.scope_name(id));
        })
    }

    fn end(
        &mut self,
        _: &Meta,
        thread: u64,
        _: u64,
        _: u64,
        end: u64,
        how: Close,
    ) -> io::Result<()> {
        let track = self.track(thread);
        self.event(thread, end, |e| {
            e.uint(field::EVENT_TYPE, kind::SLICE_END)
                .uint(field::EVENT_TRACK_UUID, track);
            if let Some(label) = how.label() {
                annotation(e, label, |a| {
                    a.uint(field::ANNOTATION_BOOL, 1);
                });
            }
        })
    }

    fn instant(&mut self, meta: &Meta, thread: u64, ns: u64, what: Instant<'_>) -> io::Result<()> {
        let track = self.track(thread);
        self.event(thread, ns, |e| {
            e.uint(field::EVENT_TYPE, kind::INSTANT)
                .uint(field::EVENT_TRACK_UUID, track);
            match what {
                Instant::Frame(id) => {
                    e.string(field::EVENT_CATEGORIES, "frame")
                        .string(field::EVENT_NAME, &meta.marker_name(id));
                }
                Instant::Message(text) => {
                    e.string(field::EVENT_CATEGORIES, "message")
                        .string(field::EVENT_NAME, text);
                }
                Instant::Lost(n) => {
                    e.string(field::EVENT_CATEGORIES, "lost")
                        .string(field::EVENT_NAME, &format!("lost {n} events"));
                    annotation(e, "dropped", |a| {
                        a.uint(field::ANNOTATION_UINT, n);
                    });
                }
            }
        })
    }

    fn counter(
        &mut self,
        meta: &Meta,
        thread: u64,
        id: u64,
        ns: u64,
        value: f64,
    ) -> io::Result<()> {
        let (ord, new) = self.counters.get_or_insert(id);
        let track = COUNTER_TRACKS + ord as u64;
        if new {
            let mut p = Message::new();
            p.uint(field::PACKET_SEQUENCE_ID, SEQUENCE).message(
                field::PACKET_TRACK_DESCRIPTOR,
                |d| {
                    d.uint(field::TRACK_UUID, track)
                        .uint(field::TRACK_PARENT_UUID, PROCESS_TRACK)
                        .string(field::TRACK_NAME, &meta.marker_name(id))
                        .message(field::TRACK_COUNTER, |_| {});
                },
            );
            self.descriptor(&p);
        }
        self.event(thread, ns, |e| {
            e.uint(field::EVENT_TYPE, kind::COUNTER)
                .uint(field::EVENT_TRACK_UUID, track)
                .double(field::EVENT_DOUBLE_COUNTER_VALUE, value);
        })
    }
}

/// Writes the capture at `reader` as a Perfetto protobuf trace, converting ticks at `clock`.
pub fn write<R: Read, W: Write>(
    reader: &mut Reader<R>,
    clock: Clock,
    mut out: W,
) -> Result<(), Error> {
    let map = TimeMap::new(reader.process(), clock);
    let process = reader.process().clone();
    let pid = (process.pid as i64).clamp(0, i32::MAX as i64);
    let mut s = Perfetto {
        descriptors: Vec::new(),
        events: Spill::new(),
        record: Vec::new(),
        pid,
        threads: IdIndex::default(),
        thread_count: 0,
        counters: IdIndex::default(),
        tids: BTreeSet::new(),
    };
    let mut p = Message::new();
    p.uint(field::PACKET_SEQUENCE_ID, SEQUENCE)
        .uint(field::PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED)
        .message(field::PACKET_TRACK_DESCRIPTOR, |d| {
            d.uint(field::TRACK_UUID, PROCESS_TRACK)
                .message(field::TRACK_PROCESS, |m| {
                    m.int(field::PROCESS_PID, pid)
                        .string(field::PROCESS_NAME, &process.program);
                });
        });
    s.descriptor(&p);
    replay(reader, &map, &mut s)?;
    s.finish(&mut out)?;
    out.flush()?;
    Ok(())
}
