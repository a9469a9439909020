//! The report as aligned text tables, in the in-process summary's layout.
//!
//! ```text
//! tickscope: run.tscap: demo (pid 4242), 3.02 s wall time, 4 threads, 5 scopes, 1.20 M events
//! name    location          calls    total     self     mean      min      p50      p99      max  %wall  clk err
//! parse   src/demo.rs:40     1200   812 ms   640 ms   677 µs   ...
//! ```

use std::fmt::Write;

use super::format::{count, count_si, duration, hertz, location};
use super::report::{Report, ScopeRow};
use crate::tscap::ScopeKind;
use tickscope_fmt::align;

impl Report {
    /// The report as text for people.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "tickscope: {}: {} (pid {}), {} wall time, {}, {}, {} events",
            self.file,
            if self.program.is_empty() {
                "?"
            } else {
                &self.program
            },
            self.pid,
            duration(self.wall_ns as f64),
            count(self.threads.len() as u64, "thread"),
            count(self.scopes.len() as u64, "scope"),
            count_si(self.events as f64),
        );
        if self.scopes.is_empty() {
            out.push_str("(no scope ended in this capture)\n");
        } else {
            out.push_str(&table(&self.scopes, true));
        }
        let _ = writeln!(
            out,
            "clock: {} at {}{} · {}",
            self.clock_source,
            hertz(self.ticks_per_second),
            match self.calibrations {
                0 => " (the process record's calibration)".to_owned(),
                n => format!(" (the last of {})", count(n, "later calibration")),
            },
            if self.complete {
                "capture complete"
            } else {
                "capture incomplete: no end record"
            }
        );
        if !self.frames.is_empty() {
            out.push_str("\nframes:\n");
            let mut rows = vec![header(&[
                "marker", "frames", "marks", "min", "mean", "p99", "max",
            ])];
            for f in &self.frames {
                rows.push(vec![
                    f.name.clone(),
                    f.frames.to_string(),
                    f.marks.to_string(),
                    opt(f.min_ns),
                    opt(f.mean_ns),
                    opt(f.p99_ns),
                    opt(f.max_ns),
                ]);
            }
            out.push_str(&align(&rows, 1));
        }
        if !self.counters.is_empty() {
            out.push_str("\ncounters:\n");
            let mut rows = vec![header(&["counter", "count", "min", "max", "last"])];
            for c in &self.counters {
                rows.push(vec![
                    c.name.clone(),
                    c.count.to_string(),
                    number(c.min),
                    number(c.max),
                    number(c.last),
                ]);
            }
            out.push_str(&align(&rows, 1));
        }
        if self.messages > 0 {
            let _ = writeln!(out, "\nmessages: {}", self.messages);
            for m in &self.first_messages {
                let _ = writeln!(
                    out,
                    "  +{} {}: {}",
                    duration(m.at_ns as f64),
                    m.thread_name,
                    m.text.replace(['\n', '\r'], " ")
                );
            }
            if self.messages > self.first_messages.len() as u64 {
                let _ = writeln!(
                    out,
                    "  … {} more",
                    self.messages - self.first_messages.len() as u64
                );
            }
        }
        out.push('\n');
        losses(&mut out, self);
        if self.per_thread {
            for t in &self.threads {
                let tid = t.tid.map(|t| format!(", tid {t}")).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "\nthread {} \"{}\"{tid}: {} events, {} dropped",
                    t.index, t.name, t.events, t.dropped
                );
                if t.scopes.is_empty() {
                    out.push_str("(no scope ended on this thread)\n");
                } else {
                    out.push_str(&table(&t.scopes, false));
                }
            }
        }
        out
    }
}

fn losses(out: &mut String, r: &Report) {
    let l = &r.losses;
    let _ = writeln!(
        out,
        "lost: {} dropped (ring full) · {} undelivered (sink could not take them) · {} evicted (flight-recorder window, by design)",
        count(l.dropped, "event"),
        count(l.undelivered, "event"),
        count(l.evicted, "event"),
    );
    let dropped: Vec<String> = r
        .threads
        .iter()
        .filter(|t| t.dropped > 0)
        .map(|t| format!("{} {}", t.name, t.dropped))
        .collect();
    if !dropped.is_empty() {
        let _ = writeln!(out, "dropped per thread: {}", dropped.join(", "));
    }
    let _ = writeln!(
        out,
        "scopes: {} abandoned (closed by an enclosing scope's end) · {} unmatched · {} still open at the end · {} cut by missing chunks · {} too deep; none of these counted",
        l.abandoned,
        count(l.unmatched_ends, "end"),
        l.open_at_end,
        l.cut_at_gaps,
        l.too_deep,
    );
    if let Some(recorded) = r.recorded_events {
        let here = r.events - r.loss_markers;
        if recorded != here {
            let _ = writeln!(
                out,
                "events: the end record counts {recorded} recorded, this file holds {here}"
            );
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out.push_str("mean/min/p50/p99/max are per outermost call; total is inclusive, self excludes child scopes\n");
}

fn opt(ns: Option<u64>) -> String {
    ns.map_or("-".into(), |v| duration(v as f64))
}

/// A counter value, as short as it can be written exactly (`64`, `-1.5`, `12.25`).
fn number(v: f64) -> String {
    format!("{v}")
}

fn header(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// The scope table; `full` adds location, min, percentiles, %wall and clock errors.
fn table(rows: &[ScopeRow], full: bool) -> String {
    let mut cells = vec![if full {
        header(&[
            "name", "location", "calls", "total", "self", "mean", "min", "p50", "p99", "max",
            "%wall", "clk err",
        ])
    } else {
        header(&["name", "calls", "total", "self", "mean", "max"])
    }];
    for r in rows {
        let name = match r.kind {
            ScopeKind::Group => format!("{} [group]", r.name),
            ScopeKind::Scope => r.name.clone(),
        };
        let d = |v: u64| duration(v as f64);
        if full {
            cells.push(vec![
                name,
                location(&r.file, r.line),
                r.calls.to_string(),
                d(r.total_ns),
                d(r.self_ns),
                opt(r.mean_ns),
                opt(r.min_ns),
                opt(r.p50_ns),
                opt(r.p99_ns),
                opt(r.max_ns),
                format!("{:.1}", r.wall_percent),
                r.clock_errors.to_string(),
            ]);
        } else {
            cells.push(vec![
                name,
                r.calls.to_string(),
                d(r.total_ns),
                d(r.self_ns),
                opt(r.mean_ns),
                opt(r.max_ns),
            ]);
        }
    }
    align(&cells, if full { 2 } else { 1 })
}
