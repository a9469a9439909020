//! The timeline end to end with the real writer: a real program records (with `--capture`,
//! with no code change through `TICKSCOPE_CAPTURE`, and killed mid-capture), `tickscope
//! report` and `tickscope convert` read what it wrote, and real third-party readers check the
//! exports: speedscope in headless Chromium (the speedscope and Chrome files) and Perfetto's
//! published protos (the Perfetto file). `.ci/run` installs those readers
//! (`tests/readers/install.sh`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn tickscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickscope"))
}

/// `tickscope demo` for `seconds` with `threads` workers, no interval lines.
pub(crate) fn demo(seconds: &str, threads: &str) -> Command {
    let mut c = tickscope();
    c.args([
        "demo",
        "--seconds",
        seconds,
        "--threads",
        threads,
        "--interval",
        "off",
    ]);
    c
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickscope-recorded-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn readers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/readers")
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tickscope report CAP --json ARGS...`, parsed.
fn report_json(cap: &Path, args: &[&str]) -> serde_json::Value {
    let out = ok(&tickscope()
        .arg("report")
        .arg(cap)
        .arg("--json")
        .args(args)
        .output()
        .unwrap());
    serde_json::from_str(&out).unwrap()
}

/// The demo's timeline, read back: the report names its scopes with the same call counts the
/// in-process summary counted (when nothing was dropped), with frames and messages.
#[test]
fn demo_capture_reads_back_with_the_same_calls_as_the_exit_summary() {
    let d = dir("demo");
    let cap = d.join("demo.tscap");
    let out = demo("0.5", "2")
        .arg("--capture")
        .arg(&cap)
        .env(
            "TICKSCOPE_SUMMARY",
            format!("json:{}", d.join("summary.json").display()),
        )
        .output()
        .unwrap();
    ok(&out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    let report = report_json(&cap, &[]);
    let calls = |v: &serde_json::Value, name: &str| -> Option<u64> {
        v["scopes"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == name)
            .and_then(|r| r["calls"].as_u64())
    };
    for name in ["parse_record", "tokenize", "fib", "alloc"] {
        let in_process = calls(&summary, name).unwrap_or_else(|| panic!("{name} in {summary}"));
        let row = scope_row(&report, name);
        // Whatever the machine's load: calls dropped whole are counted by scope.
        assert_eq!(
            in_process,
            row["calls"].as_u64().unwrap() + row["dropped"].as_u64().unwrap(),
            "{name}: {row}"
        );
    }
    // The binary's global allocator counts allocations by scope: the capture holds each
    // call site's over its life, the same figures as the exit summary's (the capture runs
    // from before the first scope to the exit).
    let mut with_allocs = 0;
    for row in summary["scopes"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        if let Some(a) = row.get("allocs").filter(|a| a["count"].as_u64() > Some(0)) {
            assert_eq!(&scope_row(&report, name)["allocs"], a, "{name}");
            with_allocs += 1;
        }
    }
    assert!(with_allocs >= 4, "{summary}");
    let text = ok(&tickscope().arg("report").arg(&cap).output().unwrap());
    assert!(
        text.contains("parse_record")
            && text.contains("batch")
            && text.contains("allocations by scope"),
        "{text}"
    );
    // Two halves of the capture: each counts the calls inside it, and with those crossing
    // the middle the halves make up the whole.
    let mid = format!("{}ns", report["wall_ns"].as_u64().unwrap() / 2);
    let half = |range: [&str; 2]| report_json(&cap, &range);
    let first = half(["--until", &mid]);
    let second = half(["--from", &mid]);
    // A range's report shows no allocations: they are the whole capture's.
    for v in [&first, &second] {
        assert!(
            v["scopes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r.get("allocs").is_none()),
            "{v}"
        );
    }
    let crossing = |v: &serde_json::Value| v["range"]["crossing"].as_u64().unwrap();
    let mut across_the_middle = 0;
    for name in ["parse_record", "tokenize", "process_batch"] {
        let whole = scope_row(&report, name)["calls"].as_u64().unwrap();
        let parts: u64 = [&first, &second]
            .iter()
            .map(|v| calls(v, name).unwrap_or(0))
            .sum();
        assert!(parts <= whole, "{name}: {parts} of {whole}");
        across_the_middle += whole - parts;
    }
    // Each call crossing the middle is counted by both halves (as crossing one's end and
    // the other's start); the whole capture's own edges add none (nothing open).
    assert!(
        across_the_middle <= crossing(&first) && across_the_middle <= crossing(&second),
        "{across_the_middle}: {} {}",
        first["range"],
        second["range"]
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A report's row for scope `name`.
/// `tickscope convert CAP --to TO -o OUT`, which must succeed.
fn convert(cap: &Path, to: &str, out: &Path) {
    ok(&tickscope()
        .arg("convert")
        .arg(cap)
        .args(["--to", to, "-o"])
        .arg(out)
        .output()
        .unwrap());
}

/// What tests/readers/perfetto-decode.py (Perfetto's protos) made of a trace, and its text.
fn decode_perfetto(trace: &Path, flags: &[&str]) -> (serde_json::Value, String) {
    let out = Command::new(readers().join(".venv/bin/python"))
        .arg(readers().join("perfetto-decode.py"))
        .args(flags)
        .arg(trace)
        .output()
        .expect("the readers' venv is missing: run tests/readers/install.sh (.ci/run does)");
    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&summary).unwrap_or_else(|e| panic!("{e}: {summary}"));
    (v, summary)
}

fn scope_row<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["scopes"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("{name} in {v}"))
}

/// `demo --async`: requests on a tokio multi-thread runtime, as `tracing` spans and
/// `#[profile] async fn`. The exit summary gives each future and span its busy time beside
/// its wall time, with cancellations apart; the capture holds every poll as a slice, on the
/// worker thread that ran it, and the `tracing` events as messages.
#[test]
fn demo_async_puts_busy_beside_wall_and_its_polls_on_the_timeline() {
    let d = dir("async");
    let cap = d.join("async.tscap");
    let summary_path = d.join("summary.json");
    ok(&demo("0.4", "2")
        .arg("--async")
        .arg("--capture")
        .arg(&cap)
        .env(
            "TICKSCOPE_SUMMARY",
            format!("json:{}", summary_path.display()),
        )
        .output()
        .unwrap());
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary_path).unwrap()).unwrap();
    let row = |name: &str| scope_row(&summary, name).clone();
    let (handle, request, lookup) = (row("handle"), row("request"), row("cache_lookup"));
    let wall = |r: &serde_json::Value, k: &str| {
        r["wall"][k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"))
    };
    // One request span, one `handle` future, one parse and one render per request.
    let requests = wall(&handle, "calls");
    assert!(requests > 0, "{handle}");
    assert_eq!(handle["wall"]["kind"], "future");
    assert_eq!(request["wall"]["kind"], "span");
    assert_eq!(wall(&request, "calls"), requests, "{request}");
    assert_eq!(row("parse")["calls"].as_u64(), Some(requests));
    assert_eq!(wall(&handle, "cancelled"), 0);
    // Each lookup races a deadline: some finish, some are cancelled, each counted once.
    assert_eq!(wall(&lookup, "calls"), requests, "{lookup}");
    let cancelled = wall(&lookup, "cancelled");
    assert!(cancelled > 0 && cancelled < requests, "{lookup}");
    // A request waits on a channel and a timer: far longer than it is busy, and polled
    // more than once.
    assert!(
        wall(&handle, "total_ns") > handle["total_ns"].as_u64().unwrap(),
        "{handle}"
    );
    assert!(
        handle["calls"].as_u64().unwrap() >= 2 * requests,
        "{handle}"
    );
    assert_eq!(wall(&row("database"), "calls"), 1);

    // The timeline: every poll a slice (as many as the summary counted, or dropped whole),
    // polls of `handle` on both worker threads, the tracing event a message.
    let report = report_json(&cap, &[]);
    let polls = scope_row(&report, "handle");
    assert_eq!(
        polls["calls"].as_u64().unwrap() + polls["dropped"].as_u64().unwrap(),
        handle["calls"].as_u64().unwrap(),
        "{polls}"
    );
    // Each future's and span's life is in the capture too (when nothing was dropped): the
    // report gives the same lives, the same cancellations and the same wall time.
    if report["lost"]["dropped"] == 0 {
        for name in ["handle", "request", "cache_lookup", "database"] {
            let (mine, theirs) = (&scope_row(&report, name)["wall"], &row(name)["wall"]);
            for k in ["calls", "cancelled"] {
                assert_eq!(mine[k], theirs[k], "{name} {k}: {mine} {theirs}");
            }
            let (a, b) = (
                mine["total_ns"].as_f64().unwrap(),
                theirs["total_ns"].as_f64().unwrap(),
            );
            assert!((a - b).abs() <= b * 1e-3 + 1e3, "{name}: {mine} {theirs}");
        }
    }
    let text = ok(&tickscope().arg("report").arg(&cap).output().unwrap());
    assert!(text.contains("demo: all clients done"), "{text}");
    let chrome = d.join("async.json");
    convert(&cap, "chrome", &chrome);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    let mut tids: Vec<u64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "handle")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    tids.sort_unstable();
    tids.dedup();
    assert!(
        tids.len() >= 2,
        "handle polled on one thread only: {tids:?}"
    );
    // The lives as async slices: a `b` and an `e` per life, the cancelled ones marked.
    let events = trace["traceEvents"].as_array().unwrap();
    let life = |ph: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == ph && e["name"] == "cache_lookup")
            .count() as u64
    };
    let lookups = wall(&lookup, "calls");
    assert_eq!((life("b"), life("e")), (lookups, lookups));
    let marked = events
        .iter()
        .filter(|e| e["ph"] == "e" && e["name"] == "cache_lookup" && e["args"]["cancelled"] == true)
        .count() as u64;
    assert_eq!(marked, cancelled);
    // Perfetto: a track per life under the process, begun and ended on the sequences of the
    // threads that polled it, balanced as trace_processor pairs them.
    let pftrace = d.join("async.pftrace");
    convert(&cap, "perfetto", &pftrace);
    let (v, summary) = decode_perfetto(&pftrace, &[]);
    assert_eq!(
        (v["ok"].as_bool(), v["balanced"].as_bool()),
        (Some(true), Some(true)),
        "{summary}"
    );
    let tracks = v["tracks"].as_array().unwrap();
    let lives: Vec<&serde_json::Value> = tracks
        .iter()
        .filter(|t| t["parent_uuid"] == 1 && t["name"] == "cache_lookup")
        .collect();
    assert_eq!(lives.len() as u64, lookups);
    assert!(lives
        .iter()
        .all(|t| t["slices"].as_array().map(Vec::len) == Some(1)));
    let _ = std::fs::remove_dir_all(&d);
}

