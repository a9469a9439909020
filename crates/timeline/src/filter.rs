//! What an export keeps: a time window, some threads, scopes of at least some length
//! (`tickscope convert --from --until --thread --min-duration`).
//!
//! [`Filtered`] sits between the replay and an export's [`Sink`]: the export sees only what
//! passes, in the order the replay gave it, with every kept scope whole and properly nested.
//! A scope is kept if it overlaps the window and its part inside the window lasts at least the
//! minimum; it is then cut to the window (a scope that began before the window begins at its
//! start; one still open at its end ends there, marked `clipped`). Frame marks, messages,
//! losses and counter values are kept inside the window. Threads not asked for are not
//! replayed at all (their chunks are not decoded).
//!
//! A scope's fate is known at its end, or earlier, as soon as the thread's time passes its
//! (clipped) begin by the minimum. Until then the events after its begin wait in a queue, so
//! that the export still receives them in order: the queue holds at most the events of one
//! minimum duration of the thread's time. Before the window nothing is queued (only the
//! open scopes are followed, to begin at the window's start those still open there).

use std::collections::{HashMap, VecDeque};
use std::io;

use super::sink::{Close, Instant, Sink};
use crate::tscap::{AsyncWhat, Meta};

/// What an export keeps. The default keeps everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The window's start, in ns since the capture's start.
    pub from_ns: u64,
    /// The window's end (`u64::MAX`: the capture's end).
    pub until_ns: u64,
    /// Threads to keep, by name or OS thread id (empty: every thread).
    pub threads: Vec<String>,
    /// Scopes shorter than this (inside the window) are left out, and counted.
    pub min_duration_ns: u64,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter {
            from_ns: 0,
            until_ns: u64::MAX,
            threads: Vec::new(),
            min_duration_ns: 0,
        }
    }
}

impl Filter {
    /// True if and only if it keeps everything.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }

    /// True if it cuts time or scopes (not only threads): the replay then goes through
    /// [`Filtered`].
    pub(crate) fn cuts_events(&self) -> bool {
        self.from_ns > 0 || self.until_ns != u64::MAX || self.min_duration_ns > 0
    }

    /// True if thread `index` is kept.
    pub(crate) fn keeps_thread(&self, meta: &Meta, index: u64) -> bool {
        if self.threads.is_empty() {
            return true;
        }
        let name = meta.thread_name(index);
        let tid = meta.thread(index).map(|d| d.tid.to_string());
        self.threads
            .iter()
            .any(|t| *t == name || tid.as_deref() == Some(t.as_str()))
    }
}

impl Filter {
    /// True if the samples of the thread with OS id `tid` are kept.
    pub(crate) fn keeps_tid(&self, meta: &Meta, tid: u64) -> bool {
        if self.threads.is_empty() {
            return true;
        }
        match meta.thread_by_tid(tid) {
            Some(index) => self.keeps_thread(meta, index),
            None => self.threads.iter().any(|t| *t == tid.to_string()),
        }
    }
}

/// What a filter left out that a reader of the export should know of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Scopes inside the window shorter than the minimum duration.
    pub short_scopes: u64,
    /// Threads the export kept (with `--thread`, none means no thread matched).
    pub threads_kept: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Undecided,
    Kept,
    Dropped,
}

struct Scope {
    id: u64,
    /// Its begin, cut to the window.
    begin: u64,
    fate: Fate,
    /// Began before the window and still open at its start: not yet queued.
    before: bool,
}

enum Item {
    /// The scope at this stack slot (its `Scope` in `Thread::scopes`, by serial).
    Begin(u64),
    End {
        serial: u64,
        end: u64,
        how: Close,
    },
    Frame(u64, u64),
    Message(u64, String),
    Lost(u64, u64),
    Counter(u64, u64, f64),
    Async(u64, u64, u64, AsyncWhat),
}

#[derive(Default)]
struct Thread {
    /// Open scopes, outermost first, each with its serial.
    open: Vec<(u64, Scope)>,
    /// Scopes closed but still referenced by queued items, by serial.
    closed: HashMap<u64, Scope>,
    queue: VecDeque<Item>,
    next_serial: u64,
    /// The thread's time has reached the window.
    in_window: bool,
}

