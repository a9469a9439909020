//! Perfetto's native protobuf trace: a `Trace` of `TracePacket`s, read by the Perfetto UI and
//! `trace_processor`, written as Perfetto's own SDK and tracing service write it.
//!
//! - **A sequence per thread.** Sequence 1 carries the process's `TrackDescriptor` (pid,
//!   program name) and the counters' (`CounterDescriptor` tracks under the process). Each
//!   thread gets its own sequence (`trusted_packet_sequence_id` 2, 3, ... by first
//!   appearance), which opens with `SEQ_INCREMENTAL_STATE_CLEARED`, the thread's
//!   `TrackDescriptor` (`ThreadDescriptor`: pid, OS tid, name) and `TracePacketDefaults` whose
//!   `TrackEventDefaults.track_uuid` is the thread's track: its events name no track.
//! - **Interned names.** A scope's name is written once per sequence, in
//!   `InternedData.event_names`, and its slices refer to it by `name_iid`; those packets carry
//!   `SEQ_NEEDS_INCREMENTAL_STATE`.
//! - **Events in the replay's order.** `TYPE_SLICE_BEGIN`/`TYPE_SLICE_END` per scope,
//!   `TYPE_INSTANT` for frame marks (category `frame`), messages (`message`) and losses
//!   (`lost`, with a `dropped` debug annotation), `TYPE_COUNTER` with `double_counter_value` on
//!   counter tracks; timestamps in ns since the start of capture. Each sequence's timestamps
//!   never decrease; trace_processor sorts across sequences itself, so nothing is gathered or
//!   merged here: the export streams, in memory bounded by one batch.
//! - **CPU samples** (a capture the sampler ran beside) go on a sequence of their own, as
//!   `PerfSample`s (pid, tid, `callstack_iid`) whose `InternedData` holds the callstacks
//!   (root first), frames (one per function: `rel_pc` is its own id, so no two names share a
//!   frame), function names and one mapping, the program: trace_processor puts them on their
//!   threads.
//! - **Compressed.** Packets are gathered in batches of about 1 MiB, each deflated (zlib) into
//!   one `TracePacket.compressed_packets`, as Perfetto's tracing service does with
//!   `compression_type: DEFLATE`: about 1 to 2 bytes an event.
//!
//! A scope closed other than by its own end gets a debug annotation (`unfinished`,
//! `abandoned`, `cut` or `clipped` = true) on its end event. With a filter, the number of
//! scopes left out for being short is an instant on the process track at the end.
//!
//! Field numbers, from Perfetto's `protos/perfetto/trace/`: `Trace.packet` 1; `TracePacket`:
//! `timestamp` 8, `trusted_packet_sequence_id` 10, `track_event` 11, `interned_data` 12,
//! `sequence_flags` 13, `compressed_packets` 50, `trace_packet_defaults` 59,
//! `track_descriptor` 60; `TracePacketDefaults`: `track_event_defaults` 11;
//! `TrackEventDefaults`: `track_uuid` 11; `InternedData`: `event_names` 2; `EventName`:
//! `iid` 1, `name` 2; `TrackDescriptor`: `uuid` 1, `name` 2, `process` 3, `thread` 4,
//! `parent_uuid` 5, `counter` 8; `ProcessDescriptor`: `pid` 1, `process_name` 6;
//! `ThreadDescriptor`: `pid` 1, `tid` 2, `thread_name` 5; `TrackEvent`: `debug_annotations` 4,
//! `type` 9, `name_iid` 10, `track_uuid` 11, `categories` 22, `name` 23,
//! `double_counter_value` 44; `DebugAnnotation`: `bool_value` 2, `uint_value` 3, `name` 10;
//! `TracePacket.clock_snapshot` 6, `timestamp_clock_id` 58, `perf_sample` 66;
//! `ClockSnapshot.clocks` 1: `clock_id` 1, `timestamp` 2, `is_incremental` 3;
//! `TracePacketDefaults.timestamp_clock_id` 58; `PerfSample`: `cpu` 1, `pid` 2, `tid` 3,
//! `callstack_iid` 4; `InternedData`: `function_names` 5, `frames` 6, `callstacks` 7,
//! `mapping_paths` 17, `mappings` 19; `InternedString`: `iid` 1, `str` 2; `Frame`: `iid` 1,
//! `function_name_id` 2, `mapping_id` 3, `rel_pc` 4; `Callstack`: `iid` 1, `frame_ids` 2;
//! `Mapping`: `iid` 1, `path_string_ids` 7 (checked against Perfetto's compiled protos).

