//! Reports: the exit summary (text or JSON), [`report`](crate::report()) on demand, and the
//! per-thread interval lines.
//!
//! Everything here runs off the measured threads: at exit (from `atexit`), on demand, or on
//! the reporter thread. A [`Snapshot`] reads every live thread's slots (relaxed loads) and the
//! retired totals under the registry lock; rendering is a pure function of the snapshot and a
//! [`Context`] (wall time, clock rate, overhead), which is what the golden tests feed.

pub(crate) mod format;
pub(crate) mod interval;
pub(crate) mod json;
pub(crate) mod text;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

use crate::config::{Output, Settings, SummaryFormat};
use crate::scope::callsite::{self, CallsiteInfo, Kind};
use crate::scope::registry::{self, ThreadSnapshot};
use crate::scope::thread::Row;
use crate::scope::wall::{self, WallRow};

/// One row of the summary: a call site (or group) and its merged statistics.
#[derive(Clone)]
pub(crate) struct Entry {
    pub info: CallsiteInfo,
    pub row: Row,
    /// A span's or future's wall time (whole-process rows only): the row's calls are then
    /// its entries or polls, its total the busy time.
    pub wall: Option<WallRow>,
}

/// Everything a report shows, read at one moment.
pub(crate) struct Snapshot {
    /// Sorted by total (inclusive) time, largest first; ties by name.
    pub entries: Vec<Entry>,
    /// Per-thread breakdown (only when asked for), live threads first.
    pub threads: Vec<(ThreadSnapshot, Vec<Entry>)>,
    pub live_threads: u64,
    pub exited_threads: u64,
    /// Scopes open right now, not yet counted anywhere.
    pub open_now: u64,
    pub unfinished_at_thread_exit: u64,
    pub lost_too_deep: u64,
    /// Scopes abandoned because an enclosing scope's guard was dropped first.
    pub unbalanced: u64,
    pub lost_after_thread_exit: u64,
    /// Events the timeline capture lost (memory budget spent, sink, after thread exit), this one or
    /// the last: the footer speaks of everything tickscope lost.
    pub capture_lost: u64,
    /// `tracing` span exits on a thread where the span was not entered (nothing recorded).
    pub foreign_exits: u64,
    /// Scopes count their allocations (`tickscope::alloc::Profiled` is the global allocator):
    /// the rows' `heap` figures mean something.
    pub allocs_counted: bool,
    /// Allocations inside scopes that found no room for their counts.
    pub allocs_uncounted: u64,
}

/// The context a snapshot is rendered in.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    /// The process's wall time so far, ns.
    pub wall_ns: u64,
    /// Ticks per second.
    pub rate: f64,
    pub clock: &'static str,
    /// Measured cost of one scope (enter + exit), ns.
    pub overhead_ns: f64,
    /// Clock errors found by `Timer`s (scope clock errors are per row).
    pub timer_clock_errors: u64,
}

impl Context {
    /// The live context: process wall time, calibrated clock, measured overhead.
    pub(crate) fn now() -> Context {
        Context {
            wall_ns: crate::sys::clock::process_wall_ns(),
            rate: crate::clock::rate(),
            clock: crate::clock::source().name(),
            overhead_ns: overhead_ns(),
            timer_clock_errors: crate::clock::timer_clock_errors(),
        }
    }

    pub(crate) fn ns(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e9 / self.rate
    }
}

