//! Recording a capture from a stream: chunks written through unchanged, a stream that breaks
//! off kept valid up to its last complete chunk, the status line.

use std::sync::Mutex;

use tickscope_analyze::timeline::live::{record, Live};
use tickscope_analyze::tscap::Reader;

use crate::support::sample;

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
