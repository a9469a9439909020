//! Timeline capture: every scope begin and end, frame mark, counter value and message, with
//! its timestamp, streamed to a file, a TCP listener or an in-memory flight recorder.
//!
//! Turn it on with [`start`] (or [`Builder`]), or with no code change at all through the
//! environment: `TICKSCOPE_CAPTURE=run.tscap`, `TICKSCOPE_CAPTURE=tcp://127.0.0.1:7878`
//! (connects to `tickscope capture listen`), or `TICKSCOPE_CAPTURE=flight:10s:crash.tscap`
//! (keep the last 10 s in memory, dump them on panic or on [`dump`]). The same
//! [`scope!`](crate::scope) macros then also record their begin and end; [`frame!`](crate::frame),
//! [`plot!`](crate::plot) and [`message!`](crate::message) add frame marks, counters and
//! messages. With the CPU [sampler](crate::sampler) running too, every sample it takes
//! during the capture is recorded with its time, thread and stack. `tickscope report run.tscap` prints the exit-summary table computed from the
//! timeline; `tickscope convert run.tscap --to chrome|perfetto|speedscope|folded` exports it.
//!
//! ```no_run
//! let capture = tickscope::capture::start(tickscope::capture::Sink::File("run.tscap".into()))?;
//! for frame in 0..100 {
//!     tickscope::scope!("update");
//!     tickscope::plot!("entities", frame as f64 * 1.5);
//!     tickscope::frame!();
//! }
//! tickscope::message!("done after {} frames", 100);
//! // As the sampler's: stop() returns the figures; dropping the handle stops it too.
//! let stats = capture.stop().expect("capture was running");
//! assert_eq!(stats.dropped, 0);
//! # Ok::<(), tickscope::capture::Error>(())
//! ```
//!
//! # How
//! Each thread writes fixed 16-byte records into its own chain of blocks (`ring`: two
//! relaxed stores and a release store per event, no lock, no shared write; a new block every
//! 2,048 records). One collector thread drains them every millisecond, delta-encodes the
//! timestamps, compresses chunks with LZ4 and hands them to the sink. A thread never waits
//! for the collector: when the collector falls behind (a machine with no core to spare),
//! the blocks grow, up to the capture's memory budget ([`Builder::memory`],
//! `TICKSCOPE_CAPTURE_MEMORY`, 256 MiB by default). Past the budget an event is dropped and
//! counted ([`Full::Drop`], the default) or the thread waits ([`Full::Block`]). A scope is
//! dropped whole, its begin and its end, never half: the timeline never pairs a begin with
//! another call's end. Scopes already open when the capture starts are counted by call site
//! (their calls are not in the timeline).
//! A sink that cannot keep up (a slow or vanished TCP listener) never blocks the collector:
//! what it cannot take is counted as undelivered and announced in the stream. Every loss is
//! in the file's end record, in [`stats`], and printed to stderr at the end.
//!
//! A child created by `fork` while a capture runs does not record (it has no collector, and
//! the capture is the parent's): its scopes cost what they cost without a capture, it never
//! writes to the parent's file, and at its exit it says in one line that it was not
//! captured.
//!
//! The byte layout is specified in its `format` module.

pub mod format;

mod allocs;
mod builder;
pub use builder::Builder;
mod collector;
mod marker;
#[cfg(feature = "sampler")]
pub(crate) use marker::heap_in_use;
pub use marker::{frame, message, plot, Marker};
use marker::{heap_at_start, markers};
#[allow(unsafe_code)] // blocks allocated, linked and freed by hand (each block is a raw allocation)
mod ring;
mod sink;
mod stats;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub use ring::Full;
use stats::{err, STATS};
pub use stats::{Error, ErrorKind, Stats};

/// Where a capture goes.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Sink {
    /// A `.tscap` file, created (or truncated) at start.
    File(PathBuf),
    /// A TCP connection to `host:port` where `tickscope capture listen` waits.
    Tcp(String),
    /// Memory: the last `window` of events (at most `max_bytes` of chunks), written out by
    /// [`dump`], and to `dump_on_panic` when a thread panics.
    FlightRecorder {
        /// How much history to keep.
        window: Duration,
        /// A bound on the memory the recorder holds, whatever the window.
        max_bytes: usize,
        /// Where to write the recording when a thread panics.
        dump_on_panic: Option<PathBuf>,
    },
}

