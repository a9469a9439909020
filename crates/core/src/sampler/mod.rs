//! A CPU (or wall-clock) sampling profiler in the spirit of pprof, with exact CPU time at any
//! requested rate.
//!
//! ```no_run
//! use tickscope::sampler::{Mode, Sampler};
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

mod attach;
#[allow(unsafe_code)] // the vDSO's image, read in place
mod cfi;
mod error;
#[allow(unsafe_code)] // the signal handler: signal context, raw pointers
mod handler;
#[doc(hidden)]
pub mod host;
mod poller;
mod profile;
mod table;
#[allow(unsafe_code)] // timer_create, perf_event_open, fcntl, ioctl
mod timer;
#[allow(unsafe_code)] // reads of the interrupted stack, each checked first
mod unwind;

use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub use attach::Attached;
pub use error::{Error, ErrorKind};
use handler::{Shared, Tids, ACTIVE, SHARED};
use poller::{drain_loop, Adopting, Drained, Msg, Poller, Reply};
pub use profile::{FunctionTime, Profile, ThreadTime};
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
/// The running sampler's process id (0: none), checked before [`ADOPT`] is locked, so a fork
/// child never waits on a lock a parent's thread held at the fork.
static ADOPT_PID: AtomicU32 = AtomicU32::new(0);
/// The running sampler's drain thread, for threads that ask to be armed at once.
static ADOPT: Mutex<Option<mpsc::Sender<Msg>>> = Mutex::new(None);
/// Bumped and woken for each message to the drain thread and for each stop request
/// ([`request_stop`]): the drain thread sleeps on it between polls (a futex, which a signal
/// handler may wake, where a channel's wait cannot be).
static DRAIN_WAKE: AtomicU32 = AtomicU32::new(0);
/// A stop a signal handler or `_exit` asked for ([`request_stop`]): its code, 0 for none.
static REQUEST: AtomicU32 = AtomicU32::new(0);
/// The process whose running sampler was asked to stop (0: none since the start): a later
/// request (a second Ctrl-C, `record` passing on the signal) is the first one's to answer.
static REQUESTED: AtomicU32 = AtomicU32::new(0);
/// What to run on the drain thread when it stops at a request (libtickscope's: write the
/// profile, then end the process as the signal or `_exit` would have).
static ON_REQUEST: std::sync::OnceLock<fn(u32)> = std::sync::OnceLock::new();
/// A request that came as the sampler was being stopped by another thread (`stop()` at the
/// program's exit, say), after the drain thread had taken its `Stop`: left for that stop's
/// caller to answer once the profile is written ([`take_unanswered_request`]).
static UNANSWERED: AtomicU32 = AtomicU32::new(0);
/// What the drain thread gathered when it stopped at a request (a leaked `Box`, or null):
/// taken by the `stop()` that follows (on the drain thread itself, or on another that joins
/// it). A pointer, not a lock: a fork child never finds it taken.
static HANDED: crate::sys::futex::Handoff<Drained> = crate::sys::futex::Handoff::new();

/// [`forget_shared_in_fork_child`] registered, once per process.
static FORK_CHILD_HANDLER: std::sync::Once = std::sync::Once::new();

/// In the child of a `fork` (glibc's child handler, async-signal-safe: atomic stores): the
/// handler forgets the parent's state, whose tables are not mapped in the child
/// (`sys::memory::not_into_fork_children`). A sampling signal there (a timer the child made itself
/// with this signal and no handler of its own) is counted stray, where it would have read
/// them. The child's own sampler, if it starts one, publishes its own.
extern "C" fn forget_shared_in_fork_child() {
    SHARED.store(std::ptr::null_mut(), SeqCst);
    ACTIVE.store(0, SeqCst);
}

/// Sends `msg` to the drain thread and wakes it.
fn to_drain(tx: &mpsc::Sender<Msg>, msg: Msg) -> Result<(), mpsc::SendError<Msg>> {
    tx.send(msg)?;
    DRAIN_WAKE.fetch_add(1, SeqCst);
    crate::sys::futex::futex_wake(&DRAIN_WAKE);
    Ok(())
}

