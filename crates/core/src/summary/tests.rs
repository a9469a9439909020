//! Report tests: golden summaries from a fake clock, and the real registry across threads.

use super::*;
use crate::clock::tests::FakeCounter;
use crate::scope::callsite::{Callsite, Kind, Name};
use crate::scope::thread::tests::{recorder, row};
use crate::scope::thread::Recorder;
use crate::scope::wall::WallKind;

static PARSE: Callsite = Callsite::new(
    Name::Static("parse"),
    Kind::Scope,
    "app/src/parse.rs",
    10,
    "app::parse",
);
static TOKEN: Callsite = Callsite::new(
    Name::Static("tokenize"),
    Kind::Scope,
    "app/src/parse.rs",
    40,
    "app::parse",
);
static ALLOC_A: Callsite = Callsite::new(
    Name::Static("golden-alloc"),
    Kind::Group,
    "app/src/pool.rs",
    7,
    "app::pool",
);
static ALLOC_B: Callsite = Callsite::new(
    Name::Static("golden-alloc"),
    Kind::Group,
    "app/src/pool.rs",
    19,
    "app::pool",
);
static FIB: Callsite = Callsite::new(
    Name::Static("fib"),
    Kind::Scope,
    "app/src/main.rs",
    3,
    "app",
);

/// A deterministic workload on two fake-clock threads.
fn workload() -> (Recorder, Recorder) {
    let (a, b, c) = (recorder(), recorder(), FakeCounter::new());
    for i in 0..100u64 {
        let p = a.enter(PARSE.id(), &c).unwrap();
        c.advance_ns(1_000 + i * 10);
        let t = a.enter(TOKEN.id(), &c).unwrap();
        c.advance_ns(400);
        a.exit(t, &c);
        // The pool API calling its own public function: one outer call, two calls counted.
        let x = a.enter(ALLOC_A.id(), &c).unwrap();
        c.advance_ns(50);
        let y = a.enter(ALLOC_B.id(), &c).unwrap();
        c.advance_ns(150);
        a.exit(y, &c);
        a.exit(x, &c);
        a.exit(p, &c);
    }
    fn fib(n: u32, r: &Recorder, c: &FakeCounter) {
        let g = r.enter(FIB.id(), c).unwrap();
        c.advance_ns(100);
        if n > 1 {
            fib(n - 1, r, c);
            fib(n - 2, r, c);
        }
        r.exit(g, c);
    }
    fib(10, &b, &c); // 177 calls
    let g = b.enter(ALLOC_A.id(), &c).unwrap();
    c.advance_ns(2_000_000); // a 2 ms outlier
    b.exit(g, &c);
    (a, b)
}

fn snapshot(recs: &[&Recorder]) -> Snapshot {
    let table = callsite::table();
    let mut entries: Vec<Entry> = [&PARSE, &TOKEN, &ALLOC_A, &FIB]
        .iter()
        .map(|cs| {
            let mut r = Row::empty();
            for rec in recs {
                r.merge(&row(rec, cs));
            }
            let info = table.get(cs.id()).unwrap().clone();
            // `parse` stands for a future here: 98 finished, 2 cancelled, wall times
            // 10 µs, 20 µs, ... 1 ms.
            let wall = (info.name == "parse").then(|| {
                let mut hist = tickscope_fmt::hist::Counts::new();
                (1..=100u64).for_each(|i| hist.record(i * 10_000));
                WallRow {
                    kind: WallKind::Future,
                    done: 98,
                    cancelled: 2,
                    total: (1..=100u64).map(|i| i * 10_000).sum(),
                    min: 10_000,
                    max: 1_000_000,
                    clock_errors: 0,
                    hist,
                }
            });
            Entry { info, row: r, wall }
        })
        .collect();
    sort_entries(&mut entries);
    Snapshot {
        entries,
        threads: Vec::new(),
        live_threads: recs.len() as u64,
        exited_threads: 3,
        open_now: 0,
        unfinished_at_thread_exit: 0,
        lost_too_deep: 0,
        unbalanced: 0,
        lost_after_thread_exit: 0,
        capture_lost: 0,
        foreign_exits: 0,
        allocs_counted: false,
        allocs_uncounted: 0,
    }
}

fn meta() -> Context {
    Context {
        wall_ns: 50_000_000,
        rate: 1e9,
        clock: "tsc",
        overhead_ns: 12.4,
        timer_clock_errors: 0,
    }
}

/// Compares with `tests/data/NAME`, rewriting it only with `TICKSCOPE_BLESS=1`: a missing
/// golden file fails.
fn golden(name: &str, got: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    if std::env::var_os("TICKSCOPE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (restore it from git, or write it with TICKSCOPE_BLESS=1)",
            path.display()
        )
    });
    assert_eq!(
        got,
        want,
        "differs from {} (TICKSCOPE_BLESS=1 to update)",
        path.display()
    );
}

#[test]
fn summary_text_golden() {
    let (a, b) = workload();
    golden(
        "summary.txt",
        &text::render(&snapshot(&[&a, &b]), &meta(), false),
    );
}

#[test]
fn summary_json_golden() {
    let (a, b) = workload();
    golden(
        "summary.json",
        &json::render(&snapshot(&[&a, &b]), &meta(), false),
    );
}

