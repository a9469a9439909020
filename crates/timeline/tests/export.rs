//! Exports: Chrome trace JSON (parses, µs units, strictly nested per thread), speedscope
//! (balanced O/C events), Perfetto protobuf (decoded structurally), folded stacks (exact
//! self times); all deterministic.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::Value;
use tickscope_timeline::tscap::Reader;
use tickscope_timeline::{convert_file, export, export_with, Filter, Format};

use crate::support::proto::Msg;
use crate::support::writer::{process_payload, scope, thread, Capture, Entry, Ev, PROCESS};
use crate::support::{sample, sample_split, T0};

fn convert(bytes: &[u8], format: Format) -> Vec<u8> {
    let mut r = Reader::new(bytes, "x.tscap").unwrap();
    let mut out = Vec::new();
    export(&mut r, format, None, &mut out).unwrap();
    out
}

fn ns(v: &Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// An `X` event's duration in ns: its end (`ts + dur`, added as a reader adds them) less its
/// start, each back to ns (times are written on a grid of 1/1024 µs).
fn dur_ns(e: &Value) -> i64 {
    let end = e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap();
    (end * 1000.0).round() as i64 - ns(&e["ts"])
}

/// Checks that a thread's intervals nest: no two overlap without one containing the other.
fn assert_nested(name: &str, mut spans: Vec<Span>) {
    spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut stack: Vec<Span> = Vec::new();
    for s in spans {
        assert!(s.1 >= s.0, "{name}: negative duration {s:?}");
        while stack.last().is_some_and(|top| top.1 <= s.0 && top.0 < s.0) {
            stack.pop();
        }
        if let Some(top) = stack.last() {
            assert!(
                s.0 >= top.0 && s.1 <= top.1,
                "{name}: {s:?} overlaps {top:?} without nesting"
            );
        }
        stack.push(s);
    }
}

/// A scope as (start ns, end ns, name).
type Span = (i64, i64, String);

/// Chrome `X` events per tid, and the document.
fn chrome(bytes: &[u8]) -> (Value, BTreeMap<i64, Vec<Span>>) {
    let out = convert(bytes, Format::Chrome);
    let v: Value = serde_json::from_slice(&out).expect("Chrome output is JSON");
    let mut per_tid: BTreeMap<i64, Vec<Span>> = BTreeMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["ph"] == "X" {
            let ts = ns(&e["ts"]);
            per_tid
                .entry(e["tid"].as_i64().unwrap())
                .or_default()
                .push((ts, ts + dur_ns(e), e["name"].as_str().unwrap().to_owned()));
        }
    }
    (v, per_tid)
}