use std::collections::BTreeSet;
use std::io::{self, Read, Write};

use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::error::Error;
use super::filter::{Filter, LeftOut};
use super::protobuf::{varint, Message};
use super::replay::replay;
use super::sink::{Close, Instant, Sink};
use super::time::TimeMap;
use crate::tscap::{AsyncWhat, Clock, IdIndex, Meta, Reader};

/// Field numbers (see the module docs).
pub(crate) mod field {
    pub const TRACE_PACKET: u32 = 1;

    pub const PACKET_CLOCK_SNAPSHOT: u32 = 6;
    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_INTERNED_DATA: u32 = 12;
    pub const PACKET_SEQUENCE_FLAGS: u32 = 13;
    pub const PACKET_COMPRESSED: u32 = 50;
    pub const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;
    pub const PACKET_DEFAULTS: u32 = 59;
    pub const PACKET_PERF_SAMPLE: u32 = 66;

    pub const PERF_SAMPLE_CPU: u32 = 1;
    pub const PERF_SAMPLE_PID: u32 = 2;
    pub const PERF_SAMPLE_TID: u32 = 3;
    pub const PERF_SAMPLE_CALLSTACK_IID: u32 = 4;

    pub const INTERNED_FUNCTION_NAMES: u32 = 5;
    pub const INTERNED_FRAMES: u32 = 6;
    pub const INTERNED_CALLSTACKS: u32 = 7;
    pub const INTERNED_MAPPING_PATHS: u32 = 17;
    pub const INTERNED_MAPPINGS: u32 = 19;
    pub const INTERNED_STRING_IID: u32 = 1;
    pub const INTERNED_STRING_STR: u32 = 2;
    pub const FRAME_IID: u32 = 1;
    pub const FRAME_FUNCTION_NAME_ID: u32 = 2;
    pub const FRAME_MAPPING_ID: u32 = 3;
    pub const FRAME_REL_PC: u32 = 4;
    pub const CALLSTACK_IID: u32 = 1;
    pub const CALLSTACK_FRAME_IDS: u32 = 2;
    pub const MAPPING_IID: u32 = 1;
    pub const MAPPING_PATH_STRING_IDS: u32 = 7;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;

    pub const DEFAULTS_TRACK_EVENT: u32 = 11;
    pub const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;

    pub const SNAPSHOT_CLOCKS: u32 = 1;
    pub const CLOCK_ID: u32 = 1;
    pub const CLOCK_TIMESTAMP: u32 = 2;
    pub const CLOCK_IS_INCREMENTAL: u32 = 3;
    pub const TRACK_EVENT_DEFAULTS_TRACK_UUID: u32 = 11;

