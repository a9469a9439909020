//! The `.tscap` reader: round trips of every event kind, chunk and batch boundaries, every
//! kind of bad input (one-line error with the right offset), salvage, missing end records.

use tickscope_timeline::tscap::{
    AsyncWhat, ChunkKind, Clock, End, ErrorKind, Event, EventKind, Events, MarkerKind, Meta,
    MetaEntry, Problem, Process, Reader, ScopeKind,
};

use crate::support::writer::{
    events_payload, meta_payload, process_payload, thread, varint, Capture, EndRec, Entry, Ev, END,
    EVENTS, META, PROCESS,
};
use crate::support::{sample, sample_main, sample_worker, T0};

/// Everything read from a capture.
struct Got {
    /// (thread, event, message text)
    events: Vec<(u64, Event, Option<String>)>,
    /// The open-scope list of every events chunk.
    open: Vec<Vec<(u64, u64)>>,
    warnings: Vec<String>,
    end: Option<End>,
    meta: Meta,
    process: Process,
    entries: Vec<MetaEntry>,
    chunks: u64,
}

fn read(bytes: &[u8], salvage: bool) -> Result<Got, tickscope_timeline::tscap::Error> {
    let mut r = Reader::new(bytes, "x.tscap")?.salvage(salvage);
    let mut batch = Events::new();
    let mut events = Vec::new();
    let mut open = Vec::new();
    let mut entries = Vec::new();
    while let Some(kind) = r.next_chunk()? {
        match kind {
            ChunkKind::Events => {
                let info = r.events_info().clone();
                open.push(info.open.iter().map(|o| (o.id, o.ticks)).collect());
                let mut n = 0;
                while r.decode(&mut batch) {
                    assert!(!batch.is_empty() && batch.len() <= 4096);
                    n += batch.len() as u64;
                    for e in batch.as_slice() {
                        events.push((info.thread, *e, batch.message(e).map(str::to_owned)));
                    }
                }
                assert_eq!(n, info.events, "every event of the chunk decoded");
                assert!(batch.is_empty());
            }
            ChunkKind::Meta => entries.extend(r.meta_entries()),
            ChunkKind::End => {}
        }
    }
    assert_eq!(r.next_chunk().unwrap(), None, "stays at the end");
    Ok(Got {
        events,
        open,
        warnings: r.warnings(),
        end: r.end().cloned(),
        meta: r.meta().clone(),
        process: r.process().clone(),
        entries,
        chunks: r.chunks(),
    })
}

fn err(bytes: &[u8]) -> tickscope_timeline::tscap::Error {
    match read(bytes, false) {
        Ok(_) => panic!("read a bad capture without error"),
        Err(e) => e,
    }
}

/// The event as the test writer wrote it.
fn same(e: &Event, text: &Option<String>, w: &Ev) -> bool {
    match w {
        Ev::Begin(id, t) => e.kind == EventKind::Begin && e.id == *id && e.ticks == *t,
        Ev::End(id, t) => e.kind == EventKind::End && e.id == *id && e.ticks == *t,
        Ev::Frame(id, t) => e.kind == EventKind::Frame && e.id == *id && e.ticks == *t,
        Ev::Counter(id, t, v) => {
            e.kind == EventKind::Counter
                && e.id == *id
                && e.ticks == *t
                && e.counter_value().map(f64::to_bits) == Some(v.to_bits())
        }
        Ev::Message(t, s) => {
            e.kind == EventKind::Message && e.ticks == *t && text.as_deref() == Some(s.as_str())
        }
        Ev::Lost(t, n) => {
            // A count saturates below 2^63 (the reader keeps a flag in the top bit).
            e.kind == EventKind::Lost
                && e.ticks == *t
                && e.lost_count() == Some((*n).min((1 << 63) - 1))
                && e.lost_breaks_pairs()
        }
        Ev::Sample(t, tid, stack) => {
            e.kind == EventKind::Sample && e.ticks == *t && e.sample() == Some((*tid, *stack))
        }
        Ev::Lost2(t, n, flags) => {
            e.kind == EventKind::Lost
                && e.ticks == *t
                && e.lost_count() == Some(*n)
                && e.lost_breaks_pairs() == (flags & 1 != 0)
        }
        Ev::Async(t, id, aid, what) => {
            let w = [AsyncWhat::Begin, AsyncWhat::End, AsyncWhat::Cancelled][*what as usize];
            e.kind == EventKind::Async
                && e.ticks == *t
                && e.id == *id
                && e.async_event() == Some((*aid, w))
        }
    }
}