impl Thread {
    fn scope(&self, serial: u64) -> Option<&Scope> {
        match self.closed.get(&serial) {
            Some(s) => Some(s),
            None => self
                .open
                .iter()
                .rev()
                .find(|(s, _)| *s == serial)
                .map(|(_, s)| s),
        }
    }
}

/// An export's sink behind a [`Filter`].
pub(crate) struct Filtered<'a, S> {
    pub(crate) inner: &'a mut S,
    filter: &'a Filter,
    threads: Vec<(u64, Thread)>,
    /// Thread index to its place in `threads`.
    places: HashMap<u64, usize>,
    pub(crate) left_out: LeftOut,
}

impl<'a, S: Sink> Filtered<'a, S> {
    pub(crate) fn new(inner: &'a mut S, filter: &'a Filter) -> Self {
        Filtered {
            inner,
            filter,
            threads: Vec::new(),
            places: HashMap::new(),
            left_out: LeftOut::default(),
        }
    }

    fn thread(&mut self, index: u64) -> usize {
        let n = self.threads.len();
        let k = *self.places.entry(index).or_insert(n);
        if k == n {
            self.threads.push((index, Thread::default()));
        }
        k
    }

    /// The thread's time is now `t`: decides what it can, queues nothing.
    fn advance(&mut self, k: usize, t: u64) {
        let f = self.filter;
        let th = &mut self.threads[k].1;
        if !th.in_window && t >= f.from_ns {
            th.in_window = true;
            // The scopes still open at the window's start begin there.
            for (serial, s) in th.open.iter_mut() {
                if s.before && s.fate == Fate::Undecided {
                    s.before = false;
                    s.begin = f.from_ns;
                    th.queue.push_back(Item::Begin(*serial));
                }
            }
        }
        if !th.in_window {
            return;
        }
        let now = t.min(f.until_ns);
        for (_, s) in th.open.iter_mut() {
            if s.fate == Fate::Undecided && now.saturating_sub(s.begin) >= f.min_duration_ns {
                s.fate = Fate::Kept;
            }
        }
    }

    /// Forwards the queue's decided front.
    fn flush(&mut self, meta: &Meta, k: usize) -> io::Result<()> {
        let index = self.threads[k].0;
        loop {
            let th = &mut self.threads[k].1;
            let Some(front) = th.queue.front() else {
                break;
            };
            match front {
                Item::Begin(serial) => {
                    let s = th.scope(*serial).expect("a queued scope is known");
                    match s.fate {
                        Fate::Undecided => break,
                        Fate::Kept => {
                            let (id, begin) = (s.id, s.begin);
                            self.inner.begin(meta, index, id, begin)?;
                        }
                        Fate::Dropped => {}
                    }
                }
                Item::End { serial, end, how } => {
                    let s = th.scope(*serial).expect("a queued scope is known");
                    if s.fate == Fate::Kept {
                        let (id, begin, end, how) = (s.id, s.begin, *end, *how);
                        self.inner.end(meta, index, id, begin, end, how)?;
                    }
                    let serial = *serial;
                    th.closed.remove(&serial);
                }
                Item::Frame(ns, id) => self.inner.instant(meta, index, *ns, Instant::Frame(*id))?,
                Item::Message(ns, text) => {
                    self.inner
                        .instant(meta, index, *ns, Instant::Message(text))?
                }
                Item::Lost(ns, n) => self.inner.instant(meta, index, *ns, Instant::Lost(*n))?,
                Item::Counter(ns, id, v) => self.inner.counter(meta, index, *id, *ns, *v)?,
                Item::Async(ns, id, aid, what) => {
                    let a = Instant::Async(*id, *aid, *what);
                    self.inner.instant(meta, index, *ns, a)?
                }
            }
            self.threads[k].1.queue.pop_front();
        }
        Ok(())
    }