    pub const INTERNED_EVENT_NAMES: u32 = 2;
    pub const EVENT_NAME_IID: u32 = 1;
    pub const EVENT_NAME_NAME: u32 = 2;

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
    pub const EVENT_NAME_IID_FIELD: u32 = 10;
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

/// `TracePacket.SequenceFlags`.
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// The sequence of the process and counter descriptors; threads' sequences follow.
const PROCESS_SEQUENCE: u64 = 1;
/// Track uuids: the process, then threads and counters in their own ranges, numbered in order
/// of first appearance (deterministic).
const PROCESS_TRACK: u64 = 1;
const THREAD_TRACKS: u64 = 1 << 32;
const COUNTER_TRACKS: u64 = 2 << 32;
/// A future's or span's life (format version 3) is a track of its own under the process,
/// named by its call site: `ASYNC_TRACKS` + its async id.
const ASYNC_TRACKS: u64 = 1 << 40;
/// The sequence of the begins given to lives whose begin is not in the trace (absolute
/// timestamps).
const ASYNC_SEQUENCE: u64 = 0x7ffe_0000;
/// Ends kept waiting for their begins, at most (a damaged capture naming endless ids).
const MAX_EARLY_ENDS: usize = 1 << 20;
/// Threads without a usable OS tid (unknown, or one an earlier thread of the capture already
/// used) get a synthetic one from here.
const SYNTHETIC_TID: u64 = 0x4000_0000;
/// `ClockSnapshot.Clock.BuiltinClocks.BOOTTIME`: the trace's default clock.
const BOOTTIME: u64 = 6;
/// The sequence-scoped clock each thread's timestamps use: incremental (each packet's
/// timestamp is the ns since the previous one on its sequence), as Perfetto's SDK does.
const INCREMENTAL_CLOCK: u64 = 64;
/// The sequence of the CPU sampler's samples (`PerfSample`s, with their callstacks
/// interned), apart from the threads' own: samples arrive later than their thread's events.
const SAMPLE_SEQUENCE: u64 = 0x7fff_0000;
/// Raw bytes of packets deflated into one `compressed_packets`.
const BATCH: usize = 1 << 20;

/// Appends a packet to a `Trace`: field 1, length-delimited.
fn frame(out: &mut Vec<u8>, packet: &[u8]) {
    varint(out, (field::TRACE_PACKET as u64) << 3 | 2);
    varint(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

/// A field key byte (every field number used on the hot path is below 16).
const fn key(field: u32, wire: u8) -> u8 {
    ((field as u8) << 3) | wire
}

/// One thread's sequence.
struct Seq {
    id: u64,
    /// The last timestamp written on it (its incremental clock's value).
    last: u64,
    /// Scope ids whose names this sequence has interned (iid = id + 1).
    interned: Interned,
}

/// A set of scope ids: flat for the small ids most programs have, hashed past them (a
/// capture of many threads each using one large id must not cost a flat table each).
#[derive(Default)]
struct Interned {
    dense: Vec<bool>,
    sparse: std::collections::HashSet<u64>,
}

/// Ids below this are kept flat.
const DENSE: u64 = 1024;

impl Interned {
    #[inline]
    fn contains(&self, id: u64) -> bool {
        if id < DENSE {
            self.dense.get(id as usize) == Some(&true)
        } else {
            self.sparse.contains(&id)
        }
    }

    /// Adds `id`; false if it was there.
    fn insert(&mut self, id: u64) -> bool {
        if id < DENSE {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, false);
            }
            !std::mem::replace(&mut self.dense[i], true)
        } else {
            self.sparse.insert(id)
        }
    }
}

struct Perfetto<W: Write> {
    out: W,
    /// Framed packets not yet deflated.
    batch: Vec<u8>,
    /// Scratch for a track event.
    event: Vec<u8>,
    pid: i64,
    /// The program's name (the samples' mapping).
    program: String,
    threads: IdIndex,
    seqs: Vec<Seq>,
    counters: IdIndex,
    tids: BTreeSet<u64>,
    /// The latest timestamp written (for the closing note).
    last_ns: u64,
    /// The samples' sequence, once it has begun.
    samples: Option<Samples>,
    compressed: Vec<u8>,
    /// Futures and spans begun and not yet ended: async id to scope id and the thread of
    /// the begin.
    lives: std::collections::HashMap<u64, (u64, u64)>,
    /// Ends written before their begins were read: async id to scope id.
    early: std::collections::HashMap<u64, u64>,
    /// The window's start (where an end without a begin has its begin).
    from_ns: u64,
}

impl<W: Write> Perfetto<W> {
    /// Appends a whole packet (its fields in `p`) to the batch.
    fn put(&mut self, p: &[u8]) -> io::Result<()> {
        frame(&mut self.batch, p);
        if self.batch.len() >= BATCH {
            self.deflate()?;
        }
        Ok(())
    }