#[test]
fn chrome_trace_parses_nests_per_thread_and_uses_microseconds() {
    let (v, per_tid) = chrome(&sample(false).bytes);
    assert_eq!(v["displayTimeUnit"], "ns");
    let events = v["traceEvents"].as_array().unwrap();
    let find = |name: &str| {
        events
            .iter()
            .find(|e| e["name"] == name && e["ph"] == "X")
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let outer = find("outer");
    // Capture starts at tick 1000; outer begins at tick 10000: 9000 ns = 9.000 µs.
    assert_eq!((ns(&outer["ts"]), dur_ns(outer)), (9000, 1000));
    assert_eq!(
        (outer["pid"].as_i64(), outer["tid"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(find("leaked")["args"]["abandoned"], true);
    assert_eq!(dur_ns(find("leaked")), 400);
    let open = find("never-ends");
    assert_eq!(open["args"]["unfinished"], true);
    assert_eq!(
        (ns(&open["ts"]), dur_ns(open)),
        (17_000, 100),
        "closed at the last event"
    );
    assert_eq!(
        dur_ns(find("backwards")),
        0,
        "a clock step back is not a negative duration"
    );
    let text = String::from_utf8(convert(&sample(false).bytes, Format::Chrome)).unwrap();
    assert!(
        text.contains("\"ts\":9,\"pid\":1,\"tid\":1,\"dur\":1"),
        "{text}"
    );
    for (tid, spans) in per_tid {
        assert!(tid > 0);
        assert_nested(&format!("tid {tid}"), spans);
    }
    let count = |ph: &str, cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == ph && (cat.is_empty() || e["cat"] == cat))
            .count()
    };
    assert_eq!(count("X", ""), 10 + 2);
    assert_eq!(count("i", "frame"), 3);
    assert_eq!(count("i", "message"), 2);
    assert_eq!(count("i", "lost"), 1);
    assert_eq!(count("C", ""), 3);
    let lost = events.iter().find(|e| e["cat"] == "lost").unwrap();
    assert_eq!(lost["args"]["dropped"], 7);
    let counters: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| e["args"]["value"].as_f64().unwrap())
        .collect();
    assert_eq!(counters, [3.0, -1.5, 12.25]);
    let names: Vec<(i64, &str)> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_i64().unwrap(),
                e["args"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(names, [(1, "main"), (2, "worker")]);
    assert!(events
        .iter()
        .any(|e| e["name"] == "process_name" && e["args"]["name"] == "test-program"));
    assert_eq!(v["otherData"]["pid"], 4242);
    assert_eq!(v["otherData"]["threads"]["1"]["tid"], 4660);
}

/// A workload on an awkward tick rate whose counter steps back now and then, in many chunks.
fn rough_capture() -> Capture {
    let mut c = Capture::header();
    c.chunk(
        PROCESS,
        &process_payload(2.999_999_7e9 / 7.0, 5, 0, 1, "rough"),
    );
    c.meta(&[
        scope(1, "a", "a.rs", 1),
        scope(2, "b", "b.rs", 2),
        thread(1, 10, "t"),
    ]);
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut t = 100u64;
    let mut evs = Vec::new();
    let mut depth = 0;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t = if x % 23 == 0 {
            t.saturating_sub(x % 300)
        } else {
            t + x % 1000
        };
        if depth > 0 && x % 3 == 0 {
            depth -= 1;
            evs.push(Ev::End(1 + (x >> 8) % 2, t));
        } else {
            depth += 1;
            evs.push(Ev::Begin(1 + (x >> 8) % 2, t));
        }
    }
    let mut open = Vec::new();
    for part in evs.chunks(997) {
        c.events(1, &open, part);
        open = crate::support::open_after(&open, part);
    }
    c
}

#[test]
fn chrome_nesting_survives_rounding_and_a_counter_stepping_back() {
    let (_, per_tid) = chrome(&rough_capture().bytes);
    assert_eq!(per_tid.len(), 1);
    for (tid, spans) in per_tid {
        assert!(spans.len() > 5000);
        assert_nested(&format!("tid {tid}"), spans);
    }
}

/// Checks a speedscope document: every profile's events balance and nest, in order.
fn check_speedscope(v: &Value) -> Vec<(String, usize)> {
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = v["shared"]["frames"].as_array().unwrap().len();
    let mut out = Vec::new();
    for p in v["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "evented");
        assert_eq!(p["unit"], "nanoseconds");
        let (start, end) = (
            p["startValue"].as_u64().unwrap(),
            p["endValue"].as_u64().unwrap(),
        );
        let mut stack = Vec::new();
        let mut at = start;
        let events = p["events"].as_array().unwrap();
        for e in events {
            let f = e["frame"].as_u64().unwrap() as usize;
            assert!(f < frames);
            let t = e["at"].as_u64().unwrap();
            assert!(
                t >= at && t <= end,
                "at {t} after {at}, within {start}..{end}"
            );
            at = t;
            match e["type"].as_str().unwrap() {
                "O" => stack.push(f),
                "C" => assert_eq!(stack.pop(), Some(f), "close matches the innermost open"),
                other => panic!("event type {other}"),
            }
        }
        assert!(stack.is_empty(), "every open closed");
        out.push((p["name"].as_str().unwrap().to_owned(), events.len()));
    }
    out
}

#[test]
fn speedscope_profiles_balance_their_open_and_close_events() {
    let v: Value =
        serde_json::from_slice(&convert(&sample(true).bytes, Format::Speedscope)).unwrap();
    assert_eq!(
        check_speedscope(&v),
        [("main".to_owned(), 20), ("worker".to_owned(), 4)]
    );
    let names: Vec<&str> = v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "outer",
            "inner",
            "rec",
            "alloc",
            "leaked",
            "backwards",
            "never-ends"
        ]
    );
    assert_eq!(v["shared"]["frames"][0]["file"], "src/app/main.rs");
    let rough: Value =
        serde_json::from_slice(&convert(&rough_capture().bytes, Format::Speedscope)).unwrap();
    assert_eq!(check_speedscope(&rough).len(), 1);
}

