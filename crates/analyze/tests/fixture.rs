//! The version-1 fixture: `tests/data/v1.tscap` and the report it gives,
//! `tests/data/v1.report.json`, kept forever (a reader that stops reading them has broken the
//! format). Both are created when missing and re-blessed with `TICKSCOPE_BLESS=1`.

use std::path::PathBuf;

use tickscope_analyze::timeline::{report, Options};
use tickscope_analyze::tscap::Reader;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn the_version_1_fixture_reads_as_it_always_has() {
    let bless = std::env::var_os("TICKSCOPE_BLESS").is_some_and(|v| v == "1");
    let capture = data("v1.tscap");
    let golden = data("v1.report.json");
    if bless || !capture.exists() {
        std::fs::create_dir_all(capture.parent().unwrap()).unwrap();
        std::fs::write(&capture, crate::support::sample_split(5, true).bytes).unwrap();
    }
    let mut r = Reader::open(&capture).unwrap();
    let mut got = report(&mut r, Options { per_thread: true }).unwrap();
    got.file = "v1.tscap".into();
    let json = got.to_json();
    if bless || !golden.exists() {
        std::fs::write(&golden, &json).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(
        json, want,
        "re-bless with TICKSCOPE_BLESS=1 only if the change is intended"
    );
}

/// The version-1 fixture from the real writer (`tickscope demo --seconds 0.005 --threads 2
/// --capture`, tickscope 0.1.0): a collector-written file with LZ4 chunks, two worker threads,
/// frames, a counter and messages. Its report is kept as `v1-writer.report.json`.
#[test]
fn the_version_1_fixture_from_the_writer_reads_as_it_always_has() {
    let bless = std::env::var_os("TICKSCOPE_BLESS").is_some_and(|v| v == "1");
    let capture = data("v1-writer.tscap");
    let golden = data("v1-writer.report.json");
    assert!(
        capture.exists(),
        "{} is a kept fixture: restore it from git",
        capture.display()
    );
    let mut r = Reader::open(&capture).unwrap();
    let mut got = report(&mut r, Options { per_thread: true }).unwrap();
    got.file = "v1-writer.tscap".into();
    assert!(got.warnings.is_empty(), "{:?}", got.warnings);
    assert!(got
        .scopes
        .iter()
        .any(|s| s.name == "parse_record" && s.calls > 0));
    let json = got.to_json();
    if bless || !golden.exists() {
        std::fs::write(&golden, &json).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    assert_eq!(
        json, want,
        "re-bless with TICKSCOPE_BLESS=1 only if the change is intended"
    );
}
