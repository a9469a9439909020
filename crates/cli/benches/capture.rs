//! Timeline capture, measured side by side in one run and printed as ratios:
//!
//! ```text
//! cargo bench -p tickscope-cli --bench capture
//! ```
//!
//! - **cost**: a scope with a capture running ÷ the floor (two raw counter reads and a
//!   thread-local add). Target ≤ 2.0.
//! - **sustained rate**: two producer threads run a regular nested workload into a file
//!   capture for two seconds. Target ≥ 20 million scopes a second in total, zero drops, the
//!   collector under one core, ≤ 4 bytes per scope on disk.
//! - **reading**: `tickscope report`'s decoding (the timeline crate's reader and report) of that
//!   file: target ≥ 50 million events a second on one core; peak heap while reading the file
//!   once and four times over (memory bounded by chunk size and distinct scopes, not length).
//!
//! Every figure is the best of several interleaved rounds.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tickscope::capture::{self, Sink};

#[path = "common/counting.rs"]
mod counting;
use counting::{LIVE, PEAK};

#[path = "../../core/benches/common/floor.rs"]
mod floor;
use floor::{best, floor_loop, per_iter, scope_loop};

const N: u64 = 1_000_000;
const ROUNDS: usize = 9;

/// The regular workload: an outer scope around four inner ones, each around a little work.
#[inline(never)]
fn workload(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n / 5 {
        tickscope::scope!("batch");
        for k in 0..4 {
            tickscope::scope!("item");
            acc = acc.wrapping_mul(31).wrapping_add(black_box(i ^ k));
        }
    }
    acc
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickscope-capture-bench-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn main() {
    tickscope::Config::new()
        .summary(tickscope::SummaryFormat::Off)
        .install();
    tickscope::ticks_per_second();
    let dir = dir();
    scope_loop(10_000);
    floor_loop(10_000);

    // Cost: interleaved rounds of the floor, a plain scope, and a scope with a capture running.
    let (mut floor, mut plain, mut captured) = (vec![], vec![], vec![]);
    let mut dropped = 0;
    for r in 0..ROUNDS {
        floor.push(per_iter(N, floor_loop));
        plain.push(per_iter(N, scope_loop));
        let c = capture::Builder::new(Sink::File(dir.join(format!("cost{r}.tscap"))))
            .start()
            .unwrap();
        captured.push(per_iter(N, scope_loop));
        dropped += c.stop().unwrap().dropped;
    }
    println!("tickscope capture, best of {ROUNDS} interleaved rounds");
    println!("  CPU: {}", floor::cpu_model());
    println!(
        "  clock: {} at {:.3} GHz",
        tickscope::clock::source().name(),
        tickscope::ticks_per_second() as f64 / 1e9
    );
    println!(
        "  floor (2 counter reads + TLS add):  {:6.2} ns",
        best(&floor)
    );
    println!(
        "  scope!, no capture:                 {:6.2} ns",
        best(&plain)
    );
    println!(
        "  scope!, capture running:            {:6.2} ns   ({dropped} events dropped)",
        best(&captured)
    );
    println!(
        "  RATIO captured scope / floor:       {:6.3}   (target <= 2.0)",
        best(&captured) / best(&floor)
    );
    println!(
        "  RATIO captured / plain scope:       {:6.3}",
        best(&captured) / best(&plain)
    );

    let file = sustained(&dir);
    reading(&file, &dir.join("cost0.tscap"));
    to_perfetto(&file);
    many_threads(&dir);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `tickscope convert --to perfetto` of the sustained capture, on one core, into a sink that
/// counts bytes: events a second and bytes an event, best of 3.
fn to_perfetto(path: &Path) {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len() as u64;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let prepass = tickscope_timeline::Prepass::of(path);
    let events = prepass.events.unwrap_or(0);
    let (mut best, mut bytes) = (f64::MAX, 0);
    for _ in 0..3 {
        let mut out = Count(0);
        let t = Instant::now();
        tickscope_timeline::convert_file_with(
            path,
            tickscope_timeline::Format::Perfetto,
            false,
            &tickscope_timeline::Filter::default(),
            Some(prepass),
            &mut out,
        )
        .unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        bytes = out.0;
    }
    let rate = events as f64 / best;
    println!("convert --to perfetto (interned names, incremental timestamps, deflated), one core, best of 3");
    println!(
        "  {events} events in {best:.2} s: {:.1} M events/s, {:.2} bytes per event",
        rate / 1e6,
        bytes as f64 / events as f64
    );
    println!(
        "  RATIO conversion rate / 15 M events/s: {:.3}   (target >= 1.0)",
        rate / 15e6
    );
    println!(
        "  RATIO bytes per event / 8: {:.3}   (target <= 1.0)",
        bytes as f64 / events as f64 / 8.0
    );
}

/// 64 threads in a tight loop of scopes for a second, into a file capture with the default
/// budget: what the threads' buffers took at most, against the budget.
fn many_threads(dir: &Path) {
    const THREADS: usize = 64;
    let c = capture::Builder::new(Sink::File(dir.join("threads.tscap")))
        .start()
        .unwrap();
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(move || {
                while t.elapsed() < Duration::from_secs(1) {
                    black_box(workload(10_000));
                }
            });
        }
    });
    let stats = c.stop().unwrap();
    println!("64 threads in a tight loop of scopes for 1 s, default memory budget (256 MiB)");
    println!(
        "  {} events, {} dropped ({} scopes whole); buffers peaked at {:.1} MiB; collector {:.2} of a core",
        stats.events,
        stats.dropped,
        stats.dropped_scopes,
        stats.memory_peak as f64 / (1 << 20) as f64,
        stats.collector_cpu.as_secs_f64() / stats.wall.as_secs_f64()
    );
    println!(
        "  RATIO buffer peak / budget: {:.3}   (target <= 1.0)",
        stats.memory_peak as f64 / (256u64 << 20) as f64
    );
}