#[test]
fn folded_stacks_carry_exact_self_times_in_sorted_order() {
    let out = String::from_utf8(convert(&sample(false).bytes, Format::Folded)).unwrap();
    assert_eq!(
        out,
        "main;alloc 100\n\
         main;alloc;leaked 400\n\
         main;never-ends 100\n\
         main;outer 700\n\
         main;outer;inner 300\n\
         main;rec 600\n\
         main;rec;rec 300\n\
         main;rec;rec;rec 100\n\
         worker;outer 50\n\
         worker;outer;inner 50\n"
    );
}

/// (packets, inflated; tracks by uuid; events by track: (ts, event, resolved name))
struct Perfetto {
    packets: Vec<Msg>,
    tracks: BTreeMap<u64, Msg>,
    events: BTreeMap<u64, Vec<(u64, Msg, Option<String>)>>,
}

/// Decodes the export as trace_processor reads it, with a decoder of our own: packets in
/// `compressed_packets` (zlib) in place; per sequence, incremental state cleared first,
/// timestamps on the sequence's incremental clock (from its clock snapshot) added up, the
/// default track of `TrackEventDefaults`, and names interned in `InternedData`.
fn perfetto(bytes: &[u8]) -> Perfetto {
    perfetto_filtered(bytes, &Filter::default())
}

fn perfetto_filtered(bytes: &[u8], filter: &Filter) -> Perfetto {
    let out = convert_filtered(bytes, Format::Perfetto, filter).0;
    let trace = Msg::parse(&out).expect("a protobuf message");
    assert!(
        trace.0.iter().all(|(f, _)| *f == 1),
        "a Trace holds packets only"
    );
    let mut packets = Vec::new();
    for p in trace.msgs(1) {
        match p.bytes(50) {
            Some(z) => {
                let mut raw = Vec::new();
                flate2::read::ZlibDecoder::new(z)
                    .read_to_end(&mut raw)
                    .expect("zlib");
                packets.extend(Msg::parse(&raw).expect("inner trace").msgs(1));
            }
            None => packets.push(p),
        }
    }
    #[derive(Default)]
    struct Seq {
        cleared: bool,
        clock: Option<u64>,
        value: u64,
        default_clock: Option<u64>,
        default_track: Option<u64>,
        names: BTreeMap<u64, String>,
        last: u64,
    }
    let mut seqs: BTreeMap<u64, Seq> = BTreeMap::new();
    let mut tracks = BTreeMap::new();
    let mut events: BTreeMap<u64, Vec<(u64, Msg, Option<String>)>> = BTreeMap::new();
    for p in &packets {
        let sid = p.uint(10).expect("trusted_packet_sequence_id");
        let s = seqs.entry(sid).or_default();
        if p.uint(13).is_some_and(|f| f & 1 != 0) {
            *s = Seq {
                cleared: true,
                ..Seq::default()
            };
        }
        assert!(
            s.cleared,
            "incremental state cleared first on sequence {sid}"
        );
        if let Some(snapshot) = p.msg(6) {
            for c in snapshot.msgs(1) {
                if c.uint(3) == Some(1) {
                    s.clock = c.uint(1);
                    s.value = c.uint(2).unwrap_or(0);
                }
            }
        }
        let clock = p.uint(58).or(s.default_clock);
        if let Some(d) = p.msg(59) {
            s.default_clock = d.uint(58).or(s.default_clock);
            s.default_track = d.msg(11).and_then(|t| t.uint(11)).or(s.default_track);
        }
        if let Some(i) = p.msg(12) {
            for n in i.msgs(2) {
                s.names.insert(n.uint(1).unwrap(), n.string(2).unwrap());
            }
        }
        let ts = p.uint(8).map(|t| {
            if clock.is_some() && clock == s.clock {
                s.value += t;
                s.value
            } else {
                t
            }
        });
        if let Some(ts) = ts {
            assert!(
                ts >= s.last,
                "timestamps in order on sequence {sid}: {ts} after {}",
                s.last
            );
            s.last = ts;
        }
        if let Some(d) = p.msg(60) {
            let uuid = d.uint(1).expect("track uuid");
            assert!(tracks.insert(uuid, d).is_none(), "one descriptor per track");
        }
        if let Some(e) = p.msg(11) {
            let ts = ts.expect("event timestamp");
            let track = e.uint(11).or(s.default_track).expect("event track");
            assert!(tracks.contains_key(&track), "track described before use");
            let name = e
                .string(23)
                .or_else(|| e.uint(10).map(|iid| s.names[&iid].clone()));
            events.entry(track).or_default().push((ts, e, name));
        }
    }
    Perfetto {
        packets,
        tracks,
        events,
    }
}

