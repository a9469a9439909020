//! The index and its answers, checked against the exact scopes of generated captures: every
//! scope at least a pixel wide is drawn, whole, once; the busy pixels hold the time of the
//! narrower ones; the bins hold the same time as the scopes; a tiny memory budget coarsens
//! the bins without losing a scope a bin long; a scope's details and a range's summary are
//! exact.

use std::io;

use tickscope_timeline::tscap::Reader;
use tickscope_timeline::{Options, TimeMap};
use tickscope_view::index::lives::How;
use tickscope_view::index::query::{Source, Window};
use tickscope_view::index::{Budget, Index};

use crate::writer::{process_payload, scope, thread, Capture, EndRec, Ev, PROCESS};

/// A scope as generated: (thread, depth, begin ns, end ns, id).
type Truth = (u64, usize, u64, u64, u64);

/// Ticks are ns (1 GHz) from tick 1000, the capture's start.
const START: u64 = 1000;

struct Bytes(Vec<u8>);

impl Source for Bytes {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let at = offset as usize;
        buf.copy_from_slice(
            self.0
                .get(at..at + buf.len())
                .ok_or(io::ErrorKind::UnexpectedEof)?,
        );
        Ok(())
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Log-uniform in [lo, hi).
    fn log(&mut self, lo: u64, hi: u64) -> u64 {
        let (a, b) = ((lo as f64).ln(), (hi as f64).ln());
        let f = (self.next() % 1_000_000) as f64 / 1e6;
        (a + f * (b - a)).exp() as u64
    }
}

/// Sibling scopes from `t` at `depth`, children below some: events and the exact scopes.
fn scopes(
    rng: &mut Rng,
    t: &mut u64,
    depth: usize,
    n: u64,
    thread: u64,
    evs: &mut Vec<Ev>,
    truth: &mut Vec<Truth>,
) {
    for _ in 0..n {
        *t += rng.log(5, 200);
        let id = 1 + rng.next() % 6;
        let begin = *t;
        evs.push(Ev::Begin(id, START + begin));
        if depth < 5 && rng.next() % 3 == 0 {
            let kids = 1 + rng.next() % 4;
            scopes(rng, t, depth + 1, kids, thread, evs, truth);
        }
        // Mostly short, some a few µs, a few long.
        *t += match rng.next() % 100 {
            0 => rng.log(1_000_000, 5_000_000),
            1..=10 => rng.log(5_000, 100_000),
            _ => rng.log(10, 2_000),
        };
        if rng.next() % 50 == 0 {
            evs.push(Ev::Frame(20, START + *t));
        }
        evs.push(Ev::End(id, START + *t));
        truth.push((thread, depth, begin, *t, id));
    }
}

/// A capture of two threads (chunks of 400 events, each with its open scopes), a frame
/// marker, a counter and messages; and its exact scopes.
pub(crate) fn generated(seed: u64) -> (Vec<u8>, Vec<Truth>, u64) {
    let mut rng = Rng(seed);
    let mut c = Capture::with_version(2);
    c.chunk(
        PROCESS,
        &process_payload(1e9, START, 1_700_000_000_000_000_000, 7, "generated"),
    );
    let mut meta: Vec<_> = (1..=6)
        .map(|i| scope(i, &format!("s{i}"), "gen.rs", i))
        .collect();
    meta.push(thread(1, 101, "one"));
    meta.push(thread(2, 102, "two"));
    // Named, never recording an event: `report` lists it.
    meta.push(thread(3, 103, "idle"));
    meta.push(crate::writer::Entry::Marker {
        id: 20,
        counter: false,
        name: "frame".into(),
    });
    meta.push(crate::writer::Entry::Marker {
        id: 21,
        counter: true,
        name: "level".into(),
    });
    c.meta(&meta);
    let mut truth = Vec::new();
    let mut last = 0;
    for th in [1u64, 2] {
        let mut evs = Vec::new();
        let mut t = 0;
        scopes(&mut rng, &mut t, 0, 3_000, th, &mut evs, &mut truth);
        evs.push(Ev::Counter(21, START + t, 3.5));
        evs.push(Ev::Message(START + t, format!("thread {th} done")));
        // Five events lost (a whole scope's begin and end among them, flags 0).
        evs.push(Ev::Lost2(START + t, 5, 0));
        last = last.max(t);
        // Chunks, each with the scopes open where it begins.
        let mut open: Vec<(u64, u64)> = Vec::new();
        for part in evs.chunks(400) {
            c.events(th, &open, part);
            for e in part {
                match *e {
                    Ev::Begin(id, t) => open.push((id, t)),
                    Ev::End(..) => {
                        open.pop();
                    }
                    _ => {}
                }
            }
        }
    }
    c.end(&EndRec {
        events: 0,
        dropped: 0,
        undelivered: 0,
        evicted: 0,
        end_ticks: START + last + 1,
        end_unix_ns: 0,
        threads: vec![],
    });
    (c.bytes, truth, last)
}

