//! The summary computed from a timeline: exact numbers on hand-built captures (nesting,
//! recursion, abandoned and unmatched scopes, clock errors, open scopes, chunk boundaries and
//! gaps), frames, counters, messages, losses, and the text and JSON renderings.

use tickscope_timeline::collect::{Losses, ScopeRow};
use tickscope_timeline::tscap::{Reader, ScopeKind};
use tickscope_timeline::{summarize, Options, Summary};

use crate::support::writer::{scope, Capture, Ev};
use crate::support::{sample, sample_meta, sample_split, INNER, OUTER, REC, T0};

fn summarise(bytes: &[u8], per_thread: bool) -> Summary {
    let mut r = Reader::new(bytes, "x.tscap").unwrap();
    summarize(
        &mut r,
        Options {
            per_thread,
            ..Options::default()
        },
    )
    .unwrap()
}

fn row<'a>(r: &'a Summary, name: &str) -> &'a ScopeRow {
    r.scopes
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no row {name}: {:?}", r.scopes))
}

/// (calls, outer calls, total, self, min, max, clock errors) in ns.
fn numbers(r: &ScopeRow) -> (u64, u64, u64, u64, Option<u64>, Option<u64>, u64) {
    (
        r.calls,
        r.outer_calls,
        r.total_ns,
        r.self_ns,
        r.min_ns,
        r.max_ns,
        r.clock_errors,
    )
}

#[test]
fn the_sample_gives_exact_calls_total_and_self() {
    let r = summarise(&sample(false).bytes, false);
    let names: Vec<&str> = r.scopes.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["outer", "rec", "alloc", "inner", "backwards"],
        "sorted by total"
    );
    // outer: 1000 ns with 300 ns of inner on main, 100 ns with 50 on the worker.
    assert_eq!(
        numbers(row(&r, "outer")),
        (2, 2, 1100, 750, Some(100), Some(1000), 0)
    );
    assert_eq!(row(&r, "outer").mean_ns, Some(550));
    assert_eq!(row(&r, "outer").file, "src/app/main.rs");
    assert_eq!(row(&r, "outer").line, 10);
    assert_eq!(
        numbers(row(&r, "inner")),
        (3, 3, 350, 350, Some(50), Some(200), 0)
    );
    assert_eq!(row(&r, "inner").mean_ns, Some(117));
    // Recursion: three calls, one outermost; its time counted once, self time split.
    assert_eq!(
        numbers(row(&r, "rec")),
        (3, 1, 1000, 1000, Some(1000), Some(1000), 0)
    );
    assert_eq!(row(&r, "rec").p50_ns, Some(1000));
    // The abandoned scope's time stays in its parent's self time; it is not a row.
    assert_eq!(
        numbers(row(&r, "alloc")),
        (1, 1, 500, 500, Some(500), Some(500), 0)
    );
    assert_eq!(row(&r, "alloc").kind, ScopeKind::Group);
    assert!(r
        .scopes
        .iter()
        .all(|s| s.name != "leaked" && s.name != "never-ends"));
    // An end before its begin: a clock error, counted as zero.
    assert_eq!(
        numbers(row(&r, "backwards")),
        (1, 1, 0, 0, Some(0), Some(0), 1)
    );
    assert_eq!(r.wall_ns, 18_000);
    assert!((row(&r, "outer").wall_percent - 1100.0 / 180.0).abs() < 1e-9);
    assert_eq!(
        r.losses,
        Losses {
            dropped: 7,
            abandoned: 1,
            unmatched_ends: 1,
            open_at_end: 1,
            ..Losses::default()
        }
    );
    assert!(!r.losses.is_empty());
    assert!(r.complete);
    assert_eq!(r.events, 32);
    assert_eq!(r.recorded_events, Some(31));
    assert_eq!(r.loss_markers, 1);
    assert_eq!(r.program, "test-program");
    assert_eq!(r.clock_source, "tsc");
}

