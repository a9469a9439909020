//! Answers for a window of the timeline at a given width in pixels: per thread and depth, the
//! scopes at least a pixel wide, one by one, and for the rest how busy each pixel is; per
//! pixel the frame marks, messages and CPU samples; counter ranges per pixel; every loss.
//!
//! A window of at least a bin per pixel is answered from the index alone. A narrower one is
//! answered by decoding again the chunks of each thread that hold its events (and a bin's
//! width either side, where a scope narrower than a bin that overlaps the window must begin
//! and end); the scopes a bin long or longer come from the index in both cases, so each
//! scope is drawn from one place. Scopes still open (at the capture's end, or now) are drawn
//! from the index's open stacks to their thread's last event.

use std::io;

use tickscope_timeline::tscap::{ChunkKind, Event, EventKind, Events, Reader};

use super::series::{Bin, Range, Series, FULL};
use super::track::{Close, Out, Track};
use super::{Index, Thread};

/// The most pixels a window may ask for.
pub const MAX_PX: u32 = 16_384;
/// Messages whose text an answer carries, at most (the rest are counted per pixel).
pub const MAX_MESSAGES: usize = 2_000;

/// Random access to the capture's bytes (a file, or what a live connection delivered).
pub trait Source: Send + Sync {
    /// Fills `buf` from `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl Source for std::fs::File {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

/// A window: ns from the capture's start, `px` pixels wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Its start.
    pub from_ns: u64,
    /// Its end (after `from_ns`).
    pub until_ns: u64,
    /// Its width in pixels (1 to [`MAX_PX`]).
    pub px: u32,
}

impl Window {
    /// The window, or why it is not one.
    pub fn new(from_ns: u64, until_ns: u64, px: u32) -> Result<Window, String> {
        if until_ns <= from_ns {
            return Err(format!(
                "the window ends ({until_ns} ns) before it begins ({from_ns} ns)"
            ));
        }
        if px == 0 || px > MAX_PX {
            return Err(format!(
                "{px} pixels: a window is 1 to {MAX_PX} pixels wide"
            ));
        }
        Ok(Window {
            from_ns,
            until_ns,
            px,
        })
    }

    fn ns_per_px(&self) -> f64 {
        (self.until_ns - self.from_ns) as f64 / self.px as f64
    }

    /// The pixel of `ns` (clamped into the window).
    fn pixel(&self, ns: f64) -> usize {
        let p = (ns - self.from_ns as f64) / self.ns_per_px();
        (p.max(0.0) as usize).min(self.px as usize - 1)
    }
}

/// A scope drawn one by one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SliceOut {
    /// Begin, ns from the capture's start.
    pub begin_ns: f64,
    /// End.
    pub end_ns: f64,
    /// Scope id.
    pub id: u64,
    /// How it ended.
    pub close: Close,
}

/// One depth of a thread in a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowOut {
    /// Scopes at least a pixel wide (and every scope a bin long or longer), in time order.
    pub slices: Vec<SliceOut>,
    /// Per pixel, how much of it narrower scopes fill (0 to 255).
    pub busy: Vec<u8>,
}

/// One thread in a window.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadOut {
    /// Its index in the capture.
    pub index: u64,
    /// By depth.
    pub rows: Vec<RowOut>,
    /// Frame marks per pixel.
    pub frames: Vec<u32>,
    /// Messages per pixel.
    pub messages: Vec<u32>,
    /// Messages with their text (decoded windows, up to [`MAX_MESSAGES`]): (ns, text).
    pub texts: Vec<(f64, String)>,
    /// CPU samples of this thread per pixel.
    pub samples: Vec<u32>,
    /// Losses in the window: (ns, events dropped).
    pub losses: Vec<(f64, u64)>,
}

/// A counter in a window.
#[derive(Clone, Debug, PartialEq)]
pub struct CounterOut {
    /// Marker id.
    pub id: u64,
    /// Per pixel: smallest and largest value (NaN: none).
    pub ranges: Vec<Range>,
}

/// The answer for a window.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The window.
    pub window: Window,
    /// Returns true if and only if the window was decoded again (narrower than a bin per
    /// pixel).
    pub decoded: bool,
    /// The index's bin width, ns.
    pub bin_ns: f64,
    /// Threads with anything in the window, in the index's order.
    pub threads: Vec<ThreadOut>,
    /// Counters with values in the window.
    pub counters: Vec<CounterOut>,
}