fn index(bytes: &[u8], budget: Budget) -> Index {
    let mut r = Reader::new(bytes, "gen.tscap").unwrap();
    let map = TimeMap::new(r.process(), r.meta().clock());
    let mut idx = Index::new(&r, map, budget);
    idx.read_all(&mut r).unwrap();
    idx.flush();
    idx
}

/// Checks the answer for `w` against the exact scopes: the slices drawn are exactly those
/// overlapping it at least a pixel wide; per row, the busy pixels and the slices together
/// hold the scopes' time in the window (to the bins' or pixels' rounding).
fn check(idx: &Index, src: &Bytes, truth: &[Truth], w: Window) -> bool {
    let a = idx.query(src, w).unwrap();
    let npp = (w.until_ns - w.from_ns) as f64 / w.px as f64;
    for th in [1u64, 2] {
        let t = a.threads.iter().find(|t| t.index == th);
        let mut want: Vec<(usize, u64, u64, u64)> = truth
            .iter()
            .filter(|s| {
                s.0 == th && s.3 >= w.from_ns && s.2 <= w.until_ns && (s.3 - s.2) as f64 >= npp
            })
            .map(|s| (s.1, s.2, s.3, s.4))
            .collect();
        want.sort();
        let mut got: Vec<(usize, u64, u64, u64)> = t
            .map(|t| {
                t.rows
                    .iter()
                    .enumerate()
                    .flat_map(|(d, r)| {
                        r.slices
                            .iter()
                            .map(move |s| (d, s.begin_ns as u64, s.end_ns as u64, s.id))
                    })
                    .collect()
            })
            .unwrap_or_default();
        got.sort();
        assert_eq!(
            got, want,
            "thread {th}, window {w:?} (decoded: {})",
            a.decoded
        );
        // Busy time per row: what the scopes narrower than a pixel cover (decoded windows),
        // or all of them (windows from the bins).
        let Some(t) = t else { continue };
        for (d, r) in t.rows.iter().enumerate() {
            let busy: f64 = r.busy.iter().map(|&b| b as f64 / 255.0 * npp).sum();
            let covered: f64 = truth
                .iter()
                .filter(|s| s.0 == th && s.1 == d && (!a.decoded || ((s.3 - s.2) as f64) < npp))
                .map(|s| (s.3.min(w.until_ns) as f64 - s.2.max(w.from_ns) as f64).max(0.0))
                .sum();
            // Rounding: half a level of 255 per pixel and slice (decoded), or a bin at each
            // edge of the window and a level per pixel (bins).
            let slack = if a.decoded {
                let n = truth
                    .iter()
                    .filter(|s| s.0 == th && s.1 == d && s.3 >= w.from_ns && s.2 <= w.until_ns)
                    .count();
                (n as f64 + w.px as f64) * npp / 255.0 + 1.0
            } else {
                2.0 * a.bin_ns + w.px as f64 * npp / 255.0 + covered * 0.01
            };
            assert!(
                (busy - covered).abs() <= slack,
                "thread {th} depth {d}: busy {busy:.0} ns, scopes {covered:.0} ns (slack {slack:.0}), window {w:?} decoded {}",
                a.decoded
            );
        }
    }
    a.decoded
}