    /// Writes the batch as one `compressed_packets` packet.
    fn deflate(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.compressed.clear();
        let mut z = ZlibEncoder::new(std::mem::take(&mut self.compressed), Compression::fast());
        z.write_all(&self.batch)?;
        let body = z.finish()?;
        let mut head = Vec::with_capacity(16);
        varint(&mut head, (field::TRACE_PACKET as u64) << 3 | 2);
        let mut inner_key = Vec::with_capacity(8);
        varint(&mut inner_key, (field::PACKET_COMPRESSED as u64) << 3 | 2);
        varint(&mut inner_key, body.len() as u64);
        varint(&mut head, (inner_key.len() + body.len()) as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&inner_key)?;
        self.out.write_all(&body)?;
        self.compressed = body;
        self.batch.clear();
        Ok(())
    }

    fn seq(&self, thread: u64) -> usize {
        self.threads.get(thread).unwrap_or(0) as usize
    }

    /// A track event on thread `thread`'s sequence at `ns` (never before the sequence's
    /// previous one): the packet's fields around the event's (in `self.event`), with its
    /// name interned first when `name` is new there. Written straight into the batch.
    fn track_event(&mut self, thread: u64, ns: u64, name: Option<(u64, &str)>) -> io::Result<()> {
        let k = self.seq(thread);
        let seq = &mut self.seqs[k];
        let delta = ns.saturating_sub(seq.last);
        seq.last = seq.last.max(ns);
        let b = &mut self.batch;
        b.push(key(field::TRACE_PACKET, 2));
        // The packet's length, patched below (one byte unless the packet is long).
        let at = b.len();
        b.push(0);
        b.push(key(field::PACKET_TIMESTAMP, 0));
        varint(b, delta);
        b.push(key(field::PACKET_SEQUENCE_ID, 0));
        varint(b, seq.id);
        b.push(key(field::PACKET_SEQUENCE_FLAGS, 0));
        b.push(SEQ_NEEDS_INCREMENTAL_STATE as u8);
        if let Some((id, text)) = name {
            if seq.interned.insert(id) {
                let mut m = Message::new();
                m.message(field::INTERNED_EVENT_NAMES, |n| {
                    n.uint(field::EVENT_NAME_IID, id + 1)
                        .string(field::EVENT_NAME_NAME, text);
                });
                b.push(key(field::PACKET_INTERNED_DATA, 2));
                varint(b, m.0.len() as u64);
                b.extend_from_slice(&m.0);
            }
        }
        b.push(key(field::PACKET_TRACK_EVENT, 2));
        match self.event.as_slice() {
            // A slice's begin or end, written without a copy call.
            &[t, k] => b.extend_from_slice(&[2, t, k]),
            &[t, k, n, i] => b.extend_from_slice(&[4, t, k, n, i]),
            e => {
                varint(b, e.len() as u64);
                b.extend_from_slice(e);
            }
        }
        let len = b.len() - at - 1;
        if len < 0x80 {
            b[at] = len as u8;
        } else {
            // A long packet (a long message): its length takes more bytes.
            let body = b.split_off(at + 1);
            b.truncate(at);
            varint(b, body.len() as u64);
            b.extend_from_slice(&body);
        }
        self.last_ns = self.last_ns.max(ns);
        if self.batch.len() >= BATCH {
            self.deflate()?;
        }
        Ok(())
    }

    /// A packet on the process's sequence.
    fn process_packet(&mut self, p: &Message) -> io::Result<()> {
        self.put(&p.0)
    }

