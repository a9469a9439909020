//! Shared test support: the test-only capture encoder, a minimal protobuf decoder, and the
//! hand-built captures several areas use.
#![allow(dead_code)]

pub mod proto;
pub mod writer;

use writer::{scope, thread, Capture, EndRec, Entry, Ev};

/// A test whose external tool is missing: skipped with a line on a developer's machine, a
/// failure under `CI=true` (CI installs every tool the tests use, so a missing one is a bug).
pub fn skip_unless_ci(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and {why}"
    );
    eprintln!("skipped: {why}");
}

/// Ticks of the sample capture: at 1 GHz a tick is a ns, and capture starts at tick 1000.
pub const T0: u64 = 10_000;

pub const OUTER: u64 = 1;
pub const INNER: u64 = 2;
pub const REC: u64 = 3;
pub const A: u64 = 4;
pub const B: u64 = 5;
pub const C: u64 = 6;
pub const D: u64 = 7;
pub const FRAME: u64 = 1;
pub const QUEUE: u64 = 2;

pub fn sample_meta() -> Vec<Entry> {
    vec![
        scope(OUTER, "outer", "src/app/main.rs", 10),
        scope(INNER, "inner", "src/app/main.rs", 20),
        scope(REC, "rec", "src/app/tree.rs", 30),
        Entry::Scope {
            id: A,
            group: true,
            name: "alloc".into(),
            file: "src/pool.rs".into(),
            line: 40,
        },
        scope(B, "leaked", "src/app/main.rs", 50),
        scope(C, "never-ends", "src/app/main.rs", 60),
        scope(D, "backwards", "src/app/main.rs", 70),
        Entry::Marker {
            id: FRAME,
            counter: false,
            name: "frame".into(),
        },
        Entry::Marker {
            id: QUEUE,
            counter: true,
            name: "queue depth".into(),
        },
        thread(1, 4660, "main"),
        thread(2, 4661, "worker"),
    ]
}

/// Thread 1's events of the sample: nesting, recursion, an abandoned scope, an unmatched end,
/// a backwards clock, frames, counters, messages, a loss, and a scope left open.
pub fn sample_main() -> Vec<Ev> {
    let t = T0;
    vec![
        Ev::Frame(FRAME, t),
        Ev::Begin(OUTER, t),
        Ev::Begin(INNER, t + 100),
        Ev::End(INNER, t + 300),
        Ev::Counter(QUEUE, t + 350, 3.0),
        Ev::Begin(INNER, t + 400),
        Ev::End(INNER, t + 500),
        Ev::End(OUTER, t + 1000),
        Ev::Frame(FRAME, t + 1600),
        Ev::Begin(REC, t + 2000),
        Ev::Begin(REC, t + 2100),
        Ev::Begin(REC, t + 2200),
        Ev::End(REC, t + 2300),
        Ev::End(REC, t + 2500),
        Ev::End(REC, t + 3000),
        Ev::Frame(FRAME, t + 3600),
        Ev::Message(t + 3700, "hello, wörld".into()),
        Ev::Begin(A, t + 4000),
        Ev::Begin(B, t + 4100),
        Ev::End(A, t + 4500),
        Ev::End(9, t + 5000),
        Ev::Lost(t + 5100, 7),
        Ev::Counter(QUEUE, t + 5200, -1.5),
        Ev::Begin(D, t + 7000),
        Ev::End(D, t + 6990),
        Ev::Begin(C, t + 8000),
        Ev::Counter(QUEUE, t + 8100, 12.25),
    ]
}

/// Thread 2's events: one call of `inner` and one of `outer`.
pub fn sample_worker() -> Vec<Ev> {
    let t = T0 + 500;
    vec![
        Ev::Begin(OUTER, t),
        Ev::Begin(INNER, t + 10),
        Ev::End(INNER, t + 60),
        Ev::End(OUTER, t + 100),
        Ev::Message(t + 200, "worker done".into()),
    ]
}

pub fn sample_end() -> EndRec {
    EndRec {
        // The writer counts every event but loss events.
        events: 31,
        dropped: 7,
        undelivered: 0,
        evicted: 0,
        end_ticks: T0 + 9000,
        end_unix_ns: 1_700_000_000_000_010_000,
        threads: vec![(1, 7), (2, 0)],
    }
}

/// The sample capture, in one chunk per thread.
pub fn sample(compress: bool) -> Capture {
    let mut c = Capture::new().compressed(compress);
    c.meta(&sample_meta());
    c.events(1, &[], &sample_main());
    c.events(2, &[], &sample_worker());
    c.end(&sample_end());
    c
}

/// The open scopes after `evs`, as an events chunk lists them (the format's rule: an end
/// closes the innermost open scope with its id; the ones above it are abandoned).
pub fn open_after(open: &[(u64, u64)], evs: &[Ev]) -> Vec<(u64, u64)> {
    let mut stack = open.to_vec();
    for e in evs {
        match *e {
            Ev::Begin(id, t) => stack.push((id, t)),
            Ev::End(id, _) => {
                if let Some(pos) = stack.iter().rposition(|s| s.0 == id) {
                    stack.truncate(pos);
                }
            }
            _ => {}
        }
    }
    stack
}

/// The sample with thread 1's events split into chunks of `n` events, each with its list of
/// open scopes, interleaved with thread 2's chunk.
pub fn sample_split(n: usize, compress: bool) -> Capture {
    let mut c = Capture::new().compressed(compress);
    c.meta(&sample_meta());
    let main = sample_main();
    let mut open = Vec::new();
    let mut worker = false;
    for (i, part) in main.chunks(n).enumerate() {
        c.events(1, &open, part);
        open = open_after(&open, part);
        if i == 1 {
            c.events(2, &[], &sample_worker());
            worker = true;
        }
    }
    if !worker {
        c.events(2, &[], &sample_worker());
    }
    c.end(&sample_end());
    c
}

/// A hostile capture for memory tests: `declared` scopes (ids 1..=declared, in metadata chunks
/// of 5,000), of which the first `used` are each called once on thread 1; then `threads`
/// more threads each call the last used scope once (per-thread state indexed by scope would
/// grow with threads × scopes). Every chunk is valid; it ends with an end record.
pub fn many_scopes(declared: u64, used: u64, threads: u64, compress: bool) -> Capture {
    let mut c = Capture::new().compressed(compress);
    let ids: Vec<u64> = (1..=declared).collect();
    for part in ids.chunks(5000) {
        let entries: Vec<Entry> = part
            .iter()
            .map(|&id| scope(id, &format!("scope{id}"), "src/x.rs", id))
            .collect();
        c.meta(&entries);
    }
    let mut t = T0;
    let mut evs = Vec::new();
    for id in 1..=used.min(declared) {
        evs.push(Ev::Begin(id, t));
        t += 100 + id % 1000;
        evs.push(Ev::End(id, t));
        t += 10;
    }
    for part in evs.chunks(20_000) {
        c.events(1, &[], part);
    }
    let last = used.min(declared);
    for th in 2..2 + threads {
        if last > 0 {
            c.events(th, &[], &[Ev::Begin(last, t), Ev::End(last, t + 50)]);
            t += 100;
        }
    }
    c.end(&EndRec {
        events: 2 * (last + threads),
        end_ticks: t,
        ..EndRec::default()
    });
    c
}