#[test]
fn every_window_draws_each_scope_a_pixel_wide_once_and_the_rest_as_busy_time() {
    let (bytes, truth, last) = generated(0x9e37_79b9_7f4a_7c15);
    let idx = index(&bytes, Budget::for_capture(bytes.len() as u64));
    let src = Bytes(bytes);
    assert_eq!(idx.threads.len(), 2);
    let mut rng = Rng(42);
    let (mut decoded, mut binned) = (0, 0);
    for px in [2000u32, 333] {
        // The whole capture, then windows from 2 µs to most of it.
        let mut windows = vec![Window::new(0, last + 1, px).unwrap()];
        for _ in 0..60 {
            let width = rng.log(2_000, last);
            let from = rng.next() % (last - width + 1);
            windows.push(Window::new(from, from + width, px).unwrap());
        }
        for w in windows {
            if check(&idx, &src, &truth, w) {
                decoded += 1;
            } else {
                binned += 1;
            }
        }
    }
    assert!(
        decoded > 10 && binned > 10,
        "{decoded} decoded, {binned} from the bins"
    );
}

#[test]
fn a_tiny_budget_coarsens_the_bins_and_keeps_every_scope_a_bin_long() {
    let (bytes, truth, last) = generated(7);
    let fine = index(&bytes, Budget::for_capture(bytes.len() as u64));
    let tiny = index(&bytes, Budget::new(64 << 10));
    assert!(
        tiny.shift > fine.shift + 2,
        "{} vs {}",
        tiny.shift,
        fine.shift
    );
    assert!(tiny.bytes() <= 64 << 10, "{} bytes", tiny.bytes());
    let src = Bytes(bytes);
    let mut rng = Rng(3);
    for _ in 0..40 {
        let width = rng.log(2_000, last);
        let from = rng.next() % (last - width + 1);
        check(
            &tiny,
            &src,
            &truth,
            Window::new(from, from + width, 1500).unwrap(),
        );
    }
}

#[test]
fn frames_messages_and_counters_are_counted_per_pixel() {
    let (bytes, truth, last) = generated(11);
    let idx = index(&bytes, Budget::for_capture(bytes.len() as u64));
    let src = Bytes(bytes);
    let frames = |w: Window| -> u32 {
        let a = idx.query(&src, w).unwrap();
        a.threads.iter().map(|t| t.frames.iter().sum::<u32>()).sum()
    };
    let whole = frames(Window::new(0, last + 1, 1000).unwrap());
    assert!(whole > 50, "{whole} frame marks");
    // A narrow window holds the marks in it, found by decoding.
    let ends: Vec<u64> = truth.iter().map(|s| s.3).collect();
    let mid = ends[ends.len() / 3];
    let w = Window::new(mid - 20_000, mid + 20_000, 1000).unwrap();
    let a = idx.query(&src, w).unwrap();
    assert!(a.decoded);
    let a = idx
        .query(&src, Window::new(0, last + 1, 1000).unwrap())
        .unwrap();
    assert_eq!(a.counters.len(), 1);
    let set: Vec<_> = a.counters[0].ranges.iter().filter(|r| r.is_set()).collect();
    assert!(
        (1..=2).contains(&set.len()) && set.iter().all(|r| r.min == 3.5 && r.max == 3.5),
        "{set:?}"
    );
    assert_eq!(
        a.threads
            .iter()
            .map(|t| t.messages.iter().sum::<u32>())
            .sum::<u32>(),
        2
    );
    // Each loss is marked where it happened, in wide and narrow windows alike.
    let losses: Vec<(f64, u64)> = a.threads.iter().flat_map(|t| t.losses.clone()).collect();
    assert_eq!(losses.len(), 2, "{losses:?}");
    assert!(losses.iter().all(|l| l.1 == 5));
    let end = Window::new(last - 10, last + 10, 100).unwrap();
    let a = idx.query(&src, end).unwrap();
    let texts: Vec<&str> = a
        .threads
        .iter()
        .flat_map(|t| t.texts.iter().map(|m| m.1.as_str()))
        .collect();
    assert!(
        texts.contains(&"thread 1 done") || texts.contains(&"thread 2 done"),
        "{texts:?}"
    );
}