#[test]
fn perfetto_trace_decodes_into_tracks_and_balanced_slices() {
    let p = perfetto(&sample(false).bytes);
    assert_eq!(
        p.packets[0].uint(13),
        Some(1),
        "incremental state cleared first"
    );
    assert!(
        p.packets
            .iter()
            .all(|p| p.msg(11).is_none() || p.uint(13) == Some(2)),
        "every track event says it needs the sequence's incremental state"
    );
    let process = p
        .tracks
        .values()
        .find_map(|d| d.msg(3))
        .expect("process track");
    assert_eq!(process.uint(1), Some(4242));
    assert_eq!(process.string(6).as_deref(), Some("test-program"));
    let mut threads: Vec<(u64, u64, String)> = p
        .tracks
        .values()
        .filter_map(|d| d.msg(4))
        .map(|t| (t.uint(1).unwrap(), t.uint(2).unwrap(), t.string(5).unwrap()))
        .collect();
    threads.sort();
    assert_eq!(
        threads,
        [
            (4242, 4660, "main".to_owned()),
            (4242, 4661, "worker".to_owned())
        ]
    );
    let counter = p
        .tracks
        .values()
        .find(|d| d.bytes(8).is_some())
        .expect("counter track");
    assert_eq!(counter.string(2).as_deref(), Some("queue depth"));
    let process_uuid = p.tracks.iter().find(|(_, d)| d.msg(3).is_some()).unwrap().0;
    assert_eq!(counter.uint(5), Some(*process_uuid));
    let counter_uuid = counter.uint(1).unwrap();
    let mut values: Vec<(u64, f64)> = p.events[&counter_uuid]
        .iter()
        .map(|(ts, e, _)| {
            assert_eq!(e.uint(9), Some(4), "TYPE_COUNTER");
            (*ts, e.double(44).unwrap())
        })
        .collect();
    // Values from several threads' sequences: trace_processor sorts them by time.
    values.sort_by_key(|v| v.0);
    assert_eq!(values, [(9350, 3.0), (14_200, -1.5), (17_100, 12.25)]);
    let mut begins = 0;
    let mut instants = 0;
    for (track, evs) in &p.events {
        if *track == counter_uuid {
            continue;
        }
        let mut stack = Vec::new();
        let mut last = 0;
        for (ts, e, name) in evs {
            assert!(*ts >= last, "timestamps in order on a track");
            last = *ts;
            match e.uint(9) {
                Some(1) => {
                    begins += 1;
                    assert!(e.string(23).is_none(), "names interned");
                    stack.push((name.clone().expect("slice name"), *ts));
                }
                Some(2) => {
                    let (name, begin) = stack.pop().expect("an end closes an open slice");
                    if name == "outer" && begin == 9000 {
                        assert_eq!(*ts, 10_000);
                    }
                    let note = e.msgs(4).first().and_then(|a| a.string(10));
                    match name.as_str() {
                        "leaked" => assert_eq!(note.as_deref(), Some("abandoned")),
                        "never-ends" => assert_eq!(note.as_deref(), Some("unfinished")),
                        _ => assert_eq!(note, None, "{name}"),
                    }
                }
                Some(3) => {
                    instants += 1;
                    assert!(name.is_some() && e.string(22).is_some());
                }
                t => panic!("event type {t:?}"),
            }
        }
        assert!(stack.is_empty(), "balanced slices");
    }
    assert_eq!(begins, 12);
    assert_eq!(instants, 6);
}