fn assert_events(got: &[(u64, Event, Option<String>)], want: &[(u64, Ev)]) {
    assert_eq!(got.len(), want.len());
    for (i, ((t, e, text), (wt, w))) in got.iter().zip(want).enumerate() {
        assert!(
            t == wt && same(e, text, w),
            "event {i}: got {e:?} {text:?} on thread {t}, want {w:?} on thread {wt}"
        );
    }
}

#[test]
fn every_event_kind_and_metadata_entry_round_trips() {
    for compress in [false, true] {
        let mut c = Capture::new().compressed(compress);
        let mut meta = crate::support::sample_meta();
        meta.push(Entry::Clock {
            rate: 2.5e9,
            ticks: 77,
            unix_ns: 88,
        });
        meta.push(Entry::SinkLoss {
            events: 12,
            chunks: 2,
        });
        c.meta(&meta);
        // Large ids (two-byte tags), huge and backwards timestamps, the extremes of a loss
        // count and of a counter.
        let extra = vec![
            Ev::Begin(70_000, u64::MAX - 5),
            Ev::End(70_000, 3),
            Ev::Frame(1 << 40, 2),
            Ev::Counter(300, 0, f64::MIN_POSITIVE),
            Ev::Counter(300, 1, f64::NAN),
            Ev::Lost(9, u64::MAX),
            Ev::Message(10, String::new()),
            Ev::Message(11, "é".repeat(30_000)),
        ];
        c.events(1, &[], &sample_main());
        c.events(2, &[(3, 5), (1, 6)], &sample_worker());
        c.events(7, &[], &extra);
        c.events(8, &[], &[]);
        c.end(&crate::support::sample_end());
        let got = read(&c.bytes, false).unwrap();
        let mut want: Vec<(u64, Ev)> = sample_main().into_iter().map(|e| (1, e)).collect();
        want.extend(sample_worker().into_iter().map(|e| (2, e)));
        want.extend(extra.into_iter().map(|e| (7, e)));
        assert_events(&got.events, &want);
        assert_eq!(got.open, vec![vec![], vec![(3, 5), (1, 6)], vec![], vec![]]);
        assert!(got.warnings.is_empty(), "{:?}", got.warnings);
        assert_eq!(got.chunks, 7);
        assert_eq!(got.process.pid, 4242);
        assert_eq!(got.process.program, "test-program");
        assert_eq!(got.process.clock, "tsc");
        assert_eq!(got.process.start_ticks, 1000);
        assert_eq!(got.process.ticks_per_second, 1e9);
        assert_eq!(got.entries.len(), meta.len());
        let m = &got.meta;
        assert_eq!(m.scope(1).unwrap().name, "outer");
        assert_eq!(m.scope(1).unwrap().file, "src/app/main.rs");
        assert_eq!(m.scope(1).unwrap().line, 10);
        assert_eq!(m.scope(4).unwrap().kind, ScopeKind::Group);
        assert_eq!(m.marker(2).unwrap().kind, MarkerKind::Counter);
        assert_eq!(m.thread(2).unwrap().tid, 4661);
        assert_eq!(m.scope_name(99), "<scope #99>");
        assert_eq!(m.thread_name(7), "thread 7");
        assert_eq!(
            m.clock(),
            Clock {
                ticks_per_second: 2.5e9,
                ticks: 77,
                unix_ns: 88
            }
        );
        assert_eq!(m.clock_updates(), 1);
        assert_eq!(m.sink_loss(), (12, 2));
        let end = got.end.unwrap();
        assert_eq!(end.events, 31);
        assert_eq!(end.dropped, 7);
        assert_eq!(end.end_ticks, T0 + 9000);
        assert_eq!(end.threads, vec![(1, 7), (2, 0)]);
    }
}

