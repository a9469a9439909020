//! speedscope's file format (<https://www.speedscope.app/file-format-schema.json>): shared
//! frames (one per scope) and one `"evented"` profile per thread in nanoseconds, whose `"O"`
//! (open) and `"C"` (close) events nest properly, in non-decreasing `at` order. Scopes still
//! open at the end are closed at their thread's last timestamp (speedscope has no place for
//! the reason; the Chrome and Perfetto exports mark them).
//!
//! A capture interleaves its threads chunk by chunk while speedscope wants each thread's
//! events together: they are gathered per thread in memory, and past 32 MiB in an unnamed
//! temporary file, so memory stays bounded.

use std::fmt::Write as _;
use std::io::{self, Read, Write};

use super::error::Error;
use super::filter::{Filter, LeftOut};
use super::format::json_str;
use super::replay::replay;
use super::sink::{Close, Sink};
use super::spill::Spill;
use super::time::TimeMap;
use crate::tscap::{Clock, IdIndex, Meta, Reader};

/// The schema URL speedscope checks for.
pub const SCHEMA: &str = "https://www.speedscope.app/file-format-schema.json";

struct Speedscope {
    spill: Spill,
    threads: IdIndex,
    started: Vec<bool>,
    frames: IdIndex,
    frame_ids: Vec<u64>,
    line: String,
}

impl Speedscope {
    fn push(&mut self, thread: u64, kind: char, id: u64, ns: u64) -> io::Result<()> {
        let (k, _) = self.threads.get_or_insert(thread);
        let k = k as usize;
        if self.started.len() <= k {
            self.started.resize(k + 1, false);
        }
        let (f, new) = self.frames.get_or_insert(id);
        if new {
            self.frame_ids.push(id);
        }
        self.line.clear();
        if self.started[k] {
            self.line.push(',');
        }
        self.started[k] = true;
        let _ = write!(
            self.line,
            "\n{{\"type\":\"{kind}\",\"frame\":{f},\"at\":{ns}}}"
        );
        self.spill.push(k, self.line.as_bytes())
    }
}

impl Sink for Speedscope {
    fn begin(&mut self, _: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        self.push(thread, 'O', id, ns)
    }

    fn end(
        &mut self,
        _: &Meta,
        thread: u64,
        id: u64,
        _: u64,
        end: u64,
        _: Close,
    ) -> io::Result<()> {
        self.push(thread, 'C', id, end)
    }
}

/// Writes the capture at `reader` as a speedscope file, converting ticks at `clock`.
pub fn write<R: Read, W: Write>(
    reader: &mut Reader<R>,
    clock: Clock,
    filter: &Filter,
    mut out: W,
) -> Result<LeftOut, Error> {
    let map = TimeMap::new(reader.process(), clock);
    let mut s = Speedscope {
        spill: Spill::new(),
        threads: IdIndex::default(),
        started: Vec::new(),
        frames: IdIndex::default(),
        frame_ids: Vec::new(),
        line: String::new(),
    };
    let replayed = replay(reader, &map, filter, &mut s)?;
    let spans = replayed.spans;
    let meta = reader.meta();
    let mut head = String::new();
    head.push_str("{\"$schema\":");
    json_str(&mut head, SCHEMA);
    head.push_str(",\"exporter\":");
    json_str(
        &mut head,
        concat!("tickscope-timeline ", env!("CARGO_PKG_VERSION")),
    );
    head.push_str(",\"name\":");
    let mut name = reader.process().program.clone();
    if replayed.left_out.short_scopes > 0 {
        // The format has no other place for it.
        let _ = write!(
            name,
            " ({} scopes shorter than {} ns left out)",
            replayed.left_out.short_scopes, filter.min_duration_ns
        );
    }
    json_str(&mut head, &name);
    head.push_str(",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    for (i, &id) in s.frame_ids.iter().enumerate() {
        if i > 0 {
            head.push(',');
        }
        head.push_str("\n{\"name\":");
        json_str(&mut head, &meta.scope_name(id));
        if let Some(d) = meta.scope(id) {
            if !d.file.is_empty() {
                head.push_str(",\"file\":");
                json_str(&mut head, d.file);
                let _ = write!(head, ",\"line\":{}", d.line);
            }
        }
        head.push('}');
    }
    head.push_str("]},\"profiles\":[");
    out.write_all(head.as_bytes())?;
    let mut first = true;
    for t in &spans {
        let Some(k) = s.threads.get(t.index) else {
            continue;
        };
        if s.spill.is_empty(k as usize) {
            continue;
        }
        let mut h = String::new();
        if !first {
            h.push(',');
        }
        first = false;
        h.push_str("\n{\"type\":\"evented\",\"name\":");
        json_str(&mut h, &meta.thread_name(t.index));
        let _ = write!(
            h,
            ",\"unit\":\"nanoseconds\",\"startValue\":{},\"endValue\":{},\"events\":[",
            t.first, t.last
        );
        out.write_all(h.as_bytes())?;
        s.spill.copy_to(k as usize, &mut out)?;
        out.write_all(b"]}")?;
    }
    out.write_all(b"\n]}\n")?;
    out.flush()?;
    Ok(replayed.left_out)
}