impl Sink {
    /// Parses a sink as `TICKSCOPE_CAPTURE` takes it: `PATH`, `tcp://HOST:PORT`, or
    /// `flight:DURATION[:PATH]` (a flight recorder of that window, 64 MiB at most, dumped to
    /// PATH on panic). `None` if malformed.
    pub fn parse(s: &str) -> Option<Sink> {
        if let Some(addr) = s.strip_prefix("tcp://") {
            return (!addr.is_empty()).then(|| Sink::Tcp(addr.to_owned()));
        }
        if let Some(rest) = s.strip_prefix("flight:") {
            let (window, path) = match rest.split_once(':') {
                Some((w, p)) => (w, Some(PathBuf::from(p))),
                None => (rest, None),
            };
            return Some(Sink::FlightRecorder {
                window: crate::config::parse_duration(window)?,
                max_bytes: 64 << 20,
                dump_on_panic: path,
            });
        }
        (!s.is_empty()).then(|| Sink::File(PathBuf::from(s)))
    }

    fn describe(&self) -> String {
        match self {
            Sink::File(p) => p.display().to_string(),
            Sink::Tcp(a) => format!("tcp://{a}"),
            Sink::FlightRecorder { window, .. } => format!("flight recorder ({window:?})"),
        }
    }
}

static RUNNING: AtomicBool = AtomicBool::new(false);
/// The process whose collector thread runs the capture (0: none yet). A fork child
/// inherits the state but not the thread.
static OWNER: AtomicU32 = AtomicU32::new(0);
/// In a fork child of a capturing process: the capture stopped at the fork.
static STOPPED_BY_FORK: AtomicBool = AtomicBool::new(false);

/// In the child of a `fork`, before `fork` returns there (async-signal-safe: atomic stores
/// only). The child has no collector: recording into its rings would only fill them, and
/// its events are not the parent's capture. So recording stops; scopes cost what they cost
/// without a capture. The child says so at its exit (see [`on_process_exit`]).
extern "C" fn on_fork_child() {
    if RUNNING.swap(false, Relaxed) {
        crate::state::set_capture(false);
        STOPPED_BY_FORK.store(true, Relaxed);
    }
}

/// True if and only if the capture state belongs to this process (not inherited across
/// `fork` from a parent whose collector thread does not exist here).
fn owned_here() -> bool {
    OWNER.load(Relaxed) == std::process::id()
}

/// True if and only if a capture is running.
pub fn running() -> bool {
    RUNNING.load(Relaxed)
}

/// Requests to the collector thread.
#[derive(Default)]
struct Control {
    stop: bool,
    dump: Option<PathBuf>,
    /// The answer to the last dump request.
    dumped: Option<Result<u64, Error>>,
    done: bool,
    started: Option<Instant>,
}

static CONTROL: Mutex<Control> = Mutex::new(Control {
    stop: false,
    dump: None,
    dumped: None,
    done: true,
    started: None,
});
static CONTROL_CV: Condvar = Condvar::new();
static COLLECTOR: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);

fn control() -> std::sync::MutexGuard<'static, Control> {
    CONTROL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts capturing to `sink` with the default settings ([`Builder`] for others).
///
/// ```no_run
/// use tickscope::capture::{self, Sink};
/// let capture = capture::start(Sink::File("run.tscap".into()))?; // tickscope view run.tscap
/// for _ in 0..10 {
///     tickscope::scope!("step");
///     tickscope::frame!();
/// }
/// let stats = capture.stop().expect("the capture was running");
/// assert_eq!(stats.dropped, 0);
/// # Ok::<(), capture::Error>(())
/// ```
pub fn start(sink: Sink) -> Result<Capture, Error> {
    Builder::new(sink).start()
}

