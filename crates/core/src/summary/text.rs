//! The summary as a table for people.
//!
//! ```text
//! tickscope: 5 scopes, 3.02 s wall time, 4 threads
//! name         location          calls    total     self     mean      min      p50  …
//! parse        src/demo.rs:40     1200   812 ms   640 ms    677 µs   …
//! ```
//!
//! `total` is inclusive time; `self` excludes time in child scopes; `mean`, `min`, `p50`,
//! `p99` and `max` describe outermost entries (a re-entered scope's inner calls are in `calls`
//! but their time is inside the outer entry's); `%wall` is total ÷ the process's wall time, so
//! it can pass 100% when several threads run the same scope.

use std::fmt::Write;

use super::format::{count, duration, hertz, location};
use super::{Context, Entry, Snapshot};
use crate::scope::callsite::Kind;

/// Renders the summary.
pub(crate) fn render(snap: &Snapshot, meta: &Context, per_thread: bool) -> String {
    let mut out = String::new();
    let threads = snap.live_threads + snap.exited_threads;
    let _ = writeln!(
        out,
        "tickscope: {}, {} wall time, {}",
        count(snap.entries.len() as u64, "scope"),
        duration(meta.wall_ns as f64),
        count(threads, "thread"),
    );
    if snap.entries.is_empty() {
        out.push_str("(no scope was entered)\n");
    } else {
        out.push_str(&table(&snap.entries, meta, true));
        timed(&mut out, &snap.entries, meta);
        if snap.allocs_counted {
            out.push_str(&allocs(&snap.entries));
        }
    }
    footer(&mut out, snap, meta);
    if per_thread {
        for (t, entries) in &snap.threads {
            let name = t
                .name
                .as_deref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default();
            let state = if t.alive { "running" } else { "exited" };
            if t.threads > 1 {
                let _ = writeln!(out, "\n{} merged{name}:", count(t.threads, "exited thread"));
            } else {
                let _ = writeln!(out, "\nthread TID 0x{:x}{name} ({state}):", t.tid);
            }
            out.push_str(&table(entries, meta, false));
        }
    }
    out
}

fn footer(out: &mut String, snap: &Snapshot, meta: &Context) {
    let threads = snap.live_threads + snap.exited_threads;
    let _ = writeln!(
        out,
        "threads: {threads} seen ({} running, {} exited) · clock: {} at {} (calibrated against CLOCK_MONOTONIC) · overhead: {:.0} ns per scope (measured)",
        snap.live_threads,
        snap.exited_threads,
        meta.clock,
        hertz(meta.rate),
        meta.overhead_ns,
    );
    let errors: u64 =
        snap.entries.iter().map(|e| e.row.clock_errors).sum::<u64>() + meta.timer_clock_errors;
    let mut notes = Vec::new();
    if errors > 0 {
        notes.push(format!(
            "{} replaced by the reference clock",
            count(errors, "clock error")
        ));
    }
    if snap.lost_too_deep > 0 {
        notes.push(format!(
            "{} not recorded: nested deeper than {}",
            count(snap.lost_too_deep, "scope"),
            crate::scope::thread::MAX_DEPTH
        ));
    }
    if snap.unbalanced > 0 {
        notes.push(format!(
            "{} not recorded: an enclosing scope's guard was dropped first",
            count(snap.unbalanced, "scope")
        ));
    }
    if snap.lost_after_thread_exit > 0 {
        notes.push(format!(
            "{} not recorded: entered after its thread's exit",
            count(snap.lost_after_thread_exit, "scope")
        ));
    }
    if snap.capture_lost > 0 {
        notes.push(format!(
            "{} lost by the timeline capture (memory budget spent, sink, or after thread exit)",
            count(snap.capture_lost, "capture event")
        ));
    }
    if snap.foreign_exits > 0 {
        notes.push(format!(
            "{} on a thread where the span was not entered, nothing recorded",
            count(snap.foreign_exits, "tracing span exit")
        ));
    }
    if snap.allocs_uncounted > 0 {
        notes.push(format!(
            "{} inside scopes not counted by scope (more call sites × threads than the counts' table holds)",
            count(snap.allocs_uncounted, "allocation")
        ));
    }
    if snap.open_now > 0 {
        notes.push(format!(
            "{} still open, not counted",
            count(snap.open_now, "scope")
        ));
    }
    if snap.unfinished_at_thread_exit > 0 {
        notes.push(format!(
            "{} open when their thread exited, not counted",
            count(snap.unfinished_at_thread_exit, "scope")
        ));
    }
    #[cfg(feature = "push")]
    if crate::push::dropped() > 0 {
        notes.push(format!(
            "{} pushed to Pyroscope dropped (refused, out of tries, or the queue full)",
            count(crate::push::dropped(), "profile")
        ));
    }
    if notes.is_empty() {
        out.push_str("nothing lost · mean/min/p50/p99/max are per outermost call\n");
    } else {
        let _ = writeln!(out, "note: {}", notes.join("; "));
    }
}

