//! Integration tests of the `tickscope` binary: one binary, one module per area.

use std::process::Command;

// The timeline crate's test support: its spec-following capture encoder and sample captures.
#[path = "../../timeline/tests/support/mod.rs"]
mod support;

// `report`, `convert` and `capture listen` on captures built by that encoder.
mod timeline;
// Real programs recording (--capture, TICKSCOPE_CAPTURE, killed mid-capture); the exports
// checked by speedscope in headless Chromium and by Perfetto's protos.
mod recorded;
// `tickscope view` in headless Chromium: the page's figures against report and top.
mod viewer;
mod views;
// `top` against go tool pprof's reference outputs and the real go tool pprof; bad input.
mod pprof;
// `tickscope record` on a C program, with libtickscope.so; the preload tests' helpers.
#[path = "../../preload/tests/support.rs"]
mod preload_support;
mod record;
// The user's files and everyone else's: planted links, devices and FIFOs as outputs, record's
// private files, a full disk, two runs into one output, record killed (issue 38's probe).
mod trust;
// The pull endpoint: go tool pprof and Alloy's requests answered, with the token only (issue 42).
mod http;
// The module graph: no import circle but one documented edge per crate (issue 39).
mod layout;

/// The names in `dir`, sorted: a failed write leaves no temporary file behind.
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `tickscope demo --cpuprofile`: the demo's hot functions, by name, in `go tool pprof -top`.
#[test]
fn demo_cpuprofile_shows_the_hot_functions_in_go_tool_pprof() {
    let dir = std::env::temp_dir().join(format!("tickscope-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("demo.pb.gz");
    let svg = dir.join("demo.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args([
            "demo",
            "--seconds",
            "1",
            "--interval",
            "off",
            "--cpuprofile",
        ])
        .arg(&profile)
        .arg("--flamegraph")
        .arg(&svg)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("CPU profile written to"), "{stderr}");
    let top = Command::new("go")
        .args(["tool", "pprof", "-top"])
        .arg(&profile)
        .output()
        .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.status.success(),
        "{}",
        String::from_utf8_lossy(&top.stderr)
    );
    for name in ["demo::parse_record", "demo::tokenize", "demo::fib"] {
        assert!(
            text.contains(name),
            "{name} missing from go tool pprof -top:\n{text}"
        );
    }
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("parse_record"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The demo's outputs are checked before it runs: a missing directory is one line naming it,
/// not an error after the whole run.
#[test]
fn demo_refuses_an_output_in_a_missing_directory_before_running() {
    let dir = std::env::temp_dir().join(format!("tickscope-cli-nodir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let profile = dir.join("demo.pb.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args([
            "demo",
            "--seconds",
            "0.1",
            "--interval",
            "off",
            "--cpuprofile",
        ])
        .arg(&profile)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "tickscope: error: cannot write {}: the directory {} does not exist\n",
            profile.display(),
            dir.display()
        )
    );
}
