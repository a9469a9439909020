//! The report as one JSON document, for scripts.
//!
//! ```json
//! {"tickscope":1,"source":"capture","file":"run.tscap","program":"demo","pid":4242,
//!  "wall_ns":3020000000,"complete":true,"events":1200000,"event_chunks":40,
//!  "clock":{"source":"tsc","ticks_per_second":2995000000.0,"calibrations":1},
//!  "lost":{"dropped":0,"undelivered":0,"evicted":0,"abandoned":0,…},
//!  "scopes":[{"name":"parse","kind":"scope","file":"src/demo.rs","line":40,"calls":1200,
//!    "outer_calls":1200,"total_ns":812000000,"self_ns":640000000,"mean_ns":676666,
//!    "min_ns":…,"p50_ns":…,"p90_ns":…,"p99_ns":…,"max_ns":…,"wall_percent":26.9,"clock_errors":0}],
//!  "threads":[{"index":1,"tid":4660,"name":"main","events":…,"dropped":0,…}],
//!  "frames":[…],"counters":[…],"messages":{"count":0,"first":[]},"warnings":[]}
//! ```
//! Times are integers in nanoseconds; a thread's `scopes` are present with `--per-thread`.
//! Keys are sorted, so the same capture always gives the same bytes.

use std::io;

use serde_json::{json, Map, Value};

use super::collect::{ScopeRow, Summary};
use crate::tscap::ScopeKind;

fn scope(r: &ScopeRow, full: bool) -> Value {
    let mut o = Map::new();
    o.insert("id".into(), json!(r.id));
    o.insert("name".into(), json!(r.name));
    o.insert(
        "kind".into(),
        json!(match r.kind {
            ScopeKind::Scope => "scope",
            ScopeKind::Group => "group",
        }),
    );
    o.insert("file".into(), json!(r.file));
    o.insert("line".into(), json!(r.line));
    o.insert("calls".into(), json!(r.calls));
    o.insert("outer_calls".into(), json!(r.outer_calls));
    o.insert("total_ns".into(), json!(r.total_ns));
    o.insert("self_ns".into(), json!(r.self_ns));
    let mut opt = |k: &str, v: Option<u64>| {
        if let Some(v) = v {
            o.insert(k.into(), json!(v));
        }
    };
    opt("mean_ns", r.mean_ns);
    opt("max_ns", r.max_ns);
    if full {
        opt("min_ns", r.min_ns);
        opt("p50_ns", r.p50_ns);
        opt("p90_ns", r.p90_ns);
        opt("p99_ns", r.p99_ns);
        o.insert(
            "wall_percent".into(),
            json!((r.wall_percent * 100.0).round() / 100.0),
        );
        o.insert("clock_errors".into(), json!(r.clock_errors));
        o.insert("dropped".into(), json!(r.dropped));
        o.insert("in_flight_at_start".into(), json!(r.in_flight_at_start));
        if let Some(w) = &r.wall {
            o.insert(
                "wall".into(),
                json!({
                    "calls": w.count,
                    "cancelled": w.cancelled,
                    "total_ns": w.total_ns,
                    "mean_ns": (w.total_ns as f64 / w.count.max(1) as f64).round() as u64,
                    "min_ns": w.min_ns,
                    "p50_ns": w.p50_ns,
                    "p99_ns": w.p99_ns,
                    "max_ns": w.max_ns,
                    "clock_errors": w.clock_errors,
                }),
            );
        }
    }
    if let Some([count, bytes, self_count, self_bytes]) = r.allocs {
        o.insert(
            "allocs".into(),
            json!({"count": count, "bytes": bytes, "self_count": self_count, "self_bytes": self_bytes}),
        );
    }
    Value::Object(o)
}

/// A float as JSON: non-finite values (which JSON cannot hold) as null.
fn float(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

/// Writes the value of a key itself (`Some`), or leaves it to `serde_json` (`None`).
type Stream<'a> = dyn FnMut(&str, &mut dyn io::Write) -> Option<io::Result<()>> + 'a;

/// Writes `o` as a JSON object, as `serde_json` would (keys in order, no spaces), except
/// that the values of the keys `stream` takes are written by it.
fn write_object(
    w: &mut dyn io::Write,
    o: &Map<String, Value>,
    stream: &mut Stream<'_>,
) -> io::Result<()> {
    w.write_all(b"{")?;
    for (i, (k, v)) in o.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, k)?;
        w.write_all(b":")?;
        match stream(k, w) {
            Some(r) => r?,
            None => serde_json::to_writer(&mut *w, v)?,
        }
    }
    w.write_all(b"}")
}