impl Index {
    /// The answer for `w`, decoding the capture from `source` where it is narrow.
    pub fn query(&self, source: &dyn Source, w: Window) -> io::Result<Answer> {
        let map = &self.map;
        let bin_ns = self.bin_ns();
        let decoded = w.ns_per_px() < bin_ns;
        let px = w.px as usize;
        let from_t = map.ticks(w.from_ns);
        let until_t = map.ticks(w.until_ns);
        let mut threads = Vec::new();
        let mut counters: Vec<CounterOut> = Vec::new();
        // Samples are recorded by the sampler's thread for the thread they are of.
        let mut samples_by_tid: std::collections::HashMap<u64, Vec<u32>> = Default::default();
        for th in &self.threads {
            if th.track.last < from_t.saturating_sub(self.bin_ticks()) || th.first > until_t {
                continue;
            }
            let mut out = ThreadOut {
                index: th.index,
                rows: Vec::new(),
                frames: vec![0; px],
                messages: vec![0; px],
                texts: Vec::new(),
                samples: Vec::new(),
                losses: Vec::new(),
            };
            if decoded {
                let mut d = Decode {
                    w,
                    index: self,
                    rows: Vec::new(),
                    out: &mut out,
                    counters: &mut counters,
                    samples: &mut samples_by_tid,
                    bin_ticks: self.bin_ticks(),
                    lo: from_t,
                    hi: until_t,
                };
                d.thread(source, th)?;
                let rows = std::mem::take(&mut d.rows);
                out.rows = rows;
            } else {
                self.binned(th, w, &mut out);
            }
            self.long_and_open(th, w, decoded, &mut out);
            for (ns, n) in &th.losses {
                let ns = map.ns(*ns) as f64;
                if ns >= w.from_ns as f64 && ns <= w.until_ns as f64 {
                    out.losses.push((ns, *n));
                }
            }
            let empty = out
                .rows
                .iter()
                .all(|r| r.slices.is_empty() && r.busy.iter().all(|&b| b == 0))
                && out.frames.iter().all(|&n| n == 0)
                && out.messages.iter().all(|&n| n == 0)
                && out.losses.is_empty();
            if !empty || th.track.last >= from_t {
                threads.push(out);
            }
        }
        if !decoded {
            self.counters_from_bins(w, &mut counters);
            for (tid, s) in &self.samples {
                let per = samples_by_tid.entry(*tid).or_insert_with(|| vec![0; px]);
                self.per_px(w, s, |p, bins| per[p] += bins.iter().sum::<u32>());
            }
        }
        // Each sampled thread's samples go on its own track.
        for t in &mut threads {
            let tid = self.meta.thread(t.index).map(|d| d.tid);
            if let Some(s) = tid.and_then(|tid| samples_by_tid.remove(&tid)) {
                t.samples = s;
            }
        }
        counters.sort_by_key(|c| c.id);
        Ok(Answer {
            window: w,
            decoded,
            bin_ns,
            threads,
            counters,
        })
    }

    /// Calls `put(pixel, bins)` with the bins of `series` whose middle is in each pixel of
    /// window `w` (pixels without bins are passed over).
    pub(crate) fn per_px<T: Bin>(
        &self,
        w: Window,
        series: &Series<T>,
        mut put: impl FnMut(usize, &[T]),
    ) {
        if series.is_empty() {
            return;
        }
        // Bin b's middle is at (b + 0.5) * bin_ns from the capture's start.
        let bin_ns = self.bin_ns();
        let npp = w.ns_per_px();
        let first = |p: usize| -> u64 {
            let x = (w.from_ns as f64 + p as f64 * npp) / bin_ns - 0.5;
            x.ceil().max(0.0) as u64
        };
        let (lo, hi) = (first(0), first(w.px as usize));
        let (start, vals) = series.window(lo, hi);
        if vals.is_empty() {
            return;
        }
        let mut b = first(0);
        for p in 0..w.px as usize {
            let next = first(p + 1);
            let (a, z) = (
                b.max(start) - start,
                next.min(start + vals.len() as u64).max(start) - start,
            );
            if a < z {
                put(p, &vals[a as usize..z as usize]);
            }
            b = next;
        }
    }

    /// The bin width in ns.
    pub fn bin_ns(&self) -> f64 {
        self.bin_ticks() as f64 * 1e9 / self.map_rate()
    }

    /// Ticks per second of the index's calibration.
    fn map_rate(&self) -> f64 {
        let t = self.process.start_ticks;
        let ns = self.map.ns(t + (1 << 40));
        (1u64 << 40) as f64 * 1e9 / ns.max(1) as f64
    }