/// The threads' loss events are counted as dropped when no end record says so (a capture cut
/// short), and when the end record says less: found missing before, when the losses were
/// summed after the thread rows had let each thread's state go.
#[test]
fn loss_events_count_as_dropped_without_an_end_record_or_above_it() {
    use crate::support::{sample_end, sample_main, sample_worker};
    let build = |end: Option<u64>| {
        let mut c = Capture::new();
        c.meta(&sample_meta());
        c.events(1, &[], &sample_main());
        c.events(2, &[], &sample_worker());
        if let Some(dropped) = end {
            c.end(&crate::support::writer::EndRec {
                dropped,
                ..sample_end()
            });
        }
        summarise(&c.bytes, false)
    };
    // sample_main holds one loss event of 7.
    let cut = build(None);
    assert!(!cut.complete);
    assert_eq!(cut.losses.dropped, 7, "{:?}", cut.losses);
    assert_eq!(build(Some(3)).losses.dropped, 7);
    assert_eq!(build(Some(9)).losses.dropped, 9);
}

#[test]
fn frames_counters_messages_and_threads_are_summarised() {
    let r = summarise(&sample(true).bytes, false);
    assert_eq!(r.frames.len(), 1);
    let f = &r.frames[0];
    assert_eq!(f.name, "frame");
    assert_eq!((f.marks, f.frames), (3, 2));
    assert_eq!(
        (f.min_ns, f.mean_ns, f.p99_ns, f.max_ns),
        (Some(1600), Some(1800), Some(2000), Some(2000))
    );
    assert_eq!(r.counters.len(), 1);
    let c = &r.counters[0];
    assert_eq!(c.name, "queue depth");
    assert_eq!((c.count, c.min, c.max, c.last), (3, -1.5, 12.25, 12.25));
    assert_eq!(r.messages, 2);
    let first: Vec<(&str, u64, &str)> = r
        .first_messages
        .iter()
        .map(|m| (m.text.as_str(), m.at_ns, m.thread_name.as_str()))
        .collect();
    assert_eq!(
        first,
        [
            ("worker done", 9_700, "worker"),
            ("hello, wörld", 12_700, "main")
        ]
    );
    type ThreadLine<'a> = (u64, Option<u64>, &'a str, u64, u64, u64);
    let threads: Vec<ThreadLine> = r
        .threads
        .iter()
        .map(|t| {
            (
                t.index,
                t.tid,
                t.name.as_str(),
                t.events,
                t.dropped,
                t.open_at_end,
            )
        })
        .collect();
    assert_eq!(
        threads,
        [
            (1, Some(4660), "main", 27, 7, 1),
            (2, Some(4661), "worker", 5, 0, 0)
        ]
    );
}

/// The same events cut into chunks of every size, each listing its open scopes, give the
/// same numbers as one chunk.
#[test]
fn chunk_boundaries_with_open_scopes_change_nothing() {
    let whole = summarise(&sample(false).bytes, true);
    for n in 1..=28 {
        for compress in [false, true] {
            let r = summarise(&sample_split(n, compress).bytes, true);
            assert_eq!(r.scopes, whole.scopes, "chunks of {n}");
            assert_eq!(r.losses, whole.losses, "chunks of {n}");
            assert_eq!(r.frames, whole.frames, "chunks of {n}");
            assert_eq!(r.counters, whole.counters, "chunks of {n}");
            assert_eq!(r.threads, whole.threads, "chunks of {n}");
        }
    }
}

#[test]
fn a_gap_cuts_the_scopes_that_ended_in_it_and_adopts_those_that_began_in_it() {
    let mut c = Capture::new();
    c.meta(&sample_meta());
    c.events(1, &[], &[Ev::Begin(OUTER, T0), Ev::Begin(INNER, T0 + 100)]);
    // Chunks are missing here: inner ended and rec began in them.
    c.events(
        1,
        &[(OUTER, T0), (REC, T0 + 500)],
        &[Ev::End(REC, T0 + 700), Ev::End(OUTER, T0 + 1000)],
    );
    // A thread whose first chunk (a flight recorder's window) starts inside a scope.
    c.events(2, &[(OUTER, T0 + 50)], &[Ev::End(OUTER, T0 + 150)]);
    let r = summarise(&c.bytes, false);
    assert_eq!(r.losses.cut_at_gaps, 1);
    assert_eq!(
        numbers(row(&r, "rec")),
        (1, 1, 200, 200, Some(200), Some(200), 0)
    );
    assert_eq!(
        numbers(row(&r, "outer")),
        (2, 2, 1100, 900, Some(100), Some(1000), 0)
    );
    assert!(r.scopes.iter().all(|s| s.name != "inner"));
    assert!(!r.complete);
    assert_eq!(r.warnings.len(), 1, "no end record");
}