/// A running capture, from [`Builder::start`] or [`start`]: the same shape as the sampler's
/// ([`Sampler`](crate::sampler::Sampler)). [`Capture::stop`] ends it and returns its figures;
/// dropping the handle stops it the same way (every ring drained, the end record written,
/// the sink closed) and discards the figures. A capture is process-wide: one at a time.
#[must_use = "dropping the handle stops the capture"]
#[derive(Debug)]
pub struct Capture {
    /// Which capture of the process this is: a handle never stops a later one (after
    /// [`stop`] ended its own).
    generation: u64,
}

/// Captures started so far in this process.
static GENERATION: AtomicU64 = AtomicU64::new(0);

impl Capture {
    /// Settings for a capture to `sink` ([`Builder::new`]).
    pub fn builder(sink: Sink) -> Builder {
        Builder::new(sink)
    }

    /// Stops the capture: drains every ring, writes the end record, closes the sink (waiting
    /// up to 2 s for a TCP listener to take what is queued). Returns the capture's figures;
    /// `None` in a fork child (the capture is the parent's, stopped in the child at the fork)
    /// or when [`stop`] already stopped it. Losses, if any, are also printed to stderr.
    pub fn stop(self) -> Option<Stats> {
        let generation = self.generation;
        std::mem::forget(self);
        stop_generation(generation)
    }

    /// The capture's figures so far.
    pub fn stats(&self) -> Stats {
        stats()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = stop_generation(self.generation);
    }
}

/// Stops the capture if it is still capture `generation`.
fn stop_generation(generation: u64) -> Option<Stats> {
    // (Not `running()`: a capture whose collector failed is not running, and its stop
    // still reports the failure.)
    if GENERATION.load(Relaxed) != generation {
        return None;
    }
    stop_within(None)
}

/// The collector thread's loop: a pass every millisecond while events flow, every 5 ms when
/// idle; answers dump and stop requests.
fn run(c: &mut collector::Collector) {
    let _failed = CollectorFailed;
    loop {
        let (stop, dump) = {
            let mut ctl = control();
            (ctl.stop, ctl.dump.take())
        };
        if let Some(path) = dump {
            let target = path.display().to_string();
            let r = match c.dump(&path) {
                None => Err(err(ErrorKind::NotFlightRecorder, "", None)),
                Some(r) => r.map_err(|e| err(ErrorKind::Io, target, Some(e))),
            };
            control().dumped = Some(r);
            CONTROL_CV.notify_all();
        }
        if stop {
            RUNNING.store(false, Relaxed);
            crate::state::set_capture(false);
            c.finish(Instant::now() + Duration::from_secs(2));
            break;
        }
        let (n, behind) = c.pass(false);
        STATS.dropped.store(c.dropped(), Relaxed);
        if let Some(ns) = crate::sys::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) {
            STATS.collector_cpu_ns.store(ns, Relaxed);
        }
        let mut ctl = control();
        if ctl.stop || ctl.dump.is_some() || behind {
            continue;
        }
        let wait = Duration::from_millis(if n > 0 { 1 } else { 5 });
        ctl = CONTROL_CV
            .wait_timeout(ctl, wait)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        drop(ctl);
    }
    STATS.dropped.store(c.dropped(), Relaxed);
    if let Some(ns) = crate::sys::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) {
        STATS.collector_cpu_ns.store(ns, Relaxed);
    }
    control().done = true;
    CONTROL_CV.notify_all();
}

/// Ends the capture for the program's threads should the collector thread unwind (a bug):
/// they stop recording, no thread waits under [`Full::Block`] for blocks nobody would free
/// again, [`stop`] does not wait for it, and the capture's figures say so.
struct CollectorFailed;

impl Drop for CollectorFailed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            STATS.collector_failed.store(true, Relaxed);
            RUNNING.store(false, Relaxed);
            crate::state::set_capture(false);
            control().done = true;
            CONTROL_CV.notify_all();
        }
    }
}

/// Stops the process's capture, whoever started it: for the one `TICKSCOPE_CAPTURE` starts
/// (which has no [`Capture`] handle, and otherwise runs until the process exits) and for the
/// C API. As [`Capture::stop`]; `None` if none was running.
pub fn stop() -> Option<Stats> {
    stop_within(None)
}