/// Reads every thread's statistics. With `wait`, gives up (returns `None`) if the locks stay
/// busy that long, so the exit path cannot deadlock.
pub(crate) fn collect(per_thread: bool, wait: Option<Duration>) -> Option<Snapshot> {
    let reg = match wait {
        Some(w) => registry::try_lock(w)?,
        None => registry::lock(),
    };
    let mut rows: BTreeMap<u32, Row> = reg.retired.clone();
    let mut threads = Vec::new();
    let mut lost_too_deep = reg.retired_lost_too_deep;
    let mut open_now = 0;
    let mut unbalanced = reg.retired_unbalanced;
    for t in &reg.live {
        let mut light = BTreeMap::new();
        let reading = t.pool.reading();
        t.for_each_slot(|id, slot| {
            let acc = rows.entry(id).or_insert_with(Row::empty);
            let row = Row::read_into(slot, &reading, acc);
            open_now += row.open;
            if per_thread {
                light.insert(id, row);
            }
        });
        lost_too_deep += t.lost_too_deep.load(Relaxed);
        unbalanced += t.unbalanced.load(Relaxed);
        if per_thread {
            threads.push(ThreadSnapshot {
                serial: t.serial.load(Relaxed),
                tid: t.tid.load(Relaxed),
                name: t.name(),
                alive: true,
                threads: 1,
                rows: light,
            });
        }
    }
    if per_thread {
        threads.extend(reg.retired_threads.iter().cloned());
        threads.sort_by_key(|t| (!t.alive, t.serial));
    }
    let (live_threads, exited_threads) = (reg.live.len() as u64, reg.retired_count);
    let unfinished_at_thread_exit = reg.unfinished_at_thread_exit;
    drop(reg);
    let walls: BTreeMap<u32, WallRow> = wall::snapshot(wait)?.into_iter().collect();
    for id in walls.keys() {
        rows.entry(*id).or_insert_with(Row::empty);
    }

    let table = match wait {
        Some(w) => callsite::try_table(w)?,
        None => callsite::table(),
    };
    let entries_of = |rows: &BTreeMap<u32, Row>, walls: Option<&BTreeMap<u32, WallRow>>| {
        let mut v: Vec<Entry> = rows
            .iter()
            .filter_map(|(&id, r)| {
                let wall = walls.and_then(|w| w.get(&id)).cloned();
                let used =
                    r.calls > 0 || r.open > 0 || wall.as_ref().is_some_and(|w| w.count() > 0);
                if !used {
                    return None;
                }
                Some(Entry {
                    info: table.get(id)?.clone(),
                    row: r.clone(),
                    wall,
                })
            })
            .collect();
        sort_entries(&mut v);
        v
    };
    let entries = entries_of(&rows, Some(&walls));
    let threads = threads.into_iter().map(|t| {
        let e = entries_of(&t.rows, None);
        (t, e)
    });
    Some(Snapshot {
        entries,
        threads: threads.collect(),
        live_threads,
        exited_threads,
        open_now,
        unfinished_at_thread_exit,
        lost_too_deep,
        unbalanced,
        lost_after_thread_exit: crate::scope::LOST_AFTER_THREAD_EXIT.load(Relaxed),
        capture_lost: capture_lost(),
        foreign_exits: foreign_exits(),
        allocs_counted: crate::state::counting_allocs(),
        allocs_uncounted: crate::scope::heap::uncounted(),
    })
}

/// What the running (or last) capture lost.
fn capture_lost() -> u64 {
    #[cfg(feature = "capture")]
    {
        let s = crate::capture::stats();
        s.dropped + s.undelivered + s.lost_after_exit
    }
    #[cfg(not(feature = "capture"))]
    0
}

/// `tracing` span exits that found their span entered on another thread.
fn foreign_exits() -> u64 {
    crate::scope::FOREIGN_SPAN_EXITS.load(std::sync::atomic::Ordering::Relaxed)
}

pub(crate) fn sort_entries(v: &mut [Entry]) {
    v.sort_by(|a, b| {
        b.row
            .incl
            .cmp(&a.row.incl)
            .then_with(|| a.info.name.cmp(b.info.name))
            .then_with(|| a.info.file.cmp(b.info.file))
            .then_with(|| a.info.line.cmp(&b.info.line))
    });
}

/// Renders a snapshot in `format` (`Off` renders nothing).
pub(crate) fn render(
    snap: &Snapshot,
    meta: &Context,
    format: SummaryFormat,
    per_thread: bool,
) -> String {
    match format {
        SummaryFormat::Off => String::new(),
        SummaryFormat::Text => text::render(snap, meta, per_thread),
        SummaryFormat::Json => json::render(snap, meta, per_thread),
    }
}

/// Writes `text` to the report file `path`: appended to (interval lines, one per interval),
/// never through a symbolic link at the name (`O_NOFOLLOW`); else replaced whole, as every
/// output is ([`crate::sys::output`]).
fn write_file(path: &std::path::Path, text: &str, append: bool) -> std::io::Result<()> {
    if append {
        use std::os::unix::fs::OpenOptionsExt;
        return std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
    }
    let mut out = crate::sys::output::OutputFile::create(path)?;
    out.file().write_all(text.as_bytes())?;
    out.commit()
}

/// Writes `text` to `out`. Never panics; a failure is one warning on stderr.
pub(crate) fn emit(out: &Output, text: &str, append: bool) {
    match out {
        Output::Stderr => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        Output::File(path) => {
            if let Err(e) = write_file(path, text, append) {
                crate::sys::stderr::warn(&format!(
                    "could not write the report to {}: {e}",
                    path.display()
                ));
            }
        }
        Output::Callback(f) => {
            let f = f.clone();
            let text = text.to_owned();
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&text))).is_err() {
                crate::sys::stderr::warn("the report callback panicked");
            }
        }
        #[cfg(feature = "log")]
        Output::Log => {
            for line in text.lines() {
                log::info!(target: "tickscope", "{line}");
            }
        }
    }
}