/// A capture whose memory budget is far too small for its threads (the test for
/// whole scopes): every scope the report times is a whole call, so its figures never pass
/// the in-process summary's for the same run, and with the scopes dropped whole it makes
/// every call the program counted.
#[test]
fn a_capture_past_its_memory_budget_drops_whole_scopes_and_never_corrupts_a_figure() {
    let d = dir("budget");
    let cap = d.join("budget.tscap");
    let out = demo("0.5", "4")
        .env("TICKSCOPE_CAPTURE", &cap)
        // Eight blocks for five threads: most events cannot be held.
        .env("TICKSCOPE_CAPTURE_MEMORY", "256K")
        .env(
            "TICKSCOPE_SUMMARY",
            format!("json:{}", d.join("summary.json").display()),
        )
        .output()
        .unwrap();
    ok(&out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("summary.json")).unwrap()).unwrap();
    let report = report_json(&cap, &[]);
    let lost = &report["lost"];
    assert!(lost["dropped_scopes"].as_u64().unwrap() > 0, "{lost}");
    for k in [
        "unmatched_ends",
        "abandoned",
        "cut_at_gaps",
        "cut_at_losses",
    ] {
        assert_eq!(lost[k], 0, "{k}: {lost}");
    }
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    let mut compared = 0;
    for inp in summary["scopes"].as_array().unwrap() {
        let name = inp["name"].as_str().unwrap();
        let row = scope_row(&report, name);
        assert_eq!(
            n(inp, "calls"),
            n(row, "calls") + n(row, "dropped"),
            "{name}: in-process {inp}, timeline {row}"
        );
        assert!(n(row, "self_ns") <= n(row, "total_ns"), "{name}: {row}");
        if n(row, "calls") == 0 {
            continue;
        }
        compared += 1;
        // The same readings timed both: a subset of the calls cannot take longer in total
        // or at most. The clock's conversion may round each figure by a nanosecond.
        assert!(
            n(row, "total_ns") <= n(inp, "total_ns") + 1,
            "{name}: {inp} {row}"
        );
        assert!(
            n(row, "max_ns") <= n(inp, "max_ns") + 1,
            "{name}: {inp} {row}"
        );
        // Percentiles of a subset are bounded by rank, not by the whole's same percentile
        // (dropping short calls raises a subset's p99 above the whole's, legitimately): the
        // r-th smallest of the m calls kept lies between the r-th and the (r + d)-th
        // smallest of all n = m + d calls. Both summaries take percentiles from the same
        // buckets of the same readings, so the bound holds of their figures too, within
        // half a bucket (1/64) below.
        if n(inp, "calls") > n(inp, "outer_calls") && n(row, "dropped") > 0 {
            // A recursive scope whose outer call was dropped while calls inside it were
            // kept: those calls are outer calls on the timeline (791 against 789 in one
            // run), so the kept set is no subset of the whole's outer calls and the rank
            // bound does not apply. Each promoted call lies inside a dropped outer one,
            // so no figure can pass the whole's longest call.
            for key in ["p50_ns", "p90_ns", "p99_ns", "max_ns"] {
                assert!(
                    n(row, key) <= n(inp, "max_ns") + 1,
                    "{name}: {key} {inp} {row}"
                );
            }
        } else {
            percentiles_within_rank_bounds(name, inp, row);
        }
    }
    assert!(compared >= 4, "{report}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Checks the report's p50/p90/p99/max of scope `name` (calls kept) against the in-process
/// summary's min/p50/p90/p99/max (every call), knowing only those figures of the whole: a
/// kept call of rank `r` is at most the whole's figure at the first known rank `>= r + d`
/// and at least the one at the last known rank `<= r`.
fn percentiles_within_rank_bounds(name: &str, whole: &serde_json::Value, kept: &serde_json::Value) {
    let n_of = |v: &serde_json::Value| v["outer_calls"].as_u64().unwrap();
    let (n, m) = (n_of(whole), n_of(kept));
    assert!(m <= n, "{name}: {whole} {kept}");
    let d = n - m;
    let rank = |q: f64, n: u64| ((q * n as f64).ceil() as u64).clamp(1, n);
    let fig =
        |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} of {v}"));
    // The whole's figures by rank.
    let known: Vec<(u64, u64)> = [
        (1, fig(whole, "min_ns")),
        (rank(0.5, n), fig(whole, "p50_ns")),
        (rank(0.9, n), fig(whole, "p90_ns")),
        (rank(0.99, n), fig(whole, "p99_ns")),
        (n, fig(whole, "max_ns")),
    ]
    .into();
    for (q, key) in [
        (0.5, "p50_ns"),
        (0.9, "p90_ns"),
        (0.99, "p99_ns"),
        (1.0, "max_ns"),
    ] {
        let (r, got) = (rank(q, m), fig(kept, key));
        let hi = known.iter().find(|&&(k, _)| k >= r + d).unwrap().1;
        let lo = known.iter().rev().find(|&&(k, _)| k <= r).unwrap().1;
        assert!(
            got <= hi + 1 && got as f64 >= lo as f64 * (1.0 - 1.0 / 64.0) - 1.0,
            "{name}: {key} {got} of {m} calls outside [{lo}, {hi}] (rank {r}, {d} dropped): \
             in-process {whole}, timeline {kept}"
        );
    }
}