    /// A wide window: busy pixels, frames and messages from the bins.
    fn binned(&self, th: &Thread, w: Window, out: &mut ThreadOut) {
        let px = w.px as usize;
        for r in &th.rows {
            let mut busy = vec![0u8; px];
            self.per_px(w, &r.busy, |p, bins| {
                let sum: u64 = bins.iter().map(|&v| v as u64).sum();
                busy[p] = (sum * 255)
                    .div_ceil(bins.len() as u64 * FULL as u64)
                    .min(255) as u8;
            });
            out.rows.push(RowOut {
                slices: Vec::new(),
                busy,
            });
        }
        for f in th.frames.values() {
            self.per_px(w, f, |p, bins| out.frames[p] += bins.iter().sum::<u32>());
        }
        self.per_px(w, &th.messages, |p, bins| {
            out.messages[p] += bins.iter().sum::<u32>()
        });
    }

    fn counters_from_bins(&self, w: Window, counters: &mut Vec<CounterOut>) {
        for (&id, s) in &self.counters {
            let mut ranges = vec![Range::default(); w.px as usize];
            let mut any = false;
            self.per_px(w, s, |p, bins| {
                let r = bins.iter().copied().fold(Range::default(), Range::merge);
                any |= r.is_set();
                ranges[p] = r;
            });
            if any {
                counters.push(CounterOut { id, ranges });
            }
        }
    }

    /// The scopes a bin long or longer (at least a pixel wide) and the open ones.
    fn long_and_open(&self, th: &Thread, w: Window, decoded: bool, out: &mut ThreadOut) {
        let map = &self.map;
        let min_ns = if decoded { 0.0 } else { w.ns_per_px() };
        let (from, until) = (w.from_ns as f64, w.until_ns as f64);
        let depth = th.rows.len().max(th.track.stack.len());
        if out.rows.len() < depth {
            out.rows.resize_with(depth, || RowOut {
                slices: Vec::new(),
                busy: vec![0; w.px as usize],
            });
        }
        let from_t = map.ticks(w.from_ns);
        for (d, r) in th.rows.iter().enumerate() {
            // The first slice ending in the window: they are in time order.
            let start = r.long.partition_point(|s| s.end < from_t);
            let mut long = Vec::new();
            for s in &r.long[start..] {
                let (b, e) = (map.ns(s.begin) as f64, map.ns(s.end) as f64);
                if b > until {
                    break;
                }
                if e - b >= min_ns {
                    long.push(SliceOut {
                        begin_ns: b,
                        end_ns: e,
                        id: s.id,
                        close: s.close,
                    });
                }
            }
            merge_in_order(&mut out.rows[d].slices, long);
        }
        let end = map.ns(th.track.last) as f64;
        for (d, &(id, begin)) in th.track.stack.iter().enumerate() {
            let b = map.ns(begin) as f64;
            if b <= until && end >= from {
                merge_in_order(
                    &mut out.rows[d].slices,
                    vec![SliceOut {
                        begin_ns: b,
                        end_ns: end,
                        id,
                        close: Close::Open,
                    }],
                );
            }
        }
    }
}

/// Adds `more` (in time order) to `slices` (in time order), keeping the order.
fn merge_in_order(slices: &mut Vec<SliceOut>, more: Vec<SliceOut>) {
    if more.is_empty() {
        return;
    }
    if slices.last().is_none_or(|l| l.begin_ns <= more[0].begin_ns) {
        slices.extend(more);
        return;
    }
    slices.extend(more);
    slices.sort_by(|a, b| a.begin_ns.total_cmp(&b.begin_ns));
}

/// Decoding a narrow window again.
struct Decode<'a> {
    w: Window,
    index: &'a Index,
    rows: Vec<RowOut>,
    out: &'a mut ThreadOut,
    counters: &'a mut Vec<CounterOut>,
    samples: &'a mut std::collections::HashMap<u64, Vec<u32>>,
    bin_ticks: u64,
    /// The window in ticks.
    lo: u64,
    hi: u64,
}

