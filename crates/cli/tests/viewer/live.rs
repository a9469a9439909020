//! Live captures on the page: a program sending `TICKSCOPE_CAPTURE=tcp://…` to `view` and to
//! `capture listen --view`, drawn as it arrives (Chromium, `live.mjs`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use super::*;

/// Runs live.mjs on `url`, starting the program with `start` once the page is up (its first
/// line, `loaded`), and returns what the page saw, with the program's exit.
fn browse_live(
    url: &str,
    out: &Path,
    start: impl FnOnce() -> Child,
) -> (serde_json::Value, std::process::ExitStatus) {
    let mut node = Command::new("node")
        .arg(root().join("crates/view/tests/browser/live.mjs"))
        .arg(url)
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("node not found: install Node.js (Debian: nodejs, npm) and run tests/readers/install.sh");
    let mut lines = BufReader::new(node.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let mut program = (first == "loaded").then(start);
    let last = if first == "loaded" {
        lines.map_while(Result::ok).last().unwrap_or_default()
    } else {
        first
    };
    let _ = node.wait();
    let status = match program.as_mut() {
        Some(p) => p.wait().unwrap(),
        None => panic!("live.mjs ended before the page was up: {last}"),
    };
    let v: serde_json::Value =
        serde_json::from_str(last.trim()).unwrap_or_else(|e| panic!("live.mjs: {e}: {last}"));
    assert_eq!(
        v["errors"],
        serde_json::json!([]),
        "live.mjs in Chromium: {v}"
    );
    (v, status)
}

/// The number in a table cell as the page wrote it.
/// How long the live demo runs: the page must draw it, then see it grow, while it runs. 3 s
/// (with two workers) was once too short beside two busy loops and the rest of the suite:
/// the capture had ended before Chromium's first look, and the wait for it to grow timed
/// out. One worker for 8 s sends about as many events as two did for 3 s (~100 MB).
const LIVE_SECONDS: &str = "8";

/// Runs the demo for `seconds` into `tcp://addr`.
fn demo_into(addr: &str, seconds: &str) -> Child {
    tickscope()
        .args([
            "demo",
            "--seconds",
            seconds,
            "--threads",
            "1",
            "--interval",
            "off",
        ])
        .env("TICKSCOPE_CAPTURE", format!("tcp://{addr}"))
        .env("TICKSCOPE_SUMMARY", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The page saw a capture grow while it arrived, then end with what it had.
fn check_live(page: &serde_json::Value) {
    let seen = page["seen"].as_array().unwrap();
    assert_eq!(seen.len(), 3, "{page}");
    let d = |i: usize| seen[i]["duration"].as_f64().unwrap();
    assert!(d(1) > d(0) && d(2) >= d(1), "{page}");
    assert!(
        seen.iter().all(|s| s["slices"].as_u64() > Some(0)),
        "{page}"
    );
    assert_eq!(seen[2]["done"], true);
    // Following the end: the window moved with the capture.
    assert!(
        seen[1]["until"].as_f64() > seen[0]["until"].as_f64(),
        "{page}"
    );
    // Before: what the page waits for; after: the program's name on its tab.
    let waiting = page["waiting"].as_str().unwrap_or_default();
    assert!(waiting.starts_with("Waiting for"), "{page}");
    let tab = page["tab"].as_str().unwrap_or_default();
    assert!(tab.starts_with("Live: tickscope (pid "), "{page}");
}

#[test]
fn live_captures_arrive_on_the_page_from_view_and_from_capture_listen() {
    // `tickscope view tcp://127.0.0.1:0`: it says where it listens.
    let v = view(&["tcp://127.0.0.1:0"]);
    let addr = v
        .stderr
        .iter()
        .find_map(|l| l.split("receiving live captures on ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{:?}", v.stderr))
        .to_owned();
    let out = shots("live");
    let (page, status) = browse_live(&v.url, &out, || demo_into(&addr, LIVE_SECONDS));
    assert!(status.success());
    check_live(&page);
    // It named where to connect.
    let waiting = page["waiting"].as_str().unwrap_or_default();
    assert!(
        waiting.contains(&format!("TICKSCOPE_CAPTURE=tcp://{addr}")),
        "{waiting}"
    );
    drop(v);

    // `tickscope capture listen --view`: the file is written and the page shows it.
    let d = dir("listen");
    let file = d.join("live.tscap");
    let mut listen = tickscope()
        .args([
            "capture",
            "listen",
            "127.0.0.1:0",
            "--connections",
            "1",
            "--quiet",
            "--view",
            "--no-open",
            "-o",
        ])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(listen.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let mut err = BufReader::new(listen.stderr.take().unwrap());
    let mut at = None;
    while at.is_none() {
        let mut l = String::new();
        assert!(
            err.read_line(&mut l).unwrap() > 0,
            "capture listen said nothing"
        );
        at = l
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(str::to_owned);
    }
    let at = at.unwrap();
    let (page, status) = browse_live(url.trim(), &out, || demo_into(&at, LIVE_SECONDS));
    assert!(status.success());
    check_live(&page);
    // The file is the capture: `report` reads it.
    let _ = listen.kill();
    let _ = listen.wait();
    let report = json(
        &tickscope()
            .arg("report")
            .arg(&file)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert!(report["events"].as_u64() > Some(0), "{report}");
    let _ = std::fs::remove_dir_all(&d);
}