#[test]
fn per_thread_rows_split_the_totals() {
    let r = summarise(&sample(false).bytes, true);
    let main = &r.threads[0].scopes;
    let worker = &r.threads[1].scopes;
    let get = |rows: &[ScopeRow], name: &str| {
        let s = rows.iter().find(|s| s.name == name).unwrap();
        (s.calls, s.total_ns, s.self_ns, s.max_ns)
    };
    assert_eq!(get(main, "outer"), (1, 1000, 700, Some(1000)));
    assert_eq!(get(worker, "outer"), (1, 100, 50, Some(100)));
    assert_eq!(get(worker, "inner"), (1, 50, 50, Some(50)));
    assert_eq!(worker.len(), 2);
    assert!(summarise(&sample(false).bytes, false).threads[0]
        .scopes
        .is_empty());
}

#[test]
fn percentiles_are_within_two_percent() {
    let mut evs = Vec::new();
    let mut t = 0u64;
    let mut durations = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let d = if x % 10 == 0 {
            2_000_000 + x % 500_000
        } else {
            10_000 + x % 40_000
        };
        durations.push(d);
        evs.push(Ev::Begin(1, t));
        evs.push(Ev::End(1, t + d));
        t += d + 10;
    }
    let mut c = Capture::new();
    c.meta(&[scope(1, "work", "w.rs", 1)]);
    for part in evs.chunks(5000) {
        c.events(1, &[], part);
    }
    let r = summarise(&c.bytes, false);
    durations.sort_unstable();
    let exact = |q: f64| durations[(q * durations.len() as f64).ceil() as usize - 1] as f64;
    let w = row(&r, "work");
    for (q, got) in [(0.5, w.p50_ns), (0.9, w.p90_ns), (0.99, w.p99_ns)] {
        let got = got.unwrap() as f64;
        assert!(
            (got - exact(q)).abs() / exact(q) <= 0.02,
            "p{q}: {got} vs {}",
            exact(q)
        );
    }
    assert_eq!(w.min_ns, Some(durations[0]));
    assert_eq!(w.max_ns, Some(*durations.last().unwrap()));
}

#[test]
fn scopes_nested_past_the_limit_are_counted_not_kept() {
    let n = 5000u64;
    let mut evs: Vec<Ev> = (0..n).map(|i| Ev::Begin(1, i)).collect();
    evs.extend((0..n).map(|i| Ev::End(1, n + i)));
    let mut c = Capture::new();
    c.events(1, &[], &evs);
    let r = summarise(&c.bytes, false);
    assert_eq!(r.losses.too_deep, n - 4096);
    assert_eq!(r.scopes[0].calls, 4096);
    assert_eq!(r.scopes[0].outer_calls, 1);
}

#[test]
fn the_text_table_has_the_summary_columns() {
    let text = summarise(&sample(false).bytes, true).to_text();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("tickscope: x.tscap: test-program (pid 4242), 18.0 µs wall time, 2 threads, 5 scopes, 32 events"),
        "{text}"
    );
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "name", "location", "calls", "total", "self", "mean", "min", "p50", "p99", "max",
            "%wall", "clk", "err"
        ]
    );
    let outer: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        outer,
        [
            "outer",
            "app/main.rs:10",
            "2",
            "1.10",
            "µs",
            "750",
            "ns",
            "550",
            "ns",
            "100",
            "ns",
            "100",
            "ns",
            "1.00",
            "µs",
            "1.00",
            "µs",
            "6.1",
            "0"
        ]
    );
    // Columns line up: every row of the table is as wide as its header, right-aligned.
    let end = lines[1].len();
    for l in &lines[2..7] {
        assert_eq!(l.chars().count(), lines[1].chars().count(), "{l}");
    }
    assert!(end > 0);
    assert!(text.contains("alloc [group]"));
    assert!(
        text.contains("lost: 7 events dropped (memory budget spent)"),
        "{text}"
    );
    assert!(text.contains("dropped per thread: main 7"), "{text}");
    assert!(
        text.contains("scopes: 1 abandoned (closed by an enclosing scope's end) · 1 end unmatched · 1 still open at the end"),
        "{text}"
    );
    assert!(text.contains("frames:") && text.contains("counters:") && text.contains("messages: 2"));
    assert!(
        text.contains("thread 2 \"worker\", tid 4661: 5 events, 0 dropped"),
        "{text}"
    );
}

