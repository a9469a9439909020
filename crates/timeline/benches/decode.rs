//! Decode speed: builds a capture of a regular instrumented workload (nested scopes, frame
//! marks, a counter; LZ4-compressed 1 MiB chunks, as the collector writes them) in memory with
//! the tests' encoder, then times, on one core, reading and decoding every event, the full
//! `report` summary, and the Chrome export. Prints events per second.
//!
//! `cargo bench -p tickscope-timeline --bench decode [-- EVENTS]` (default 20 million).

use std::time::Instant;

use tickscope_timeline::tscap::{ChunkKind, Events, Reader};
use tickscope_timeline::{export, summarize, Format, Options};

#[path = "../tests/support/writer.rs"]
mod writer;

use writer::{scope, thread, Capture, Entry, Ev};

/// One frame of the workload: a frame mark, `update` with 8 `entity` calls each holding a
/// `physics` and a `collide` call, then `render` with 4 `draw` calls; a counter at the end.
fn frame(t: &mut u64, x: &mut u64, out: &mut Vec<Ev>) {
    let mut step = |base: u64| {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *t += base + *x % 16;
        *t
    };
    out.push(Ev::Frame(1, step(10)));
    out.push(Ev::Begin(1, step(20)));
    for _ in 0..8 {
        out.push(Ev::Begin(2, step(30)));
        out.push(Ev::Begin(3, step(25)));
        out.push(Ev::End(3, step(400)));
        out.push(Ev::Begin(4, step(25)));
        out.push(Ev::End(4, step(250)));
        out.push(Ev::End(2, step(40)));
    }
    out.push(Ev::End(1, step(30)));
    out.push(Ev::Begin(5, step(20)));
    for _ in 0..4 {
        out.push(Ev::Begin(6, step(30)));
        out.push(Ev::End(6, step(900)));
    }
    out.push(Ev::End(5, step(30)));
    out.push(Ev::Counter(2, step(10), (*x % 1000) as f64));
}

fn build(events: usize) -> (Vec<u8>, usize) {
    let mut c = Capture::new().compressed(true);
    c.meta(&[
        scope(1, "update", "src/game.rs", 10),
        scope(2, "entity", "src/game.rs", 20),
        scope(3, "physics", "src/physics.rs", 30),
        scope(4, "collide", "src/physics.rs", 40),
        scope(5, "render", "src/render.rs", 50),
        scope(6, "draw", "src/render.rs", 60),
        Entry::Marker {
            id: 1,
            counter: false,
            name: "frame".into(),
        },
        Entry::Marker {
            id: 2,
            counter: true,
            name: "entities".into(),
        },
        thread(1, 100, "main"),
        thread(2, 101, "worker"),
    ]);
    let (mut t, mut x) = (1_000_000u64, 0x9e37_79b9_7f4a_7c15u64);
    let mut n = 0;
    let mut part = Vec::new();
    let mut th = 1;
    while n < events {
        part.clear();
        // About 1 MiB of raw payload per chunk: ~2.3 bytes per event.
        while part.len() < 450_000 {
            frame(&mut t, &mut x, &mut part);
        }
        c.events(th, &[], &part);
        th = 3 - th;
        n += part.len();
    }
    (c.bytes, n)
}

fn rate(n: usize, secs: f64) -> String {
    format!("{:.1} M events/s ({:.3} s)", n as f64 / secs / 1e6, secs)
}

fn best<T>(f: impl Fn() -> T) -> (T, f64) {
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64());
        out = Some(r);
    }
    (out.unwrap(), best)
}

fn main() {
    let events: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(20_000_000);
    let (bytes, n) = build(events);
    println!(
        "capture: {n} events, {:.1} MiB ({:.2} bytes per event, LZ4)",
        bytes.len() as f64 / (1 << 20) as f64,
        bytes.len() as f64 / n as f64
    );
    let (count, secs) = best(|| {
        let mut r = Reader::new(&bytes[..], "bench").unwrap();
        let mut ev = Events::new();
        let mut count = 0usize;
        while let Some(k) = r.next_chunk().unwrap() {
            if k == ChunkKind::Events {
                while r.decode(&mut ev) {
                    count += ev.len();
                }
            }
        }
        count
    });
    assert_eq!(count, n);
    println!("read + decode:        {}", rate(n, secs));
    let (rep, secs) = best(|| {
        let mut r = Reader::new(&bytes[..], "bench").unwrap();
        summarize(&mut r, Options::default()).unwrap()
    });
    assert_eq!(rep.events as usize, n);
    println!("report (summary):     {}", rate(n, secs));
    let (_, secs) = best(|| {
        let mut r = Reader::new(&bytes[..], "bench").unwrap();
        summarize(
            &mut r,
            Options {
                per_thread: true,
                ..Options::default()
            },
        )
        .unwrap()
    });
    println!("report --per-thread:  {}", rate(n, secs));
    let (len, secs) = best(|| {
        let mut r = Reader::new(&bytes[..], "bench").unwrap();
        let mut sink = Counting(0);
        export(&mut r, Format::Chrome, None, &mut sink).unwrap();
        sink.0
    });
    println!(
        "chrome export:        {} ({:.0} MiB of JSON)",
        rate(n, secs),
        len as f64 / (1 << 20) as f64
    );
}

/// A writer that counts bytes.
struct Counting(usize);

impl std::io::Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