/// Asks the running sampler to stop from where no lock may be taken (a signal handler,
/// `_exit`): the drain thread disarms the timers and runs the function given to
/// [`on_request`] with `code` (non-zero), on its own thread, where it may stop the sampler
/// and write its profile. False (and nothing asked) if no sampler runs in this process.
/// Async-signal-safe: atomics and one system call.
pub(crate) fn request_stop(code: u32) -> bool {
    let pid = std::process::id();
    if code == 0 {
        return false;
    }
    // Asked already (here, or by another thread at the same moment): what that request's
    // function does (write the profile, end the process) answers this one too.
    if REQUESTED.load(SeqCst) == pid {
        return true;
    }
    if ADOPT_PID.load(SeqCst) != pid {
        return false;
    }
    if REQUESTED.swap(pid, SeqCst) == pid {
        return true;
    }
    REQUEST.store(code, SeqCst);
    DRAIN_WAKE.fetch_add(1, SeqCst);
    crate::sys::futex::futex_wake(&DRAIN_WAKE);
    true
}

/// A request the drain thread did not take because another thread was stopping the sampler
/// (see [`UNANSWERED`]): its code, once, for the caller of that stop to answer after writing
/// the profile.
pub(crate) fn take_unanswered_request() -> Option<u32> {
    let code = UNANSWERED.swap(0, SeqCst);
    (code != 0).then_some(code)
}

/// Leaves `code` for the thread that is stopping the sampler to answer (the request's
/// function found the sampler being stopped by another thread, which writes the profile).
pub(crate) fn leave_unanswered(code: u32) {
    UNANSWERED.store(code, SeqCst);
}

/// Sets what the drain thread runs when it stops at a [`request_stop`]; the first setting
/// stays.
pub(crate) fn on_request(f: fn(u32)) {
    let _ = ON_REQUEST.set(f);
}

/// The drain thread's whole life: its loop, then, if it stopped at a request, the request's
/// function (see [`request_stop`]), what it gathered left in [`HANDED`].
fn drain_thread(
    shared: &Shared,
    poller: Poller,
    every: Duration,
    rx: mpsc::Receiver<Msg>,
) -> Drained {
    let drained = drain_loop(shared, poller, every, rx, &DRAIN_WAKE, &REQUEST);
    let Some(code) = drained.request else {
        return drained;
    };
    HANDED.put(drained);
    if let Some(f) = ON_REQUEST.get() {
        let _ = std::panic::catch_unwind(|| f(code));
    }
    Drained::default()
}

/// How long a new thread waits for its timer before it runs unsampled (counted then as
/// `[not sampled: thread start before discovery]`, as a thread found by polling is). Generous:
/// the drain thread answers in microseconds, but a busy machine may not run it for a while.
const ADOPT_WAIT: Duration = Duration::from_secs(2);

/// Returns true if and only if a sampler this process started is running.
pub fn running_here() -> bool {
    ADOPT_PID.load(Relaxed) == std::process::id()
}

/// Arms the calling thread's timer now, if a sampler runs in this process and has not found
/// the thread yet; returns true if and only if the thread is sampled when this returns.
///
/// Threads are otherwise found by polling `/proc/self/task` every 10 ms, and the CPU time a
/// thread uses before it is found is reported as not sampled. A thread that calls this first
/// thing is sampled from its first instruction on: libtickscope's `pthread_create` does it
/// for every thread of a preloaded program. Not for signal handlers (it locks and waits).
pub fn adopt_current_thread() -> bool {
    if ADOPT_PID.load(SeqCst) != std::process::id() {
        return false;
    }
    let tx = match ADOPT.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    };
    let Some(tx) = tx else { return false };
    // The wait is a bare futex, not a channel's: std's blocking calls name the current
    // thread, and this runs before std's own spawn code has set that (for threads this
    // library's std starts), which std aborts on.
    let done = std::sync::Arc::new(AtomicU32::new(0));
    let tid = crate::sys::thread::gettid() as i32;
    let me = Adopting {
        stack: crate::sys::thread::own_stack(),
        name: crate::sys::thread::own_name(),
    };
    if to_drain(&tx, Msg::Adopt(tid, me, Reply(done.clone()))).is_err() {
        return false;
    }
    let deadline = Instant::now() + ADOPT_WAIT;
    while done.load(Acquire) == 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        crate::sys::futex::futex_wait(&done, left);
    }
    // 1: armed; 2: the sampler stopped first.
    done.load(Acquire) == 1
}

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