impl Decode<'_> {
    /// Decodes thread `th`'s chunks that hold the window's events (a bin either side).
    fn thread(&mut self, source: &dyn Source, th: &Thread) -> io::Result<()> {
        let map = &self.index.map;
        let lo = map.ticks(self.w.from_ns).saturating_sub(self.bin_ticks);
        let hi = map.ticks(self.w.until_ns).saturating_add(self.bin_ticks);
        let first = th.chunks.partition_point(|c| c.last < lo);
        let chunks: Vec<_> = th.chunks[first..]
            .iter()
            .take_while(|c| c.first <= hi)
            .collect();
        if chunks.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        let header_len = tickscope_timeline::tscap::HEADER_LEN;
        let p = self.index.process_chunk;
        bytes.resize(header_len + p.len as usize, 0);
        source.read_at(0, &mut bytes[..header_len])?;
        source.read_at(p.offset, &mut bytes[header_len..])?;
        for c in &chunks {
            let at = bytes.len();
            bytes.resize(at + c.span.len as usize, 0);
            source.read_at(c.span.offset, &mut bytes[at..])?;
        }
        let mut reader = Reader::new(&bytes[..], "window").map_err(io::Error::other)?;
        let mut track = Track::default();
        let mut events = Events::new();
        while let Some(kind) = reader.next_chunk().map_err(io::Error::other)? {
            if kind != ChunkKind::Events {
                continue;
            }
            track.chunk(reader.events_info(), self);
            while reader.decode(&mut events) {
                track.events(&events, self);
            }
        }
        Ok(())
    }

    fn row(&mut self, depth: usize) -> &mut RowOut {
        if self.rows.len() <= depth {
            let px = self.w.px as usize;
            self.rows.resize_with(depth + 1, || RowOut {
                slices: Vec::new(),
                busy: vec![0; px],
            });
        }
        &mut self.rows[depth]
    }
}

impl Out for Decode<'_> {
    fn slice(&mut self, depth: usize, id: u64, begin: u64, end: u64, close: Close) {
        // Scopes a bin long or longer are the index's; most are outside the window.
        if end - begin >= self.bin_ticks || end < self.lo || begin > self.hi {
            return;
        }
        let map = self.index.map;
        let (b, e) = (map.ns(begin) as f64, map.ns(end) as f64);
        let w = self.w;
        let (from, until) = (w.from_ns as f64, w.until_ns as f64);
        if e < from || b > until {
            return;
        }
        let ns_per_px = w.ns_per_px();
        let row = self.row(depth);
        if e - b >= ns_per_px {
            row.slices.push(SliceOut {
                begin_ns: b,
                end_ns: e,
                id,
                close,
            });
            return;
        }
        // Narrower than a pixel: its share of the pixels it touches.
        let (b, e) = (b.max(from), e.min(until));
        let (p0, p1) = (w.pixel(b), w.pixel(e));
        for p in p0..=p1 {
            let lo = from + p as f64 * ns_per_px;
            let hi = lo + ns_per_px;
            let part = (e.min(hi) - b.max(lo)).max(0.0) / ns_per_px;
            let v = &mut row.busy[p];
            *v = (*v as f64 + part * 255.0).round().min(255.0) as u8;
        }
    }

    fn point(&mut self, batch: &Events, e: &Event, ticks: u64) {
        let ns = self.index.map.ns(ticks) as f64;
        let w = self.w;
        if ns < w.from_ns as f64 || ns > w.until_ns as f64 {
            return;
        }
        let p = w.pixel(ns);
        match e.kind {
            EventKind::Frame => self.out.frames[p] += 1,
            EventKind::Message => {
                self.out.messages[p] += 1;
                if self.out.texts.len() < MAX_MESSAGES {
                    let text = batch.message(e).unwrap_or_default().to_owned();
                    self.out.texts.push((ns, text));
                }
            }
            EventKind::Counter => {
                let v = e.counter_value().unwrap_or(0.0) as f32;
                let c = match self.counters.iter_mut().position(|c| c.id == e.id) {
                    Some(i) => &mut self.counters[i],
                    None => {
                        self.counters.push(CounterOut {
                            id: e.id,
                            ranges: vec![Range::default(); w.px as usize],
                        });
                        self.counters.last_mut().expect("pushed")
                    }
                };
                c.ranges[p] = c.ranges[p].with(v);
            }
            EventKind::Sample => {
                let (tid, _) = e.sample().unwrap_or_default();
                self.samples
                    .entry(tid)
                    .or_insert_with(|| vec![0; w.px as usize])[p] += 1;
            }
            // Losses come from the index (each is kept there).
            // Futures' and spans' lives are not drawn yet (their polls and entries are).
            EventKind::Lost | EventKind::Begin | EventKind::End | EventKind::Async => {}
        }
    }
}
