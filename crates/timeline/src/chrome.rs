//! Chrome trace event JSON: `{"traceEvents":[...],"displayTimeUnit":"ns"}`, read by
//! `chrome://tracing`, the Perfetto UI and speedscope.
//!
//! Each scope is one `"X"` complete event whose `ts` and `dur` are microseconds on a grid of
//! 1/1024 µs (exact binary fractions, see `format::micros`), so that nesting survives the
//! conversion exactly, even for a reader that adds `ts` and `dur` in doubles; `pid` is
//! 1 and `tid` the capture's thread index (small and non-zero). Frame marks, messages and
//! losses are thread-scoped `"i"` instant events (categories `frame`, `message`, `lost`),
//! counters `"C"` events, and `"M"` metadata events name the process (its program) and
//! threads (their names; the OS pid and tids are in `otherData`). A scope
//! closed other than by its own end carries `args` `{"unfinished":true}`, `{"abandoned":true}`
//! or `{"cut":true}` (see the replay rules in the [module docs](super)).

use std::io::{self, Read, Write};

use super::error::Error;
use super::filter::{Filter, LeftOut};
use super::format::{grid, json_str, micros};
use super::replay::replay;
use super::sink::{Close, Instant, Sink};
use super::time::TimeMap;
use crate::tscap::AsyncWhat;
use crate::tscap::{Clock, Meta, Reader};

/// Bytes buffered before a write.
const FLUSH: usize = 1 << 16;

struct Chrome<W> {
    out: W,
    buf: String,
    first: bool,
    /// Futures and spans begun and not yet ended: async id to scope id and the thread of
    /// the begin.
    lives: std::collections::HashMap<u64, (u64, u64)>,
    /// Ends read before their begins: async id to the end's ns, thread and how it ended.
    early: std::collections::HashMap<u64, (u64, u64, AsyncWhat)>,
}

/// How an async slice's end is marked: a future cancelled.
fn label(how: AsyncWhat) -> Option<&'static str> {
    (how == AsyncWhat::Cancelled).then_some("cancelled")
}

impl<W: Write> Chrome<W> {
    fn event(&mut self) {
        if !self.first {
            self.buf.push(',');
        }
        self.first = false;
        self.buf.push_str("\n{");
    }