fn start(b: Builder) -> Result<Sampler, Error> {
    if b.hz == 0 || b.hz > 100_000 {
        return Err(Error::new(
            ErrorKind::BadFrequency,
            format!("sampling frequency {} Hz: must be 1 to 100000", b.hz),
            None,
        ));
    }
    let pid = std::process::id();
    let mut running = lock_running();
    match *running {
        Some(p) if p == pid => {
            return Err(Error::new(
                ErrorKind::AlreadyRunning,
                "a sampler is already running in this process".into(),
                None,
            ))
        }
        // Inherited from the parent across fork: that sampler has no timers or threads here,
        // and a handler the parent's other threads were running does not exist either
        // (already forgotten at the fork, unless the child was made without fork handlers).
        Some(_) => forget_shared_in_fork_child(),
        None => {}
    }
    if let (Mode::Cpu, Some(Source::WallTimer))
    | (Mode::Wall, Some(Source::ThreadCpuTimer))
    | (Mode::Wall, Some(Source::PerfTaskClock))
    | (Mode::Wall, Some(Source::ProcessTimer)) = (b.mode, b.source)
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!(
                "source {:?} does not measure {:?} time",
                b.source.unwrap(),
                b.mode
            ),
            None,
        ));
    }
    let signal = b.signal;
    if signal <= 0 || signal > libc::SIGRTMAX() || [libc::SIGKILL, libc::SIGSTOP].contains(&signal)
    {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("signal {signal} cannot carry samples"),
            None,
        ));
    }
    if signal != libc::SIGPROF && b.source == Some(Source::ProcessTimer) {
        return Err(Error::new(
            ErrorKind::Unsupported,
            format!("setitimer(ITIMER_PROF) delivers SIGPROF only, not signal {signal}"),
            None,
        ));
    }
    if let Err(owner) = handler::install(signal) {
        return Err(Error::new(
            ErrorKind::SignalInUse,
            format!(
                "another handler ({owner:#x}) owns {}; the sampler will not replace it",
                signal_name(signal)
            ),
            None,
        ));
    }
    let period_ns = (1_000_000_000 / b.hz as u64).max(1);
    let source = match timer::choose(b.mode, b.source, signal) {
        Ok(Source::ProcessTimer) if signal != libc::SIGPROF => {
            handler::uninstall(signal);
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!(
                    "no per-thread timer works here, and setitimer(ITIMER_PROF) cannot deliver {}",
                    signal_name(signal)
                ),
                None,
            ));
        }
        Ok(s) => s,
        Err((s, e)) => {
            handler::uninstall(signal);
            return Err(Error::new(
                ErrorKind::Unsupported,
                format!("the timer source {} does not work here", s.name()),
                Some(e),
            ));
        }
    };
    // The handler reads the clock; choose its source here, outside signal context. With the
    // unwind tables no thread is signalled unless its ring cannot be had; the poller chooses
    // it then (a short program exec'd under `record` is spared the CPU counter's checks).
    if !(b.unwind == Unwind::Tables && source == Source::PerfTaskClock) {
        crate::clock::now();
    }
    let shared = Arc::new(Shared {
        store: Store::new(b.table_entries, b.log_entries),
        ranges: Ranges::new(16_384),
        known: Tids::new(16_384),
        source,
        period_ns,
        // Zeroed, untouched until a descriptor is used: 16 KiB a short program never reads.
        perf_tid: crate::sys::memory::zeroed_slice(PERF_FDS),
        signals: AtomicU64::new(0),
        handler_ticks: AtomicU64::new(0),
        leaf_only: AtomicU64::new(0),
        truncated: AtomicU64::new(0),
        overrun_signals: AtomicU64::new(0),
        max_overrun: AtomicU64::new(0),
        overrun_periods: AtomicU64::new(0),
        overrun_periods_sq: AtomicU64::new(0),
        #[cfg(feature = "capture")]
        timeline: table::SampleLog::new(16_384),
    });
    FORK_CHILD_HANDLER.call_once(|| {
        crate::sys::process::at_fork_child(forget_shared_in_fork_child);
    });
    SHARED.store(Arc::as_ptr(&shared).cast_mut(), SeqCst);
    if source == Source::ProcessTimer {
        if let Err(e) = timer::process_timer(period_ns) {
            SHARED.store(std::ptr::null_mut(), SeqCst);
            handler::uninstall(signal);
            // No timer was armed; no handler holds the state once this returns.
            wait_handlers();
            drop(shared);
            return Err(Error::new(
                ErrorKind::Unsupported,
                "cannot start setitimer(ITIMER_PROF)".into(),
                Some(e),
            ));
        }
    }
    let n = STARTS.fetch_add(1, Relaxed);
    let cpu_at_start = match b.whole_process {
        true => Some(0),
        false => timer::process_cpu_ns(),
    };
    let mut poller = Poller::new(
        source,
        b.mode,
        period_ns,
        signal,
        n,
        b.whole_process,
        b.unwind == Unwind::Tables,
    );
    poller.quick_unsampled_exit(b.unsampled_said);
    poller.poll(&shared);
    // Nothing of an earlier sampler's request is this one's.
    REQUEST.store(0, SeqCst);
    REQUESTED.store(0, SeqCst);
    UNANSWERED.store(0, SeqCst);
    drop(HANDED.take());
    let (tx, rx) = mpsc::channel();
    let every = b.poll;
    let drains = shared.clone();
    // Its own samples still come by the signal where that is the walk.
    let spawned = crate::sys::thread::spawn_quiet(
        std::thread::Builder::new().name("tickscope-sampler".into()),
        &[signal],
        move || drain_thread(&drains, poller, every, rx),
    );
    let drain = match spawned {
        Ok(d) => d,
        Err(e) => {
            // The poller went down with the closure and disarmed its timers (its Drop).
            if source == Source::ProcessTimer {
                let _ = timer::process_timer(0);
            }
            SHARED.store(std::ptr::null_mut(), SeqCst);
            // No timer is armed; no handler holds the state once this returns.
            wait_handlers();
            handler::uninstall(signal);
            drop(shared);
            return Err(Error::new(
                ErrorKind::Unsupported,
                "cannot start the sampler's drain thread".into(),
                Some(e),
            ));
        }
    };
    *running = Some(pid);
    *ADOPT.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx.clone());
    ADOPT_PID.store(pid, SeqCst);
    Ok(Sampler {
        inner: Some(Running {
            pid,
            tx,
            drain,
            shared,
            meta: StartInfo {
                settings: b,
                source,
                started: Instant::now(),
                cpu_at_start,
                stray_at_start: handler::STRAY.load(Relaxed),
                unsampled_said: false,
                start_time: SystemTime::now(),
            },
        }),
    })
}