/// Prints a summary now, to the configured output (text if the exit summary is off).
pub(crate) fn report_now(s: &Settings) {
    let format = if s.summary == SummaryFormat::Off {
        SummaryFormat::Text
    } else {
        s.summary
    };
    let text = report_string(format, s.per_thread);
    emit(&s.summary_output, &text, shares_file_with_lines(s));
}

/// The summary as a string.
pub(crate) fn report_string(format: SummaryFormat, per_thread: bool) -> String {
    let snap = collect(per_thread, None).expect("collect without a deadline always returns");
    render(&snap, &Context::now(), format, per_thread)
}

static EXIT_DONE: AtomicBool = AtomicBool::new(false);

/// True if and only if interval lines go to the same file as the summary, which must then be
/// appended after them rather than replace them.
fn shares_file_with_lines(s: &Settings) -> bool {
    s.interval.is_some()
        && matches!((&s.summary_output, &s.line_output), (Output::File(a), Output::File(b)) if a == b)
}

/// True if and only if the process is exiting (the exit summary has started): the interval
/// reporter prints nothing more.
pub(crate) fn exiting() -> bool {
    EXIT_DONE.load(Relaxed)
}

/// The exit summary, printed once (the runtime's exit hook calls this, and never blocks for
/// long on a lock).
pub(crate) fn exit_summary(s: &Settings) {
    if EXIT_DONE.swap(true, Relaxed) || s.summary == SummaryFormat::Off {
        return;
    }
    let text = match collect(s.per_thread, Some(Duration::from_millis(500))) {
        Some(snap) => render(&snap, &Context::now(), s.summary, s.per_thread),
        None => "tickscope: exit summary skipped: a thread held the registry lock for 500 ms\n"
            .to_owned(),
    };
    emit(&s.summary_output, &text, shares_file_with_lines(s));
}

/// The measured cost of one scope (enter + exit) on this machine, in ns: the same recorder code
/// and clock as real scopes, on a private recorder that no report shows. Measured once.
pub(crate) fn overhead_ns() -> f64 {
    static OVERHEAD: OnceLock<f64> = OnceLock::new();
    *OVERHEAD.get_or_init(|| {
        use crate::clock::{Counter, CpuCounter, SystemCounter};
        static PROBE: callsite::Callsite = callsite::Callsite::new(
            callsite::Name::Static("tickscope overhead probe"),
            Kind::Scope,
            file!(),
            line!(),
            module_path!(),
        );
        // A private state, never registered, so no report shows the probe. Leaked once.
        let stats = crate::scope::thread::ThreadStats::leak();
        let stack = Box::new(crate::scope::thread::Stack::new());
        let slot = stats.slot(PROBE.id());
        let c = SystemCounter;
        const N: u64 = 20_000;
        let mut best = u64::MAX;
        // Where scopes count allocations, their marks too: above this thread's open scopes',
        // which stay as they are.
        let counting = crate::state::counting_allocs();
        // The path the program's scopes take now (see `imp::enter_cached`).
        let fast =
            crate::state::STATE.load(std::sync::atomic::Ordering::Relaxed) == crate::state::ON;
        use crate::scope::thread::{enter_fast, enter_slot, exit, exit_fast};
        let above = crate::scope::open_depth();
        for _ in 0..5 {
            let t0 = c.ticks();
            for _ in 0..N {
                // As the macros do: the slot found once (their per-call-site cache).
                let slot = std::hint::black_box(slot);
                let open = match fast {
                    true => enter_fast(&*stack, stats, slot, &CpuCounter),
                    false => enter_slot(&*stack, stats, slot, &c),
                };
                if let Some(o) = open {
                    let at = above + o.index();
                    let marked = counting && crate::scope::heap::begin(o.t0(), at);
                    match o.flags {
                        0 => exit_fast(&*stack, stats, &o, &CpuCounter),
                        _ => exit(&*stack, stats, &o, &c),
                    };
                    if marked {
                        crate::scope::heap::end_at(&o, at);
                    }
                }
            }
            best = best.min(c.ticks().wrapping_sub(t0));
        }
        best as f64 * 1e9 / crate::clock::rate() / N as f64
    })
}

#[cfg(test)]
mod tests;