#[test]
fn perfetto_events_of_many_chunks_come_out_in_time_order() {
    // Thread 2's chunk comes after all of thread 1's but holds earlier events.
    let p = perfetto(&sample_split(3, true).bytes);
    assert_eq!(p.events.values().map(Vec::len).sum::<usize>(), 24 + 6 + 3);
    let rough = perfetto(&rough_capture().bytes);
    assert!(rough.events.values().map(Vec::len).sum::<usize>() > 10_000);
}

#[test]
fn every_export_is_deterministic_and_independent_of_chunking_and_compression() {
    for format in [
        Format::Chrome,
        Format::Perfetto,
        Format::Speedscope,
        Format::Folded,
    ] {
        let a = convert(&sample(false).bytes, format);
        assert_eq!(a, convert(&sample(false).bytes, format), "{format}");
        assert_eq!(a, convert(&sample(true).bytes, format), "{format}");
        if format != Format::Perfetto && format != Format::Chrome {
            // Chunking changes only the order of interleaved threads' events in the
            // streaming formats.
            assert_eq!(a, convert(&sample_split(4, true).bytes, format), "{format}");
        }
    }
}

#[test]
fn convert_file_uses_the_last_calibration() {
    let mut c = sample(false);
    // Remove the end record, add a later calibration at 2 GHz, then the end record again.
    let end_at = c.bytes.len()
        - (16 + crate::support::writer::end_payload(&crate::support::sample_end()).len());
    c.bytes.truncate(end_at);
    c.meta(&[Entry::Clock {
        rate: 2e9,
        ticks: T0,
        unix_ns: 0,
    }]);
    c.end(&crate::support::sample_end());
    let path = c.write("calibrated.tscap");
    let mut out = Vec::new();
    let warnings = convert_file(&path, Format::Chrome, false, &mut out).unwrap();
    assert!(warnings.is_empty());
    let v: Value = serde_json::from_slice(&out).unwrap();
    let outer = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "outer" && e["tid"] == 1)
        .unwrap();
    assert_eq!((ns(&outer["ts"]), dur_ns(outer)), (4500, 500));
}