/// `SIGPROF`, `SIGRTMIN+4` or `signal 12`: how messages name a signal.
fn signal_name(signal: libc::c_int) -> String {
    match signal {
        libc::SIGPROF => "SIGPROF".into(),
        s if s >= libc::SIGRTMIN() && s <= libc::SIGRTMAX() => {
            format!("SIGRTMIN+{}", s - libc::SIGRTMIN())
        }
        s => format!("signal {s}"),
    }
}

/// In a fork child: whether [`RUNNING`] and [`ADOPT`] are free (see
/// [`host::free_after_fork`]). A poisoned lock is free: its holder is gone.
pub(crate) fn free_after_fork() -> bool {
    use std::sync::TryLockError::WouldBlock;
    let running = !matches!(RUNNING.try_lock(), Err(WouldBlock));
    let adopt = !matches!(ADOPT.try_lock(), Err(WouldBlock));
    running && adopt
}

fn lock_running() -> std::sync::MutexGuard<'static, Option<u32>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until no handler holds the shared state.
fn wait_handlers() {
    while ACTIVE.load(SeqCst) != 0 {
        std::thread::yield_now();
    }
}

/// How a sampler is stopped.
#[derive(Clone, Copy, PartialEq)]
enum Ending {
    /// Dropped: no profile is built.
    Dropped,
    /// [`Sampler::stop`].
    Stopped,
    /// [`Sampler::stop_at_exit`]: the process is about to end, the shared state is left.
    AtExit,
    /// [`Sampler::stop_at_exit_unless_unsampled`]: as `AtExit`, and "nothing sampled" is an
    /// answer.
    AtExitUnlessUnsampled,
}

