//! Counters on the timeline: a counter holds its value until it is set again.

use super::{browse, dir, shots, view};
use crate::support::writer::{scope, thread, Capture, EndRec, Entry, Ev};

/// A counter set to one value three times, far apart, is drawn as a line through the whole
/// span, not as three dots (it looked dashed).
#[test]
fn a_counter_set_now_and_then_is_drawn_as_the_line_it_holds() {
    let d = dir("counter-line");
    let mut c = Capture::new();
    c.meta(&[
        scope(1, "work", "src/main.rs", 1),
        Entry::Marker {
            id: 9,
            counter: true,
            name: "pool size".into(),
        },
        thread(1, 4242, "main"),
    ]);
    let t = 1000;
    c.events(
        1,
        &[],
        &[
            Ev::Counter(9, t + 100, 8.0),
            Ev::Begin(1, t + 200),
            Ev::Counter(9, t + 500_000, 8.0),
            Ev::End(1, t + 900_000),
            Ev::Counter(9, t + 999_000, 8.0),
        ],
    );
    c.end(&EndRec {
        events: 5,
        dropped: 0,
        undelivered: 0,
        evicted: 0,
        end_ticks: t + 1_000_000,
        end_unix_ns: 1_700_000_000_001_000_000,
        threads: vec![(1, 0)],
    });
    let cap = d.join("counter.tscap");
    std::fs::write(&cap, &c.bytes).unwrap();
    let v = view(&[cap.to_str().unwrap()]);
    let page = browse(
        "check.mjs",
        &v.url,
        &shots("counter-line"),
        &["--first-page-only", "--counter-line"],
    );
    let line = &page["counter_line"];
    let (first, last, drawn) = (
        line["first"].as_i64().unwrap(),
        line["last"].as_i64().unwrap(),
        line["drawn"].as_i64().unwrap(),
    );
    // From its first setting to the capture's end: most of the track's width.
    assert!(last - first > 500, "{line}");
    assert_eq!(drawn, last - first + 1, "gaps in the line: {line}");
    let _ = std::fs::remove_dir_all(&d);
}