/// Writes `items` as a JSON array, one value made at a time.
fn write_array<T>(
    w: &mut dyn io::Write,
    items: &[T],
    value: impl Fn(&T) -> Value,
) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, &value(item))?;
    }
    w.write_all(b"]")
}

impl Summary {
    /// The report as JSON (one line, and a newline).
    pub fn to_json(&self) -> String {
        let mut v = Vec::new();
        self.write_json(&mut v).expect("a Vec takes every write");
        String::from_utf8(v).expect("JSON is UTF-8")
    }

    /// [`to_json`](Self::to_json), written to `w` as it is made: scope and thread rows
    /// become JSON one at a time, never a document of them all.
    pub fn write_json(&self, w: &mut dyn io::Write) -> io::Result<()> {
        let l = &self.losses;
        let v = json!({
            "tickscope": 1,
            "source": "capture",
            "file": self.file,
            "program": self.program,
            "pid": self.pid,
            "wall_ns": self.wall_ns,
            "complete": self.complete,
            "recorded_events": self.recorded_events,
            "events": self.events,
            "loss_markers": self.loss_markers,
            "event_chunks": self.event_chunks,
            "clock": {
                "source": self.clock_source,
                "ticks_per_second": float(self.ticks_per_second),
                "calibrations": self.calibrations,
            },
            "lost": {
                "dropped": l.dropped,
                "undelivered": l.undelivered,
                "undelivered_chunks": l.undelivered_chunks,
                "evicted": l.evicted,
                "abandoned": l.abandoned,
                "unmatched_ends": l.unmatched_ends,
                "open_at_end": l.open_at_end,
                "cut_at_gaps": l.cut_at_gaps,
                "too_deep": l.too_deep,
                "dropped_scopes": l.dropped_scopes,
                "in_flight_at_start": l.in_flight_at_start,
                "cut_at_losses": l.cut_at_losses,
                "async_unpaired": l.async_unpaired,
            },
            // Written by `write_object`'s `stream`, below.
            "scopes": Value::Null,
            "threads": Value::Null,
            "frames": self.frames.iter().map(|f| json!({
                "id": f.id,
                "name": f.name,
                "marks": f.marks,
                "frames": f.frames,
                "min_ns": f.min_ns,
                "mean_ns": f.mean_ns,
                "p99_ns": f.p99_ns,
                "max_ns": f.max_ns,
            })).collect::<Vec<_>>(),
            "counters": self.counters.iter().map(|c| json!({
                "id": c.id,
                "name": c.name,
                "count": c.count,
                "min": float(c.min),
                "max": float(c.max),
                "last": float(c.last),
            })).collect::<Vec<_>>(),
            "messages": {
                "count": self.messages,
                "first": self.first_messages.iter().map(|m| json!({
                    "at_ns": m.at_ns,
                    "thread": m.thread,
                    "text": m.text,
                })).collect::<Vec<_>>(),
            },
            "warnings": self.warnings,
        });
        let Value::Object(mut top) = v else {
            unreachable!("an object")
        };
        // Only captures the CPU sampler ran beside have samples (the key is left out of the
        // others, whose reports stay as they were).
        if self.samples > 0 {
            top.insert(
                "samples".into(),
                json!({"count": self.samples, "stacks": self.sample_stacks}),
            );
        }
        if let Some(r) = &self.range {
            top.insert(
                "range".into(),
                json!({"from_ns": r.from_ns, "until_ns": r.until_ns, "crossing": r.crossing}),
            );
        }
        write_object(w, &top, &mut |k, w| match k {
            "scopes" => Some(write_array(w, &self.scopes, |r| scope(r, true))),
            "threads" => Some(self.write_threads(w)),
            _ => None,
        })?;
        w.write_all(b"\n")
    }

    fn write_threads(&self, w: &mut dyn io::Write) -> io::Result<()> {
        w.write_all(b"[")?;
        for (i, t) in self.threads.iter().enumerate() {
            if i > 0 {
                w.write_all(b",")?;
            }
            let mut o = json!({
                "index": t.index,
                "tid": t.tid,
                "name": t.name,
                "events": t.events,
                "dropped": t.dropped,
                "lost_events": t.lost_events,
                "open_at_end": t.open_at_end,
            });
            if self.per_thread {
                o["scopes"] = Value::Null;
            }
            let Value::Object(o) = o else {
                unreachable!("an object")
            };
            write_object(w, &o, &mut |k, w| {
                (k == "scopes").then(|| write_array(w, &t.scopes, |r| scope(r, false)))
            })?;
        }
        w.write_all(b"]")
    }
}
