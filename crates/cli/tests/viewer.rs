//! `tickscope view` as a person uses it: files checked first; the page driven in headless
//! Debian Chromium (crates/view/tests/browser/*.mjs, with playwright-core from tests/readers)
//! showing the same figures as `tickscope report --json` and `top --json` for the same
//! files; zoom, pan, a scope's details, a range's summary and samples, the URL restoring
//! the view; the profile's views; a diff; live captures arriving. Screenshots of every view
//! are kept in the target directory (`view-screenshots/`); `TICKSCOPE_BLESS=1` also writes
//! the README's (`docs/view.png`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

// Counters: the value held between settings.
mod counters;
// A diff of two profiles: diff's table, both totals, widths and normalisation.
mod diff;
// Heap profiles: the sample-type switch.
mod heap;
// Live captures arriving on the page.
mod live;
// Opening the browser: the token in no command line.
mod opener;
// The URL: zoom and search kept, Back and an edited hash.
mod url;

fn tickscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickscope"))
}

/// `tickscope report --json` of capture `cap`.
fn report_json(cap: &Path) -> serde_json::Value {
    json(
        &tickscope()
            .arg("report")
            .arg(cap)
            .arg("--json")
            .output()
            .unwrap(),
    )
}

/// `tickscope demo` for 0.4 s on 2 threads, no interval lines or exit summary.
fn demo() -> Command {
    let mut c = tickscope();
    c.args([
        "demo",
        "--seconds",
        "0.4",
        "--threads",
        "2",
        "--interval",
        "off",
    ])
    .env("TICKSCOPE_SUMMARY", "off");
    c
}

/// `tickscope demo` for `seconds` on `threads` threads, captured into `cap` (no interval lines
/// or exit summary).
fn demo_capture(cap: &Path, seconds: &str, threads: &str) {
    ok(&crate::recorded::demo(seconds, threads)
        .arg("--capture")
        .arg(cap)
        .env("TICKSCOPE_SUMMARY", "off")
        .output()
        .unwrap());
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickscope-viewer-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Where the screenshots of test `name` go (kept after the run, for a person to look at).
fn shots(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("../view-screenshots")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).unwrap()
}