/// Two producer threads into a file capture for two seconds, each at a set rate (a batch of
/// scopes every millisecond, sleeping when ahead of schedule; `None`: flat out).
fn run_producers(path: &Path, per_thread: Option<f64>) -> (u64, Duration, capture::Stats, u64) {
    // The default memory budget (256 MiB), unless MEMORY (bytes) says otherwise.
    let mut b = capture::Builder::new(Sink::File(path.to_owned()));
    if let Some(m) = std::env::var("MEMORY").ok().and_then(|v| v.parse().ok()) {
        b = b.memory(m);
    }
    let c = b.start().unwrap();
    let t = Instant::now();
    let run = Duration::from_secs(2);
    let scopes: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(move || {
                    let mut n = 0u64;
                    let batch = per_thread.map_or(100_000, |r| (r / 1000.0) as u64);
                    while t.elapsed() < run {
                        black_box(workload(batch));
                        n += batch;
                        if let Some(rate) = per_thread {
                            let due = Duration::from_secs_f64(n as f64 / rate);
                            if let Some(wait) = due.checked_sub(t.elapsed()) {
                                std::thread::sleep(wait);
                            }
                        }
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let wall = t.elapsed();
    let stats = c.stop().unwrap();
    let size = std::fs::metadata(path).unwrap().len();
    (scopes, wall, stats, size)
}

fn sustained(dir: &Path) -> PathBuf {
    println!("sustained capture to a file: two producer threads, a nested workload (1 outer + 4 inner scopes), 2 s, default memory budget (256 MiB)");
    let path = dir.join("sustained.tscap");
    for (label, rate) in [
        ("paced, 2 x 10.5 M scopes/s", Some(10.5e6)),
        ("paced, 2 x 13 M scopes/s", Some(13e6)),
        ("flat out (more than 2 cores can give 3 threads)", None),
    ] {
        let (scopes, wall, stats, size) = run_producers(&path, rate);
        let total = scopes as f64 / wall.as_secs_f64();
        println!(
            "  {label}: {:.1} M scopes/s in total, {} events, {} dropped, {} undelivered; collector {:.2} of a core; {:.2} bytes per scope on disk; buffers peaked at {:.1} MiB",
            total / 1e6,
            stats.events,
            stats.dropped,
            stats.undelivered,
            stats.collector_cpu.as_secs_f64() / stats.wall.as_secs_f64(),
            size as f64 / scopes as f64,
            stats.memory_peak as f64 / (1 << 20) as f64,
        );
        if rate == Some(10.5e6) {
            println!(
                "  RATIO sustained rate / 20 M scopes/s: {:.3}   (target >= 1.0 with 0 dropped: {})",
                total / 20e6,
                stats.dropped
            );
            println!(
                "  RATIO bytes per scope / 4: {:.3}   (target <= 1.0)",
                size as f64 / scopes as f64 / 4.0
            );
            println!(
                "  RATIO collector CPU / one core: {:.3}   (target < 1.0)",
                stats.collector_cpu.as_secs_f64() / stats.wall.as_secs_f64()
            );
            std::fs::rename(&path, dir.join("keep.tscap")).unwrap();
        }
    }
    dir.join("keep.tscap")
}

/// Decoding speed and memory of the reader that `tickscope report` uses, on files the real
/// writer wrote: the sustained run's, and a short one (peak heap should not grow with length).
fn reading(long: &Path, short: &Path) {
    use tickscope_timeline::tscap::Reader;
    use tickscope_timeline::{summarize, Options};
    let read = |path: &Path| {
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        let t = Instant::now();
        let mut reader = Reader::open(path).unwrap();
        let r = summarize(
            &mut reader,
            Options {
                per_thread: false,
                ..Options::default()
            },
        )
        .unwrap();
        let secs = t.elapsed().as_secs_f64();
        (r.events, secs, PEAK.load(Relaxed) - base)
    };
    let mut best = 0.0f64;
    let mut long_peak = 0;
    let mut events = 0;
    for _ in 0..3 {
        let (n, secs, peak) = read(long);
        best = best.max(n as f64 / secs);
        long_peak = peak;
        events = n;
    }
    let (short_events, _, short_peak) = read(short);
    let size = std::fs::metadata(long).unwrap().len();
    println!("reading (tickscope report's reader and summary), one core, best of 3");
    println!(
        "  {events} events ({:.1} MB file) at {:.1} M events/s",
        size as f64 / 1e6,
        best / 1e6
    );
    println!(
        "  RATIO decode rate / 50 M events/s: {:.3}   (target >= 1.0)",
        best / 50e6
    );
    println!(
        "  peak heap while reading: {:.2} MB for {events} events, {:.2} MB for {short_events} events (bounded by chunk size and scopes, not length)",
        long_peak as f64 / 1e6,
        short_peak as f64 / 1e6
    );
}
