//! `tickscope view` on the default demo capture, measured in one run and printed as ratios
//! to the targets:
//!
//! ```text
//! cargo bench -p tickscope-cli --bench view
//! ```
//!
//! - **first picture**: headless Chromium started first, then `tickscope view run.tscap`; the
//!   time from the viewer's start to the timeline drawn with its first answer (the index
//!   built on the way). Target ≤ 3 s. Also the index's build time and size, and the server's
//!   peak memory against 3 × the capture and 16 MB.
//! - **windows**: 200 random windows (log-uniform widths from 10 µs to the whole capture) at
//!   2000 px, answered by the index in this process. Target: p99 ≤ 50 ms.
//! - **flame graph**: `tickscope view large.cpu.pb.gz` (tests/data/pprof, 20,430 samples):
//!   from the page's load to its flame graph drawn. Target ≤ 1 s.
//! - **live**: a 2 s demo on 4 threads streamed (`TICKSCOPE_CAPTURE=tcp://…`) into `tickscope
//!   view tcp://…`, then the same into `tickscope capture listen -o FILE`, one after the
//!   other on this machine: the share of events each lost (undelivered: the receiver did not
//!   keep up). Target: the viewer loses no more than the listener (ratio ≤ 1, with a few
//!   points' noise between two runs).
//! - **frames**: the 10 s demo's capture (`demo --seconds 10`) at 1440 × 900, its whole
//!   window in view: the time of one full redraw (30 of them), and the intervals between the
//!   frames drawn while the mouse drags and wheels the timeline. Target: a redraw ≤ 16 ms.
//!
//! The capture is `tickscope demo --capture` (3 s, the default threads), made afresh, or the
//! file `TICKSCOPE_BENCH_CAPTURE` names. Needs node and Chromium (`tests/readers/install.sh`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use tickscope_timeline::tscap::{self, Reader};
use tickscope_timeline::TimeMap;
use tickscope_view::index::query::Window;
use tickscope_view::index::{Budget, Index};