#[test]
fn the_json_report_parses_and_carries_the_numbers() {
    let json = summarise(&sample(false).bytes, true).to_json();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["tickscope"], 1);
    assert_eq!(v["wall_ns"], 18_000);
    assert_eq!(v["scopes"][0]["name"], "outer");
    assert_eq!(v["scopes"][0]["total_ns"], 1100);
    assert_eq!(v["scopes"][0]["self_ns"], 750);
    assert_eq!(v["scopes"][0]["calls"], 2);
    assert_eq!(v["scopes"][4]["clock_errors"], 1);
    assert_eq!(v["lost"]["abandoned"], 1);
    assert_eq!(v["lost"]["dropped"], 7);
    assert_eq!(v["threads"][1]["scopes"][0]["name"], "outer");
    assert_eq!(v["counters"][0]["last"], 12.25);
    assert_eq!(v["frames"][0]["frames"], 2);
    assert_eq!(v["messages"]["count"], 2);
    assert_eq!(
        json,
        summarise(&sample(false).bytes, true).to_json(),
        "deterministic"
    );
}

/// Version 1 made no promise that a dropped run took whole scopes: an end after a loss may
/// be another call's, so the scopes open across the loss are discarded, not paired.
#[test]
fn a_version_1_loss_discards_the_scopes_open_across_it() {
    let mut c = Capture::new();
    c.meta(&sample_meta());
    c.events(
        1,
        &[],
        &[
            Ev::Begin(OUTER, T0),
            Ev::Begin(INNER, T0 + 100),
            // Dropped here: inner's end and another inner's begin, say.
            Ev::Lost(T0 + 200, 2),
            Ev::End(INNER, T0 + 900),
            Ev::End(OUTER, T0 + 1000),
            Ev::Begin(INNER, T0 + 1100),
            Ev::End(INNER, T0 + 1150),
        ],
    );
    let r = summarise(&c.bytes, false);
    assert_eq!(r.losses.cut_at_losses, 2, "{:?}", r.losses);
    assert_eq!(r.losses.unmatched_ends, 2, "{:?}", r.losses);
    assert_eq!(
        numbers(row(&r, "inner")),
        (1, 1, 50, 50, Some(50), Some(50), 0)
    );
    assert!(r.scopes.iter().all(|s| s.name != "outer"));
}