fn stop_within(wait: Option<Duration>) -> Option<Stats> {
    let handle = COLLECTOR.lock().unwrap_or_else(|p| p.into_inner()).take()?;
    if !owned_here() {
        // A fork child: the collector thread is the parent's, not to be waited for here.
        std::mem::forget(handle);
        return None;
    }
    {
        let mut ctl = control();
        ctl.stop = true;
        CONTROL_CV.notify_all();
        match wait {
            None => {
                drop(ctl);
                let _ = handle.join();
            }
            Some(w) => {
                let deadline = Instant::now() + w;
                while !ctl.done {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        crate::sys::stderr::warn("capture: the collector did not finish in time");
                        break;
                    }
                    ctl = CONTROL_CV
                        .wait_timeout(ctl, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
        }
    }
    let s = stats();
    if s.collector_failed {
        crate::sys::stderr::warn(
            "capture: the collector thread failed (a bug in tickscope, reported above): the capture ends where it failed, without its end record",
        );
    }
    let lost = s.dropped + s.undelivered + s.lost_after_exit;
    if lost > 0 {
        crate::sys::stderr::warn(&format!(
            "capture: {} of {} events lost ({} dropped, memory budget spent; {} undelivered, sink; {} after thread exit)",
            lost,
            s.events + s.dropped + s.lost_after_exit,
            s.dropped,
            s.undelivered,
            s.lost_after_exit
        ));
    }
    Some(s)
}

/// The current (or last) capture's figures.
pub fn stats() -> Stats {
    let started = control().started;
    Stats {
        events: STATS.events.load(Relaxed),
        dropped: STATS.dropped.load(Relaxed),
        dropped_scopes: STATS.dropped_scopes.load(Relaxed),
        in_flight_at_start: STATS.in_flight_at_start.load(Relaxed),
        memory_peak: ring::memory().1,
        undelivered: STATS.undelivered.load(Relaxed),
        evicted: STATS.evicted.load(Relaxed),
        lost_after_exit: ring::LOST_AFTER_EXIT.load(Relaxed),
        bytes: STATS.bytes.load(Relaxed),
        chunks: STATS.chunks.load(Relaxed),
        collector_cpu: Duration::from_nanos(STATS.collector_cpu_ns.load(Relaxed)),
        wall: started.map_or(Duration::ZERO, |s| s.elapsed()),
        disconnected: STATS.disconnected.load(Relaxed),
        collector_failed: STATS.collector_failed.load(Relaxed),
        write_failed: STATS.write_failed.load(Relaxed),
    }
}

/// Writes what the flight recorder holds (the last window of events) to `path` as a complete
/// `.tscap` file; returns its size in bytes.
pub fn dump(path: impl AsRef<Path>) -> Result<u64, Error> {
    let path = path.as_ref();
    if !owned_here()
        || COLLECTOR
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    {
        return Err(err(ErrorKind::NotRunning, "", None));
    }
    let mut ctl = control();
    ctl.dumped = None;
    ctl.dump = Some(path.to_owned());
    CONTROL_CV.notify_all();
    let deadline = Instant::now() + Duration::from_secs(5);
    while ctl.dumped.is_none() && !ctl.done {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        ctl = CONTROL_CV
            .wait_timeout(ctl, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    ctl.dumped.take().unwrap_or_else(|| {
        Err(err(
            ErrorKind::Io,
            path.display().to_string(),
            Some(std::io::Error::other("the collector did not answer in 5 s")),
        ))
    })
}

fn install_panic_dump(path: PathBuf) {
    static INSTALLED: AtomicBool = AtomicBool::new(false);
    static PATH: Mutex<Option<PathBuf>> = Mutex::new(None);
    *PATH.lock().unwrap_or_else(|p| p.into_inner()) = Some(path);
    if INSTALLED.swap(true, Relaxed) {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let path = PATH.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let (Some(path), true) = (path, running()) {
            match dump(&path) {
                Ok(_) => crate::sys::stderr::say(&format!(
                    "tickscope: capture: flight recorder dumped to {}",
                    path.display()
                )),
                Err(e) => crate::sys::stderr::say(&format!("tickscope: {e}")),
            }
        }
        previous(info)
    }));
}

fn register_exit_hook() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    if REGISTERED.swap(true, Relaxed) {
        return;
    }
    if !crate::sys::process::at_exit(on_process_exit) {
        crate::sys::stderr::warn("capture: could not register the exit hook; call capture::stop()");
    }
    if !crate::sys::process::at_fork_child(on_fork_child) {
        crate::sys::stderr::warn(
            "capture: could not register the fork hook; a fork child would record into rings no one reads",
        );
    }
}

/// At process exit: finish the capture (the end record, the last chunks). In a fork child
/// of a capturing process, say that the child was not captured.
extern "C" fn on_process_exit() {
    let _ = std::panic::catch_unwind(|| {
        if !owned_here() {
            if STOPPED_BY_FORK.swap(false, Relaxed) {
                crate::sys::stderr::say(&format!(
                    "tickscope: capture: process {} is a fork child of the capturing process {}: nothing it did was captured (the capture is the parent's)",
                    std::process::id(),
                    OWNER.load(Relaxed)
                ));
            }
            return;
        }
        stop_within(Some(Duration::from_secs(3)));
    });
}

/// Starts the capture `TICKSCOPE_CAPTURE` asks for (called once, at first use).
pub(crate) fn start_from_env(sink: Sink, full: Option<Full>, memory: Option<u64>) {
    let mut b = Builder::new(sink.clone());
    if let Some(f) = full {
        b = b.full(f);
    }
    if let Some(m) = memory {
        b = b.memory(m);
    }
    if let Err(e) = b.start_inner() {
        crate::sys::stderr::warn(&format!(
            "{}={}: {e}",
            crate::config::var::CAPTURE,
            sink.describe()
        ));
    }
}

/// Stacks of the CPU sampler's samples, by id (the sampler's key hash): their frames (return
/// addresses, leaf first). The collector names them when a sample first uses one.
#[cfg(feature = "sampler")]
static STACKS: Mutex<Option<std::collections::HashMap<u64, Box<[u64]>>>> = Mutex::new(None);

/// Defines the frames of the sampler's stack `id` (the sampler's drain thread).
#[cfg(feature = "sampler")]
pub(crate) fn define_stack(id: u64, frames: &[u64]) {
    STACKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(Default::default)
        .insert(id, frames.into());
}

/// The frames of the sampler's stack `id`, if defined.
#[cfg(feature = "sampler")]
pub(crate) fn stack_frames(id: u64) -> Option<Box<[u64]>> {
    STACKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&id).cloned())
}