/// A deterministic pseudo-random workload of `n` events on one thread.
fn workload(n: usize, seed: u64) -> Vec<Ev> {
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut t = 1_000_000u64;
    let mut depth = 0;
    (0..n)
        .map(|_| {
            let r = next();
            t += r % 5000;
            let id = 1 + r % 40;
            match r % 11 {
                0 => Ev::Counter(2, t, (r % 1000) as f64 / 8.0),
                1 => Ev::Frame(1, t),
                2 if r % 7 == 0 => Ev::Message(t, format!("m{}", r % 100)),
                3 if r % 5 == 0 => Ev::Lost(t, r % 50),
                _ if depth > 0 && r % 2 == 0 => {
                    depth -= 1;
                    Ev::End(id, t)
                }
                _ => {
                    depth += 1;
                    Ev::Begin(id, t)
                }
            }
        })
        .collect()
}

#[test]
fn chunks_longer_than_a_batch_decode_completely_in_order() {
    for compress in [false, true] {
        let evs = workload(10_000, 7);
        let mut c = Capture::new().compressed(compress);
        c.events(3, &[], &evs);
        let got = read(&c.bytes, false).unwrap();
        let want: Vec<(u64, Ev)> = evs.into_iter().map(|e| (3, e)).collect();
        assert_events(&got.events, &want);
    }
}

/// One bad-input case: the capture, the byte the error names, and the message after
/// `x.tscap: at byte N: `.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    offset: u64,
    message: String,
}

/// A chunk header with every field given, and no payload.
fn header(kind: u8, flags: u8, stored: u32, raw: u32, crc: u32) -> Vec<u8> {
    let mut h = vec![kind, flags, 0, 0];
    h.extend_from_slice(&stored.to_le_bytes());
    h.extend_from_slice(&raw.to_le_bytes());
    h.extend_from_slice(&crc.to_le_bytes());
    h
}