    /// Declares a track under the process's, named `name` (a counter track if `counter`).
    fn process_child_track(&mut self, track: u64, name: &str, counter: bool) -> io::Result<()> {
        let mut p = Message::new();
        p.uint(field::PACKET_SEQUENCE_ID, PROCESS_SEQUENCE).message(
            field::PACKET_TRACK_DESCRIPTOR,
            |d| {
                d.uint(field::TRACK_UUID, track)
                    .uint(field::TRACK_PARENT_UUID, PROCESS_TRACK)
                    .string(field::TRACK_NAME, name);
                if counter {
                    d.message(field::TRACK_COUNTER, |_| {});
                }
            },
        );
        self.process_packet(&p)
    }

    /// A future's or span's life: a slice on a track of its own (under the process, named
    /// by its call site), its begin and end each on the sequence of the thread it happened
    /// on (a future moves between threads; trace_processor sorts across sequences, as for
    /// the SDK's async tracks). An end read before its begin (its thread's chunk came first)
    /// is written at once; one whose begin never comes (lost, or outside the window) gets a
    /// begin at the window's start, marked `begun_before`, so that every slice is whole.
    fn life(
        &mut self,
        meta: &Meta,
        thread: u64,
        ns: u64,
        id: u64,
        aid: u64,
        how: AsyncWhat,
    ) -> io::Result<()> {
        let track = ASYNC_TRACKS + aid;
        let known = self.lives.contains_key(&aid) || self.early.contains_key(&aid);
        if !known {
            self.process_child_track(track, &meta.scope_name(id), false)?;
        }
        let mut e = Message(std::mem::take(&mut self.event));
        e.0.clear();
        if how == AsyncWhat::Begin {
            if self.lives.contains_key(&aid) {
                self.event = e.0;
                return Ok(());
            }
            if self.early.remove(&aid).is_none() {
                self.lives.insert(aid, (id, thread));
            }
            e.uint(field::EVENT_TYPE, kind::SLICE_BEGIN)
                .uint(field::EVENT_NAME_IID_FIELD, id + 1)
                .uint(field::EVENT_TRACK_UUID, track);
            self.event = e.0;
            let interned = self.seqs[self.seq(thread)].interned.contains(id);
            return if interned {
                self.track_event(thread, ns, None)
            } else {
                let name = meta.scope_name(id);
                self.track_event(thread, ns, Some((id, &name)))
            };
        }
        if self.lives.remove(&aid).is_none() {
            if self.early.len() >= MAX_EARLY_ENDS || self.early.contains_key(&aid) {
                self.event = e.0;
                return Ok(());
            }
            self.early.insert(aid, id);
        }
        e.uint(field::EVENT_TYPE, kind::SLICE_END)
            .uint(field::EVENT_TRACK_UUID, track);
        if how == AsyncWhat::Cancelled {
            annotation(&mut e, "cancelled", |a| {
                a.uint(field::ANNOTATION_BOOL, 1);
            });
        }
        self.event = e.0;
        self.track_event(thread, ns, None)
    }
}

/// What the samples' sequence has interned: function names (one frame each, its `rel_pc` its
/// own iid, so that no two names share a frame) and callstacks (by the capture's stack id).
#[derive(Default)]
struct Samples {
    functions: std::collections::HashMap<String, u64>,
    callstacks: std::collections::HashSet<u64>,
}

fn annotation(e: &mut Message, name: &str, f: impl FnOnce(&mut Message)) {
    e.message(field::EVENT_DEBUG_ANNOTATIONS, |a| {
        a.string(field::ANNOTATION_NAME, name);
        f(a);
    });
}

impl<W: Write> Sink for Perfetto<W> {
    fn thread(&mut self, meta: &Meta, thread: u64) -> io::Result<()> {
        let (ord, new) = self.threads.get_or_insert(thread);
        if !new {
            return Ok(());
        }
        let def = meta.thread(thread);
        let mut tid = def.map_or(0, |d| d.tid);
        if tid == 0 || tid > i32::MAX as u64 || !self.tids.insert(tid) {
            tid = SYNTHETIC_TID + thread % SYNTHETIC_TID;
        }
        let name = meta.thread_name(thread);
        let track = THREAD_TRACKS + ord as u64;
        let seq = PROCESS_SEQUENCE + 1 + ord as u64;
        self.seqs.push(Seq {
            id: seq,
            last: 0,
            interned: Interned::default(),
        });
        let pid = self.pid;
        // The sequence's incremental clock starts at 0, which is BOOTTIME 0 (the start of
        // capture): a packet's timestamp is then the ns since the previous packet's.
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, 0)
            .uint(field::PACKET_TIMESTAMP_CLOCK_ID, BOOTTIME)
            .uint(field::PACKET_SEQUENCE_ID, seq)
            .uint(field::PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED)
            .message(field::PACKET_CLOCK_SNAPSHOT, |c| {
                c.message(field::SNAPSHOT_CLOCKS, |k| {
                    k.uint(field::CLOCK_ID, BOOTTIME)
                        .uint(field::CLOCK_TIMESTAMP, 0);
                })
                .message(field::SNAPSHOT_CLOCKS, |k| {
                    k.uint(field::CLOCK_ID, INCREMENTAL_CLOCK)
                        .uint(field::CLOCK_TIMESTAMP, 0)
                        .uint(field::CLOCK_IS_INCREMENTAL, 1);
                });
            });
        self.process_packet(&p)?;
        let mut p = Message::new();
        p.uint(field::PACKET_SEQUENCE_ID, seq)
            .message(field::PACKET_DEFAULTS, |d| {
                d.uint(field::DEFAULTS_TIMESTAMP_CLOCK_ID, INCREMENTAL_CLOCK)
                    .message(field::DEFAULTS_TRACK_EVENT, |t| {
                        t.uint(field::TRACK_EVENT_DEFAULTS_TRACK_UUID, track);
                    });
            })
            .message(field::PACKET_TRACK_DESCRIPTOR, |d| {
                d.uint(field::TRACK_UUID, track)
                    .message(field::TRACK_THREAD, |t| {
                        t.int(field::THREAD_PID, pid)
                            .int(field::THREAD_TID, tid as i64)
                            .string(field::THREAD_NAME, &name);
                    });
            });
        self.process_packet(&p)
    }

