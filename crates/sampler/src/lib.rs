//! A CPU (or wall-clock) sampling profiler in the spirit of pprof, with exact CPU time at any
//! requested rate. `tickscope` re-exports it as `tickscope::sampler` (feature `sampler`, on
//! by default), where its samples carry the open scopes as labels and go on a running
//! capture's timeline too ([`library`]).
//!
//! ```no_run
//! use tickscope_sampler::{Mode, Sampler};
//!
//! let sampler = Sampler::builder().frequency(1000).mode(Mode::Cpu).start()?;
//! // ... the work to profile, on any number of threads ...
//! let profile = sampler.stop();
//! profile.write_pprof("cpu.pb.gz")?; // go tool pprof -top cpu.pb.gz
//! println!("{}", profile.top(10));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # How it works
//! - **Timers** ([`Source`]): one per thread, delivered to that thread. In CPU mode a perf
//!   task-clock event, where the kernel allows it: it fires on time at any rate, however busy
//!   the machine. Else a timer on the thread's CPU clock, first expiry randomised, which the
//!   kernel checks only when a tick lands on the thread: each sample is weighted by the
//!   periods that elapsed (`1 + si_overrun`), so CPU time stays exact at any rate, but under
//!   CPU contention a late signal can carry a long stretch to one stack (the profile counts
//!   such signals). `setitimer(ITIMER_PROF)` is the last fallback.
//! - **Every thread**: threads running at `start()` and threads started later are found by a
//!   drain thread that reads `/proc/self/task` every 10 ms, or at once when a new thread calls
//!   [`adopt_current_thread`] (libtickscope's `pthread_create` does, for every thread of a
//!   preloaded program). The CPU time a thread used before its timer was armed is not lost:
//!   it appears as a frame `[not sampled: thread start before discovery]` under that thread. In CPU mode the
//!   process's CPU time that no sample holds (threads that began and ended between two polls,
//!   each thread's last partial period) appears as one more `[not sampled: ...]` frame, so the
//!   profile's total is the process's CPU time.
//! - **The handler** walks frame pointers from the interrupted registers, validating every
//!   read, reads the thread's open tickscope scopes, and stores the stack in a fixed,
//!   lock-free table. It never allocates or locks. Samples that find no room are counted as
//!   lost, by reason, and appear in the profile as a frame `[lost: ...]`.
//! - **At `stop()`** the addresses are symbolised in-process (DWARF with inlined frames, else
//!   the symbol table).
//!
//! # Frame pointers, or unwind tables
//! By default ([`Unwind::FramePointers`]) the handler follows frame pointers. Build with `-C force-frame-pointers=yes` (this
//! workspace sets it in `.cargo/config.toml`; add it to your own `.cargo/config.toml` or
//! `RUSTFLAGS`). The standard library ships with frame pointers. Code built without them
//! (glibc, most C libraries) ends the stack at that frame: a caller is never invented, but the
//! callers above such a frame are missing.
//!
//! With [`Builder::unwind`]`(`[`Unwind::Tables`]`)` and the perf source, no signal is sent:
//! each thread's task-clock event copies its registers and the top 16 KiB of its stack into
//! a ring, and the drain thread walks the copy by the unwind tables (`.eh_frame`, with
//! `framehop`): full stacks in code built without frame pointers, but no scope labels.
//! libtickscope (for programs built by others) uses it.
//!
//! Inlined functions are named from DWARF: keep `debug = "limited"` (or more) in the profile
//! you sample. With `debug = "line-tables-only"` they keep their file and line but lose their
//! path (`exit` instead of `tickscope::scope::thread::exit`); with no debug info only the
//! symbol table names the non-inlined functions.
//!
//! # Labels
//! Each sample carries the thread's name (`thread`), its id (`tid`) and every tickscope scope
//! open on it (`scope`), so `go tool pprof -tagfocus=scope=parse` cuts the profile by scope.
//!
//! # Signals
//! The sampler uses `SIGPROF` (or the signal [`Builder::signal`] names) and refuses to start
//! if another handler owns it. A program that installs its own handler for that signal while
//! the sampler runs takes the signal over: the drain thread notices at its next poll (and
//! `stop()` at the latest), stops the timers, and the profile reports the CPU time from then
//! on as `[not sampled: signal handler replaced by the program]`, with a comment. After
//! `stop()` the signal is left ignored, so a signal still in flight cannot kill the process.
//! In a child created by `fork` while sampling, no timer runs; the child may start its own
//! sampler, and dropping the inherited [`Sampler`] there does nothing.