    /// A future's or span's life as an async slice (`b` and `e`, paired by `id`, named by
    /// its call site): drawn apart from the threads' slices, whichever threads its ends
    /// were on. An end read before its begin (its thread's chunk came first) waits for it;
    /// one whose begin never comes (lost, or outside the window) is left out.
    fn life(
        &mut self,
        meta: &Meta,
        thread: u64,
        ns: u64,
        id: u64,
        aid: u64,
        how: AsyncWhat,
    ) -> io::Result<()> {
        if how != AsyncWhat::Begin {
            if self.lives.remove(&aid).is_some() {
                return self.life_event(meta, "e", id, aid, ns, thread, label(how));
            }
            if self.early.len() < 1 << 20 {
                self.early.insert(aid, (ns, thread, how));
            }
            return Ok(());
        }
        if self.lives.contains_key(&aid) {
            return Ok(());
        }
        self.life_event(meta, "b", id, aid, ns, thread, None)?;
        match self.early.remove(&aid) {
            Some((end, t, how)) => self.life_event(meta, "e", id, aid, end.max(ns), t, label(how)),
            None => {
                self.lives.insert(aid, (id, thread));
                Ok(())
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn life_event(
        &mut self,
        meta: &Meta,
        ph: &str,
        id: u64,
        aid: u64,
        ns: u64,
        thread: u64,
        label: Option<&str>,
    ) -> io::Result<()> {
        self.event();
        self.buf.push_str("\"name\":");
        json_str(&mut self.buf, &meta.scope_name(id));
        self.buf.push_str(",\"cat\":\"async\",\"id\":\"0x");
        self.buf.push_str(&format!("{aid:x}"));
        self.buf.push('"');
        self.common(ph, ns, thread);
        if let Some(label) = label {
            self.buf.push_str(",\"args\":{\"");
            self.buf.push_str(label);
            self.buf.push_str("\":true}");
        }
        self.done()
    }

    fn done(&mut self) -> io::Result<()> {
        self.buf.push('}');
        if self.buf.len() >= FLUSH {
            self.out.write_all(self.buf.as_bytes())?;
            self.buf.clear();
        }
        Ok(())
    }

    fn common(&mut self, ph: &str, ns: u64, thread: u64) {
        self.buf.push_str(",\"ph\":\"");
        self.buf.push_str(ph);
        self.buf.push_str("\",\"ts\":");
        micros(&mut self.buf, grid(ns));
        self.buf.push_str(",\"pid\":1,\"tid\":");
        self.buf.push_str(&thread.to_string());
    }
}

impl<W: Write> Sink for Chrome<W> {
    fn begin(&mut self, _: &Meta, _: u64, _: u64, _: u64) -> io::Result<()> {
        Ok(())
    }

    fn end(
        &mut self,
        meta: &Meta,
        thread: u64,
        id: u64,
        begin: u64,
        end: u64,
        how: Close,
    ) -> io::Result<()> {
        self.event();
        self.buf.push_str("\"name\":");
        json_str(&mut self.buf, &meta.scope_name(id));
        self.buf.push_str(",\"cat\":\"scope\"");
        self.common("X", begin, thread);
        self.buf.push_str(",\"dur\":");
        // The end on the grid less the start on the grid: `ts + dur` is the end's own value.
        micros(&mut self.buf, grid(end).saturating_sub(grid(begin)));
        if let Some(label) = how.label() {
            self.buf.push_str(",\"args\":{\"");
            self.buf.push_str(label);
            self.buf.push_str("\":true}");
        }
        self.done()
    }

    fn instant(&mut self, meta: &Meta, thread: u64, ns: u64, what: Instant<'_>) -> io::Result<()> {
        if let Instant::Async(id, aid, how) = what {
            return self.life(meta, thread, ns, id, aid, how);
        }
        self.event();
        self.buf.push_str("\"name\":");
        match what {
            Instant::Async(..) => {}
            Instant::Frame(id) => {
                json_str(&mut self.buf, &meta.marker_name(id));
                self.buf.push_str(",\"cat\":\"frame\"");
            }
            Instant::Message(text) => {
                json_str(&mut self.buf, text);
                self.buf.push_str(",\"cat\":\"message\"");
            }
            Instant::Lost(n) => {
                json_str(&mut self.buf, &format!("lost {n} events"));
                self.buf.push_str(",\"cat\":\"lost\"");
            }
        }
        self.common("i", ns, thread);
        self.buf.push_str(",\"s\":\"t\"");
        if let Instant::Lost(n) = what {
            self.buf.push_str(",\"args\":{\"dropped\":");
            self.buf.push_str(&n.to_string());
            self.buf.push('}');
        }
        self.done()
    }

    fn finish(&mut self, meta: &Meta, ns: u64) -> io::Result<()> {
        // Lives still open when the capture ends: ended there, marked unfinished.
        let mut open: Vec<(u64, (u64, u64))> = self.lives.drain().collect();
        open.sort_unstable();
        for (aid, (id, thread)) in open {
            self.life_event(meta, "e", id, aid, ns, thread, Some("unfinished"))?;
        }
        self.early.clear();
        Ok(())
    }

    fn counter(
        &mut self,
        meta: &Meta,
        thread: u64,
        id: u64,
        ns: u64,
        value: f64,
    ) -> io::Result<()> {
        // JSON has no NaN or infinity; such a value cannot be drawn either.
        if !value.is_finite() {
            return Ok(());
        }
        self.event();
        self.buf.push_str("\"name\":");
        json_str(&mut self.buf, &meta.marker_name(id));
        self.buf.push_str(",\"cat\":\"counter\"");
        self.common("C", ns, thread);
        self.buf.push_str(",\"args\":{\"value\":");
        self.buf
            .push_str(&serde_json::Number::from_f64(value).map_or("0".into(), |n| n.to_string()));
        self.buf.push('}');
        self.done()
    }
}

/// Writes the capture at `reader` as Chrome trace JSON, converting ticks at `clock`, keeping
/// what `filter` keeps (what it left out is in `otherData.left_out`).
pub fn write<R: Read, W: Write>(
    reader: &mut Reader<R>,
    clock: Clock,
    filter: &Filter,
    out: W,
) -> Result<LeftOut, Error> {
    let map = TimeMap::new(reader.process(), clock);
    let mut c = Chrome {
        lives: Default::default(),
        early: Default::default(),
        out,
        buf: String::from("{\"traceEvents\":["),
        first: true,
    };
    let replayed = replay(reader, &map, filter, &mut c)?;
    let threads = replayed.spans;
    let meta = reader.meta();
    let p = reader.process();
    c.event();
    c.buf
        .push_str("\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":");
    // Viewers add the pid and tid to these names themselves.
    json_str(&mut c.buf, &p.program);
    c.buf.push('}');
    c.done()?;
    for t in &threads {
        let name = meta.thread_name(t.index);
        c.event();
        c.buf
            .push_str("\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":");
        c.buf.push_str(&t.index.to_string());
        c.buf.push_str(",\"args\":{\"name\":");
        json_str(&mut c.buf, &name);
        c.buf.push('}');
        c.done()?;
        c.event();
        c.buf
            .push_str("\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":");
        c.buf.push_str(&t.index.to_string());
        c.buf.push_str(",\"args\":{\"sort_index\":");
        c.buf.push_str(&t.index.to_string());
        c.buf.push('}');
        c.done()?;
    }
    c.buf.push_str("\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"source\":\"tickscope capture\",\"program\":");
    json_str(&mut c.buf, &p.program);
    c.buf.push_str(",\"pid\":");
    c.buf.push_str(&p.pid.to_string());
    c.buf.push_str(",\"threads\":{");
    for (i, t) in threads.iter().enumerate() {
        if i > 0 {
            c.buf.push(',');
        }
        c.buf.push('"');
        c.buf.push_str(&t.index.to_string());
        c.buf.push_str("\":{\"name\":");
        json_str(&mut c.buf, &meta.thread_name(t.index));
        c.buf.push_str(",\"tid\":");
        match meta.thread(t.index) {
            Some(d) => c.buf.push_str(&d.tid.to_string()),
            None => c.buf.push_str("null"),
        }
        c.buf.push('}');
    }
    c.buf.push('}');
    if !filter.is_empty() {
        c.buf.push_str(",\"filter\":{\"from_ns\":");
        c.buf.push_str(&filter.from_ns.to_string());
        if filter.until_ns != u64::MAX {
            c.buf.push_str(",\"until_ns\":");
            c.buf.push_str(&filter.until_ns.to_string());
        }
        c.buf.push_str(",\"min_duration_ns\":");
        c.buf.push_str(&filter.min_duration_ns.to_string());
        c.buf.push_str(",\"threads\":[");
        for (i, t) in filter.threads.iter().enumerate() {
            if i > 0 {
                c.buf.push(',');
            }
            json_str(&mut c.buf, t);
        }
        c.buf.push_str("]},\"left_out\":{\"short_scopes\":");
        c.buf.push_str(&replayed.left_out.short_scopes.to_string());
        c.buf.push('}');
    }
    c.buf.push_str("}}\n");
    c.out.write_all(c.buf.as_bytes())?;
    c.out.flush()?;
    Ok(replayed.left_out)
}
