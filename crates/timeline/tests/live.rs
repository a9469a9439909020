//! Recording a capture from a stream: chunks written through unchanged, a stream that breaks
//! off kept valid up to its last complete chunk, the status line.

use std::sync::Mutex;

use tickscope_timeline::live::{record, Live};
use tickscope_timeline::tscap::Reader;

use crate::support::writer::{scope, Capture, EndRec, Ev};
use crate::support::{sample, T0};

#[test]
fn a_complete_stream_is_written_through_unchanged() {
    let c = sample(true);
    let live = Mutex::new(Live::new("x"));
    let mut out = Vec::new();
    let rec = record(&c.bytes[..], "x.tscap", &mut out, &live).unwrap();
    assert_eq!(out, c.bytes);
    assert!(rec.complete);
    assert_eq!(
        (rec.chunks, rec.events, rec.bytes),
        (5, 32, c.bytes.len() as u64)
    );
    assert_eq!(rec.stopped, None);
    assert!(rec.warnings.is_empty());
    let mut live = live.into_inner().unwrap();
    assert_eq!(
        live.tick(1.0),
        "x: 32 events/s · 7 dropped so far · top: outer 1.10 µs, rec 1.00 µs, alloc 500 ns"
    );
    assert_eq!(live.tick(1.0), "x: 0 events/s · 7 dropped so far · top: -");
}

/// The status line names scopes by the latest definitions, also those that arrive after the
/// scope was first called (it keeps the names of the scopes called, not the metadata).
#[test]
fn the_status_line_names_scopes_by_their_latest_definition() {
    let mut c = Capture::new();
    c.meta(&[
        scope(1, "first", "a.rs", 1),
        scope(3, "never called", "a.rs", 3),
    ]);
    c.events(
        1,
        &[],
        &[
            Ev::Begin(1, T0),
            Ev::End(1, T0 + 300),
            Ev::Begin(2, T0 + 400),
            Ev::End(2, T0 + 500),
        ],
    );
    let live = Mutex::new(Live::new("x"));
    record(&c.bytes[..], "x.tscap", &mut Vec::new(), &live).unwrap();
    assert_eq!(
        live.lock().unwrap().tick(1.0),
        "x: 4 events/s · 0 dropped so far · top: first 300 ns, <scope #2> 100 ns"
    );
    c.meta(&[scope(1, "renamed", "a.rs", 1), scope(2, "two", "a.rs", 2)]);
    c.events(1, &[], &[Ev::Begin(2, T0 + 600), Ev::End(2, T0 + 1000)]);
    c.end(&EndRec::default());
    let live = Mutex::new(Live::new("x"));
    record(&c.bytes[..], "x.tscap", &mut Vec::new(), &live).unwrap();
    assert_eq!(
        live.lock().unwrap().tick(1.0),
        "x: 6 events/s · 0 dropped so far · top: two 500 ns, renamed 300 ns"
    );
}

#[test]
fn a_stream_cut_mid_chunk_leaves_a_valid_file_up_to_its_last_chunk() {
    let c = sample(false);
    let cut = c.bytes.len() - 20; // inside the end record
    let live = Mutex::new(Live::new("x"));
    let mut out = Vec::new();
    let rec = record(&c.bytes[..cut], "x.tscap", &mut out, &live).unwrap();
    assert!(!rec.complete);
    assert_eq!(rec.chunks, 4);
    assert_eq!(rec.bytes, out.len() as u64);
    assert!(out.len() < cut);
    assert_eq!(&out[..], &c.bytes[..out.len()]);
    let stopped = rec.stopped.unwrap();
    assert!(
        stopped.contains("truncated: chunk header says"),
        "{stopped}"
    );
    // What was written reads cleanly, without salvage.
    let mut r = Reader::new(&out[..], "out").unwrap();
    while r.next_chunk().unwrap().is_some() {}
    assert_eq!(r.warnings().len(), 1, "only the missing end record");
}

#[test]
fn a_stream_that_is_not_a_capture_writes_nothing() {
    let live = Mutex::new(Live::new("x"));
    let mut out = Vec::new();
    let e = record(&b"GET / HTTP/1.1\r\n\r\n"[..], "peer", &mut out, &live).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("peer: at byte 0: not a tickscope capture"),
        "{e}"
    );
    assert!(out.is_empty());
}