/// A capture for the filters: process start at tick 1000 and 1 GHz, so ns = tick - 1000.
/// Thread 1 ("main"): outer [0, 4000] ns, inner [500, 600], inner [1000, 3000], a frame at
/// 2000, inner [3100, 3200], outer [5000, 6000]; thread 2 ("worker"): outer [200, 300].
fn filter_capture() -> Vec<u8> {
    let mut c = Capture::new();
    c.meta(&[
        scope(1, "outer", "f.rs", 1),
        scope(2, "inner", "f.rs", 2),
        Entry::Marker {
            id: 1,
            counter: false,
            name: "frame".into(),
        },
        thread(1, 100, "main"),
        thread(2, 101, "worker"),
    ]);
    c.events(
        1,
        &[],
        &[
            Ev::Begin(1, 1000),
            Ev::Begin(2, 1500),
            Ev::End(2, 1600),
            Ev::Begin(2, 2000),
            Ev::Frame(1, 3000),
            Ev::End(2, 4000),
            Ev::Begin(2, 4100),
            Ev::End(2, 4200),
            Ev::End(1, 5000),
            Ev::Begin(1, 6000),
            Ev::End(1, 7000),
        ],
    );
    c.events(2, &[], &[Ev::Begin(1, 1200), Ev::End(1, 1300)]);
    c.bytes
}

fn convert_filtered(bytes: &[u8], format: Format, filter: &Filter) -> (Vec<u8>, u64) {
    let mut r = Reader::new(bytes, "x.tscap").unwrap();
    let mut out = Vec::new();
    let e = export_with(&mut r, format, None, filter, &mut out).unwrap();
    (out, e.left_out.short_scopes)
}

/// `--from 1000ns --until 3500ns --thread main --min-duration 500ns`: scopes cut to the
/// window (the outer one begins at its start and ends, clipped, at its end), the short one
/// left out and counted, what lies outside the window and the other thread gone.
#[test]
fn a_filtered_export_keeps_the_window_the_threads_and_the_long_scopes() {
    let filter = Filter {
        from_ns: 1000,
        until_ns: 3500,
        threads: vec!["main".into()],
        min_duration_ns: 500,
    };
    let (out, short) = convert_filtered(&filter_capture(), Format::Chrome, &filter);
    assert_eq!(short, 1);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let mut scopes: Vec<(String, i64, i64, Value, Value)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_owned(),
                ns(&e["ts"]),
                dur_ns(e),
                e["tid"].clone(),
                e["args"].clone(),
            )
        })
        .collect();
    scopes.sort_by_key(|s| (s.1, -s.2));
    assert_eq!(
        scopes,
        [
            (
                "outer".to_owned(),
                1000,
                2500,
                Value::from(1),
                serde_json::json!({"clipped": true})
            ),
            ("inner".to_owned(), 1000, 2000, Value::from(1), Value::Null),
        ]
    );
    let frames: Vec<i64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "i")
        .map(|e| ns(&e["ts"]))
        .collect();
    assert_eq!(frames, [2000]);
    assert_eq!(v["otherData"]["left_out"]["short_scopes"], 1);
    assert_eq!(v["otherData"]["filter"]["min_duration_ns"], 500);

    // The same in Perfetto's export: the one thread's slices, balanced, and the count.
    let p = perfetto_filtered(&filter_capture(), &filter);
    let slices: Vec<(u64, Option<String>)> = p
        .events
        .values()
        .flatten()
        .filter(|(_, e, _)| e.uint(9) == Some(1))
        .map(|(ts, _, name)| (*ts, name.clone()))
        .collect();
    assert_eq!(
        slices,
        [(1000, Some("outer".into())), (1000, Some("inner".into()))]
    );
    let note = p
        .events
        .values()
        .flatten()
        .find_map(|(_, e, name)| {
            (e.string(22).as_deref() == Some("tickscope")).then(|| name.clone())
        })
        .flatten()
        .expect("the left-out note");
    assert!(
        note.contains("1 scopes shorter than 500 ns left out"),
        "{note}"
    );

    // speedscope: the window's bounds, events in order and balanced.
    let (out, _) = convert_filtered(&filter_capture(), Format::Speedscope, &filter);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(check_speedscope(&v), [("main".to_owned(), 4)]);
    assert_eq!(v["profiles"][0]["startValue"], 1000);
    assert!(v["name"]
        .as_str()
        .unwrap()
        .contains("1 scopes shorter than 500 ns left out"));
}