// `unsafe` lives only where a module allows it below (the signal handler, its stack reads
// and its sample table); everywhere else it is an error. The timers, perf events and images
// read in place are `tickscope-sys`'s.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod attach;
mod cfi;
mod drain;
mod error;
mod finish;
#[allow(unsafe_code)] // the signal handler: signal context, raw pointers
mod handler;
pub mod heap;
#[doc(hidden)]
pub mod host;
pub mod library;
mod poller;
mod profile;
mod start;
// Names for addresses in this process; `tickscope`'s capture names its samples' stacks with
// it. Not a stable API.
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)] // its docs are for this crate's readers
pub mod symbolize;
mod table;
mod timer;
#[allow(unsafe_code)] // reads of the interrupted stack, each checked first
mod unwind;

use std::fmt;

// The platform layer (clocks, threads, /proc, futexes, files).
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tickscope_sys as sys;

pub use attach::Attached;
use drain::*;
pub use drain::{adopt_current_thread, running_here};
pub use error::{Error, ErrorKind};
use finish::*;
use handler::{Shared, Tids, ACTIVE, SHARED};
use poller::{drain_loop, Adopting, Drained, Msg, Poller, Reply};
pub use profile::{FunctionTime, Profile, ThreadTime};
use start::*;
use table::Store;
use unwind::Ranges;

/// What the sampler measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// CPU time: a thread is sampled only while it runs.
    Cpu,
    /// Wall-clock time: every thread is sampled at the rate, running or blocked.
    Wall,
}

/// What interrupts the threads (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Per-thread `timer_create` on the thread's CPU clock, `SIGEV_THREAD_ID`.
    ThreadCpuTimer,
    /// Per-thread `perf_event_open` task-clock events, signalled to their thread.
    PerfTaskClock,
    /// Per-thread `timer_create(CLOCK_MONOTONIC)`, for [`Mode::Wall`].
    WallTimer,
    /// `setitimer(ITIMER_PROF)`: one process-wide timer, limited to the kernel tick rate.
    ProcessTimer,
}

impl Source {
    /// A short name, as the profile's comments show it.
    pub fn name(self) -> &'static str {
        match self {
            Source::ThreadCpuTimer => "timer_create(thread CPU clock)",
            Source::PerfTaskClock => "perf_event task-clock",
            Source::WallTimer => "timer_create(CLOCK_MONOTONIC)",
            Source::ProcessTimer => "setitimer(ITIMER_PROF)",
        }
    }
}

/// How the sampler walks a thread's stack (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unwind {
    /// In the signal handler, by frame pointers. Every sample is labelled with the scopes
    /// open on its thread. Code built without frame pointers hides its callers.
    FramePointers,
    /// By the unwind tables (`.eh_frame`), on the drain thread, from the registers and
    /// stack bytes a perf event copies at each sample: full stacks in code built without
    /// frame pointers, threads that block signals included, but no scope labels. CPU mode
    /// with the perf source only: elsewhere, and for a thread whose ring cannot be had, the
    /// sampler falls back to frame pointers and the profile says so.
    Tables,
}

/// Settings for a [`Sampler`]; from [`Sampler::builder`].
#[derive(Clone, Debug)]
pub struct Builder {
    hz: u32,
    mode: Mode,
    source: Option<Source>,
    table_entries: usize,
    log_entries: usize,
    poll: Duration,
    signal: libc::c_int,
    whole_process: bool,
    unwind: Unwind,
    unsampled_said: bool,
}

/// Perf-event descriptors below this map to their thread in the handler; a higher one still
/// works, with a gettid call.
const PERF_FDS: usize = 4096;

/// The signal the timers deliver unless [`Builder::signal`] picks another.
const SIGNAL: libc::c_int = libc::SIGPROF;

impl Builder {
    /// Samples per second of CPU time (or of wall time) per thread. Default 100.
    pub fn frequency(mut self, hz: u32) -> Builder {
        self.hz = hz;
        self
    }