    fn begin(&mut self, meta: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        let e = &mut self.event;
        e.clear();
        e.push(key(field::EVENT_TYPE, 0));
        e.push(kind::SLICE_BEGIN as u8);
        e.push(key(field::EVENT_NAME_IID_FIELD, 0));
        varint(e, id + 1);
        let k = self.seq(thread);
        let known = self.seqs[k].interned.contains(id);
        if known {
            self.track_event(thread, ns, None)
        } else {
            let name = meta.scope_name(id);
            self.track_event(thread, ns, Some((id, &name)))
        }
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
        let e = &mut self.event;
        e.clear();
        e.push(key(field::EVENT_TYPE, 0));
        e.push(kind::SLICE_END as u8);
        if let Some(label) = how.label() {
            let mut m = Message(std::mem::take(e));
            annotation(&mut m, label, |a| {
                a.uint(field::ANNOTATION_BOOL, 1);
            });
            *e = m.0;
        }
        self.track_event(thread, end, None)
    }

    fn instant(&mut self, meta: &Meta, thread: u64, ns: u64, what: Instant<'_>) -> io::Result<()> {
        if let Instant::Async(id, aid, how) = what {
            return self.life(meta, thread, ns, id, aid, how);
        }
        let mut e = Message(std::mem::take(&mut self.event));
        e.0.clear();
        e.uint(field::EVENT_TYPE, kind::INSTANT);
        match what {
            Instant::Async(..) => {}
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
                annotation(&mut e, "dropped", |a| {
                    a.uint(field::ANNOTATION_UINT, n);
                });
            }
        }
        self.event = e.0;
        self.track_event(thread, ns, None)
    }

    /// A `PerfSample` on the samples' sequence, its callstack (root first), frames and
    /// function names interned on first use; the mapping is the program's.
    fn sample(
        &mut self,
        meta: &Meta,
        _recorder: u64,
        ns: u64,
        tid: u64,
        stack: u64,
    ) -> io::Result<()> {
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, ns)
            .uint(field::PACKET_SEQUENCE_ID, SAMPLE_SEQUENCE);
        let first = self.samples.is_none();
        let samples = self.samples.get_or_insert_with(Samples::default);
        let mut interned = Message::new();
        if first {
            interned
                .message(field::INTERNED_MAPPING_PATHS, |s| {
                    s.uint(field::INTERNED_STRING_IID, 1)
                        .string(field::INTERNED_STRING_STR, &self.program);
                })
                .message(field::INTERNED_MAPPINGS, |m| {
                    m.uint(field::MAPPING_IID, 1)
                        .uint(field::MAPPING_PATH_STRING_IDS, 1);
                });
        }
        let stack = stack + 1;
        if samples.callstacks.insert(stack) {
            let frames = meta.stack(stack - 1).unwrap_or_default();
            let mut ids = Vec::with_capacity(frames.len());
            // Root first: the capture lists them leaf first.
            for name in frames.iter().rev() {
                let next = samples.functions.len() as u64 + 1;
                let (iid, new) = match samples.functions.get(name) {
                    Some(&iid) => (iid, false),
                    None => {
                        samples.functions.insert(name.clone(), next);
                        (next, true)
                    }
                };
                if new {
                    interned
                        .message(field::INTERNED_FUNCTION_NAMES, |s| {
                            s.uint(field::INTERNED_STRING_IID, iid)
                                .string(field::INTERNED_STRING_STR, name);
                        })
                        .message(field::INTERNED_FRAMES, |f| {
                            f.uint(field::FRAME_IID, iid)
                                .uint(field::FRAME_FUNCTION_NAME_ID, iid)
                                .uint(field::FRAME_MAPPING_ID, 1)
                                .uint(field::FRAME_REL_PC, iid);
                        });
                }
                ids.push(iid);
            }
            interned.message(field::INTERNED_CALLSTACKS, |c| {
                c.uint(field::CALLSTACK_IID, stack);
                for id in &ids {
                    c.uint(field::CALLSTACK_FRAME_IDS, *id);
                }
            });
        }
        p.uint(
            field::PACKET_SEQUENCE_FLAGS,
            if first {
                SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE
            } else {
                SEQ_NEEDS_INCREMENTAL_STATE
            },
        );
        if !interned.0.is_empty() {
            p.bytes(field::PACKET_INTERNED_DATA, &interned.0);
        }
        let pid = self.pid;
        p.message(field::PACKET_PERF_SAMPLE, |s| {
            s.uint(field::PERF_SAMPLE_CPU, 0)
                .int(field::PERF_SAMPLE_PID, pid)
                .uint(field::PERF_SAMPLE_TID, tid)
                .uint(field::PERF_SAMPLE_CALLSTACK_IID, stack);
        });
        self.last_ns = self.last_ns.max(ns);
        self.process_packet(&p)
    }

    fn finish(&mut self, meta: &Meta, ns: u64) -> io::Result<()> {
        // Lives still open when the capture ends: ended there (on their begin's thread),
        // marked unfinished.
        let mut open: Vec<(u64, (u64, u64))> = self.lives.drain().collect();
        open.sort_unstable();
        for (aid, (_, thread)) in open {
            let mut e = Message(std::mem::take(&mut self.event));
            e.0.clear();
            e.uint(field::EVENT_TYPE, kind::SLICE_END)
                .uint(field::EVENT_TRACK_UUID, ASYNC_TRACKS + aid);
            annotation(&mut e, "unfinished", |a| {
                a.uint(field::ANNOTATION_BOOL, 1);
            });
            self.event = e.0;
            let at = ns.max(self.seqs[self.seq(thread)].last);
            self.track_event(thread, at, None)?;
        }
        // Ends whose begins never came: begun at the window's start, on a sequence of their
        // own (absolute timestamps, all equal).
        let mut orphans: Vec<(u64, u64)> = self.early.drain().collect();
        orphans.sort_unstable();
        for (aid, id) in orphans {
            let name = meta.scope_name(id);
            let mut p = Message::new();
            p.uint(field::PACKET_TIMESTAMP, self.from_ns)
                .uint(field::PACKET_SEQUENCE_ID, ASYNC_SEQUENCE)
                .message(field::PACKET_TRACK_EVENT, |e| {
                    e.uint(field::EVENT_TYPE, kind::SLICE_BEGIN)
                        .uint(field::EVENT_TRACK_UUID, ASYNC_TRACKS + aid)
                        .string(field::EVENT_NAME, &name);
                    annotation(e, "begun_before", |a| {
                        a.uint(field::ANNOTATION_BOOL, 1);
                    });
                });
            self.process_packet(&p)?;
        }
        Ok(())
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
            self.process_child_track(track, &meta.marker_name(id), true)?;
        }
        let mut e = Message(std::mem::take(&mut self.event));
        e.0.clear();
        e.uint(field::EVENT_TYPE, kind::COUNTER)
            .uint(field::EVENT_TRACK_UUID, track)
            .double(field::EVENT_DOUBLE_COUNTER_VALUE, value);
        self.event = e.0;
        self.track_event(thread, ns, None)
    }
}