/// The table of rows; `full` adds location, percentiles, %wall and clock errors.
fn table(entries: &[Entry], meta: &Context, full: bool) -> String {
    let header: Vec<&str> = if full {
        vec![
            "name", "location", "calls", "total", "self", "mean", "min", "p50", "p99", "max",
            "%wall", "clk err",
        ]
    } else {
        vec!["name", "calls", "total", "self", "mean", "max"]
    };
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(entries.len());
    for e in entries {
        let r = &e.row;
        let ns = |t: u64| duration(meta.ns(t));
        let name = match e.info.kind {
            Kind::Group => format!("{} [group]", e.info.name),
            Kind::Scope => e.info.name.to_owned(),
        };
        // A concurrent read may see `outer` before `min`/`max` of a first call.
        let complete = r.outer > 0 && r.min <= r.max;
        let mean = if complete {
            duration(meta.ns(r.incl) / r.outer as f64)
        } else {
            "-".into()
        };
        let (min, max) = if complete {
            (ns(r.min), ns(r.max))
        } else {
            ("-".into(), "-".into())
        };
        let q = |q: f64| match r.hist.quantile(q) {
            Some(v) if complete => ns(v.max(r.min).min(r.max)),
            _ => "-".into(),
        };
        if full {
            let mut loc = location(e.info.file, e.info.line);
            if e.info.sites > 1 {
                let _ = write!(loc, " +{}", e.info.sites - 1);
            }
            let wall = if meta.wall_ns > 0 {
                format!("{:.1}", meta.ns(r.incl) * 100.0 / meta.wall_ns as f64)
            } else {
                "-".into()
            };
            rows.push(vec![
                name,
                loc,
                r.calls.to_string(),
                ns(r.incl),
                ns(r.self_ticks),
                mean,
                min,
                q(0.5),
                q(0.99),
                max,
                wall,
                r.clock_errors.to_string(),
            ]);
        } else {
            rows.push(vec![
                name,
                r.calls.to_string(),
                ns(r.incl),
                ns(r.self_ticks),
                mean,
                max,
            ]);
        }
    }
    rows.insert(0, header.iter().map(|h| h.to_string()).collect());
    tickscope_fmt::align(&rows, if full { 2 } else { 1 })
}

/// Futures and spans: their busy time (the row's scope figures) beside their wall time
/// (`tickscope_fmt::lives_table`, as `tickscope report` prints it).
fn timed(out: &mut String, entries: &[Entry], meta: &Context) {
    let ns = |t: u64| meta.ns(t);
    let rows: Vec<tickscope_fmt::LivesRow> = entries
        .iter()
        .filter_map(|e| {
            let (r, w) = (&e.row, e.wall.as_ref()?);
            let complete = r.outer > 0 && r.min <= r.max;
            let entry_q = |q: f64| {
                r.hist
                    .quantile(q)
                    .filter(|_| complete)
                    .map(|v| ns(v.max(r.min).min(r.max)))
            };
            Some(tickscope_fmt::LivesRow {
                name: e.info.name.to_owned(),
                kind: Some(w.kind.name()),
                lives: w.count(),
                cancelled: w.cancelled,
                entries: r.calls,
                busy_ns: ns(r.incl),
                self_ns: ns(r.self_ticks),
                wall_ns: ns(w.total),
                wall: [
                    w.quantile(0.5).map(ns),
                    w.quantile(0.99).map(ns),
                    (w.count() > 0).then(|| ns(w.max)),
                ],
                entry: [entry_q(0.5), entry_q(0.99), complete.then(|| ns(r.max))],
            })
        })
        .collect();
    out.push_str(&tickscope_fmt::lives_table(&rows));
}

/// Allocations by scope (`tickscope_fmt::allocs_table`), where they are counted.
fn allocs(entries: &[Entry]) -> String {
    let rows: Vec<tickscope_fmt::AllocsRow> = entries
        .iter()
        .map(|e| {
            let [allocs, bytes, self_allocs, self_bytes] = e.row.heap;
            tickscope_fmt::AllocsRow {
                name: match e.info.kind {
                    Kind::Group => format!("{} [group]", e.info.name),
                    Kind::Scope => e.info.name.to_owned(),
                },
                allocs,
                bytes,
                self_allocs,
                self_bytes,
            }
        })
        .collect();
    tickscope_fmt::allocs_table(&rows)
}