    /// CPU time (default) or wall-clock time.
    pub fn mode(mut self, mode: Mode) -> Builder {
        self.mode = mode;
        self
    }

    /// Forces a timer source instead of the best one available.
    pub fn source(mut self, source: Source) -> Builder {
        self.source = Some(source);
        self
    }

    /// Distinct stacks the lock-free table holds between two drains (default 2048, about
    /// 1.1 KiB each), and samples the overflow log holds (default 1024). Memory is fixed at
    /// start; what does not fit is counted as lost.
    pub fn capacity(mut self, table_entries: usize, log_entries: usize) -> Builder {
        self.table_entries = table_entries;
        self.log_entries = log_entries;
        self
    }

    /// How often the drain thread looks for new threads and empties the table (default
    /// 10 ms). A thread's CPU time before it is found is reported, not sampled.
    pub fn poll_interval(mut self, poll: Duration) -> Builder {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// The signal the timers deliver (default `SIGPROF`). A program that uses `SIGPROF` for
    /// itself can leave it alone by naming another, such as a real-time signal
    /// (`libc::SIGRTMIN() + 4`); the `setitimer` source can only deliver `SIGPROF`, so with
    /// another signal it is not used (asked for explicitly, `start` says so).
    pub fn signal(mut self, signal: libc::c_int) -> Builder {
        self.signal = signal;
        self
    }

    /// Accounts for the process's whole CPU time, from its first instruction, not only from
    /// `start()` on: the CPU time used before (loading, constructors) is in the profile as
    /// `[not sampled: ...]` under the threads that used it. For a sampler started when the
    /// program loads (libtickscope's `TICKSCOPE_CPUPROFILE`), so that its total is the
    /// process's CPU time, as `getrusage` gives it.
    pub fn whole_process(mut self, yes: bool) -> Builder {
        self.whole_process = yes;
        self
    }

    /// How stacks are walked (default [`Unwind::FramePointers`], which keeps scope labels;
    /// libtickscope, for programs built by others, uses [`Unwind::Tables`]).
    pub fn unwind(mut self, unwind: Unwind) -> Builder {
        self.unwind = unwind;
        self
    }

    /// For a caller that reports a process which ended before its first sample its own way
    /// (libtickscope under `tickscope record`: one line instead of a file):
    /// [`stop_at_exit_unless_unsampled`](Sampler::stop_at_exit_unless_unsampled) then
    /// returns only the CPU time when nothing was sampled, without reading, disarming or
    /// building anything.
    #[doc(hidden)]
    pub fn unsampled_said(mut self, yes: bool) -> Builder {
        self.unsampled_said = yes;
        self
    }

    /// Starts sampling every thread of the process.
    pub fn start(self) -> Result<Sampler, Error> {
        start(self)
    }
}

/// A running sampler; [`Sampler::stop`] ends it and returns the [`Profile`]. Dropping it
/// stops sampling and discards the profile.
///
/// ```no_run
/// let sampler = tickscope_sampler::Sampler::builder().frequency(999).start()?;
/// let mut x = 0u64;
/// for i in 0..50_000_000u64 {
///     x = x.wrapping_mul(31).wrapping_add(i); // the work to profile
/// }
/// let profile = sampler.stop();
/// profile.write_pprof("cpu.pb.gz")?; // go tool pprof -top cpu.pb.gz
/// println!("{}\n{x}", profile.top(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Sampler {
    inner: Option<Running>,
}

struct Running {
    pid: u32,
    tx: mpsc::Sender<Msg>,
    drain: std::thread::JoinHandle<Drained>,
    /// Also the drain thread's, and published to the handler through [`SHARED`] (a raw
    /// pointer that [`finish`] clears, waiting for the handlers, before the last `Arc` goes).
    shared: Arc<Shared>,
    meta: StartInfo,
}

/// What a profile says of the sampler that took it.
struct StartInfo {
    settings: Builder,
    source: Source,
    started: Instant,
    start_time: SystemTime,
    /// The process's CPU time at `start()`.
    cpu_at_start: Option<u64>,
    /// [`handler::STRAY`] at `start()`.
    stray_at_start: u64,
    /// A profile without a sample is reported by the caller: no warning of it (set by
    /// [`Sampler::stop_at_exit_unless_unsampled`]).
    unsampled_said: bool,
}

