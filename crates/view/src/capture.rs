//! A capture being viewed: its bytes (a file, or what a live connection delivered), its
//! index (built by a thread of its own, or growing as a live capture arrives), its summary
//! (computed by another thread beside the index), and the answers built on them: windows of
//! the timeline, summaries of a range, the CPU samples of a range, a scope's details.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use tickscope_profile::{Profile, ValueType};
use tickscope_timeline::collect::{Collector, Options, Summary};
use tickscope_timeline::tscap::{self, ChunkKind, EventKind, Events, Reader};
use tickscope_timeline::TimeMap;

use crate::index::query::{Answer, Source, Window};
use crate::index::track::{Close, Out, Track};
use crate::index::{Budget, Index, Span};
use crate::Error;

mod ingest;
mod slowest;
pub use ingest::{Feed, LiveBudget};
pub use slowest::Call;

/// A live capture's bytes as they arrive: the file header and every complete chunk.
#[derive(Default)]
pub struct Memory {
    bytes: RwLock<Vec<u8>>,
}

impl Memory {
    fn append(&self, b: &[u8]) {
        self.bytes
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
    }

    fn len(&self) -> u64 {
        self.bytes.read().unwrap_or_else(|p| p.into_inner()).len() as u64
    }
}

impl Source for Memory {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let b = self.bytes.read().unwrap_or_else(|p| p.into_inner());
        let at = usize::try_from(offset).map_err(io::Error::other)?;
        match b.get(at..at + buf.len()) {
            Some(s) => {
                buf.copy_from_slice(s);
                Ok(())
            }
            None => Err(io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// Where a capture's building stands.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// Bytes indexed so far.
    pub read: u64,
    /// The capture's size (so far, for a live one).
    pub size: u64,
    /// Returns true if and only if the index is complete (for a live capture: the
    /// connection ended).
    pub done: bool,
    /// What the reader said: where a damaged or cut capture stopped, a missing end record.
    pub warnings: Vec<String>,
    /// Why the capture could not be indexed at all.
    pub error: Option<String>,
    /// Seconds the index took to build.
    pub seconds: Option<f64>,
}

/// The whole capture's summary, once computed.
enum SummaryState {
    Pending,
    Done(Arc<Summary>),
    Failed(String),
}

/// A capture being viewed.
pub struct Capture {
    /// Its name: the file's path, or the peer's address.
    pub name: String,
    /// Returns true if and only if it arrives over a connection.
    pub live: bool,
    source: Arc<dyn Source>,
    memory: Option<Arc<Memory>>,
    index: RwLock<Option<Index>>,
    status: Mutex<Status>,
    summary: Mutex<SummaryState>,
    read: AtomicU64,
    ended: AtomicBool,
    /// A live capture's share of the viewer's memory for live captures.
    budget: Option<Arc<LiveBudget>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Capture {
    /// Opens the capture file at `path`, checking its header and process record now, and
    /// starts the threads that index and summarise it.
    pub fn open_file(path: &Path) -> Result<Arc<Capture>, Error> {
        let name = path.display().to_string();
        let reader = Reader::open(path).map_err(|e| Error::capture(&e))?;
        drop(reader);
        let file = std::fs::File::open(path).map_err(|e| Error::io(&name, e))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let c = Arc::new(Capture {
            name,
            live: false,
            source: Arc::new(file),
            memory: None,
            index: RwLock::new(None),
            status: Mutex::new(Status {
                size,
                ..Status::default()
            }),
            summary: Mutex::new(SummaryState::Pending),
            read: AtomicU64::new(0),
            ended: AtomicBool::new(true),
            budget: None,
        });
        let (ci, cs) = (c.clone(), c.clone());
        let (pi, ps) = (path.to_owned(), path.to_owned());
        // The summary reads the file again beside the index; with fewer than three cores it
        // waits for the index, which the first picture needs (and the browser wants a core).
        let beside = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 3;
        let summarise = move || {
            let r = Reader::open(&ps)
                .map(|r| r.salvage(true))
                .and_then(|mut r| tickscope_timeline::summarize(&mut r, Options::default()))
                .map_err(|e| e.to_string());
            *lock(&cs.summary) = match r {
                Ok(s) => SummaryState::Done(Arc::new(bounded(s))),
                Err(e) => SummaryState::Failed(e),
            };
        };
        let summary_thread = |f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name("tickscope-summary".into())
                .spawn(f)
                .map(drop)
                .map_err(|e| Error::io("a thread", e))
        };
        if beside {
            summary_thread(Box::new(summarise))?;
            std::thread::Builder::new()
                .name("tickscope-index".into())
                .spawn(move || ci.build_from_file(&pi, size))
                .map_err(|e| Error::io("a thread", e))?;
        } else {
            std::thread::Builder::new()
                .name("tickscope-index".into())
                .spawn(move || {
                    ci.build_from_file(&pi, size);
                    summarise();
                })
                .map_err(|e| Error::io("a thread", e))?;
        }
        Ok(c)
    }

    fn build_from_file(&self, path: &Path, size: u64) {
        let start = Instant::now();
        // Times at the capture's last calibration, as `tickscope report` and the exports.
        let clock = tscap::last_clock(path);
        let mut reader = match Reader::open(path) {
            Ok(r) => r.salvage(true),
            Err(e) => {
                lock(&self.status).error = Some(e.to_string());
                return;
            }
        };
        let map = TimeMap::new(
            reader.process(),
            clock.unwrap_or_else(|| reader.meta().clock()),
        );
        let mut index = Index::new(&reader, map, Budget::for_capture(size));
        loop {
            match reader.next_chunk() {
                Ok(Some(kind)) => {
                    index.add_chunk(&mut reader, kind);
                    self.read.store(reader.offset(), Relaxed);
                }
                Ok(None) => break,
                Err(e) => {
                    // Salvage is on: only an I/O error ends here.
                    lock(&self.status).warnings.push(e.to_string());
                    break;
                }
            }
        }
        index.fit();
        index.flush();
        let mut st = lock(&self.status);
        st.warnings.extend(reader.warnings());
        st.read = reader.offset();
        st.done = true;
        st.seconds = Some(start.elapsed().as_secs_f64());
        *self.index.write().unwrap_or_else(|p| p.into_inner()) = Some(index);
    }

    /// Where the building stands.
    pub fn status(&self) -> Status {
        let mut st = lock(&self.status).clone();
        if !st.done {
            st.read = self.read.load(Relaxed);
        }
        if let Some(m) = &self.memory {
            st.size = m.len();
        }
        st
    }

    /// Runs `f` on the index once it has one (a file's once complete; a live capture's as it
    /// grows).
    pub fn with_index<T>(&self, f: impl FnOnce(&Index) -> T) -> Option<T> {
        let g = self.index.read().unwrap_or_else(|p| p.into_inner());
        g.as_ref().map(f)
    }

    /// The answer for window `w`.
    pub fn query(&self, w: Window) -> Option<io::Result<Answer>> {
        self.with_index(|i| i.query(&*self.source, w))
    }

    /// Futures' and spans' lives in window `w`, by call site (None until indexed).
    pub fn lives(&self, w: Window) -> Option<Vec<crate::index::lives::SiteLives>> {
        self.with_index(|i| i.lives(w))
    }

    /// The whole capture's summary: `None` while it is computed. A live capture's is
    /// computed from what arrived so far, each time.
    pub fn summary(&self) -> Option<Result<Arc<Summary>, String>> {
        if self.live {
            return self.range_summary(None).map(|r| r.map(Arc::new));
        }
        match &*lock(&self.summary) {
            SummaryState::Pending => None,
            SummaryState::Done(s) => Some(Ok(s.clone())),
            SummaryState::Failed(e) => Some(Err(e.clone())),
        }
    }

    /// The summary of the range `(from_ns, until_ns)` (the whole capture: `None`), as
    /// `tickscope report --from --until` computes it: the chunks that hold the range are
    /// read again.
    pub fn range_summary(&self, range: Option<(u64, u64)>) -> Option<Result<Summary, String>> {
        self.with_index(|idx| {
            let (lo, hi) = match range {
                Some((f, u)) => (idx.map.ticks(f), idx.map.ticks(u)),
                None => (0, u64::MAX),
            };
            // Each thread's chunks that overlap the range, and the one after them: its list
            // of the scopes open where it begins names those begun before the range and
            // still open after it, on a thread with no event in the range (crossing calls
            // that `report --from --until` counts, reading every chunk). The collector reads
            // that chunk's events no further than the first past the range.
            let mut spans: Vec<Span> = idx
                .threads
                .iter()
                .flat_map(|t| {
                    let first = t.chunks.partition_point(|c| c.last < lo);
                    let after = first + t.chunks[first..].partition_point(|c| c.first <= hi);
                    t.chunks[first..(after + 1).min(t.chunks.len())]
                        .iter()
                        .map(|c| c.span)
                })
                .collect();
            spans.sort_by_key(|s| s.offset);
            spans.extend(idx.end_chunk);
            let mut c = Collector::new(Options {
                per_thread: false,
                range: range.map(|_| (lo, hi)),
            });
            let mut reader = self.reader(idx, &spans).map_err(|e| e.to_string())?;
            let mut events = Events::new();
            while let Some(kind) = reader.next_chunk().map_err(|e| e.to_string())? {
                if kind == ChunkKind::Events {
                    c.chunk(reader.events_info());
                    while reader.decode(&mut events) {
                        c.add(&events);
                    }
                }
            }
            let mut s = c.finish(&self.name, &idx.process, &idx.meta, reader.end());
            s.warnings = lock(&self.status).warnings.clone();
            Ok(bounded(s))
        })
    }

    /// A reader over the file header, the process record and the chunks `spans`.
    fn reader(&self, idx: &Index, spans: &[Span]) -> io::Result<Reader<io::Cursor<Vec<u8>>>> {
        let mut bytes = vec![0; tscap::HEADER_LEN];
        self.source.read_at(0, &mut bytes)?;
        for s in std::iter::once(&idx.process_chunk).chain(spans) {
            let at = bytes.len();
            let len = usize::try_from(s.len).map_err(io::Error::other)?;
            bytes.resize(at + len, 0);
            self.source.read_at(s.offset, &mut bytes[at..])?;
        }
        Reader::new(io::Cursor::new(bytes), self.name.clone()).map_err(io::Error::other)
    }

    /// The CPU samples the capture holds in `(from_ns, until_ns)`, of the threads
    /// `threads` (OS ids; all when empty), as a profile the profile views read
    /// (`samples`/`count`, stacks from the capture's stack definitions).
    pub fn samples(
        &self,
        from_ns: u64,
        until_ns: u64,
        threads: &[u64],
    ) -> Option<io::Result<Profile>> {
        self.with_index(|idx| {
            let (lo, hi) = (idx.map.ticks(from_ns), idx.map.ticks(until_ns));
            // Samples are recorded by the sampler's own thread.
            let mut spans = Vec::new();
            for t in &idx.threads {
                if idx.meta.thread_name(t.index) != "tickscope-sampler" {
                    continue;
                }
                let first = t.chunks.partition_point(|c| c.last < lo);
                spans.extend(
                    t.chunks[first..]
                        .iter()
                        .take_while(|c| c.first <= hi)
                        .map(|c| c.span),
                );
            }
            let mut counts: std::collections::HashMap<u64, i64> = Default::default();
            let mut reader = self.reader(idx, &spans)?;
            let mut events = Events::new();
            while let Some(kind) = reader.next_chunk().map_err(io::Error::other)? {
                if kind != ChunkKind::Events {
                    continue;
                }
                while reader.decode(&mut events) {
                    for e in events.as_slice() {
                        if e.kind != EventKind::Sample || e.ticks < lo || e.ticks > hi {
                            continue;
                        }
                        let (tid, stack) = e.sample().unwrap_or_default();
                        if threads.is_empty() || threads.contains(&tid) {
                            *counts.entry(stack).or_default() += 1;
                        }
                    }
                }
            }
            Ok(stacks_profile(idx, &counts))
        })
    }

    /// The scope of thread `thread` (its index) at depth `depth` around `at_ns`, with its
    /// children: `None` when there is none there.
    pub fn scope_at(
        &self,
        thread: u64,
        depth: usize,
        at_ns: u64,
    ) -> Option<io::Result<Option<Details>>> {
        self.with_index(|idx| {
            let th = idx.position(thread).map(|p| &idx.threads[p])?;
            let at = idx.map.ticks(at_ns);
            // A long scope the index holds, or an open one.
            let mut found: Option<(u64, u64, u64, Close)> = th.rows.get(depth).and_then(|r| {
                let i = r.long.partition_point(|s| s.end < at);
                r.long
                    .get(i)
                    .filter(|s| s.begin <= at)
                    .map(|s| (s.id, s.begin, s.end, s.close))
            });
            if found.is_none() {
                if let Some(&(id, b)) = th.track.stack.get(depth) {
                    if b <= at {
                        found = Some((id, b, th.track.last, Close::Open));
                    }
                }
            }
            // Otherwise decode the chunks around `at` (a scope shorter than a bin).
            let (lo, hi) = match found {
                Some((_, b, e, _)) => (b, e),
                None => (at.saturating_sub(idx.bin_ticks()), at + idx.bin_ticks()),
            };
            let first = th.chunks.partition_point(|c| c.last < lo);
            let spans: Vec<Span> = th.chunks[first..]
                .iter()
                .take_while(|c| c.first <= hi)
                .map(|c| c.span)
                .collect();
            let mut finder = Find {
                depth,
                at,
                target: found,
                children: Vec::new(),
            };
            // A scope spanning more chunks than this gets its children's time from the
            // index's bins (exact to a bin) rather than by decoding it all again.
            let decode = spans.len() <= MAX_DETAIL_CHUNKS;
            if decode {
                let result = (|| -> io::Result<()> {
                    let mut reader = self.reader(idx, &spans)?;
                    let mut track = Track::default();
                    let mut events = Events::new();
                    while let Some(kind) = reader.next_chunk().map_err(io::Error::other)? {
                        if kind == ChunkKind::Events {
                            track.chunk(reader.events_info(), &mut finder);
                            while reader.decode(&mut events) {
                                track.events(&events, &mut finder);
                            }
                        }
                    }
                    Ok(())
                })();
                if let Err(e) = result {
                    return Some(Err(e));
                }
            }
            let (id, b, e, close) = finder.target?;
            finder.children.retain(|c| c.1 >= b && c.2 <= e);
            let map = &idx.map;
            let ns = |t: u64| map.ns(t);
            let mut by_id: Vec<(u64, u64, u64)> = Vec::new(); // (id, calls, ns)
            let child_ns: u64 = if decode {
                for &(cid, cb, ce) in &finder.children {
                    match by_id.iter_mut().find(|x| x.0 == cid) {
                        Some(x) => {
                            x.1 += 1;
                            x.2 += ns(ce) - ns(cb);
                        }
                        None => by_id.push((cid, 1, ns(ce) - ns(cb))),
                    }
                }
                by_id.iter().map(|x| x.2).sum()
            } else {
                let busy = th.rows.get(depth + 1).map_or(0, |r| {
                    let (_, bins) = r.busy.window(idx.bin(b), idx.bin(e) + 1);
                    bins.iter().map(|&v| v as u64).sum::<u64>()
                });
                (busy as f64 * idx.bin_ns() / crate::index::series::FULL as f64) as u64
            };
            by_id.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
            let (begin_ns, end_ns) = (ns(b), ns(e));
            Some(Ok(Some(Details {
                thread,
                depth,
                id,
                begin_ns,
                end_ns,
                self_ns: (end_ns - begin_ns).saturating_sub(child_ns),
                exact: decode,
                close,
                children: by_id,
            })))
        })
        .map(|o| o.unwrap_or(Ok(None)))
    }
}

/// `s` with each of its lists cut to [`crate::ANSWER_ROWS`] rows (the scopes are largest
/// total first: the rows cut are the smallest), each cut said in a warning.
fn bounded(mut s: Summary) -> Summary {
    let rows = crate::ANSWER_ROWS;
    let mut said = Vec::new();
    let mut cut = |what: &str, n: usize| {
        if n > rows {
            said.push(format!(
                "{} {what} more not listed here (the viewer lists {rows}; `tickscope report` lists all)",
                n - rows
            ));
        }
    };
    cut("scopes, of the smallest total time,", s.scopes.len());
    cut("threads", s.threads.len());
    cut("frame markers", s.frames.len());
    cut("counters", s.counters.len());
    s.scopes.truncate(rows);
    s.threads.truncate(rows);
    s.frames.truncate(rows);
    s.counters.truncate(rows);
    s.warnings.truncate(rows);
    s.warnings.extend(said);
    s
}

/// The most chunks [`Capture::scope_at`] decodes for one scope's children.
const MAX_DETAIL_CHUNKS: usize = 64;

/// A scope's details.
#[derive(Clone, Debug, PartialEq)]
pub struct Details {
    /// Its thread's index.
    pub thread: u64,
    /// Its depth.
    pub depth: usize,
    /// Its scope id.
    pub id: u64,
    /// Begin, ns from the capture's start.
    pub begin_ns: u64,
    /// End.
    pub end_ns: u64,
    /// Time not in its child scopes.
    pub self_ns: u64,
    /// Returns true if and only if its children were read one by one (else `children` is
    /// empty and `self_ns` exact to a bin of the index).
    pub exact: bool,
    /// How it ended.
    pub close: Close,
    /// Its child scopes by scope id: (id, calls, total ns), largest first.
    pub children: Vec<(u64, u64, u64)>,
}

/// Finds the scope at a depth and time, and its direct children.
struct Find {
    depth: usize,
    at: u64,
    /// (id, begin, end, close), once known.
    target: Option<(u64, u64, u64, Close)>,
    /// Direct children: (id, begin, end).
    children: Vec<(u64, u64, u64)>,
}

impl Out for Find {
    fn slice(&mut self, depth: usize, id: u64, begin: u64, end: u64, close: Close) {
        if depth == self.depth && begin <= self.at && end >= self.at {
            // The same scope as the index's, or the one narrower than a bin found here.
            if self.target.is_none_or(|t| t.1 == begin) {
                self.target = Some((id, begin, end, close));
            }
        } else if depth == self.depth + 1 {
            self.children.push((id, begin, end));
        }
    }

    fn point(&mut self, _: &Events, _: &tscap::Event, _: u64) {}
}

/// A profile of CPU samples: `counts` by stack id, stacks from the capture's definitions
/// (leaf first).
fn stacks_profile(idx: &Index, counts: &std::collections::HashMap<u64, i64>) -> Profile {
    let mut p = Profile::default();
    p.sample_types = vec![ValueType::new("samples", "count")];
    let mut functions: std::collections::HashMap<String, u32> = Default::default();
    let mut ids: Vec<&u64> = counts.keys().collect();
    ids.sort();
    for id in ids {
        let frames = idx.meta.stack(*id).unwrap_or(&[]);
        let mut locs = Vec::with_capacity(frames.len());
        for name in frames {
            let f = match functions.get(name) {
                Some(&f) => f,
                None => {
                    let fid = p.functions.len() as u64 + 1;
                    let f = p.push_function(fid, name, "", "", 0);
                    functions.insert(name.clone(), f);
                    f
                }
            };
            let lid = p.locations.len() as u64 + 1;
            locs.push(p.push_location(
                lid,
                None,
                0,
                &[tickscope_profile::Line {
                    function: f,
                    line: 0,
                }],
                false,
            ));
        }
        p.push_sample(locs.iter().copied(), &[counts[id]], &[]);
    }
    p
}
