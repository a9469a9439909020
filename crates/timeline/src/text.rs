//! The report as aligned text tables, in the in-process summary's layout.
//!
//! ```text
//! tickscope: run.tscap: demo (pid 4242), 3.02 s wall time, 4 threads, 5 scopes, 1.20 M events
//! name    location          calls    total     self     mean      min      p50      p99      max  %wall  clk err
//! parse   src/demo.rs:40     1200   812 ms   640 ms   677 µs   ...
//! ```

use std::fmt::Write;
use std::io;

use super::collect::{ScopeRow, Summary};
use super::format::{count, count_si, duration, hertz, location};
use crate::tscap::ScopeKind;

/// Text on its way to a writer: lines gather in a buffer that goes out whenever it holds a
/// few KB, so a table of a million rows never stands whole in memory.
struct Out<'a> {
    buf: String,
    w: &'a mut dyn io::Write,
}

impl Out<'_> {
    fn flush_some(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.write_all(self.buf.as_bytes())?;
        self.buf.clear();
        Ok(())
    }
}

/// [`tickscope_fmt::align`], a row at a time: `fill(i, cells)` gives row `i`'s cells (row 0
/// the header), and is called twice per row, to measure the columns and to write them.
fn align_to(
    out: &mut Out<'_>,
    n: usize,
    left: usize,
    mut fill: impl FnMut(usize, &mut Vec<String>),
) -> io::Result<()> {
    let mut cells = Vec::new();
    let mut widths: Vec<usize> = Vec::new();
    for i in 0..n {
        cells.clear();
        fill(i, &mut cells);
        if widths.len() < cells.len() {
            widths.resize(cells.len(), 0);
        }
        for (c, cell) in cells.iter().enumerate() {
            widths[c] = widths[c].max(cell.chars().count());
        }
    }
    for i in 0..n {
        cells.clear();
        fill(i, &mut cells);
        tickscope_fmt::align_row(&cells, &widths, left, &mut out.buf);
        out.flush_some()?;
    }
    Ok(())
}

impl Summary {
    /// The report as text for people.
    pub fn to_text(&self) -> String {
        let mut v = Vec::new();
        self.write_text(&mut v).expect("a Vec takes every write");
        String::from_utf8(v).expect("the text is UTF-8")
    }

    /// [`to_text`](Self::to_text), written to `w` as it is made (the report's rows are in
    /// memory; their text is not, at once).
    pub fn write_text(&self, w: &mut dyn io::Write) -> io::Result<()> {
        let mut out = Out {
            buf: String::new(),
            w,
        };
        self.text_to(&mut out)?;
        out.flush()
    }

    fn text_to(&self, o: &mut Out<'_>) -> io::Result<()> {
        let out = &mut o.buf;
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
        if let Some(r) = &self.range {
            let _ = writeln!(
                out,
                "range {} to {} from the start of capture: the calls that began and ended in it; {} crossing its edges not counted",
                duration(r.from_ns as f64),
                duration(r.until_ns as f64),
                count(r.crossing, "call"),
            );
        }
        if self.scopes.is_empty() {
            out.push_str("(no scope ended in this capture)\n");
        } else {
            table(o, &self.scopes, true)?;
            lives(o, &self.scopes)?;
            allocs(o, &self.scopes)?;
        }
        let out = &mut o.buf;
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
            align_to(o, self.frames.len() + 1, 1, |i, cells| {
                let Some(f) = i.checked_sub(1).map(|i| &self.frames[i]) else {
                    return header(
                        cells,
                        &["marker", "frames", "marks", "min", "mean", "p99", "max"],
                    );
                };
                cells.extend([
                    f.name.clone(),
                    f.frames.to_string(),
                    f.marks.to_string(),
                    opt(f.min_ns),
                    opt(f.mean_ns),
                    opt(f.p99_ns),
                    opt(f.max_ns),
                ]);
            })?;
        }
        if !self.counters.is_empty() {
            o.buf.push_str("\ncounters:\n");
            align_to(o, self.counters.len() + 1, 1, |i, cells| {
                let Some(c) = i.checked_sub(1).map(|i| &self.counters[i]) else {
                    return header(cells, &["counter", "count", "min", "max", "last"]);
                };
                cells.extend([
                    c.name.clone(),
                    c.count.to_string(),
                    number(c.min),
                    number(c.max),
                    number(c.last),
                ]);
            })?;
        }
        let out = &mut o.buf;
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
        if self.samples > 0 {
            let _ = writeln!(
                out,
                "\nCPU samples: {} from the sampler, {} stacks (on their threads' tracks in `convert --to perfetto`)",
                self.samples, self.sample_stacks
            );
        }
        out.push('\n');
        losses(out, self);
        if self.per_thread {
            for t in &self.threads {
                let tid = t.tid.map(|t| format!(", tid {t}")).unwrap_or_default();
                let _ = writeln!(
                    o.buf,
                    "\nthread {} \"{}\"{tid}: {} events, {} dropped",
                    t.index, t.name, t.events, t.dropped
                );
                if t.scopes.is_empty() {
                    o.buf.push_str("(no scope ended on this thread)\n");
                } else {
                    table(o, &t.scopes, false)?;
                }
                o.flush_some()?;
            }
        }
        Ok(())
    }
}