/// Writes the capture at `reader` as a Perfetto protobuf trace, converting ticks at `clock`,
/// keeping what `filter` keeps.
pub fn write<R: Read, W: Write>(
    reader: &mut Reader<R>,
    clock: Clock,
    filter: &Filter,
    out: W,
) -> Result<LeftOut, Error> {
    let map = TimeMap::new(reader.process(), clock);
    let process = reader.process().clone();
    let pid = (process.pid as i64).clamp(0, i32::MAX as i64);
    let mut s = Perfetto {
        out,
        batch: Vec::with_capacity(BATCH + (64 << 10)),
        event: Vec::new(),
        pid,
        program: process.program.clone(),
        threads: IdIndex::default(),
        seqs: Vec::new(),
        counters: IdIndex::default(),
        tids: BTreeSet::new(),
        last_ns: 0,
        samples: None,
        compressed: Vec::new(),
        lives: std::collections::HashMap::new(),
        early: std::collections::HashMap::new(),
        from_ns: filter.from_ns,
    };
    let mut p = Message::new();
    p.uint(field::PACKET_SEQUENCE_ID, PROCESS_SEQUENCE)
        .uint(field::PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED)
        .message(field::PACKET_TRACK_DESCRIPTOR, |d| {
            d.uint(field::TRACK_UUID, PROCESS_TRACK)
                .message(field::TRACK_PROCESS, |m| {
                    m.int(field::PROCESS_PID, pid)
                        .string(field::PROCESS_NAME, &process.program);
                });
        });
    s.process_packet(&p)?;
    let replayed = replay(reader, &map, filter, &mut s)?;
    if replayed.left_out.short_scopes > 0 {
        let note = format!(
            "tickscope: {} scopes shorter than {} ns left out",
            replayed.left_out.short_scopes, filter.min_duration_ns
        );
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, s.last_ns)
            .uint(field::PACKET_SEQUENCE_ID, PROCESS_SEQUENCE)
            .message(field::PACKET_TRACK_EVENT, |e| {
                e.uint(field::EVENT_TYPE, kind::INSTANT)
                    .uint(field::EVENT_TRACK_UUID, PROCESS_TRACK)
                    .string(field::EVENT_CATEGORIES, "tickscope")
                    .string(field::EVENT_NAME, &note);
                annotation(e, "short_scopes_left_out", |a| {
                    a.uint(field::ANNOTATION_UINT, replayed.left_out.short_scopes);
                });
                annotation(e, "min_duration_ns", |a| {
                    a.uint(field::ANNOTATION_UINT, filter.min_duration_ns);
                });
            });
        s.process_packet(&p)?;
    }
    s.deflate()?;
    s.out.flush()?;
    Ok(replayed.left_out)
}