    /// An item inside the window: straight to the export when nothing waits before it.
    fn item(&mut self, meta: &Meta, k: usize, item: Item) -> io::Result<()> {
        self.threads[k].1.queue.push_back(item);
        self.flush(meta, k)
    }
}

impl<S: Sink> Sink for Filtered<'_, S> {
    fn thread(&mut self, meta: &Meta, thread: u64) -> io::Result<()> {
        self.inner.thread(meta, thread)
    }

    fn begin(&mut self, meta: &Meta, thread: u64, id: u64, ns: u64) -> io::Result<()> {
        let k = self.thread(thread);
        self.advance(k, ns);
        let f = self.filter;
        let th = &mut self.threads[k].1;
        let serial = th.next_serial;
        th.next_serial += 1;
        let (fate, before) = if ns > f.until_ns {
            (Fate::Dropped, false)
        } else {
            (Fate::Undecided, !th.in_window)
        };
        th.open.push((
            serial,
            Scope {
                id,
                begin: ns.max(f.from_ns),
                fate,
                before,
            },
        ));
        if fate == Fate::Undecided && !before {
            if f.min_duration_ns == 0 {
                th.open.last_mut().expect("pushed").1.fate = Fate::Kept;
            }
            return self.item(meta, k, Item::Begin(serial));
        }
        Ok(())
    }

    fn end(
        &mut self,
        meta: &Meta,
        thread: u64,
        _id: u64,
        _begin: u64,
        end: u64,
        how: Close,
    ) -> io::Result<()> {
        let k = self.thread(thread);
        self.advance(k, end);
        let f = self.filter;
        let th = &mut self.threads[k].1;
        // The replay ends scopes innermost first: this is the top of the stack.
        let Some((serial, mut s)) = th.open.pop() else {
            return Ok(());
        };
        if s.before || s.fate == Fate::Dropped {
            // Ended before the window, or began after it: outside, not a loss.
            return Ok(());
        }
        let clipped = end > f.until_ns;
        let end = end.min(f.until_ns);
        if s.fate == Fate::Undecided {
            if end.saturating_sub(s.begin) >= f.min_duration_ns {
                s.fate = Fate::Kept;
            } else {
                s.fate = Fate::Dropped;
                self.left_out.short_scopes += 1;
            }
        }
        // Past the window's end it ends there, whatever ended it later.
        let how = if clipped { Close::Clipped } else { how };
        th.closed.insert(serial, s);
        self.item(meta, k, Item::End { serial, end, how })
    }

    fn instant(&mut self, meta: &Meta, thread: u64, ns: u64, what: Instant<'_>) -> io::Result<()> {
        let k = self.thread(thread);
        self.advance(k, ns);
        if ns < self.filter.from_ns || ns > self.filter.until_ns {
            return Ok(());
        }
        let item = match what {
            Instant::Frame(id) => Item::Frame(ns, id),
            Instant::Message(text) => Item::Message(ns, text.to_owned()),
            Instant::Lost(n) => Item::Lost(ns, n),
            Instant::Async(id, aid, what) => Item::Async(ns, id, aid, what),
        };
        self.item(meta, k, item)
    }

    fn sample(
        &mut self,
        meta: &Meta,
        recorder: u64,
        ns: u64,
        tid: u64,
        stack: u64,
    ) -> io::Result<()> {
        // Not queued: samples go to their own sequence (see `perfetto`), in their own order.
        if ns < self.filter.from_ns || ns > self.filter.until_ns {
            return Ok(());
        }
        self.inner.sample(meta, recorder, ns, tid, stack)
    }

    fn finish(&mut self, meta: &Meta, ns: u64) -> io::Result<()> {
        self.inner.finish(meta, ns.min(self.filter.until_ns))
    }

    fn counter(
        &mut self,
        meta: &Meta,
        thread: u64,
        id: u64,
        ns: u64,
        value: f64,
    ) -> io::Result<()> {
        let k = self.thread(thread);
        self.advance(k, ns);
        if ns < self.filter.from_ns || ns > self.filter.until_ns {
            return Ok(());
        }
        self.item(meta, k, Item::Counter(ns, id, value))
    }
}
