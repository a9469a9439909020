//! The kept fixtures, one set per format version: `tests/data/v1.tscap` and the report it
//! gives, `tests/data/v1.report.json`, and the real writer's captures of each version, kept
//! forever (a reader that stops reading them has broken the
//! format). The captures are never rewritten, not even by a bless: a missing one is restored
//! from git. A report is rewritten only by an explicit `TICKSCOPE_BLESS=1`; a missing one fails.

use std::path::PathBuf;

use tickscope_timeline::tscap::Reader;
use tickscope_timeline::{summarize, Options};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The kept report; a missing one fails (never created by a run that finds it missing).
fn read_golden(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; restore it from git, or write it with TICKSCOPE_BLESS=1",
            path.display()
        )
    })
}

/// The kept capture `name` (never rewritten: a missing one is restored from git), read with
/// per-thread rows, named as the file.
fn read_fixture(name: &str) -> tickscope_timeline::Summary {
    let capture = data(name);
    assert!(
        capture.exists(),
        "{} is a kept fixture: restore it from git",
        capture.display()
    );
    let mut r = Reader::open(&capture).unwrap();
    let mut got = summarize(
        &mut r,
        Options {
            per_thread: true,
            ..Options::default()
        },
    )
    .unwrap();
    got.file = name.into();
    got
}

/// `got` as JSON equals the kept report `name` (written first with `TICKSCOPE_BLESS=1`).
fn assert_golden(got: &tickscope_timeline::Summary, name: &str) {
    let golden = data(name);
    let json = got.to_json();
    if std::env::var_os("TICKSCOPE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&golden, &json).unwrap();
    }
    let want = read_golden(&golden);
    assert_eq!(
        json, want,
        "re-bless with TICKSCOPE_BLESS=1 only if the change is intended"
    );
}

/// The version-1 capture written by the test encoder (`support::sample_split(5, true)`, as it
/// was when the fixture was made) reads to the report kept beside it.
#[test]
fn the_version_1_fixture_reads_as_it_always_has() {
    let got = read_fixture("v1.tscap");
    assert_golden(&got, "v1.report.json");
}

/// The version-1 fixture from the real writer (`tickscope demo --seconds 0.005 --threads 2
/// --capture`, tickscope 0.1.0): a collector-written file with LZ4 chunks, two worker threads,
/// frames, a counter and messages. Its report is kept as `v1-writer.report.json`.
#[test]
fn the_version_1_fixture_from_the_writer_reads_as_it_always_has() {
    let got = read_fixture("v1-writer.tscap");
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    assert!(got
        .scopes
        .iter()
        .any(|s| s.name == "parse_record" && s.calls > 0));
    assert_golden(&got, "v1-writer.report.json");
}

/// The version-2 fixture from the real writer (`TICKSCOPE_CAPTURE=v2-writer.tscap
/// TICKSCOPE_CAPTURE_MEMORY=100K tickscope demo --seconds 0.003 --threads 2`): a memory budget
/// far too small, so most scopes were dropped whole and announced by call site. Its report
/// is kept as `v2-writer.report.json`.
#[test]
fn the_version_2_fixture_from_the_writer_reads_as_it_always_has() {
    let got = read_fixture("v2-writer.tscap");
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    let l = &got.losses;
    // Two events per scope dropped, and the frame marks and counter values dropped.
    assert!(
        l.dropped_scopes > 0 && l.dropped >= 2 * l.dropped_scopes,
        "{l:?}"
    );
    assert_eq!(
        (l.unmatched_ends, l.abandoned, l.cut_at_losses),
        (0, 0, 0),
        "{l:?}"
    );
    assert_golden(&got, "v2-writer.report.json");
}

/// The version-3 fixture from the real writer (`tickscope demo --async --seconds 0.01
/// --threads 2 --capture v3-writer.tscap`): futures and `tracing` spans on a tokio runtime
/// of two workers, their polls and entries as scopes and their lives as async events, some
/// cancelled. Its report is kept as `v3-writer.report.json`.
#[test]
fn the_version_3_fixture_from_the_writer_reads_as_it_always_has() {
    let got = read_fixture("v3-writer.tscap");
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    let row = |name: &str| got.scopes.iter().find(|s| s.name == name).unwrap();
    let (handle, lookup) = (row("handle"), row("cache_lookup"));
    let lives = handle.wall.as_ref().expect("handle's lives");
    assert!(
        lives.count > 0 && lives.total_ns > handle.total_ns,
        "{handle:?}"
    );
    let lookups = lookup.wall.as_ref().expect("cache_lookup's lives");
    assert_eq!(lookups.count, lives.count);
    assert!(lookups.cancelled > 0, "{lookup:?}");
    assert_eq!(got.losses.async_unpaired, 0, "{:?}", got.losses);
    assert_golden(&got, "v3-writer.report.json");
}

/// The version-4 fixture from the real writer (`TICKSCOPE_CAPTURE=v4-writer.tscap tickscope
/// demo --seconds 0.005 --threads 2`, the binary whose global allocator is
/// `tickscope::alloc::Profiled`): each call site's allocations over the capture, counted by
/// scope. Its report is kept as `v4-writer.report.json`.
#[test]
fn the_version_4_fixture_from_the_writer_reads_as_it_always_has() {
    let got = read_fixture("v4-writer.tscap");
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    let allocs = |name: &str| {
        got.scopes
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.allocs)
            .unwrap_or_else(|| panic!("{name} has no allocations"))
    };
    // `process_batch` allocates only inside `parse_record`, which allocates only inside
    // `tokenize` and the `alloc` group: totals equal, selves add up.
    let (batch, record) = (allocs("process_batch"), allocs("parse_record"));
    assert_eq!(
        (batch[0], batch[1]),
        (record[0], record[1]),
        "{batch:?} {record:?}"
    );
    assert_eq!((batch[2], record[2]), (0, 0), "{batch:?} {record:?}");
    let (tokenize, alloc) = (allocs("tokenize"), allocs("alloc"));
    assert_eq!(record[0], tokenize[0] + alloc[0]);
    assert_eq!(record[1], tokenize[1] + alloc[1]);
    assert_golden(&got, "v4-writer.report.json");
}