fn main() {
    let tickscope = PathBuf::from(env!("CARGO_BIN_EXE_tickscope"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("tickscope-bench-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let capture = match std::env::var_os("TICKSCOPE_BENCH_CAPTURE") {
        Some(p) => PathBuf::from(p),
        None => {
            let p = dir.join("run.tscap");
            let out = Command::new(&tickscope)
                .args(["demo", "--interval", "off", "--capture"])
                .arg(&p)
                .env("TICKSCOPE_SUMMARY", "off")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            p
        }
    };
    let size = std::fs::metadata(&capture).unwrap().len();

    // The index, in this process.
    let t = Instant::now();
    let clock = tscap::last_clock(&capture).unwrap();
    let mut r = Reader::open(&capture).unwrap();
    let map = TimeMap::new(r.process(), clock);
    let mut idx = Index::new(&r, map, Budget::for_capture(size));
    idx.read_all(&mut r).unwrap();
    idx.flush();
    let build = t.elapsed().as_secs_f64();
    println!(
        "tickscope view, {} ({:.1} MB, {:.1} M events)",
        capture.display(),
        size as f64 / 1e6,
        idx.events as f64 / 1e6
    );
    println!(
        "  index: built in {build:.2} s on one core ({:.0} M events/s), {:.1} MB ({:.2} x the capture), bins of {:.1} µs",
        idx.events as f64 / build / 1e6,
        idx.bytes() as f64 / 1e6,
        idx.bytes() as f64 / size as f64,
        idx.bin_ns() / 1e3
    );

    // 200 random windows at 2000 px.
    let file = std::fs::File::open(&capture).unwrap();
    let end = map.ns(idx.last);
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut times = Vec::new();
    let mut decoded = 0;
    for _ in 0..200 {
        let (lo, hi) = ((10_000f64).ln(), (end as f64).ln());
        let width = (lo + (next() % 10_000) as f64 / 10_000.0 * (hi - lo)).exp() as u64;
        let from = next() % (end - width + 1);
        let w = Window::new(from, from + width, 2000).unwrap();
        let t = Instant::now();
        let a = idx.query(&file, w).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        decoded += a.decoded as u32;
    }
    times.sort_by(f64::total_cmp);
    let p99 = times[197];
    println!(
        "  windows at 2000 px: p50 {:.1} ms, p99 {p99:.1} ms, max {:.1} ms ({decoded} of 200 decoded again, the rest from the bins)",
        times[100], times[199]
    );
    println!(
        "  RATIO window p99 / 50 ms: {:.3}   (target <= 1.0)",
        p99 / 50.0
    );
    drop(idx);

    // The page, in Chromium.
    let script = root.join("crates/view/tests/browser/bench.mjs");
    let node = |what: &str, file: &Path| -> serde_json::Value {
        let out = Command::new("node")
            .arg(&script)
            .arg(what)
            .arg(&tickscope)
            .arg(file)
            .output()
            .expect("node not found: install Node.js and run tests/readers/install.sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let tl = node("timeline", &capture);
    let paint = tl["first_paint_ms"].as_f64().unwrap();
    let rss = tl["server_peak_rss"].as_f64().unwrap();
    println!(
        "  first picture: {paint:.0} ms from `tickscope view` starting (index built in {:.2} s beside the browser; summary table at {} ms)",
        tl["index"]["seconds"].as_f64().unwrap_or(0.0),
        tl["summary_ms"]
    );
    println!(
        "  RATIO first picture / 3 s: {:.3}   (target <= 1.0)",
        paint / 3000.0
    );
    let bound = 3.0 * size as f64 + 16e6;
    println!(
        "  server peak memory {:.1} MB: RATIO / (3 x capture + 16 MB): {:.3}   (target <= 1.0)",
        rss / 1e6,
        rss / bound
    );
    let large = root.join("tests/data/pprof/large.cpu.pb.gz");
    let fl = node("flame", &large);
    let ms = fl["flame_after_load_ms"].as_f64().unwrap();
    println!(
        "  flame graph of large.cpu.pb.gz ({} samples): {ms:.0} ms after the page loaded (its request {} ms)",
        fl["samples"], fl["flame_request_ms"]
    );
    println!(
        "  RATIO flame graph / 1 s: {:.3}   (target <= 1.0)",
        ms / 1000.0
    );
    // Live: the viewer and the listener, one after the other.
    let (viewer_lost, listener_lost) = (
        live_into_view(&tickscope),
        live_into_listener(&tickscope, &dir),
    );
    println!(
        "  live, a 2 s demo on 4 threads: the viewer lost {:.1}% of its events, capture listen {:.1}%",
        viewer_lost * 100.0,
        listener_lost * 100.0
    );
    println!(
        "  RATIO viewer's loss / listener's: {:.3}   (target <= 1.0)",
        viewer_lost / listener_lost.max(1e-9)
    );

    // Frames, on the 10 s demo.
    let ten = dir.join("ten.tscap");
    let out = Command::new(&tickscope)
        .args(["demo", "--seconds", "10", "--interval", "off", "--capture"])
        .arg(&ten)
        .env("TICKSCOPE_SUMMARY", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fr = node("frames", &ten);
    let at = |v: &serde_json::Value, q: f64| {
        let a = v.as_array().unwrap();
        a[((a.len() - 1) as f64 * q) as usize].as_f64().unwrap()
    };
    let (redraw, frames) = (&fr["redraw_ms"], &fr["frame_ms"]);
    println!(
        "  frames, the 10 s demo ({:.1} MB) at 1440 x 900: a full redraw p50 {:.1} ms, max {:.1} ms; dragged and wheeled: {} frames, p50 {:.1} ms, p90 {:.1} ms apart",
        std::fs::metadata(&ten).map_or(0, |m| m.len()) as f64 / 1e6,
        at(redraw, 0.5),
        at(redraw, 1.0),
        frames.as_array().unwrap().len(),
        at(frames, 0.5),
        at(frames, 0.9)
    );
    println!(
        "  RATIO redraw p50 / 16 ms: {:.3}   (target <= 1.0)",
        at(redraw, 0.5) / 16.0
    );
    for v in [&tl, &fl, &fr] {
        assert_eq!(v["errors"], serde_json::json!([]), "{v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The 2 s demo streamed into the program `recv` starts (on `127.0.0.1:0`): the share of
/// its events lost (`undelivered` over what it sent), from `report --json`'s figures.
fn lost_share(summary: &serde_json::Value) -> f64 {
    let lost = summary["lost"]["undelivered"].as_f64().unwrap_or(0.0);
    let got = summary["events"].as_f64().unwrap_or(0.0);
    lost / (lost + got).max(1.0)
}

/// Runs the demo for 2 s on 4 threads with `TICKSCOPE_CAPTURE=tcp://ADDR`.
fn demo_into(tickscope: &Path, addr: &str) {
    let out = Command::new(tickscope)
        .args([
            "demo",
            "--seconds",
            "2",
            "--threads",
            "4",
            "--interval",
            "off",
        ])
        .env("TICKSCOPE_CAPTURE", format!("tcp://{addr}"))
        .env("TICKSCOPE_SUMMARY", "off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The first line of `r` that holds `mark`, read until it comes.
fn line_with(r: &mut impl std::io::BufRead, mark: &str) -> String {
    let mut l = String::new();
    loop {
        l.clear();
        assert!(r.read_line(&mut l).unwrap() > 0, "no line with {mark:?}");
        if l.contains(mark) {
            return l;
        }
    }
}

/// The share of events `tickscope view tcp://…` lost.
fn live_into_view(tickscope: &Path) -> f64 {
    use std::io::BufRead;
    let mut v = Command::new(tickscope)
        .args(["view", "--no-open", "tcp://127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(v.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let mut err = std::io::BufReader::new(v.stderr.take().unwrap());
    let l = line_with(&mut err, "receiving live captures on ");
    let addr = l.split("receiving live captures on ").nth(1).unwrap();
    let addr = addr.split_whitespace().next().unwrap().to_string();
    demo_into(tickscope, &addr);
    // The capture's summary once its connection ended (polled to a deadline).
    let url = url.trim();
    let (base, token) = url.split_once("/?token=").unwrap();
    let host = base.strip_prefix("http://").unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    let summary = loop {
        let info = http_get(host, &format!("/api/info?token={token}"));
        let done = info["captures"][0]["status"]["done"] == true;
        if done {
            break http_get(host, &format!("/api/summary?token={token}&c=0"));
        }
        assert!(Instant::now() < deadline, "the live capture never ended");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let _ = v.kill();
    let _ = v.wait();
    lost_share(&summary)
}

/// The share of events `tickscope capture listen -o FILE` lost.
fn live_into_listener(tickscope: &Path, dir: &Path) -> f64 {
    let file = dir.join("listened.tscap");
    let mut l = Command::new(tickscope)
        .args([
            "capture",
            "listen",
            "127.0.0.1:0",
            "--connections",
            "1",
            "-o",
        ])
        .arg(&file)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(l.stderr.take().unwrap());
    let line = line_with(&mut err, "listening on ");
    let addr = line.split("listening on ").nth(1).unwrap();
    let addr = addr.split_whitespace().next().unwrap().to_string();
    demo_into(tickscope, &addr);
    assert!(l.wait().unwrap().success());
    let out = Command::new(tickscope)
        .arg("report")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    lost_share(&serde_json::from_slice(&out.stdout).unwrap())
}

/// A GET of the viewer's API, its JSON answer.
fn http_get(host: &str, path: &str) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..at]).to_ascii_lowercase();
    let body = if head.contains("transfer-encoding: chunked") {
        dechunk(&all[at..])
    } else {
        all[at..].to_vec()
    };
    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null)
}

/// A chunked body's bytes.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let n =
            usize::from_str_radix(std::str::from_utf8(&b[..nl]).unwrap().trim(), 16).unwrap_or(0);
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + n]);
        b = &b[nl + 2 + n + 2..];
    }
}