/// [`finish`] for a caller that wants the profile.
fn finish_profile(r: Running, how: Ending) -> Profile {
    match finish(r, how) {
        Some(Ok(p)) => p,
        // Only a caller that takes "nothing sampled" for an answer gets it.
        Some(Err(_)) | None => Profile::empty_after_fork(),
    }
}

/// Stops a running sampler and, unless it was dropped, returns its profile. `None` when
/// dropped, and in a fork child, where the drain thread and the timers do not exist. At exit, the shared state
/// is not freed (see [`Sampler::stop_at_exit`]); with
/// [`Ending::AtExitUnlessUnsampled`], `Err` with the CPU time instead of a profile when the
/// sampler was started with [`Builder::unsampled_said`] and nothing was sampled.
fn finish(r: Running, how: Ending) -> Option<Result<Profile, u64>> {
    let exiting = matches!(how, Ending::AtExit | Ending::AtExitUnlessUnsampled);
    let unsampled_ok = how == Ending::AtExitUnlessUnsampled;
    if r.pid != std::process::id() {
        // A fork child: nothing of the parent's sampler runs here. Leak the state rather
        // than touch timers and a thread that belong to the parent.
        let mut running = lock_running();
        if *running == Some(r.pid) {
            *running = None;
            forget_shared_in_fork_child();
        }
        std::mem::forget(r.drain);
        return None;
    }
    // No thread asks to be armed any more; one waiting now gets its answer from the drain
    // thread before it stops, or a closed channel.
    ADOPT_PID.store(0, SeqCst);
    *ADOPT.lock().unwrap_or_else(|p| p.into_inner()) = None;
    // The drain thread disarms every timer and hands back what it gathered; if it stopped
    // at a request, it left that in HANDED (and this may be it, stopping the sampler from
    // the request's function: it cannot join itself).
    let _ = to_drain(
        &r.tx,
        Msg::Stop {
            quick: unsampled_ok,
        },
    );
    let on_drain_thread = std::thread::current().id() == r.drain.thread().id();
    let mut drained = match on_drain_thread {
        true => Drained::default(),
        false => r.drain.join().unwrap_or_default(),
    };
    if let Some(handed) = HANDED.take() {
        drained = handed;
    }
    if !on_drain_thread {
        // A request that came while this stop was under way, too late for the drain thread
        // (it took the `Stop` first): the caller answers it once the profile is written.
        // Later signals find no sampler and act at once.
        let late = REQUEST.swap(0, SeqCst);
        if late != 0 {
            UNANSWERED.store(late, SeqCst);
        }
        REQUESTED.store(0, SeqCst);
    }
    let process_cpu_ns = r.meta.process_cpu_ns();
    let (shared, meta) = (r.shared, r.meta);
    let meta = &meta;
    // The drain thread also stops so at a signal's or `_exit`'s request (the process ends
    // once it is answered): a caller that wants a profile still gets one, of nothing.
    if drained.unsampled_exit && unsampled_ok {
        // Nothing sampled, and the process is ending: its timers (rings that hold nothing,
        // disabled) go with it, and no profile is built. No signal came, so no handler
        // holds the state; none will (the rings deliver none).
        SHARED.store(std::ptr::null_mut(), SeqCst);
        wait_handlers();
        *lock_running() = None;
        std::mem::forget(shared);
        return Some(Err(process_cpu_ns.unwrap_or(0)));
    }
    // A program that took the signal over may run its own ITIMER_PROF now: leave it.
    if meta.source == Source::ProcessTimer && drained.handler_replaced_at.is_none() {
        let _ = timer::process_timer(0);
    }
    SHARED.store(std::ptr::null_mut(), SeqCst);
    wait_handlers();
    handler::uninstall(meta.settings.signal);
    // Held only here, not across the join above: a fork during `stop()` must not leave the
    // child with this lock taken.
    *lock_running() = None;
    // SHARED is null and no handler holds it (ACTIVE was zero after the store); the drain
    // thread has been joined: `shared` is the last owner, and freed at the end.
    shared.store.drain(&mut drained.stacks, 0, true);
    #[cfg(feature = "capture")]
    poller::to_timeline(&shared, &drained.stacks, &mut drained.timeline, true);
    let profile = (how != Ending::Dropped)
        .then(|| profile::build(parts(meta, &shared, drained, process_cpu_ns)));
    if exiting {
        std::mem::forget(shared);
    }
    profile.map(Ok)
}