/// Records a CPU sample of thread `tid` taken at `ticks` with stack `stack` (see
/// [`define_stack`]), from the sampler's drain thread.
#[cfg(feature = "sampler")]
pub(crate) fn sample(ticks: u64, tid: u32, stack: u64) {
    if running() {
        ring::push_group(
            &[(ticks, format::event::SAMPLE as u64), (tid as u64, stack)],
            0,
        );
    }
}

/// A new async id: unique in the process, so in every capture.
pub(crate) fn next_async_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, Relaxed)
}

/// Records an async event of call site `id` (a future's or span's life begins or ends,
/// [`format::what`]) at `ticks` on the calling thread.
#[inline]
pub(crate) fn async_event(id: u32, async_id: u64, what: u8, ticks: u64) {
    ring::push_group(
        &[
            (ticks, format::event::ASYNC as u64 | (id as u64) << 8),
            (async_id, what as u64),
        ],
        crate::scope::open_depth(),
    );
}

/// Records the scope begin of call site `id` at `ticks` on the calling thread, at stack
/// depth `depth`; false if it was dropped (then its end must not be recorded).
#[inline]
pub(crate) fn begin(id: u32, ticks: u64, depth: u32) -> bool {
    ring::push_begin(ticks, format::event::BEGIN as u64 | (id as u64) << 8, depth)
}

/// Records the scope end of call site `id` at `ticks` on the calling thread.
#[inline]
pub(crate) fn end(id: u32, ticks: u64) {
    ring::push(ticks, format::event::END as u64 | (id as u64) << 8);
}