/// A capture with a process record and then a chunk of `kind` holding `payload`.
fn with_chunk(kind: u8, payload: &[u8], compress: bool) -> (Vec<u8>, u64) {
    let mut c = Capture::new().compressed(compress);
    let at = c.chunk(kind, payload) as u64;
    (c.bytes, at)
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let base = Capture::new();
    let l = base.len() as u64;
    let mut add = |name, bytes: Vec<u8>, offset, message: &str| {
        cases.push(Case {
            name,
            bytes,
            offset,
            message: message.to_owned(),
        })
    };
    add(
        "empty file",
        vec![],
        0,
        "empty file: not a tickscope capture",
    );
    add(
        "zip file",
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00rest of a zip".to_vec(),
        0,
        "not a tickscope capture (magic is 50 4b 03 04 14 00 00 00, a zip file?)",
    );
    add(
        "text file",
        b"hello world\n".to_vec(),
        0,
        "not a tickscope capture (magic is 68 65 6c 6c 6f 20 77 6f, a text file?)",
    );
    add(
        "unknown version",
        Capture::with_version(7).bytes,
        8,
        "unsupported format version 7 (this tickscope reads 1 to 4)",
    );
    add(
        "truncated file header",
        Capture::header().bytes[..9].to_vec(),
        0,
        "truncated: the file header is 12 bytes, 9 remain",
    );
    add(
        "header only",
        Capture::header().bytes,
        12,
        "truncated: the capture ends after its file header (no process record)",
    );
    let mut h = Capture::header();
    h.meta(&[thread(1, 2, "main")]);
    add(
        "first chunk not the process record",
        h.bytes,
        12,
        "the first chunk is a metadata chunk, expected the process record",
    );
    let mut b = base.bytes.clone();
    b.extend_from_slice(&[3, 0, 0, 0, 0]);
    add(
        "truncated chunk header",
        b,
        l,
        "truncated: a chunk header is 16 bytes, 5 remain",
    );
    let mut b = base.bytes.clone();
    b.extend(header(EVENTS, 0, 65536, 65536, 0));
    b.extend_from_slice(&[0; 12]);
    add(
        "truncated chunk",
        b,
        l,
        "truncated: chunk header says 65536 bytes, 12 remain",
    );
    let mut c = Capture::new();
    c.meta(&[thread(1, 2, "main")]);
    let last = c.bytes.len() - 1;
    c.bytes[last] ^= 0x20;
    let stored = crc32fast::hash(&meta_payload(&[thread(1, 2, "main")]));
    let computed = crc32fast::hash(&c.bytes[l as usize + 16..]);
    add(
        "CRC mismatch",
        c.bytes,
        l,
        &format!("chunk CRC mismatch (stored {stored:#010x}, computed {computed:#010x})"),
    );
    let mut b = base.bytes.clone();
    b.extend(header(EVENTS, 0, u32::MAX, u32::MAX, 0));
    add(
        "absurd stored length",
        b,
        l + 4,
        "absurd chunk length: the header says 4294967295 stored bytes, the limit is 16777216",
    );
    let mut b = base.bytes.clone();
    b.extend(header(EVENTS, 1, 10, (16 << 20) + 1, 0));
    add(
        "absurd raw length",
        b,
        l + 8,
        "absurd chunk length: the header says 16777217 raw bytes, the limit is 16777216",
    );
    let mut b = base.bytes.clone();
    b.extend(header(EVENTS, 0, 4, 5, 0));
    add(
        "uncompressed lengths differ",
        b,
        l + 8,
        "uncompressed chunk whose stored length 4 differs from its raw length 5",
    );
    let mut b = base.bytes.clone();
    b.extend(header(9, 0, 0, 0, 0));
    add(
        "unknown chunk kind",
        b,
        l,
        "unknown chunk kind 9 (known: 1 process, 2 metadata, 3 events, 4 end)",
    );
    let mut b = base.bytes.clone();
    b.extend(header(META, 2, 0, 0, 0));
    add(
        "unknown flags",
        b,
        l + 1,
        "unknown chunk flags 0x02 (only bit 0, LZ4, is defined)",
    );
    let mut b = base.bytes.clone();
    b.extend([META, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    add(
        "reserved chunk header bytes",
        b,
        l + 2,
        "reserved chunk header field is 0x1, expected 0",
    );
    let (b, at) = with_chunk(PROCESS, &process_payload(1e9, 0, 0, 1, "again"), false);
    add(
        "second process record",
        b,
        at,
        "a second process record (a capture has exactly one)",
    );
    let mut c = Capture::new();
    c.end(&EndRec::default());
    let at = c.meta(&[]) as u64;
    add(
        "chunk after the end record",
        c.bytes,
        at,
        "a chunk after the end record",
    );
    let mut h = Capture::header();
    h.chunk(PROCESS, &process_payload(0.0, 0, 0, 1, "p"));
    add(
        "zero clock rate",
        h.bytes,
        12 + 16,
        "process chunk: ticks_per_second is 0, expected a positive finite number",
    );
    let mut bad = vec![0x80; 10];
    bad.push(0x02);
    let (b, at) = with_chunk(EVENTS, &bad, false);
    add(
        "bad varint",
        b,
        at + 16,
        "events chunk: bad varint (longer than 10 bytes or over 64 bits)",
    );
    // thread 1, N = 1000, base 0, K 0, then streams of 2 + 2 + 0 bytes.
    let (b, at) = with_chunk(EVENTS, &[1, 0xe8, 0x07, 0, 0, 2, 2, 0, 0, 0, 0, 0], false);
    add(
        "more events than the streams can hold",
        b,
        at + 16 + 1,
        "events chunk: 1000 events cannot fit in 2 tag bytes and 2 delta bytes",
    );
    let (b, at) = with_chunk(EVENTS, &[1, 1, 0, 0, 2, 2, 9, 0, 0], false);
    add(
        "stream sizes past the payload",
        b,
        at + 16 + 7,
        "events chunk: stream sizes 2 + 2 + 9 do not fill the 2 bytes that remain",
    );
    let mut p = vec![1, 0, 0];
    varint(&mut p, 4097);
    let (b, at) = with_chunk(EVENTS, &p, false);
    add(
        "too many open scopes",
        b,
        at + 16 + 3,
        "events chunk: open-scope list of 4097 entries exceeds the limit of 4096",
    );
    // One event whose tag has kind 6.
    let (b, at) = with_chunk(EVENTS, &[1, 1, 0, 0, 1, 1, 0, 0x06 | 5 << 3, 0], false);
    add(
        "reserved event kind",
        b,
        at + 16 + 7,
        "events chunk: event 0 has reserved kind 6",
    );
    // A counter event with 3 bytes of payload.
    let (b, at) = with_chunk(EVENTS, &[1, 1, 0, 0, 1, 1, 3, 0x03, 0, 1, 2, 3], false);
    add(
        "counter value past the payload",
        b,
        at + 16 + 9,
        "events chunk: counter value runs past the end of the payload",
    );
    let (b, at) = with_chunk(EVENTS, &[1, 1, 0, 0, 2, 1, 0, 0x02, 0x02, 0], false);
    add(
        "bytes left in a stream",
        b,
        at + 16 + 8,
        "events chunk: the tag stream has 1 bytes left after the last event",
    );
    // A scope entry whose name says 100 bytes, with 3 left.
    let short = [1, 5, 0, 100, b'a', b'b', b'c'];
    let (b, at) = with_chunk(META, &short, false);
    add(
        "string past the payload",
        b,
        at + 16 + 3,
        "metadata chunk: string length 100 runs past the payload (3 bytes remain)",
    );
    let (b, at) = with_chunk(META, &short, true);
    add(
        "string past a compressed payload",
        b,
        at,
        "metadata chunk, byte 3 of the decompressed payload: string length 100 runs past the payload (3 bytes remain)",
    );
    let mut p = vec![3, 1, 1];
    varint(&mut p, 70_000);
    p.extend(vec![b'x'; 70_000]);
    let (b, at) = with_chunk(META, &p, false);
    add(
        "string too long",
        b,
        at + 16 + 3,
        "metadata chunk: string length 70000 exceeds the limit of 65535 bytes",
    );
    let (b, at) = with_chunk(META, &[3, 1, 1, 2, 0xff, 0xfe], false);
    add(
        "string not UTF-8",
        b,
        at + 16 + 3,
        "metadata chunk: string is not valid UTF-8",
    );
    let (b, at) = with_chunk(META, &[10], false);
    add(
        "unknown metadata tag",
        b,
        at + 16,
        "metadata chunk: unknown metadata entry tag 10",
    );
    let (b, at) = with_chunk(META, &[9, 1, 5], false);
    add(
        "allocations entry cut short",
        b,
        at + 16 + 3,
        "metadata chunk: allocs bytes runs past the end of the payload",
    );
    let (b, at) = with_chunk(META, &[1, 1, 2], false);
    add(
        "unknown scope kind",
        b,
        at + 16 + 2,
        "metadata chunk: unknown scope kind 2 (0 scope, 1 group)",
    );
    let mut p = vec![0; 6];
    varint(&mut p, 1000);
    let (b, at) = with_chunk(END, &p, false);
    add(
        "end record thread count past the payload",
        b,
        at + 16 + 6,
        "end chunk: thread count is 1000, more than the 0 bytes that remain can hold",
    );
    let (b, at) = with_chunk(END, &[0, 0, 0, 0, 0, 0, 0, 7], false);
    add(
        "bytes after the end record",
        b,
        at + 16 + 7,
        "end chunk: 1 unexpected bytes after the last field",
    );
    cases
}

#[test]
fn every_bad_input_gives_a_one_line_error_with_its_offset() {
    for case in cases() {
        let e = err(&case.bytes);
        let want = format!("x.tscap: at byte {}: {}", case.offset, case.message);
        // Damage after complete chunks says that salvage reads them.
        let shown = e.to_string();
        let (said, hint) = match shown.split_once(" (`--salvage` reads the ") {
            Some((said, hint)) => (said, Some(hint)),
            None => (shown.as_str(), None),
        };
        assert_eq!(said, want, "{}", case.name);
        if let Some(hint) = hint {
            assert!(hint.ends_with(" before it)"), "{}: {shown}", case.name);
        }
        assert_eq!(e.offset(), case.offset, "{}", case.name);
        assert_eq!(e.path(), "x.tscap");
        assert!(!e.to_string().contains('\n'), "{}", case.name);
    }
}

/// Version 3's async events read back as written (large ids, every `what`); a `what` past 2
/// is an error naming the event.
#[test]
fn async_events_round_trip_in_version_3() {
    let mut c = Capture::with_version(3);
    c.chunk(
        PROCESS,
        &process_payload(1e9, 1000, 1_700_000_000_000_000_000, 4242, "test-program"),
    );
    let evs = vec![
        Ev::Async(1000, 1, 1, 0),
        Ev::Async(1500, 70_000, u64::MAX >> 3, 1),
        Ev::Async(1500, 2, 3, 2),
    ];
    c.events(1, &[], &evs);
    let got = read(&c.bytes, false).unwrap();
    let want: Vec<(u64, Ev)> = evs.into_iter().map(|e| (1, e)).collect();
    assert_events(&got.events, &want);
    let mut bad = Capture::with_version(3);
    bad.chunk(
        PROCESS,
        &process_payload(1e9, 1000, 1_700_000_000_000_000_000, 4242, "test-program"),
    );
    bad.events(1, &[], &[Ev::Async(1000, 1, 1, 3)]);
    let e = err(&bad.bytes).to_string();
    assert!(
        e.contains("event 0 is an async event of unknown kind 3"),
        "{e}"
    );
}

#[test]
fn errors_are_matchable() {
    let next = tickscope_fmt::tscap::VERSION + 1;
    let e = err(&Capture::with_version(next).bytes);
    assert_eq!(*e.kind(), ErrorKind::UnsupportedVersion(next));
    let (b, _) = with_chunk(EVENTS, &[1, 1, 0, 0, 1, 1, 0, 0x07, 0], false);
    assert!(matches!(
        err(&b).kind(),
        ErrorKind::Malformed {
            chunk: "events",
            raw_offset: None,
            problem: Problem::ReservedEventKind { kind: 7, index: 0 }
        }
    ));
}

#[test]
fn a_corrupt_lz4_payload_is_an_error() {
    let mut c = Capture::new();
    let garbage = [0xf0, 1, 2, 3, 4, 5];
    let at = c.raw_chunk(META, 1, &garbage, 100, crc32fast::hash(&garbage)) as u64;
    let e = err(&c.bytes);
    assert_eq!(e.offset(), at);
    assert!(
        e.to_string().starts_with(&format!(
            "x.tscap: at byte {at}: LZ4 payload does not decompress: "
        )),
        "{e}"
    );
}

#[test]
fn absurd_lengths_are_refused_without_allocating_them() {
    let mut b = Capture::new().bytes;
    b.extend(header(EVENTS, 1, u32::MAX, u32::MAX, 0));
    b.extend(vec![0u8; 1 << 20]);
    let (result, largest) = crate::alloc::largest(|| read(&b, false).err());
    assert!(matches!(
        result.unwrap().kind(),
        ErrorKind::ChunkTooLarge { .. }
    ));
    assert!(largest < 1 << 20, "largest allocation {largest} bytes");
    // A length under the limit that the input cannot back costs what arrives, not what it
    // says.
    let mut b = Capture::new().bytes;
    b.extend(header(EVENTS, 0, 16 << 20, 16 << 20, 0));
    b.extend(vec![0u8; 1000]);
    let (result, largest) = crate::alloc::largest(|| read(&b, false).err());
    assert!(matches!(
        result.unwrap().kind(),
        ErrorKind::TruncatedChunk { remain: 1000, .. }
    ));
    assert!(largest < 1 << 20, "largest allocation {largest} bytes");
}

#[test]
fn an_event_count_beyond_the_streams_is_refused_before_decoding() {
    // N = 2^40 events claimed in a chunk of a few bytes.
    let mut p = vec![1];
    varint(&mut p, 1 << 40);
    p.extend([0, 0, 1, 1, 0, 0, 0]);
    let (b, _) = with_chunk(EVENTS, &p, false);
    let (result, largest) = crate::alloc::largest(|| read(&b, false).err());
    assert!(matches!(
        result.unwrap().kind(),
        ErrorKind::Malformed {
            problem: Problem::TooManyEvents { .. },
            ..
        }
    ));
    assert!(largest < 1 << 20);
}

/// A capture of four events chunks, the third damaged by `damage`; returns it with the
/// damaged chunk's offset.
fn damaged(damage: impl FnOnce(&mut Vec<u8>, usize)) -> (Vec<u8>, u64) {
    let mut c = Capture::new();
    c.meta(&crate::support::sample_meta());
    let main = sample_main();
    c.events(1, &[], &main[..8]);
    c.events(2, &[], &sample_worker());
    let at = c.events(1, &[], &main[8..15]);
    c.events(1, &[], &main[15..]);
    c.end(&crate::support::sample_end());
    damage(&mut c.bytes, at);
    (c.bytes, at as u64)
}

#[test]
fn salvage_keeps_every_chunk_before_the_damage() {
    let (b, at) = damaged(|b, at| b[at + 20] ^= 1);
    let e = err(&b);
    assert_eq!(e.offset(), at);
    assert!(matches!(e.kind(), ErrorKind::CrcMismatch { .. }));
    let shown = e.to_string();
    let plain = shown
        .strip_suffix(" (`--salvage` reads the 4 complete chunks before it)")
        .unwrap_or_else(|| panic!("no salvage hint: {shown}"));
    let got = read(&b, true).unwrap();
    let mut want: Vec<(u64, Ev)> = sample_main()[..8].iter().map(|e| (1, e.clone())).collect();
    want.extend(sample_worker().into_iter().map(|e| (2, e)));
    assert_events(&got.events, &want);
    assert_eq!(got.chunks, 4, "process, metadata and two events chunks");
    assert!(got.end.is_none());
    assert_eq!(
        got.warnings,
        vec![format!(
            "{plain}; salvaged the 4 complete chunks before it ({at} bytes), ignored the rest"
        )]
    );
}

#[test]
fn salvage_stops_at_a_truncated_tail_and_at_a_malformed_chunk() {
    let (b, at) = damaged(|b, at| b.truncate(at + 30));
    let got = read(&b, true).unwrap();
    assert_eq!(got.events.len(), 8 + 5);
    assert_eq!(got.warnings.len(), 1);
    assert!(
        got.warnings[0].starts_with(&format!(
            "x.tscap: at byte {at}: truncated: chunk header says"
        )),
        "{:?}",
        got.warnings
    );
    // A chunk with a good CRC and a bad payload: none of its events are kept.
    let mut c = Capture::new();
    c.events(1, &[], &sample_main()[..8]);
    let mut p = events_payload(1, &[], &[Ev::Begin(1, 5), Ev::End(1, 9)]);
    let last = p.len() - 1;
    p[last] = 0xff; // the last delta (the last stream) now runs past its end
    c.chunk(EVENTS, &p);
    let got = read(&c.bytes, true).unwrap();
    assert_eq!(got.events.len(), 8);
    assert!(
        got.warnings[0].contains("events chunk"),
        "{:?}",
        got.warnings
    );
}

#[test]
fn a_capture_without_an_end_record_reads_with_a_warning() {
    let mut c = Capture::new();
    c.meta(&crate::support::sample_meta());
    c.events(1, &[], &sample_main());
    let got = read(&c.bytes, false).unwrap();
    assert_eq!(got.events.len(), sample_main().len());
    assert_eq!(
        got.warnings,
        vec!["x.tscap: capture has no end record: the program stopped without finishing it (crash or kill?)"]
    );
    assert!(read(&sample(false).bytes, false)
        .unwrap()
        .warnings
        .is_empty());
}

/// Cut a capture at every byte: at a chunk boundary it reads (with the missing-end warning);
/// anywhere else it is an error naming the truncation, and salvage keeps exactly the complete
/// chunks before it.
#[test]
fn a_capture_cut_anywhere_is_an_error_or_salvaged_up_to_its_last_chunk() {
    for compress in [false, true] {
        let mut c = Capture::new().compressed(compress);
        let mut bounds = vec![c.len()];
        let mut counts = vec![0];
        c.meta(&crate::support::sample_meta());
        bounds.push(c.len());
        counts.push(0);
        let main = sample_main();
        for part in main.chunks(6) {
            c.events(1, &[], part);
            bounds.push(c.len());
            counts.push(counts.last().unwrap() + part.len());
        }
        c.end(&crate::support::sample_end());
        let full = c.len();
        for cut in 1..full {
            let bytes = &c.bytes[..cut];
            let complete = bounds.iter().rposition(|&b| b <= cut);
            match read(bytes, false) {
                Ok(got) => {
                    let i = complete.unwrap();
                    assert_eq!(bounds[i], cut, "read a capture cut at {cut}");
                    assert_eq!(got.events.len(), counts[i]);
                    assert_eq!(got.warnings.len(), 1);
                    assert!(got.warnings[0].contains("no end record"));
                }
                Err(e) => {
                    assert!(!bounds.contains(&cut) || cut < bounds[0], "cut {cut}: {e}");
                    assert!(e.to_string().contains("truncated"), "cut {cut}: {e}");
                }
            }
            match (read(bytes, true), complete) {
                (Ok(got), Some(i)) => assert_eq!(got.events.len(), counts[i], "cut {cut}"),
                (Err(e), None) => assert!(e.to_string().contains("truncated"), "{e}"),
                (r, _) => panic!("cut {cut}: {:?}", r.err()),
            }
        }
        assert!(read(&c.bytes, false).unwrap().warnings.is_empty());
    }
}

#[test]
fn the_reader_passes_validated_chunks_through_unchanged() {
    let c = sample(true);
    let mut r = Reader::new(&c.bytes[..], "x").unwrap();
    let mut copy = r.header_bytes().to_vec();
    let (h, p) = r.chunk_bytes();
    copy.extend_from_slice(h);
    copy.extend_from_slice(p);
    while r.next_chunk().unwrap().is_some() {
        let (h, p) = r.chunk_bytes();
        copy.extend_from_slice(h);
        copy.extend_from_slice(p);
    }
    assert_eq!(copy, c.bytes);
    assert_eq!(r.valid_len(), c.bytes.len() as u64);
}

#[test]
fn ids_never_defined_are_read_and_named_by_number() {
    let mut c = Capture::new();
    c.events(5, &[], &[Ev::Begin(12, 1), Ev::End(12, 2)]);
    let got = read(&c.bytes, false).unwrap();
    assert_eq!(got.events.len(), 2);
    assert_eq!(got.meta.scope_name(12), "<scope #12>");
    assert_eq!(got.meta.thread_name(5), "thread 5");
}