impl StartInfo {
    /// The process's CPU time since `start()` (CPU mode).
    fn process_cpu_ns(&self) -> Option<u64> {
        match (
            self.settings.mode,
            timer::process_cpu_ns(),
            self.cpu_at_start,
        ) {
            (Mode::Cpu, Some(now), Some(then)) => Some(now.saturating_sub(then)),
            _ => None,
        }
    }
}

/// What `profile::build` needs, from the sampler and what the drain thread gathered.
fn parts(
    r: &StartInfo,
    shared: &Shared,
    d: Drained,
    process_cpu_ns: Option<u64>,
) -> profile::Parts {
    let sampled = r.started.elapsed();
    // A profile of the whole process also holds the CPU time it used before the start (in
    // `[not sampled: ...]` rows): it spans the process since it was loaded, so that its total
    // is read against the time that holds it. A program `record` execs starts its sampler
    // late; its profile said "Duration: 240us, Total samples = 1.50ms (622%)", single-threaded.
    let span = match r.settings.whole_process {
        true => sampled.max(Duration::from_nanos(crate::sys::clock::process_wall_ns())),
        false => sampled,
    };
    profile::Parts {
        unsampled_said: r.unsampled_said,
        mode: r.settings.mode,
        source: r.source,
        requested_hz: r.settings.hz,
        period_ns: shared.period_ns,
        duration: span,
        start_time: r
            .start_time
            .checked_sub(span - sampled)
            .unwrap_or(r.start_time),
        stacks: d.stacks,
        names: d.names,
        unsampled: d.unsampled,
        before_start: d.before_start,
        lost: shared.store.lost(),
        signals: shared.signals.load(Relaxed),
        // Without waiting for the clock's calibration: a process that lived a few ms would
        // otherwise sleep out the rest of its window at exit, for a diagnostic figure.
        // No signal, no handler time (and the clock may never have been chosen).
        handler_ns: match shared.signals.load(Relaxed) {
            0 => 0,
            _ => crate::clock::rate_without_waiting().map_or(0, |r| {
                (shared.handler_ticks.load(Relaxed) as f64 * 1e9 / r) as u64
            }),
        },
        leaf_only: shared.leaf_only.load(Relaxed),
        truncated: shared.truncated.load(Relaxed),
        overrun_signals: shared.overrun_signals.load(Relaxed),
        max_overrun: shared.max_overrun.load(Relaxed),
        overrun_periods: shared.overrun_periods.load(Relaxed),
        overrun_periods_sq: shared.overrun_periods_sq.load(Relaxed),
        on_cpu_timer: d.on_cpu_timer,
        ring_threads: d.ring_threads,
        ring_threads_back: d.ring_threads_back,
        ring_lost: d.ring_lost,
        own_chain: d.own_chain,
        unwind: r.settings.unwind,
        ring_sampled: d.ring_sampled,
        stack: d.stack,
        closed_by_program: d.closed_by_program,
        overflowed: shared.store.overflowed.load(Relaxed),
        unarmed: d.unarmed,
        arm_error: d.arm_error,
        threads_seen: d.threads_seen,
        counted: d.counted,
        kernel: d.kernel,
        steal_ns: d.steal_ns,
        adopted: d.adopted,
        maps_reads: d.maps_reads,
        process_cpu_ns,
        table_bytes: shared.store.bytes(),
        stray: handler::STRAY
            .load(Relaxed)
            .saturating_sub(r.stray_at_start),
        ranges_dropped: shared.ranges.dropped.load(Relaxed),
        handler_replaced: d.handler_replaced_at.map(|at| {
            let since = match (process_cpu_ns, r.cpu_at_start) {
                // From the moment it was found to the end of the profile.
                (Some(total), Some(start)) => Some(total.saturating_sub(at.saturating_sub(start))),
                _ => None,
            };
            (signal_name(r.settings.signal), since)
        }),
        target: None,
        exit: None,
    }
}