/// The capture and the CPU sampler in one run (`demo --capture --cpuprofile`): the capture
/// holds the sampler's samples, each on the timeline when it was taken, and the Perfetto
/// export puts them on their threads as `PerfSample`s whose callstacks name the demo's
/// functions (checked with Perfetto's own protos).
#[test]
fn capture_and_sampler_in_one_run_put_the_samples_on_the_timeline() {
    let d = dir("both");
    let cap = d.join("both.tscap");
    let out = demo("0.3", "2")
        .arg("--capture")
        .arg(&cap)
        .arg("--cpuprofile")
        .arg(d.join("cpu.pb.gz"))
        .env("TICKSCOPE_SUMMARY", "off")
        .output()
        .unwrap();
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let profiled: u64 = stderr
        .split("CPU profile written to ")
        .nth(1)
        .and_then(|r| r.split(" (").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    let report = report_json(&cap, &[]);
    let samples = report["samples"]["count"].as_u64().unwrap_or(0);
    // The sampler ran before the capture began and after it ended: the timeline has fewer.
    assert!(
        samples > 0 && samples <= profiled,
        "{samples} of {profiled}"
    );
    let trace = d.join("both.pftrace");
    convert(&cap, "perfetto", &trace);
    let (v, summary) = decode_perfetto(&trace, &["--no-events"]);
    assert_eq!(v["ok"], true, "{summary}");
    assert_eq!(v["perf_samples"].as_u64(), Some(samples), "{summary}");
    let functions = v["sample_functions"].as_object().unwrap();
    assert!(
        functions.keys().any(|f| f.contains("demo::worker")),
        "the workers' samples name their function: {summary}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// The heap profiler's estimate of the bytes in use is a counter on the timeline, moving
/// at each sampled block's allocation and free; with sampling off there is none.
#[test]
fn the_heap_in_use_is_a_counter_on_the_timeline() {
    const TRACK: &str = "heap in use (sampled estimate)";
    let d = dir("heap-counter");
    let counter = |rate: &str| {
        let (cap, heap) = (
            d.join(format!("{rate}.tscap")),
            d.join(format!("{rate}.pb.gz")),
        );
        ok(&demo("0.3", "2")
            .arg("--capture")
            .arg(&cap)
            .env("TICKSCOPE_SUMMARY", "off")
            .env("TICKSCOPE_HEAP_RATE", rate)
            .env("TICKSCOPE_HEAPPROFILE", &heap)
            .output()
            .unwrap());
        let report = report_json(&cap, &[]);
        let c = report["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == TRACK)
            .cloned();
        (c, heap)
    };
    let (c, heap) = counter("65536");
    let c = c.unwrap_or_else(|| panic!("no {TRACK:?} counter"));
    let (count, min, max) = (
        c["count"].as_u64().unwrap(),
        c["min"].as_f64().unwrap(),
        c["max"].as_f64().unwrap(),
    );
    // The value at the start, then a step at each sampled allocation and free of the
    // workers (the demo allocates some 20 MB a second: hundreds of samples at 64 KiB on an
    // idle machine, 41 in a run beside two busy loops, where its 0.3 s hold less work).
    assert!(count >= 10, "{c}");
    assert!(min >= 0.0 && max > 0.0, "{c}");
    // Every block in use was allocated: the estimate in use never passes the run's estimate
    // of every allocation, each sampled block standing for the same bytes in both.
    let alloc = serde_json::from_str::<serde_json::Value>(&ok(&tickscope()
        .args(["top", "--sample-index", "alloc_space", "--json"])
        .arg(&heap)
        .output()
        .unwrap()))
    .unwrap()["total"]
        .as_f64()
        .unwrap();
    assert!(max <= alloc * 1.000_001, "in use {max} > allocated {alloc}");
    assert!(counter("0").0.is_none(), "a counter with sampling off");
    let _ = std::fs::remove_dir_all(&d);
}

/// `TICKSCOPE_CAPTURE` records a program with no code change; killed mid-capture, it leaves a
/// file that reads up to its last complete chunk.
#[test]
fn a_program_killed_mid_capture_leaves_a_readable_file() {
    let d = dir("killed");
    let cap = d.join("killed.tscap");
    let mut child = demo("30", "1")
        .env("TICKSCOPE_CAPTURE", &cap)
        .env("TICKSCOPE_SUMMARY", "off")
        .spawn()
        .unwrap();
    // Killed once the collector has written events (a chunk every 100 ms), not after a
    // fixed time: a busy machine may not have run the demo by then.
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&cap).map_or(0, |m| m.len()) < 64 * 1024 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the demo ended before it was killed"
        );
        assert!(Instant::now() < deadline, "no events written in 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(std::fs::metadata(&cap).unwrap().len() > 12);
    let out = tickscope().arg("report").arg(&cap).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        assert!(stdout.contains("parse_record"), "{stdout}");
        assert!(
            stderr.contains("end record"),
            "a warning says the end is missing: {stderr}"
        );
    } else {
        // Killed in the middle of a write: the damage is named, and salvage reads the rest.
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("killed.tscap"), "{stderr}");
        let out = tickscope()
            .arg("report")
            .arg(&cap)
            .arg("--salvage")
            .output()
            .unwrap();
        assert!(ok(&out).contains("parse_record"));
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Every export of one real capture, checked by the real readers. The capture is short:
/// speedscope's Chrome importer takes time quadratic in the events (a 0.2 s demo's 366 k
/// events take it over 80 s).
#[test]
fn exports_import_in_speedscope_and_decode_with_perfettos_protos() {
    let d = dir("exports");
    let cap = d.join("run.tscap");
    // Scopes shorter than 0.3 µs are looked for below: without the allocation counts, which
    // a debug build's scope takes longer than that to keep.
    ok(&demo("0.005", "2")
        .arg("--capture")
        .arg(&cap)
        .env("TICKSCOPE_SUMMARY", "off")
        .env("TICKSCOPE_SCOPE_ALLOCS", "0")
        .output()
        .unwrap());
    let report = report_json(&cap, &[]);
    assert!(
        report["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.get("allocs").is_none()),
        "TICKSCOPE_SCOPE_ALLOCS=0 counts nothing: {report}"
    );
    let mut files = Vec::new();
    for (to, name) in [
        ("chrome", "run.json"),
        ("speedscope", "run.speedscope.json"),
        ("perfetto", "run.pftrace"),
        ("folded", "run.folded"),
    ] {
        let path = d.join(name);
        ok(&tickscope()
            .arg("convert")
            .arg(&cap)
            .args(["--to", to, "-o"])
            .arg(&path)
            .output()
            .unwrap());
        files.push(path);
    }
    let folded = std::fs::read_to_string(&files[3]).unwrap();
    assert!(
        folded.lines().any(|l| l.contains("parse_record;tokenize ")),
        "{folded}"
    );

    let node = Command::new("node")
        .arg(readers().join("speedscope-import.mjs"))
        .arg("--strict")
        .args(&files[..2])
        .output()
        .expect("node not found: run tests/readers/install.sh (.ci/run does)");
    let lines = String::from_utf8_lossy(&node.stdout);
    assert!(
        node.status.success(),
        "speedscope refused an export:\n{lines}\n{}",
        String::from_utf8_lossy(&node.stderr)
    );
    for line in lines.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["ok"], true, "{line}");
        assert!(
            v["profiles"].as_u64().unwrap_or(0) >= 3,
            "main + 2 workers: {line}"
        );
    }

    let perfetto = Command::new(readers().join(".venv/bin/python"))
        .arg(readers().join("perfetto-decode.py"))
        .arg("--no-events")
        .arg(&files[2])
        .output()
        .expect("the readers' venv is missing: run tests/readers/install.sh (.ci/run does)");
    let summary = String::from_utf8_lossy(&perfetto.stdout);
    assert!(
        perfetto.status.success(),
        "Perfetto's protos refused our trace:\n{summary}\n{}",
        String::from_utf8_lossy(&perfetto.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(v["ok"], true, "{summary}");
    assert_eq!(v["balanced"], true, "{summary}");
    assert_eq!(
        v["unknown_fields"].as_array().map(Vec::len),
        Some(0),
        "{summary}"
    );
    let tracks = v["tracks"].as_array().unwrap();
    assert!(
        tracks.iter().any(|t| t["counter"] == true),
        "the pool counter has a counter track: {summary}"
    );
    assert!(
        tracks.iter().any(|t| t["thread"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("worker"))),
        "{summary}"
    );
    assert!(v["compressed_packets"].as_u64() > Some(0), "{summary}");

    // A window of one thread, without its shortest scopes: still a trace Perfetto's protos
    // take, balanced, of that thread alone, with what was left out said. The window is the
    // 3 ms from a scope of worker-0's that lasts from 300 ns to 1 ms and holds a shorter one
    // (the Chrome export's times, in µs from the capture's start): the 3 ms from its first
    // scope held nothing but part of an outer one when the worker was preempted there on a
    // loaded machine.
    let chrome: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let events = chrome["traceEvents"].as_array().unwrap();
    let worker0 = events
        .iter()
        .find(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"] == "worker-0")
        .map(|e| e["tid"].clone())
        .expect("worker-0 in the Chrome export");
    let mut spans: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["tid"] == worker0)
        .map(|e| (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
        .collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The scopes a scope holds follow it in time order.
    let start_us = (0..spans.len())
        .find(|&i| {
            let (ts, dur) = spans[i];
            (0.3..=1000.0).contains(&dur)
                && spans[i + 1..]
                    .iter()
                    .take_while(|&&(t, _)| t <= ts + dur)
                    .any(|&(t, d)| d < 0.3 && t + d <= ts + dur)
        })
        .map(|i| spans[i].0)
        .expect("a scope of worker-0 that holds a shorter one");
    let from_ns = (start_us * 1e3).floor() as u64;
    let until_ns = from_ns + 3_000_000;
    let window = d.join("window.pftrace");
    let out = tickscope()
        .arg("convert")
        .arg(&cap)
        .args([
            "--to",
            "perfetto",
            "--from",
            &format!("{from_ns}ns"),
            "--until",
            &format!("{until_ns}ns"),
            "--thread",
            "worker-0",
            "--min-duration",
            "300ns",
            "-o",
        ])
        .arg(&window)
        .output()
        .unwrap();
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scopes shorter than 300 ns"), "{stderr}");
    let perfetto = Command::new(readers().join(".venv/bin/python"))
        .arg(readers().join("perfetto-decode.py"))
        .arg(&window)
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&perfetto.stdout);
    let v: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["balanced"].as_bool()),
        (Some(true), Some(true)),
        "{summary}"
    );
    let threads: Vec<&str> = v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["thread"]["name"].as_str())
        .collect();
    assert_eq!(threads, ["worker-0"], "{summary}");
    let mut slices = 0;
    for t in v["tracks"].as_array().unwrap() {
        for s in t["slices"].as_array().into_iter().flatten() {
            slices += 1;
            let (ts, dur) = (s["ts"].as_u64().unwrap(), s["dur"].as_u64().unwrap());
            assert!(
                (from_ns..=until_ns).contains(&ts) && ts + dur <= until_ns && dur >= 300,
                "{s}"
            );
        }
    }
    assert!(slices > 0, "{summary}");
    // A thread that is not there is said, not written silently as an empty trace.
    let out = tickscope()
        .arg("convert")
        .arg(&cap)
        .args(["--to", "folded", "--thread", "no-such-thread", "-o"])
        .arg(d.join("none.folded"))
        .output()
        .unwrap();
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no thread matches --thread no-such-thread"),
        "{stderr}"
    );
    // A time that is not one is refused in one line, exit 2.
    let out = tickscope()
        .arg("convert")
        .arg(&cap)
        .args(["--to", "chrome", "--from", "soon", "-o"])
        .arg(d.join("never.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"soon\" is not a time"));
    assert!(!d.join("never.json").exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// A conversion stopped by a signal (Ctrl-C after the warning of a large export, say)
/// removes its temporary file and leaves the old output as it was, exiting as the signal
/// would have (128 + 15 for SIGTERM).
#[test]
fn a_conversion_stopped_by_a_signal_leaves_no_temporary_file_and_the_old_output() {
    let d = dir("signal");
    let cap = d.join("run.tscap");
    ok(&demo("0.3", "2")
        .arg("--capture")
        .arg(&cap)
        .env("TICKSCOPE_SUMMARY", "off")
        .output()
        .unwrap());
    let out = d.join("out.json");
    std::fs::write(&out, "the old output").unwrap();
    let mut child = tickscope()
        .arg("convert")
        .arg(&cap)
        .args(["--to", "chrome", "-o"])
        .arg(&out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let temps = || -> Vec<String> {
        std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.contains(".tmp-"))
            .collect()
    };
    // The temporary file exists from the start of the conversion, which takes seconds.
    let deadline = Instant::now() + Duration::from_secs(60);
    while temps().is_empty() {
        assert!(Instant::now() < deadline, "no temporary file appeared");
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the signal"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: kill with a pid this test spawned and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    assert_eq!(temps(), Vec::<String>::new());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "the old output");
    let _ = std::fs::remove_dir_all(&d);
}