#[test]
fn summary_figures_follow_from_the_workload() {
    let (a, b) = workload();
    let snap = snapshot(&[&a, &b]);
    let get = |n: &str| {
        snap.entries
            .iter()
            .find(|e| e.info.name == n)
            .unwrap()
            .row
            .clone()
    };
    let parse = get("parse");
    // 100 parses of 1000+10i ns own work, 400 ns tokenize, 200 ns in the pool.
    assert_eq!(parse.calls, 100);
    assert_eq!(parse.incl, 100 * 1_600 + 10 * 4_950);
    assert_eq!(parse.self_ticks, parse.incl - 100 * 600);
    let alloc = get("golden-alloc");
    assert_eq!(
        (alloc.calls, alloc.outer),
        (201, 101),
        "re-entries counted as calls only"
    );
    assert_eq!(alloc.incl, 100 * 200 + 2_000_000);
    assert_eq!(alloc.max, 2_000_000);
    let fib = get("fib");
    assert_eq!((fib.calls, fib.outer, fib.incl), (177, 1, 17_700));
    assert_eq!(
        snap.entries[0].info.name, "golden-alloc",
        "sorted by total, largest first"
    );
    let text = text::render(&snap, &meta(), false);
    assert!(text.contains("golden-alloc [group]"), "{text}");
    assert!(
        text.contains("pool.rs:7 +1"),
        "a group shows its extra call sites: {text}"
    );
}

#[test]
fn lost_and_open_scopes_are_reported_never_silent() {
    let (a, b) = workload();
    let mut snap = snapshot(&[&a, &b]);
    snap.lost_too_deep = 3;
    snap.open_now = 1;
    snap.lost_after_thread_exit = 2;
    let t = text::render(&snap, &meta(), false);
    assert!(
        t.contains("3 scopes not recorded: nested deeper than 4096"),
        "{t}"
    );
    assert!(t.contains("1 scope still open, not counted"), "{t}");
    assert!(
        t.contains("2 scopes not recorded: entered after its thread's exit"),
        "{t}"
    );
    let j = json::render(&snap, &meta(), false);
    assert!(
        j.contains("\"too_deep\":3,\"unbalanced\":0,\"after_thread_exit\":2,\"open_now\":1"),
        "{j}"
    );
}

#[test]
fn the_footer_counts_what_the_capture_lost_too() {
    let (a, b) = workload();
    let mut snap = snapshot(&[&a, &b]);
    let t = text::render(&snap, &meta(), false);
    assert!(t.contains("nothing lost"), "{t}");
    snap.capture_lost = 238_000_000;
    let t = text::render(&snap, &meta(), false);
    assert!(!t.contains("nothing lost"), "{t}");
    assert!(
        t.contains("238000000 capture events lost by the timeline capture"),
        "{t}"
    );
    let j = json::render(&snap, &meta(), false);
    assert!(j.contains("\"capture_events\":238000000,"), "{j}");
}

static SHORT: Callsite = Callsite::new(
    Name::Static("short-lived thread work"),
    Kind::Scope,
    file!(),
    line!(),
    module_path!(),
);
static LIVE: Callsite = Callsite::new(
    Name::Static("live thread work"),
    Kind::Scope,
    file!(),
    line!(),
    module_path!(),
);

/// Tests that record through the real registry keep the test binary's exit quiet.
fn quiet_exit() {
    crate::Config::new()
        .summary(crate::SummaryFormat::Off)
        .install();
}

#[test]
fn exited_threads_are_folded_into_the_totals() {
    quiet_exit();
    let before = collect(false, None).unwrap();
    let calls = |s: &Snapshot, n: &str| {
        s.entries
            .iter()
            .find(|e| e.info.name == n)
            .map_or(0, |e| e.row.calls)
    };
    let base = calls(&before, "short-lived thread work");
    let handles: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..25 {
                    let _g = crate::imp::enter(&SHORT);
                }
            })
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let after = collect(true, None).unwrap();
    assert_eq!(calls(&after, "short-lived thread work") - base, 200);
    assert!(after.exited_threads >= before.exited_threads + 8);
    let per_thread: u64 = after
        .threads
        .iter()
        .filter(|(t, _)| !t.alive)
        .flat_map(|(_, e)| {
            e.iter()
                .filter(|e| e.info.name == "short-lived thread work")
        })
        .map(|e| e.row.calls)
        .sum();
    assert!(
        per_thread >= 200,
        "per-thread breakdown keeps exited threads: {per_thread}"
    );
}

#[test]
fn live_threads_are_readable_while_they_run() {
    quiet_exit();
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        for _ in 0..1000 {
            let _g = crate::imp::enter(&LIVE);
        }
        tx.send(crate::sys::thread::gettid()).unwrap();
        done_rx.recv().unwrap(); // stay alive until the snapshot is taken
    });
    let tid = rx.recv().unwrap();
    let snap = collect(true, None).unwrap();
    let (t, entries) = snap
        .threads
        .iter()
        .find(|(t, _)| t.tid == tid)
        .expect("thread listed");
    assert!(t.alive);
    assert_eq!(
        entries
            .iter()
            .find(|e| e.info.name == "live thread work")
            .unwrap()
            .row
            .calls,
        1000
    );
    done_tx.send(()).unwrap();
    h.join().unwrap();
}