fn losses(out: &mut String, r: &Summary) {
    let l = &r.losses;
    let _ = writeln!(
        out,
        "lost: {} dropped (memory budget spent) · {} undelivered (sink could not take them) · {} evicted (flight-recorder window, by design)",
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
    for (what, total, of) in [
        (
            "dropped whole (memory budget spent)",
            l.dropped_scopes,
            (|r: &ScopeRow| r.dropped) as fn(&ScopeRow) -> u64,
        ),
        (
            "already open when the capture started",
            l.in_flight_at_start,
            |r: &ScopeRow| r.in_flight_at_start,
        ),
    ] {
        if total == 0 {
            continue;
        }
        let mut by: Vec<&ScopeRow> = r.scopes.iter().filter(|s| of(s) > 0).collect();
        by.sort_by(|a, b| of(b).cmp(&of(a)).then(a.name.cmp(&b.name)));
        let mut list: Vec<String> = by
            .iter()
            .take(5)
            .map(|s| format!("{} {}", s.name, of(s)))
            .collect();
        if by.len() > 5 {
            list.push(format!("{} more scopes", by.len() - 5));
        }
        let _ = writeln!(
            out,
            "calls {what}, not in the table: {} ({}); calls + these = the program's calls",
            total,
            list.join(", ")
        );
    }
    if l.cut_at_losses > 0 {
        let _ = writeln!(
            out,
            "scopes: {} open across a loss in a version 1 capture were discarded (their ends could belong to other calls)",
            l.cut_at_losses
        );
    }
    if l.async_unpaired > 0 {
        let _ = writeln!(
            out,
            "futures and spans: {} with one end of their life in the capture (alive when it ended, or the other end dropped or outside the range): no wall time",
            l.async_unpaired
        );
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

fn header(cells: &mut Vec<String>, names: &[&str]) {
    cells.extend(names.iter().map(|c| c.to_string()));
}

/// Futures and spans: their busy time (polls or entries: the row's figures) beside their
/// wall time, as the exit summary prints it (`tickscope_fmt::lives_table`).
fn lives(out: &mut Out<'_>, rows: &[ScopeRow]) -> io::Result<()> {
    let f = |v: u64| v as f64;
    let rows: Vec<tickscope_fmt::LivesRow> = rows
        .iter()
        .filter_map(|r| {
            let w = r.wall.as_ref()?;
            Some(tickscope_fmt::LivesRow {
                name: r.name.clone(),
                kind: None,
                lives: w.count,
                cancelled: w.cancelled,
                entries: r.calls,
                busy_ns: f(r.total_ns),
                self_ns: f(r.self_ns),
                wall_ns: f(w.total_ns),
                wall: [Some(f(w.p50_ns)), Some(f(w.p99_ns)), Some(f(w.max_ns))],
                entry: [r.p50_ns.map(f), r.p99_ns.map(f), r.max_ns.map(f)],
            })
        })
        .collect();
    out.buf.push_str(&tickscope_fmt::lives_table(&rows));
    out.flush_some()
}

/// Allocations by scope over the capture, where the program counted them, as the exit
/// summary prints them (`tickscope_fmt::allocs_table`).
fn allocs(out: &mut Out<'_>, rows: &[ScopeRow]) -> io::Result<()> {
    let rows: Vec<tickscope_fmt::AllocsRow> = rows
        .iter()
        .filter_map(|r| {
            let [allocs, bytes, self_allocs, self_bytes] = r.allocs?;
            Some(tickscope_fmt::AllocsRow {
                name: match r.kind {
                    ScopeKind::Group => format!("{} [group]", r.name),
                    ScopeKind::Scope => r.name.clone(),
                },
                allocs,
                bytes,
                self_allocs,
                self_bytes,
            })
        })
        .collect();
    out.buf.push_str(&tickscope_fmt::allocs_table(&rows));
    out.flush_some()
}

/// The scope table; `full` adds location, min, percentiles, %wall and clock errors.
fn table(out: &mut Out<'_>, rows: &[ScopeRow], full: bool) -> io::Result<()> {
    align_to(out, rows.len() + 1, if full { 2 } else { 1 }, |i, cells| {
        let Some(r) = i.checked_sub(1).map(|i| &rows[i]) else {
            return if full {
                header(
                    cells,
                    &[
                        "name", "location", "calls", "total", "self", "mean", "min", "p50", "p99",
                        "max", "%wall", "clk err",
                    ],
                )
            } else {
                header(cells, &["name", "calls", "total", "self", "mean", "max"])
            };
        };
        let name = match r.kind {
            ScopeKind::Group => format!("{} [group]", r.name),
            ScopeKind::Scope => r.name.clone(),
        };
        let d = |v: u64| duration(v as f64);
        if full {
            cells.extend([
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
            cells.extend([
                name,
                r.calls.to_string(),
                d(r.total_ns),
                d(r.self_ns),
                opt(r.mean_ns),
                opt(r.max_ns),
            ]);
        }
    })
}