/// A window alone (no minimum): every scope overlapping it, cut to it; nothing counted.
#[test]
fn a_window_alone_keeps_every_scope_overlapping_it() {
    let filter = Filter {
        from_ns: 550,
        until_ns: u64::MAX,
        ..Filter::default()
    };
    let (out, short) = convert_filtered(&filter_capture(), Format::Folded, &filter);
    assert_eq!(short, 0);
    // main: outer 550..4000 with inner 550..600, 1000..3000, 3100..3200 inside (2150), and
    // outer 5000..6000: outer's self time 3450 + 1000 - 2150; worker's scope ended before
    // the window.
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "main;outer 2300\nmain;outer;inner 2150\n"
    );
}

/// A capture with the CPU sampler's samples (version 2): the report counts them, and the
/// Perfetto export puts each on its own sequence as a `PerfSample` of its thread whose
/// interned callstack (root first) names the stack's functions; the other exports leave
/// them out.
#[test]
fn cpu_samples_become_perf_samples_with_interned_callstacks() {
    let mut c = Capture::with_version(2);
    c.chunk(PROCESS, &process_payload(1e9, 1000, 1, 77, "p"));
    c.meta(&[
        scope(1, "work", "w.rs", 1),
        thread(1, 100, "main"),
        thread(2, 101, "tickscope-sampler"),
        Entry::Stack {
            id: 1,
            frames: vec!["leaf".into(), "middle".into(), "main".into()],
        },
        Entry::Stack {
            id: 2,
            frames: vec!["other".into(), "main".into()],
        },
    ]);
    c.events(1, &[], &[Ev::Begin(1, 1000), Ev::End(1, 5000)]);
    c.events(
        2,
        &[],
        &[
            Ev::Sample(2000, 100, 1),
            Ev::Sample(3000, 100, 2),
            Ev::Sample(4000, 100, 1),
        ],
    );
    let mut r = Reader::new(&c.bytes[..], "x.tscap").unwrap();
    let sum = tickscope_timeline::summarize(&mut r, Default::default()).unwrap();
    assert_eq!((sum.samples, sum.sample_stacks), (3, 2));
    assert!(sum
        .to_text()
        .contains("CPU samples: 3 from the sampler, 2 stacks"));

    let p = perfetto(&c.bytes);
    let mut functions = BTreeMap::new();
    let mut frames = BTreeMap::new();
    let mut callstacks = BTreeMap::new();
    let mut got = Vec::new();
    for pkt in &p.packets {
        if let Some(i) = pkt.msg(12) {
            for f in i.msgs(5) {
                functions.insert(f.uint(1).unwrap(), f.string(2).unwrap());
            }
            for f in i.msgs(6) {
                frames.insert(f.uint(1).unwrap(), f.uint(2).unwrap());
            }
            for s in i.msgs(7) {
                callstacks.insert(s.uint(1).unwrap(), s.clone());
            }
        }
        if let Some(s) = pkt.msg(66) {
            let stack = &callstacks[&s.uint(4).unwrap()];
            let names: Vec<String> = stack
                .0
                .iter()
                .filter(|(f, _)| *f == 2)
                .map(|(_, v)| {
                    let id = match v {
                        crate::support::proto::Value::Varint(v) => *v,
                        other => panic!("frame id {other:?}"),
                    };
                    functions[&frames[&id]].clone()
                })
                .collect();
            got.push((pkt.uint(8).unwrap(), s.uint(2), s.uint(3), names.join(";")));
        }
    }
    assert_eq!(
        got,
        [
            (1000, Some(77), Some(100), "main;middle;leaf".to_owned()),
            (2000, Some(77), Some(100), "main;other".to_owned()),
            (3000, Some(77), Some(100), "main;middle;leaf".to_owned()),
        ]
    );
    // speedscope stays as it is: the samples are not scopes.
    let v: Value = serde_json::from_slice(&convert(&c.bytes, Format::Speedscope)).unwrap();
    assert_eq!(check_speedscope(&v), [("main".to_owned(), 2)]);
}