/// Whether a sampler runs in this process (and its process id, to tell a fork child).
static RUNNING: Mutex<Option<u32>> = Mutex::new(None);
/// Starts so far, for the drain thread's name.
static STARTS: AtomicU64 = AtomicU64::new(0);
impl Sampler {
    /// Settings with the defaults: 100 Hz, CPU time, the best source available.
    pub fn builder() -> Builder {
        Builder {
            hz: 100,
            mode: Mode::Cpu,
            source: None,
            table_entries: 2048,
            log_entries: 1024,
            poll: Duration::from_millis(10),
            signal: SIGNAL,
            whole_process: false,
            unwind: Unwind::FramePointers,
            unsampled_said: false,
        }
    }

    /// The timer source in use.
    pub fn source(&self) -> Option<Source> {
        self.inner.as_ref().map(|r| r.meta.source)
    }

    /// The profile of everything sampled so far, symbolised; sampling goes on. (What
    /// `tickscope_sampler_flush` in the C API writes.) Samples taken in the last moment
    /// before the call, still in flight to the table, are in the next snapshot or in
    /// [`stop`](Sampler::stop)'s profile. With the perf source, threads still running are
    /// weighted by their signals, not yet scaled to their exact task-clock counts. In a fork
    /// child, empty.
    pub fn snapshot(&self) -> Profile {
        let Some(r) = self.inner.as_ref().filter(|r| r.pid == std::process::id()) else {
            return Profile::empty_after_fork();
        };
        let (tx, rx) = mpsc::channel();
        if to_drain(&r.tx, Msg::Snapshot(tx)).is_err() {
            return Profile::empty_after_fork();
        }
        let drained = rx.recv().unwrap_or_default();
        let process_cpu_ns = r.meta.process_cpu_ns();
        // Snapshots taken one after another (a pusher's) name only what is new.
        profile::keep_symbols(true);
        profile::build(parts(&r.meta, &r.shared, drained, process_cpu_ns))
    }

    /// Stops sampling and returns the profile, symbolised.
    pub fn stop(mut self) -> Profile {
        match self.inner.take() {
            Some(r) => finish_profile(r, Ending::Stopped),
            None => Profile::empty_after_fork(),
        }
    }

    /// [`stop`](Self::stop) for a process about to end (an exit hook, a handler that then
    /// ends it): the sampler's tables, megabytes of reserved memory, are left to the
    /// process's end rather than unmapped one by one. Sampling another profile after this
    /// works, without that memory back.
    pub fn stop_at_exit(mut self) -> Profile {
        match self.inner.take() {
            Some(r) => finish_profile(r, Ending::AtExit),
            None => Profile::empty_after_fork(),
        }
    }

    /// [`stop_at_exit`](Self::stop_at_exit) for a caller that says a profile without a
    /// sample its own way (no warning of it in the profile). Started with
    /// [`Builder::unsampled_said`] in CPU mode with the perf source, if nothing was sampled
    /// (every thread on a ring that holds no record, no signal): `Err` with the process's
    /// CPU time (since `start()`, or since it began with [`Builder::whole_process`]), the
    /// rings disabled but left to the process's end (their locked memory with them: a
    /// sampler started afterwards may find less room for its own). Otherwise the profile.
    #[doc(hidden)]
    pub fn stop_at_exit_unless_unsampled(mut self) -> Result<Profile, u64> {
        match self.inner.take() {
            Some(mut r) => {
                r.meta.unsampled_said = true;
                finish(r, Ending::AtExitUnlessUnsampled)
                    .unwrap_or_else(|| Ok(Profile::empty_after_fork()))
            }
            None => Ok(Profile::empty_after_fork()),
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(r) = self.inner.take() {
            finish(r, Ending::Dropped);
        }
    }
}

impl fmt::Debug for Sampler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sampler")
            .field("source", &self.source())
            .finish()
    }
}

/// Returns true if and only if the calling thread is inside the sampler's signal handler.
/// For tests that prove the handler never allocates (a counting global allocator asks this).
#[doc(hidden)]
pub fn in_signal_handler() -> bool {
    handler::in_handler()
}