/// `tickscope report --from --until` of the capture at `path`: its summary of the range
/// `from..until` (ns), from the whole file.
fn report_range(
    path: &std::path::Path,
    from: u64,
    until: u64,
) -> tickscope_timeline::collect::Summary {
    let mut r = Reader::open(path).unwrap();
    let map = TimeMap::new(r.process(), r.meta().clock());
    tickscope_timeline::summarize(
        &mut r,
        Options {
            range: Some((map.ticks(from), map.ticks(until))),
            ..Options::default()
        },
    )
    .unwrap()
}

#[test]
fn a_scopes_details_and_a_ranges_summary_are_exact() {
    let (bytes, truth, last) = generated(5);
    let dir = std::env::temp_dir().join(format!("tickscope-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gen.tscap");
    std::fs::write(&path, &bytes).unwrap();
    let c = tickscope_view::capture::Capture::open_file(&path).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !c.status().done {
        assert!(std::time::Instant::now() < deadline, "not indexed in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Scopes of every length: each found at its middle, with its exact self time.
    for s in truth.iter().step_by(97) {
        let (th, depth, b, e, id) = *s;
        let d = c
            .scope_at(th, depth, (b + e) / 2)
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!((d.id, d.begin_ns, d.end_ns), (id, b, e), "{s:?}");
        let child: u64 = truth
            .iter()
            .filter(|k| k.0 == th && k.1 == depth + 1 && k.2 >= b && k.3 <= e)
            .map(|k| k.3 - k.2)
            .sum();
        if d.exact {
            assert_eq!(d.self_ns, (e - b) - child, "{s:?}");
        }
    }
    // A range's summary, as `report --from --until` computes it from the whole file.
    for (from, until) in [(0, last / 3), (last / 4, last / 2), (last / 2, last + 1)] {
        let got = c.range_summary(Some((from, until))).unwrap().unwrap();
        let want = report_range(&path, from, until);
        assert_eq!(got.scopes, want.scopes);
        assert_eq!(got.range, want.range);
        assert_eq!(got.threads, want.threads);
        let inside = truth.iter().filter(|s| s.2 >= from && s.3 <= until).count() as u64;
        assert_eq!(got.scopes.iter().map(|r| r.calls).sum::<u64>(), inside);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Capture `c` ended at `end_ticks`, written to a directory of its own as `NAME.tscap` and
/// opened by the viewer once indexed (polled to a deadline): the capture, its path and the
/// directory (for the test to remove).
fn ended_and_opened(
    mut c: Capture,
    end_ticks: u64,
    name: &str,
) -> (
    std::sync::Arc<tickscope_view::capture::Capture>,
    std::path::PathBuf,
    std::path::PathBuf,
) {
    c.end(&EndRec {
        events: 0,
        dropped: 0,
        undelivered: 0,
        evicted: 0,
        end_ticks,
        end_unix_ns: 0,
        threads: vec![],
    });
    let dir = std::env::temp_dir().join(format!("tickscope-view-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.tscap"));
    std::fs::write(&path, &c.bytes).unwrap();
    let cap = tickscope_view::capture::Capture::open_file(&path).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cap.status().done {
        assert!(std::time::Instant::now() < deadline, "not indexed in 60 s");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    (cap, path, dir)
}

/// A call that spans a range on a thread with no event inside it (its begin and end in
/// chunks on either side) crosses the range's edges: the range's summary counts it, as
/// `report --from --until` does, though no chunk the range overlaps holds an event of it.
#[test]
fn a_call_across_a_whole_range_counts_as_crossing_it() {
    let mut c = Capture::with_version(2);
    c.chunk(
        PROCESS,
        &process_payload(1e9, START, 1_700_000_000_000_000_000, 7, "spanning"),
    );
    c.meta(&[
        scope(1, "long", "gen.rs", 1),
        scope(2, "busy", "gen.rs", 2),
        thread(1, 101, "one"),
        thread(2, 102, "two"),
    ]);
    // Thread one: `long` begins in one chunk and ends in the next, 10 µs later.
    c.events(
        1,
        &[],
        &[Ev::Begin(1, START + 100), Ev::Frame(20, START + 150)],
    );
    c.events(
        1,
        &[(1, START + 100)],
        &[Ev::Frame(20, START + 9_900), Ev::End(1, START + 10_000)],
    );
    // Thread two is busy in between.
    c.events(
        2,
        &[],
        &[
            Ev::Begin(2, START + 2_000),
            Ev::End(2, START + 3_000),
            Ev::Begin(2, START + 4_000),
            Ev::End(2, START + 8_000),
        ],
    );
    let (cap, path, dir) = ended_and_opened(c, START + 10_001, "spanning");
    for (from, until) in [(1_500, 8_500), (3_500, 3_800), (500, 9_500)] {
        let got = cap.range_summary(Some((from, until))).unwrap().unwrap();
        let want = report_range(&path, from, until);
        // The calls over an edge: overlapping the range, not inside it.
        let crossing = [(100, 10_000), (2_000, 3_000), (4_000, 8_000)]
            .iter()
            .filter(|&&(b, e)| b < until && e > from && !(b >= from && e <= until))
            .count() as u64;
        let range = got.range.as_ref().expect("a range");
        assert_eq!(range.crossing, crossing, "{from}..{until}: {range:?}");
        assert_eq!(got.range, want.range, "{from}..{until}");
        assert_eq!(got.scopes, want.scopes, "{from}..{until}");
        assert_eq!(got.threads, want.threads, "{from}..{until}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scope's slowest call, as the summary's `max` names it: from the index where a call is
/// a bin long, from the chunks decoded again where every call is shorter; within a range
/// when asked.
#[test]
fn a_scopes_slowest_call_is_found_from_the_index_or_the_chunks() {
    let mut c = Capture::with_version(2);
    c.chunk(
        PROCESS,
        &process_payload(1e9, START, 1_700_000_000_000_000_000, 7, "slowest"),
    );
    c.meta(&[
        scope(1, "short", "gen.rs", 1),
        scope(2, "long", "gen.rs", 2),
        thread(1, 101, "one"),
        thread(2, 102, "two"),
    ]);
    // Bins are at least 4,096 ticks: `short`'s calls (at most 300) are never in the index.
    c.events(
        1,
        &[],
        &[
            Ev::Begin(1, START + 1_000),
            Ev::End(1, START + 1_100),
            Ev::Begin(2, START + 2_000),
            Ev::End(2, START + 50_000),
            Ev::Begin(1, START + 60_000),
            Ev::End(1, START + 60_300),
        ],
    );
    c.events(
        2,
        &[],
        &[
            Ev::Begin(2, START + 1_000),
            Ev::Begin(1, START + 5_000),
            Ev::End(1, START + 5_250),
            Ev::End(2, START + 90_000),
        ],
    );
    let (cap, _, dir) = ended_and_opened(c, START + 100_000, "slowest");
    let found = |id, range| cap.slowest(id, range).unwrap().unwrap();
    let call = |thread, depth, begin_ns, end_ns| tickscope_view::capture::Call {
        thread,
        depth,
        begin_ns,
        end_ns,
    };
    assert_eq!(found(2, None), Some(call(2, 0, 1_000, 90_000)));
    assert_eq!(found(1, None), Some(call(1, 0, 60_000, 60_300)));
    // Within a range: the calls that began and ended in it.
    assert_eq!(found(1, Some((0, 10_000))), Some(call(2, 1, 5_000, 5_250)));
    assert_eq!(found(2, Some((0, 80_000))), Some(call(1, 0, 2_000, 50_000)));
    assert_eq!(found(1, Some((70_000, 80_000))), None);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The real writer's version 3 capture (a tokio service: requests as spans, `#[profile]`
/// async fns, cancelled cache lookups) and its `tickscope report --json`.
fn v3_writer() -> (Vec<u8>, serde_json::Value) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../timeline/tests/data/");
    let bytes = std::fs::read(format!("{dir}v3-writer.tscap")).unwrap();
    let report = std::fs::read(format!("{dir}v3-writer.report.json")).unwrap();
    (bytes, serde_json::from_slice(&report).unwrap())
}

#[test]
fn lives_are_paired_across_threads_laid_out_in_lanes_and_agree_with_report() {
    let (bytes, report) = v3_writer();
    let idx = index(&bytes, Budget::for_capture(bytes.len() as u64));
    let tiny = index(&bytes, Budget::new(16 << 10));
    assert!(tiny.lives.min > 0, "the tiny budget coarsened the bins");
    let dur = report["wall_ns"].as_u64().unwrap();
    let whole = Window::new(0, dur + 1, 16_384).unwrap();
    let wide = idx.lives(whole);
    let coarse = idx.lives(Window::new(0, dur + 1, 20).unwrap());
    let mut checked = 0;
    for s in report["scopes"].as_array().unwrap() {
        let wall = &s["wall"];
        if wall.is_null() {
            continue;
        }
        let (name, id) = (&s["name"], s["id"].as_u64().unwrap());
        let calls = wall["calls"].as_u64().unwrap();
        let site = wide
            .iter()
            .find(|l| l.site == id)
            .unwrap_or_else(|| panic!("{name}"));
        // At ~1 µs a pixel every life here is drawn whole, each once.
        let all: Vec<_> = site.lanes.iter().flatten().collect();
        assert!(
            site.narrow.is_empty() && site.hidden == 0,
            "{name}: {site:?}"
        );
        assert_eq!(all.len() as u64, calls, "{name}");
        assert_eq!(site.ended, calls, "{name}");
        let cancelled = all.iter().filter(|l| l.how == How::Cancelled).count() as u64;
        assert_eq!(cancelled, wall["cancelled"].as_u64().unwrap(), "{name}");
        let total: f64 = all.iter().map(|l| l.end_ns - l.begin_ns).sum();
        let want = wall["total_ns"].as_f64().unwrap();
        assert!(
            (total - want).abs() <= 1e-4 * want + calls as f64,
            "{name}: {total} vs {want}"
        );
        let max = all
            .iter()
            .map(|l| l.end_ns - l.begin_ns)
            .fold(0.0, f64::max);
        let want_max = wall["max_ns"].as_f64().unwrap();
        assert!(
            (max - want_max).abs() <= 1e-4 * want_max + 1.0,
            "{name}: {max} vs {want_max}"
        );
        // A lane's lives follow one another.
        for lane in &site.lanes {
            for p in lane.windows(2) {
                assert!(p[0].end_ns <= p[1].begin_ns, "{name}: {p:?}");
            }
        }
        // Twenty pixels: the lives narrower than a pixel are counted where they begin.
        let c = coarse.iter().find(|l| l.site == id).unwrap();
        let counted: u64 = c.narrow.iter().map(|&(_, n)| u64::from(n)).sum();
        let drawn = c.lanes.iter().map(Vec::len).sum::<usize>() as u64;
        assert_eq!(drawn + counted + c.hidden, calls, "{name}: {c:?}");
        // Bins coarsened by a tiny budget: the lives shorter than a bin are counted, the
        // others drawn whole.
        let t = tiny.lives(whole);
        let t = t.iter().find(|l| l.site == id).unwrap();
        let counted: u64 = t.narrow.iter().map(|&(_, n)| u64::from(n)).sum();
        let drawn: Vec<_> = t.lanes.iter().flatten().collect();
        assert_eq!(
            drawn.len() as u64 + counted + t.hidden,
            calls,
            "{name}: {t:?}"
        );
        assert!(drawn.iter().all(|l| all.contains(l)), "{name}");
        checked += 1;
    }
    assert!(checked >= 5, "{checked} call sites with lives");
    // Concurrent requests overlap: side by side in lanes.
    assert!(wide.iter().any(|s| s.lanes.len() > 1));
    // A window that holds none of a life holds none of its lanes; one inside a life holds
    // it, whole.
    let longest = wide
        .iter()
        .flat_map(|s| s.lanes.iter().flatten().map(move |l| (s.site, *l)))
        .max_by(|a, b| (a.1.end_ns - a.1.begin_ns).total_cmp(&(b.1.end_ns - b.1.begin_ns)))
        .unwrap();
    let mid = ((longest.1.begin_ns + longest.1.end_ns) / 2.0) as u64;
    let inside = idx.lives(Window::new(mid, mid + 10, 100).unwrap());
    let s = inside.iter().find(|s| s.site == longest.0).unwrap();
    assert!(s.lanes.iter().flatten().any(|l| *l == longest.1), "{s:?}");
}
