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
//! By job: `fields.rs` Perfetto's field numbers and values, `trace.rs` the packets, batches
//! and sequences, `samples.rs` the CPU samples' sequence; here, the replay's events made
//! tracks and track events.

mod fields;
mod samples;
mod trace;

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Read, Write};

use fields::{field, kind, BOOTTIME, INCREMENTAL_CLOCK, SEQ_INCREMENTAL_STATE_CLEARED};
use samples::Samples;
use trace::{key, Trace, PROCESS_SEQUENCE};

use super::error::Error;
use super::filter::{Filter, LeftOut};
use super::protobuf::{varint, Message};
use super::replay::replay;
use super::sink::{Close, Instant, Sink};
use super::time::TimeMap;
use crate::tscap::{AsyncWhat, Clock, IdIndex, Meta, Reader};

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

/// The export: the replay's events as tracks and track events of a [`Trace`].
struct Perfetto<W: Write> {
    trace: Trace<W>,
    pid: i64,
    counters: IdIndex,
    tids: BTreeSet<u64>,
    /// The samples' sequence.
    samples: Samples,
    /// Futures and spans begun and not yet ended: async id to scope id and the thread of
    /// the begin.
    lives: HashMap<u64, (u64, u64)>,
    /// Ends written before their begins were read: async id to scope id.
    early: HashMap<u64, u64>,
    /// The window's start (where an end without a begin has its begin).
    from_ns: u64,
}

impl<W: Write> Perfetto<W> {
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
        self.trace.process_packet(&p)
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
        let mut e = Message(std::mem::take(&mut self.trace.event));
        e.0.clear();
        if how == AsyncWhat::Begin {
            if self.lives.contains_key(&aid) {
                self.trace.event = e.0;
                return Ok(());
            }
            if self.early.remove(&aid).is_none() {
                self.lives.insert(aid, (id, thread));
            }
            e.uint(field::EVENT_TYPE, kind::SLICE_BEGIN)
                .uint(field::EVENT_NAME_IID_FIELD, id + 1)
                .uint(field::EVENT_TRACK_UUID, track);
            self.trace.event = e.0;
            let interned = self.trace.interned(thread, id);
            return if interned {
                self.trace.track_event(thread, ns, None)
            } else {
                let name = meta.scope_name(id);
                self.trace.track_event(thread, ns, Some((id, &name)))
            };
        }
        if self.lives.remove(&aid).is_none() {
            if self.early.len() >= MAX_EARLY_ENDS || self.early.contains_key(&aid) {
                self.trace.event = e.0;
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
        self.trace.event = e.0;
        self.trace.track_event(thread, ns, None)
    }
}

fn annotation(e: &mut Message, name: &str, f: impl FnOnce(&mut Message)) {
    e.message(field::EVENT_DEBUG_ANNOTATIONS, |a| {
        a.string(field::ANNOTATION_NAME, name);
        f(a);
    });
}

impl<W: Write> Sink for Perfetto<W> {
    fn thread(&mut self, meta: &Meta, thread: u64) -> io::Result<()> {
        let Some((ord, seq)) = self.trace.add_thread(thread) else {
            return Ok(());
        };
        let def = meta.thread(thread);
        let mut tid = def.map_or(0, |d| d.tid);
        if tid == 0 || tid > i32::MAX as u64 || !self.tids.insert(tid) {
            tid = SYNTHETIC_TID + thread % SYNTHETIC_TID;
        }
        let name = meta.thread_name(thread);
        let track = THREAD_TRACKS + ord as u64;
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
        self.trace.process_packet(&p)?;
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
        self.trace.process_packet(&p)
    }

    fn begin(&mut self, meta: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        let e = &mut self.trace.event;
        e.clear();
        e.push(key(field::EVENT_TYPE, 0));
        e.push(kind::SLICE_BEGIN as u8);
        e.push(key(field::EVENT_NAME_IID_FIELD, 0));
        varint(e, id + 1);
        let known = self.trace.interned(thread, id);
        if known {
            self.trace.track_event(thread, ns, None)
        } else {
            let name = meta.scope_name(id);
            self.trace.track_event(thread, ns, Some((id, &name)))
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
        let e = &mut self.trace.event;
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
        self.trace.track_event(thread, end, None)
    }

    fn instant(&mut self, meta: &Meta, thread: u64, ns: u64, what: Instant<'_>) -> io::Result<()> {
        if let Instant::Async(id, aid, how) = what {
            return self.life(meta, thread, ns, id, aid, how);
        }
        let mut e = Message(std::mem::take(&mut self.trace.event));
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
        self.trace.event = e.0;
        self.trace.track_event(thread, ns, None)
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
        let p = self.samples.packet(meta, ns, tid, stack);
        self.trace.last_ns = self.trace.last_ns.max(ns);
        self.trace.process_packet(&p)
    }

    fn finish(&mut self, meta: &Meta, ns: u64) -> io::Result<()> {
        // Lives still open when the capture ends: ended there (on their begin's thread),
        // marked unfinished.
        let mut open: Vec<(u64, (u64, u64))> = self.lives.drain().collect();
        open.sort_unstable();
        for (aid, (_, thread)) in open {
            let mut e = Message(std::mem::take(&mut self.trace.event));
            e.0.clear();
            e.uint(field::EVENT_TYPE, kind::SLICE_END)
                .uint(field::EVENT_TRACK_UUID, ASYNC_TRACKS + aid);
            annotation(&mut e, "unfinished", |a| {
                a.uint(field::ANNOTATION_BOOL, 1);
            });
            self.trace.event = e.0;
            let at = ns.max(self.trace.last(thread));
            self.trace.track_event(thread, at, None)?;
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
            self.trace.process_packet(&p)?;
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
        let mut e = Message(std::mem::take(&mut self.trace.event));
        e.0.clear();
        e.uint(field::EVENT_TYPE, kind::COUNTER)
            .uint(field::EVENT_TRACK_UUID, track)
            .double(field::EVENT_DOUBLE_COUNTER_VALUE, value);
        self.trace.event = e.0;
        self.trace.track_event(thread, ns, None)
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
        trace: Trace::new(out),
        pid,
        counters: IdIndex::default(),
        tids: BTreeSet::new(),
        samples: Samples::new(process.program.clone(), pid),
        lives: HashMap::new(),
        early: HashMap::new(),
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
    s.trace.process_packet(&p)?;
    let replayed = replay(reader, &map, filter, &mut s)?;
    if replayed.left_out.short_scopes > 0 {
        let note = format!(
            "tickscope: {} scopes shorter than {} ns left out",
            replayed.left_out.short_scopes, filter.min_duration_ns
        );
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, s.trace.last_ns)
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
        s.trace.process_packet(&p)?;
    }
    s.trace.finish()?;
    Ok(replayed.left_out)
}