/// Version 2 drops scopes whole: a loss leaves the pairs intact, and the scopes dropped and
/// those open when the capture started are counted on their rows, so that calls + dropped +
/// in flight is what the program counted. A loss flagged as having taken an end is treated
/// as version 1's.
#[test]
fn a_version_2_capture_pairs_across_losses_and_counts_dropped_scopes_by_row() {
    let mut c = Capture::with_version(2);
    c.chunk(
        crate::support::writer::PROCESS,
        &crate::support::writer::process_payload(1e9, 1000, 1, 1, "p"),
    );
    let mut meta = sample_meta();
    meta.push(crate::support::writer::Entry::DroppedScopes {
        thread: 1,
        scope: INNER,
        scopes: 3,
    });
    meta.push(crate::support::writer::Entry::DroppedScopes {
        thread: 2,
        scope: INNER,
        scopes: 2,
    });
    meta.push(crate::support::writer::Entry::InFlight {
        scope: REC,
        calls: 4,
    });
    c.meta(&meta);
    c.events(
        1,
        &[],
        &[
            Ev::Begin(OUTER, T0),
            Ev::Begin(INNER, T0 + 100),
            Ev::Lost2(T0 + 200, 6, 0),
            Ev::End(INNER, T0 + 900),
            Ev::End(OUTER, T0 + 1000),
        ],
    );
    c.events(
        2,
        &[],
        &[
            Ev::Begin(OUTER, T0),
            Ev::Begin(INNER, T0 + 10),
            Ev::Lost2(T0 + 20, 1, 1),
            Ev::End(INNER, T0 + 30),
            Ev::End(OUTER, T0 + 40),
        ],
    );
    let r = summarise(&c.bytes, false);
    let l = &r.losses;
    assert_eq!(
        (
            l.cut_at_losses,
            l.unmatched_ends,
            l.dropped_scopes,
            l.in_flight_at_start
        ),
        (2, 2, 5, 4),
        "{l:?}"
    );
    let inner = row(&r, "inner");
    assert_eq!(numbers(inner), (1, 1, 800, 800, Some(800), Some(800), 0));
    assert_eq!((inner.dropped, inner.in_flight_at_start), (5, 0));
    let outer = row(&r, "outer");
    assert_eq!(numbers(outer), (1, 1, 1000, 200, Some(1000), Some(1000), 0));
    // A scope none of whose calls is in the capture still has its row, with its count.
    let rec = row(&r, "rec");
    assert_eq!((rec.calls, rec.in_flight_at_start), (0, 4));
    let text = r.to_text();
    assert!(
        text.contains("calls dropped whole (memory budget spent), not in the table: 5 (inner 5)"),
        "{text}"
    );
    assert!(
        text.contains("calls already open when the capture started, not in the table: 4 (rec 4)"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["lost"]["dropped_scopes"], 5);
    assert!(v["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "inner" && s["dropped"] == 5));
}

/// A summary of a time range counts the calls that begin and end in it, exactly; calls
/// crossing either edge are counted apart, whichever chunk they began in.
#[test]
fn a_range_counts_the_calls_inside_it_and_those_crossing_its_edges_apart() {
    // Ticks are ns from tick 1000 (the capture's start); the range is 100 to 1000 ns.
    let t = |ns: u64| 1000 + ns;
    let mut c = Capture::new();
    c.meta(&[scope(1, "outer", "a.rs", 1), scope(2, "inner", "a.rs", 2)]);
    c.events(
        1,
        &[],
        &[
            Ev::Begin(1, t(50)), // crosses the start
            Ev::End(1, t(150)),
            Ev::Begin(1, t(200)), // inside, with a child inside
            Ev::Begin(2, t(250)),
            Ev::End(2, t(260)),
            Ev::End(1, t(300)),
            Ev::Begin(1, t(900)), // crosses the end: its end is in the next chunk
        ],
    );
    c.events(
        1,
        &[(1, t(900))],
        &[
            Ev::End(1, t(1100)),
            Ev::Begin(2, t(1200)),
            Ev::End(2, t(1300)),
        ],
    );
    let mut r = Reader::new(&c.bytes[..], "x.tscap").unwrap();
    let s = summarize(
        &mut r,
        Options {
            range: Some((t(100), t(1000))),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(
        numbers(row(&s, "outer")),
        (1, 1, 100, 90, Some(100), Some(100), 0)
    );
    assert_eq!(
        numbers(row(&s, "inner")),
        (1, 1, 10, 10, Some(10), Some(10), 0)
    );
    let range = s.range.unwrap();
    assert_eq!(
        (range.from_ns, range.until_ns, range.crossing),
        (100, 1000, 2)
    );
    assert_eq!(s.wall_ns, 900);
    assert_eq!(s.losses.open_at_end, 0);
    assert!(
        s.to_text().contains("2 calls crossing its edges"),
        "{}",
        s.to_text()
    );
    // The whole capture, for comparison: every call.
    let all = summarise(&c.bytes, false);
    assert_eq!(row(&all, "outer").calls, 3);
    assert_eq!(all.range, None);
}

/// Version 3's async events: a future's or span's life, paired by async id whatever the
/// threads and whichever comes first in the file (a future that moved: its end's thread
/// wrote its chunk first). Each life is its call site's wall time beside the row's busy
/// time; cancellations are counted apart; a life with one end in the capture, or a damaged
/// pair, is counted, never timed.
#[test]
fn futures_lives_pair_across_threads_in_any_order_beside_their_polls() {
    let mut c = Capture::with_version(3);
    c.chunk(
        crate::support::writer::PROCESS,
        &crate::support::writer::process_payload(1e9, 1000, 1, 1, "p"),
    );
    c.meta(&[
        scope(1, "fetch", "f.rs", 1),
        scope(2, "never entered", "f.rs", 2),
        crate::support::writer::thread(1, 100, "worker-a"),
        crate::support::writer::thread(2, 101, "worker-b"),
    ]);
    // Thread b's chunk first: future 7 ends there (ready) and future 8 is cancelled there,
    // both begun on thread a; future 9 is a lone end (its begin lost).
    c.events(
        2,
        &[],
        &[
            Ev::Begin(1, T0 + 5_000),
            Ev::End(1, T0 + 5_300),
            Ev::Async(T0 + 5_300, 1, 7, 1),
            Ev::Async(T0 + 6_000, 1, 8, 2),
            Ev::Async(T0 + 6_500, 1, 9, 1),
        ],
    );
    c.events(
        1,
        &[],
        &[
            Ev::Async(T0, 1, 7, 0),
            Ev::Begin(1, T0),
            Ev::End(1, T0 + 200),
            Ev::Async(T0 + 1_000, 1, 8, 0),
            Ev::Begin(1, T0 + 1_000),
            Ev::End(1, T0 + 1_100),
            // A span created and closed without an entry, on this thread alone.
            Ev::Async(T0 + 2_000, 2, 10, 0),
            Ev::Async(T0 + 2_400, 2, 10, 1),
            // Alive at the end.
            Ev::Async(T0 + 3_000, 1, 11, 0),
            // Damaged: two begins under one id.
            Ev::Async(T0 + 4_000, 1, 12, 0),
            Ev::Async(T0 + 4_100, 1, 12, 0),
        ],
    );
    let r = summarise(&c.bytes, false);
    let fetch = row(&r, "fetch");
    // Busy: three polls (200 + 300 on two threads, 100); wall: 5,300 and 5,000 (cancelled).
    assert_eq!((fetch.calls, fetch.total_ns), (3, 600));
    let w = fetch.wall.as_ref().expect("fetch has lives");
    assert_eq!((w.count, w.cancelled, w.total_ns), (2, 1, 10_300), "{w:?}");
    assert_eq!((w.min_ns, w.max_ns), (5_000, 5_300), "{w:?}");
    assert!(w.p50_ns >= 5_000 && w.p99_ns <= 5_300, "{w:?}");
    let span = row(&r, "never entered");
    assert_eq!(span.calls, 0);
    assert_eq!(
        span.wall.as_ref().map(|w| (w.count, w.total_ns)),
        Some((1, 400))
    );
    // 9 (lone end), 11 (alive), 12 (two begins).
    assert_eq!(r.losses.async_unpaired, 4, "{:?}", r.losses);
    let text = r.to_text();
    assert!(text.contains("futures and spans: busy"), "{text}");
    assert!(
        text.contains("futures and spans: 4 with one end of their life in the capture"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let fetch = json["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fetch")
        .unwrap();
    assert_eq!(fetch["wall"]["cancelled"], 1, "{fetch}");
    assert_eq!(fetch["wall"]["total_ns"], 10_300, "{fetch}");
}

/// An async event in a version 2 capture is refused: kind 7 is reserved there.
#[test]
fn async_events_before_version_3_are_refused() {
    let mut c = Capture::with_version(2);
    c.chunk(
        crate::support::writer::PROCESS,
        &crate::support::writer::process_payload(1e9, 1000, 1, 1, "p"),
    );
    c.events(1, &[], &[Ev::Async(T0, 1, 7, 0)]);
    let mut reader = Reader::new(&c.bytes[..], "x.tscap").unwrap();
    let e = summarize(&mut reader, Options::default()).unwrap_err();
    assert!(e.to_string().contains("reserved kind 7"), "{e}");
}
