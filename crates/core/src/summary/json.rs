//! The summary as one JSON document, for scripts.
//!
//! ```json
//! {"tickscope":1,"wall_ns":3020000000,"clock":{"source":"tsc","ticks_per_second":2995000000},
//!  "overhead_ns_per_scope":9.8,"threads":{"seen":4,"running":1,"exited":3},
//!  "lost":{"too_deep":0,"unbalanced":0,"after_thread_exit":0,"open_now":0,
//!    "open_at_thread_exit":0,"timer_clock_errors":0,"capture_events":0},
//!  "scopes":[{"name":"parse","kind":"scope","file":"src/demo.rs","line":40,"module":"demo",
//!    "sites":1,"calls":1200,"outer_calls":1200,"total_ns":812000000,"self_ns":640000000,
//!    "mean_ns":676666,"min_ns":…,"p50_ns":…,"p90_ns":…,"p99_ns":…,"max_ns":…,
//!    "wall_percent":26.9,"allocs":{"count":2400,"bytes":9830400,"self_count":1200,
//!    "self_bytes":4915200},"clock_errors":0}],
//!  "per_thread":[{"tid":4660,"name":"main","running":true,"threads":1,"scopes":[…]}]}
//! ```
//! Times are integers in nanoseconds; `per_thread` is present only when asked for, and its
//! scopes carry no percentiles; `allocs` only where `tickscope::alloc::Profiled` is the
//! global allocator (allocations inside the scope's outermost calls, and not in its child
//! scopes: `self_*`).

use std::fmt::Write;

use super::{Context, Entry, Snapshot};
use crate::scope::callsite::Kind;

/// Renders the summary.
pub(crate) fn render(snap: &Snapshot, meta: &Context, per_thread: bool) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "{{\"tickscope\":1,\"wall_ns\":{},\"clock\":{{\"source\":{},\"ticks_per_second\":{}}},\"overhead_ns_per_scope\":{:.1},",
        meta.wall_ns,
        string(meta.clock),
        meta.rate.round() as u64,
        meta.overhead_ns
    );
    let _ = write!(
        o,
        "\"threads\":{{\"seen\":{},\"running\":{},\"exited\":{}}},",
        snap.live_threads + snap.exited_threads,
        snap.live_threads,
        snap.exited_threads
    );
    let _ = write!(
        o,
        "\"lost\":{{\"too_deep\":{},\"unbalanced\":{},\"after_thread_exit\":{},\"open_now\":{},\"open_at_thread_exit\":{},\"timer_clock_errors\":{},\"capture_events\":{},\"foreign_span_exits\":{}}},",
        snap.lost_too_deep,
        snap.unbalanced,
        snap.lost_after_thread_exit,
        snap.open_now,
        snap.unfinished_at_thread_exit,
        meta.timer_clock_errors,
        snap.capture_lost,
        snap.foreign_exits
    );
    o.push_str("\"scopes\":[");
    for (i, e) in snap.entries.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        entry(&mut o, e, meta, (true, snap.allocs_counted));
    }
    o.push(']');
    if per_thread {
        o.push_str(",\"per_thread\":[");
        for (i, (t, entries)) in snap.threads.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            let name = t.name.as_deref().map_or("null".to_owned(), string);
            let _ = write!(
                o,
                "{{\"tid\":{},\"name\":{name},\"running\":{},\"threads\":{},\"scopes\":[",
                t.tid, t.alive, t.threads
            );
            for (j, e) in entries.iter().enumerate() {
                if j > 0 {
                    o.push(',');
                }
                entry(&mut o, e, meta, (false, snap.allocs_counted));
            }
            o.push_str("]}");
        }
        o.push(']');
    }
    o.push_str("}\n");
    o
}

/// One scope's row; `full`: with percentiles and `%wall`; `allocs`: with its allocations.
fn entry(o: &mut String, e: &Entry, meta: &Context, (full, allocs): (bool, bool)) {
    let r = &e.row;
    let ns = |t: u64| meta.ns(t).round() as u64;
    let kind = match e.info.kind {
        Kind::Group => "group",
        Kind::Scope => "scope",
    };
    let _ = write!(
        o,
        "{{\"name\":{},\"kind\":\"{kind}\",\"file\":{},\"line\":{},\"module\":{},\"sites\":{},\"calls\":{},\"outer_calls\":{},\"total_ns\":{},\"self_ns\":{},",
        string(e.info.name),
        string(e.info.file),
        e.info.line,
        string(e.info.module),
        e.info.sites,
        r.calls,
        r.outer,
        ns(r.incl),
        ns(r.self_ticks),
    );
    // A concurrent read may see `outer` before `min`/`max` of a first call: skip then.
    if r.outer > 0 && r.min <= r.max {
        let _ = write!(
            o,
            "\"mean_ns\":{},\"min_ns\":{},\"max_ns\":{},",
            (meta.ns(r.incl) / r.outer as f64).round() as u64,
            ns(r.min),
            ns(r.max)
        );
        if full {
            for (q, key) in [(0.5, "p50_ns"), (0.9, "p90_ns"), (0.99, "p99_ns")] {
                if let Some(v) = r.hist.quantile(q) {
                    let _ = write!(o, "\"{key}\":{},", ns(v.max(r.min).min(r.max)));
                }
            }
        }
    }
    if full {
        let pct = if meta.wall_ns > 0 {
            meta.ns(r.incl) * 100.0 / meta.wall_ns as f64
        } else {
            0.0
        };
        let _ = write!(o, "\"wall_percent\":{pct:.2},");
    }
    if let Some(w) = &e.wall {
        let _ = write!(
            o,
            "\"wall\":{{\"kind\":\"{}\",\"calls\":{},\"cancelled\":{},\"total_ns\":{},",
            w.kind.name(),
            w.count(),
            w.cancelled,
            ns(w.total)
        );
        if w.count() > 0 {
            let _ = write!(
                o,
                "\"mean_ns\":{},\"min_ns\":{},\"max_ns\":{},",
                (meta.ns(w.total) / w.count() as f64).round() as u64,
                ns(w.min),
                ns(w.max)
            );
            for (q, key) in [(0.5, "p50_ns"), (0.99, "p99_ns")] {
                if let Some(v) = w.quantile(q) {
                    let _ = write!(o, "\"{key}\":{},", ns(v));
                }
            }
        }
        let _ = write!(o, "\"clock_errors\":{}}},", w.clock_errors);
    }
    if allocs {
        let [count, bytes, self_count, self_bytes] = r.heap;
        let _ = write!(
            o,
            "\"allocs\":{{\"count\":{count},\"bytes\":{bytes},\"self_count\":{self_count},\"self_bytes\":{self_bytes}}},"
        );
    }
    let _ = write!(o, "\"clock_errors\":{}}}", r.clock_errors);
}

/// A JSON string literal.
pub(crate) fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    tickscope_fmt::json_string(&mut o, s);
    o
}