/// A running `tickscope view`, ended when dropped.
struct Viewer {
    child: Child,
    url: String,
    stderr: Vec<String>,
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tickscope view ARGS --no-open` and reads its URL (the first line of stdout) and
/// the stderr lines before it.
fn view(args: &[&str]) -> Viewer {
    let mut child = tickscope()
        .arg("view")
        .args(args)
        .arg("--no-open")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let mut stderr = Vec::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut l = String::new();
        if err.read_line(&mut l).unwrap() == 0 {
            break;
        }
        let serving = l.contains("serving");
        stderr.push(l);
        if serving {
            break;
        }
    }
    assert!(url.starts_with("http://127.0.0.1:"), "{url:?} {stderr:?}");
    assert!(url.contains("/?token="), "{url}");
    Viewer {
        child,
        url: url.trim().to_owned(),
        stderr,
    }
}

/// Runs a browser script of crates/view/tests/browser on `url`.
fn browse(script: &str, url: &str, out: &Path, flags: &[&str]) -> serde_json::Value {
    let r = Command::new("node")
        .arg(root().join("crates/view/tests/browser").join(script))
        .arg(url)
        .arg(out)
        .args(flags)
        .output()
        .expect("node not found: install Node.js (Debian: nodejs, npm) and run tests/readers/install.sh");
    let text = String::from_utf8_lossy(&r.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "{script}: {e}: {text}\n{}",
            String::from_utf8_lossy(&r.stderr)
        )
    });
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "{script} in Chromium: {v}"
    );
    v
}

/// `n` as the page writes a count (`toLocaleString('en-US')`): 12,345.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The samples of profile `p` (not the records that hold them), as `top` counts them.
fn samples_of(p: &Path) -> u64 {
    let top = json(
        &tickscope()
            .arg("top")
            .arg(p)
            .args(["--sample-index", "samples", "--json"])
            .output()
            .unwrap(),
    );
    top["total"].as_u64().unwrap()
}

fn cell(row: &serde_json::Value, col: &str) -> Option<f64> {
    row[col]["value"].as_str().and_then(|v| v.parse().ok())
}

#[test]
fn bad_files_and_addresses_are_one_line_and_status_2_before_anything_is_served() {
    let d = dir("bad");
    let text = d.join("notes.txt");
    std::fs::write(&text, "not a profile\n").unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec![text.display().to_string()], "notes.txt"),
        (
            vec![d.join("absent.tscap").display().to_string()],
            "absent.tscap",
        ),
        (vec![], "nothing to view"),
        (
            vec![
                "--addr".into(),
                "0.0.0.0:0".into(),
                text.display().to_string(),
            ],
            "notes.txt",
        ),
    ];
    for (args, says) in cases {
        let out = tickscope()
            .arg("view")
            .args(&args)
            .arg("--no-open")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: a URL was printed");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // A good file on a non-loopback address.
    let cap = d.join("x.tscap");
    demo_capture(&cap, "0.05", "1");
    let out = tickscope()
        .args(["view", "--no-open", "--addr", "0.0.0.0:0"])
        .arg(&cap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--allow-remote"));
    let _ = std::fs::remove_dir_all(&d);
}

/// `demo --async`'s futures and spans: each call site's lives drawn in lanes on the timeline
/// (concurrent requests side by side), as many as `report --json` counts, with the same wall
/// time; a life clicked shows its details.
#[test]
fn futures_and_spans_lives_are_drawn_as_report_counts_them() {
    let d = dir("lives");
    let cap = d.join("async.tscap");
    ok(&demo()
        .arg("--async")
        .arg("--capture")
        .arg(&cap)
        .output()
        .unwrap());
    let report = report_json(&cap);
    let v = view(&[cap.to_str().unwrap()]);
    let page = browse("check.mjs", &v.url, &shots("lives"), &["--lives"]);
    let lives = &page["lives"];
    let (mut on_page, mut in_report, mut lanes) = (0, 0, 0);
    for s in report["scopes"].as_array().unwrap() {
        let wall = &s["wall"];
        if wall.is_null() {
            continue;
        }
        let name = s["name"].as_str().unwrap();
        let l = &lives[s["id"].as_u64().unwrap().to_string()];
        assert!(l.is_object(), "{name}: no lives on the page: {lives}");
        let drawn = l["drawn"].as_array().unwrap();
        let (narrow, hidden) = (l["narrow"].as_u64().unwrap(), l["hidden"].as_u64().unwrap());
        on_page += drawn.len() as u64 + narrow + hidden;
        in_report += wall["calls"].as_u64().unwrap();
        lanes = lanes.max(l["tracks_lanes"].as_u64().unwrap());
        let ended: Vec<_> = drawn
            .iter()
            .filter(|x| x["how"].as_u64() < Some(2))
            .collect();
        let cancelled = ended.iter().filter(|x| x["how"] == 1).count() as u64;
        if narrow + hidden == 0 && ended.len() as u64 == wall["calls"].as_u64().unwrap() {
            // Every life of this call site drawn: the same count, cancellations and wall.
            assert_eq!(
                cancelled,
                wall["cancelled"].as_u64().unwrap(),
                "{name}: {l}"
            );
            let total: f64 = ended
                .iter()
                .map(|x| x["e"].as_f64().unwrap() - x["b"].as_f64().unwrap())
                .sum();
            let want = wall["total_ns"].as_f64().unwrap();
            assert!(
                (total - want).abs() <= 1e-4 * want + ended.len() as f64 * 2.0,
                "{name}: page {total} ns, report {want} ns"
            );
        } else {
            assert!(
                cancelled <= wall["cancelled"].as_u64().unwrap(),
                "{name}: {l}"
            );
        }
    }
    // Lives with one end in the capture are drawn too (to its end, or from its start); the
    // report counts them apart.
    let unpaired = report["lost"]["async_unpaired"].as_u64().unwrap();
    assert_eq!(on_page, in_report + unpaired, "{lives}");
    assert!(in_report > 0);
    assert!(lanes > 1, "concurrent requests side by side: {lives}");
    // The widest life, clicked: its wall time.
    let clicked = &page["clicked_life"];
    let details = &page["life_details"];
    let want = (clicked["e"].as_f64().unwrap() - clicked["b"].as_f64().unwrap()).round();
    assert_eq!(
        details["wall time"]["value"]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok()),
        Some(want),
        "{details}"
    );
    let site = &report["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == clicked["site"])
        .unwrap();
    assert_eq!(details["call site"]["text"], site["name"], "{details}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_page_shows_what_report_and_top_print_and_every_view_works_in_chromium() {
    let d = dir("page");
    let (cap, prof) = (d.join("run.tscap"), d.join("cpu.pb.gz"));
    ok(&demo()
        .arg("--capture")
        .arg(&cap)
        .arg("--cpuprofile")
        .arg(&prof)
        .output()
        .unwrap());
    let source_path = root().display().to_string();
    let v = view(&[
        cap.to_str().unwrap(),
        prof.to_str().unwrap(),
        "--source-path",
        &source_path,
    ]);
    let out = shots("page");
    let page = browse("check.mjs", &v.url, &out, &[]);

    // The summary table: `tickscope report --json`, row by row.
    let report = report_json(&cap);
    // The summary's max goes to that call: parse_record's slowest, its details showing it.
    let slow = &page["slowest"];
    let want_max = report["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "parse_record")
        .and_then(|r| r["max_ns"].as_f64())
        .unwrap();
    let got = slow["duration_ns"].as_f64().unwrap_or(-1.0);
    assert!(
        (got - want_max).abs() <= 1.0,
        "{slow}: report's max {want_max}"
    );
    // The call is in the window, a third of it.
    let span = slow["until"].as_f64().unwrap() - slow["from"].as_f64().unwrap();
    assert!((span / got - 3.0).abs() < 0.1, "{slow}");
    // The status line counts the threads as report does (those without an event too).
    let threads = report["threads"].as_array().unwrap().len();
    let status = page["capture_status"].as_str().unwrap_or_default();
    assert!(
        status.contains(&format!(" {threads} threads")),
        "{status:?}: report's {threads}"
    );
    let compare = |table: &serde_json::Value, report: &serde_json::Value, what: &str| {
        let want = report["scopes"].as_array().unwrap();
        let got = table.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{what}: {table} vs {report}");
        for w in want {
            let name = w["name"].as_str().unwrap();
            let g = got
                .iter()
                .find(|r| r["name"]["value"] == name)
                .unwrap_or_else(|| panic!("{what}: {name} not on the page"));
            for col in [
                "calls", "total_ns", "self_ns", "mean_ns", "min_ns", "p50_ns", "p99_ns", "max_ns",
                "dropped",
            ] {
                assert_eq!(
                    cell(g, col),
                    w[col].as_f64(),
                    "{what}: {name} {col}: page {g}, report {w}"
                );
            }
            // %wall as report's text prints it (its last digit differed).
            let wall = report["wall_ns"].as_f64().unwrap();
            let pct = w["total_ns"].as_f64().unwrap() * 100.0 / wall;
            assert_eq!(
                g["wall_percent"]["text"].as_str(),
                Some(format!("{pct:.1}").as_str()),
                "{what}: {name} %wall: page {g}, report {w}"
            );
        }
    };
    compare(&page["summary"], &report, "whole capture");
    // Beside it, the profile's top functions, as `top` lists them.
    let top = json(
        &tickscope()
            .arg("top")
            .arg(&prof)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let first: Vec<&serde_json::Value> = top["rows"]
        .as_array()
        .unwrap()
        .iter()
        .take(25)
        .map(|r| &r["name"])
        .collect();
    assert_eq!(
        page["first_page_top"]
            .as_array()
            .unwrap()
            .iter()
            .collect::<Vec<_>>(),
        first
    );
    assert_eq!(page["banner"], "", "a complete capture has no banner");
    // W zooms with the focus off the canvas; `?` lists the keys, Esc closes the list.
    let zoom = page["key_zoom"].as_f64().unwrap();
    assert!((0.7..0.9).contains(&zoom), "W zoomed by {zoom}");
    let help = page["help"]
        .as_str()
        .unwrap_or_else(|| panic!("no help: {page}"));
    assert!(
        help.contains("zoom in / out") && help.contains("callers and callees"),
        "{help}"
    );
    assert_eq!(page["help_closed"], true);
    // Names and figures are text in the page, not pixels only.
    let text = page["dom_text"].as_str().unwrap();
    for name in ["process_batch", "parse_record", "tokenize"] {
        assert!(text.contains(name), "{name} not in the page's text");
    }
    // Zoom, then pan: the window changed each time; narrow enough to be decoded again.
    let (whole, zoomed, panned) = (&page["whole"], &page["zoomed"], &page["panned"]);
    let span = |v: &serde_json::Value| v["until"].as_f64().unwrap() - v["from"].as_f64().unwrap();
    assert!(span(zoomed) < span(whole) / 10.0, "{whole} {zoomed}");
    assert!(
        panned["from"].as_f64() > zoomed["from"].as_f64(),
        "{zoomed} {panned}"
    );
    assert_eq!(
        page["zoomed_decoded"], true,
        "{zoomed} {}",
        page["zoomed_answer"]
    );
    // The scope clicked: its details are the slice's.
    let clicked = &page["clicked"];
    let details = &page["details"];
    assert!(clicked.is_object(), "nothing to click: {page}");
    let dur = clicked["e"].as_f64().unwrap() - clicked["b"].as_f64().unwrap();
    assert_eq!(
        cell(details, "duration").unwrap(),
        dur.round(),
        "{details} {clicked}"
    );
    assert!(cell(details, "self").unwrap() <= dur, "{details}");
    let name = &report["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"].as_f64() == clicked["id"].as_f64())
        .unwrap()["name"];
    assert_eq!(details["scope"]["text"], *name, "{details}");
    // The range: `tickscope report --from --until --json`.
    let range = page["range"].as_array().unwrap();
    let (from, until) = (
        range[0].as_f64().unwrap().round(),
        range[1].as_f64().unwrap().round(),
    );
    let want = json(
        &tickscope()
            .arg("report")
            .arg(&cap)
            .args([
                "--json",
                "--from",
                &format!("{from}ns"),
                "--until",
                &format!("{until}ns"),
            ])
            .output()
            .unwrap(),
    );
    compare(&page["range_summary"], &want, "range");

    // A second range, its answer held back: the first one's figures dimmed under a line
    // naming the range asked for; then the answer in their place.
    let loading = &page["range_loading"];
    let line = loading["line"]
        .as_str()
        .unwrap_or_else(|| panic!("{loading}"));
    assert!(line.starts_with("Computing the summary of "), "{loading}");
    assert!(
        loading["stale_opacity"]
            .as_str()
            .unwrap()
            .parse::<f64>()
            .unwrap()
            < 0.5,
        "{loading}"
    );
    let loaded = page["range_loaded"].as_str().unwrap();
    assert!(loaded.starts_with("Range"), "{loaded}");
    assert!(page["range_samples"].as_f64() > Some(0.0), "{page}");
    assert_eq!(
        page["range_root_visible"], true,
        "the range's flame graph out of sight"
    );
    // The URL restored the window and the range.
    let (before, after) = (&page["restored"]["before"], &page["restored"]["after"]);
    for k in ["from", "until"] {
        assert!(
            (before[k].as_f64().unwrap() - after[k].as_f64().unwrap()).abs() <= 1.0,
            "{before} {after}"
        );
    }
    assert_eq!(after["sel"].as_array().map(Vec::len), Some(2), "{after}");

    // The profile: `tickscope top --json`.
    let top = json(
        &tickscope()
            .arg("top")
            .arg(&prof)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let rows = page["top"].as_array().unwrap();
    let want = top["rows"].as_array().unwrap();
    assert_eq!(rows.len(), want.len());
    for (g, w) in rows.iter().zip(want) {
        assert_eq!(g["name"]["value"], w["name"]);
        assert_eq!(cell(g, "flat"), w["flat"].as_f64());
        assert_eq!(cell(g, "cum"), w["cum"].as_f64());
        assert_eq!(g["flat"]["text"], w["flat_text"]);
    }
    // The callers' icicle's widest top row: the function top puts first (most flat time).
    let widest = &page["icicle_widest"];
    assert_eq!(widest["cum"].as_f64(), want[0]["flat"].as_f64(), "{widest}");
    let cums: Vec<f64> = page["top_sorted_by_cum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    assert!(cums.windows(2).all(|w| w[0] >= w[1]), "{cums:?}");
    // A second click on the header sorts the other way (then a third back).
    let up: Vec<f64> = page["top_sorted_by_cum_up"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    assert!(up.windows(2).all(|w| w[0] <= w[1]), "{up:?}");
    assert_eq!(up.len(), cums.len());
    // A double-click in the flame graph opens the callers and callees of the frame it hit.
    let dbl = &page["flame_dblclick"];
    assert!(dbl["want"].is_string(), "no frame three rows up: {page}");
    assert_eq!(dbl["got"], dbl["want"], "{dbl}");
    assert_eq!(page["flame_total"].as_f64(), top["total"].as_f64());
    // The status line counts the samples, not the records that hold them (several samples
    // of one stack are one record).
    let status = page["profile_status"].as_str().unwrap();
    let samples = format!("{} samples", thousands(samples_of(&prof)));
    assert!(status.starts_with(&samples), "{status:?}, want {samples:?}");
    assert_eq!(page["profile_empty"], serde_json::Value::Null);
    let sandwich = &page["sandwich"];
    assert!(
        sandwich["callers"].as_u64().unwrap() + sandwich["callees"].as_u64().unwrap() > 0,
        "{sandwich}"
    );
    // The source of the function picked: its hottest line as `tickscope list` shows it.
    let picked = sandwich["name"].as_str().unwrap();
    let list = json(
        &tickscope()
            .arg("list")
            .arg(format!("^{}$", regex::escape(picked)))
            .arg(&prof)
            .args(["--json", "--source-path", &source_path])
            .output()
            .unwrap(),
    );
    let hot = list["functions"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|l| l["cum"].as_i64())
        .unwrap_or_else(|| panic!("`list` shows no lines of {picked:?}: {list}"));
    let source = page["source"].as_str().unwrap();
    let text = hot["text"].as_str().unwrap().trim();
    // It opens at that line, in view.
    let hottest = &page["source_hottest"];
    assert_eq!(hottest["visible"], true, "{hottest}");
    assert_eq!(
        hottest["text"].as_str().map(str::trim),
        Some(text),
        "{hottest}"
    );
    assert!(
        source.contains("demo.rs") && source.contains(text),
        "{text:?} not in {}",
        source.chars().take(3000).collect::<String>()
    );
    for s in [
        "timeline",
        "timeline-zoomed",
        "timeline-scope",
        "timeline-range",
        "timeline-samples",
        "profile-flame",
        "profile-icicle",
        "profile-top",
        "profile-sandwich",
        "profile-source",
    ] {
        assert!(out.join(format!("{s}.png")).exists(), "{s}.png");
    }
    if std::env::var_os("TICKSCOPE_BLESS").is_some_and(|b| b == "1") {
        std::fs::copy(out.join("timeline.png"), root().join("docs/view.png")).unwrap();
    }
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}

/// A frame named with 10,000 characters (read from folded stacks whose first line is longer
/// than the loader sniffs): its tooltip, at the window's right edge, is flipped into the
/// window, 520 px wide at most, and shows the name's two ends (issue 43 item 13).
#[test]
fn a_long_name_has_a_tooltip_that_stays_in_the_window() {
    let d = dir("long-name");
    let file = d.join("long.folded");
    let long = format!("very_long_{}", "x".repeat(10_000));
    std::fs::write(&file, format!("main;{long};leaf 10\n")).unwrap();
    let v = view(&[file.to_str().unwrap()]);
    let page = browse("check.mjs", &v.url, &shots("long-name"), &["--tip-edge"]);
    let tip = &page["tip"];
    let f = |k: &str| tip[k].as_f64().unwrap();
    let (w, h) = (
        tip["window"][0].as_f64().unwrap(),
        tip["window"][1].as_f64().unwrap(),
    );
    // It was 67,000 px wide, past the window's edge.
    assert!(f("width") <= 540.0, "{tip}");
    assert!(f("left") >= 0.0 && f("right") <= w, "{tip}");
    assert!(f("top") >= 0.0 && f("bottom") <= h, "{tip}");
    // The name's two ends, not all of it.
    assert!(tip["chars"].as_u64().unwrap() < 1000, "{tip}");
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}

/// A timeline window the server cannot answer yet (202: the capture's index is being built,
/// as when a live capture ends) is asked for again: before, the page stayed on an older
/// window, or undrawn, until the user moved it.
#[test]
fn a_timeline_window_not_ready_yet_is_asked_for_again() {
    let d = dir("pending");
    let cap = d.join("run.tscap");
    demo_capture(&cap, "0.1", "1");
    let v = view(&[cap.to_str().unwrap()]);
    // check.mjs waits (60 s at most) for the window in view to be drawn from its answer.
    let page = browse(
        "check.mjs",
        &v.url,
        &shots("pending"),
        &["--first-page-only", "--timeline-pending"],
    );
    assert_eq!(page["pending_answered"], 2, "{page}");
    assert!(page["first_paint_ms"].as_u64().is_some(), "{page}");
    assert!(
        page["summary"].as_array().is_some_and(|s| !s.is_empty()),
        "{page}"
    );
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_capture_cut_short_opens_to_its_last_good_chunk_with_a_banner_saying_so() {
    let d = dir("cut");
    let cap = d.join("run.tscap");
    demo_capture(&cap, "0.2", "2");
    // Cut in the middle of a chunk, as a program killed mid-write leaves it.
    let bytes = std::fs::read(&cap).unwrap();
    let cut = d.join("cut.tscap");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let v = view(&[cut.to_str().unwrap()]);
    let page = browse("check.mjs", &v.url, &shots("cut"), &["--first-page-only"]);
    let banner = page["banner"].as_str().unwrap();
    assert!(
        banner.contains("incomplete") && banner.contains("cut.tscap"),
        "{banner}"
    );
    // What it shows is `report --salvage`'s.
    let report = json(
        &tickscope()
            .args(["report", "--salvage", "--json"])
            .arg(&cut)
            .output()
            .unwrap(),
    );
    let calls = |v: &serde_json::Value| -> f64 {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| cell(r, "calls").or(r["calls"].as_f64()).unwrap())
            .sum()
    };
    assert_eq!(calls(&page["summary"]), calls(&report["scopes"]));
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}
