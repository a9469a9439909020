//! Arbitrary bytes into the `.tscap` reader, with and without salvage, and into every
//! analysis (report, Chrome, Perfetto, speedscope and folded exports, live recording): none may
//! panic, loop or allocate without bound. Round-trip property: recording passes through a
//! prefix of the input made of whole, valid chunks, which reads again without salvage and
//! holds the same events.
//!
//! Each input is tried twice: as raw bytes, and reframed (a valid header and process record,
//! then the input cut into payloads, each framed as a chunk with a correct CRC, some
//! LZ4-compressed), so that mutations reach the payload decoders rather than the CRC check.
#![no_main]

use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use tickscope_timeline::live::{record, Live};
use tickscope_timeline::{export, summarize, Format, Options};
use tickscope_timeline::tscap::{ChunkKind, Events, Reader};

/// Reads every chunk and event; returns the events read, or `None` on an error.
fn read_all(data: &[u8], salvage: bool) -> Option<u64> {
    let mut r = Reader::new(data, "fuzz").ok()?.salvage(salvage);
    let mut events = Events::new();
    let mut n = 0;
    loop {
        match r.next_chunk() {
            Ok(Some(ChunkKind::Events)) => {
                while r.decode(&mut events) {
                    for e in events.as_slice() {
                        let _ = (e.counter_value(), e.lost_count(), events.message(e));
                    }
                    n += events.len() as u64;
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => {
                assert!(
                    !salvage,
                    "salvage never fails after the process record: {e}"
                );
                assert!(!e.to_string().contains('\n'));
                return None;
            }
        }
    }
    let _ = r.warnings();
    Some(n)
}

/// Appends a chunk with a correct CRC.
fn chunk(out: &mut Vec<u8>, kind: u8, payload: &[u8], compress: bool) {
    let stored = if compress {
        lz4_flex::block::compress(payload)
    } else {
        payload.to_vec()
    };
    out.extend_from_slice(&[kind, compress as u8, 0, 0]);
    out.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&stored).to_le_bytes());
    out.extend_from_slice(&stored);
}

/// A capture whose chunks are the input's pieces: the first byte picks the format version
/// (1 to 3), then each piece is a byte (kind in its low 3 bits, compression in bit 3), a
/// length byte, and that many payload bytes.
fn reframe(data: &[u8]) -> Vec<u8> {
    let (version, data) = match data.split_first() {
        Some((v, rest)) => (1 + v % 3, rest),
        None => (1, data),
    };
    let mut out = b"TSCAP\r\n\x1a".to_vec();
    out.extend_from_slice(&[version, 0, 0, 0]);
    let mut process = 1e9f64.to_le_bytes().to_vec();
    process.extend_from_slice(&[0, 0, 1, 1, b'p', 3, b't', b's', b'c']);
    chunk(&mut out, 1, &process, false);
    let mut rest = data;
    while let [head, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        chunk(&mut out, head & 7, &tail[..n], head & 8 != 0);
        rest = &tail[n..];
    }
    out
}

fuzz_target!(|data: &[u8]| {
    check(data);
    check(&reframe(data));
});

fn check(data: &[u8]) {
    for salvage in [false, true] {
        let _ = read_all(data, salvage);
        if let Ok(r) = Reader::new(data, "fuzz") {
            let mut r = r.salvage(salvage);
            let opts = Options {
                per_thread: true,
                range: None,
            };
            if let Ok(rep) = summarize(&mut r, opts) {
                let _ = (rep.to_text(), rep.to_json());
            }
        }
        // A range: the calls that begin and end in it, those crossing its edges apart.
        if let Ok(r) = Reader::new(data, "fuzz") {
            let mut r = r.salvage(salvage);
            let start = r.process().start_ticks;
            let opts = Options {
                per_thread: false,
                range: Some((start.wrapping_add(1000), start.wrapping_add(1_000_000))),
            };
            if let Ok(rep) = summarize(&mut r, opts) {
                let _ = (rep.to_text(), rep.to_json());
            }
        }
        for format in [
            Format::Chrome,
            Format::Perfetto,
            Format::Speedscope,
            Format::Folded,
        ] {
            if let Ok(r) = Reader::new(data, "fuzz") {
                let mut r = r.salvage(salvage);
                let _ = export(&mut r, format, None, std::io::sink());
            }
        }
    }
    let live = Mutex::new(Live::new("fuzz"));
    let mut out = Vec::new();
    if let Ok(rec) = record(data, "fuzz", &mut out, &live) {
        let _ = live.lock().unwrap().tick(1.0);
        assert!(data.starts_with(&out), "recording passes a prefix through");
        assert_eq!(rec.bytes, out.len() as u64);
        assert_eq!(
            read_all(&out, false),
            Some(rec.events),
            "what was kept reads alone"
        );
    }
}
