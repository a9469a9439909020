//! tickscope: an in-process profiler for Rust — exact scope timings at a few nanoseconds each,
//! with no setup call.
//!
//! Put [`scope!`] (or [`#[profile]`](macro@profile)) in the code to measure. Each thread keeps
//! its own counters with no lock and no shared write; at process exit a table of every scope
//! appears on stderr by itself: calls, total, self, mean, min, p50, p99, max, share of wall
//! time and clock errors. [`Config`] or `TICKSCOPE_*` variables add per-thread interval lines
//! (`TID 0x1a2b time spent in "parse": 7/1001 ms 0.7% 6481x`), JSON, files and more.
//!
//! The clock is the CPU's counter, calibrated against `CLOCK_MONOTONIC` and guarded against
//! jumps ([`now`], [`Timer`]).
//!
//! ```
//! #[tickscope::profile]
//! fn parse(input: &str) -> usize {
//!     input.split(',').count()
//! }
//!
//! fn alloc_block() {
//!     tickscope::scope!(group = "alloc"); // every function of an API in one row
//! }
//!
//! fn main() {
//!     tickscope::scope!("main loop");
//!     for _ in 0..1000 {
//!         parse("a,b,c");
//!         alloc_block();
//!     }
//! } // the exit summary prints itself
//! ```
//!
//! # Main types
//! - [`scope!`] and [`#[profile]`](macro@profile): open a scope until the end of the block.
//! - [`Scope`]: the guard (`!Send`); [`set_enabled`] switches recording at run time.
//! - [`report`], [`report_string`]: a summary on demand; [`Config`] for settings.
//! - [`Timer`], [`now`], [`ticks_per_second`], [`system_time_ms`]: the clock.
//! - [`sampler::Sampler`]: the sampling CPU profiler; its samples carry the open scopes as
//!   pprof labels.
//! - [`capture::Capture`]: the timeline (every scope begin and end, frame marks, counters,
//!   messages) to a file, a TCP listener or a flight recorder; also `TICKSCOPE_CAPTURE=FILE`.
//!   The same shape as the sampler: a builder whose `start()` returns a handle, whose
//!   `stop()` returns what was collected; dropping the handle stops it.
//!
//! # Semantics
//! - **total** is inclusive time; **self** excludes time in child scopes.
//! - A scope (or group) entered again while it is open on the same thread — recursion, or an
//!   API calling its own public function — counts the call, but its time is added once, at
//!   the outermost exit. `mean`, `min`, `max` and percentiles describe outermost calls.
//! - Percentiles come from a log-linear histogram: within 1% of the exact value.
//! - A thread that exits is folded into the totals; nothing it recorded is lost. Whatever
//!   cannot be recorded (nesting deeper than 4096, a scope opened during thread teardown) is
//!   counted and shown in the report.
//!
//! # Features
//! | feature | default | what it does |
//! |---|---|---|
//! | `enabled` | yes | Scopes record. Without it (`default-features = false`) the macros expand to nothing: zero cost. |
//! | `log` | no | `Output::Log` sends report lines to the `log` crate. |
//! | `sampler` | yes | [`sampler`]: the CPU profiler, pprof output, in-process symbolisation (`addr2line`, `object`, `flate2`). |
//! | `capture` | yes | [`capture`]: the timeline of every scope begin/end, [`frame!`], [`plot!`] and [`message!`], streamed to a `.tscap` file, a TCP listener or a flight recorder (`lz4_flex`, `crc32fast`). |
//! | `tracing` | no | `tracing::Layer`: `tracing` spans as call sites (`tracing-core`, `tracing-subscriber` with the registry only). |
//! | `flamegraph` | no | `Profile::flamegraph_svg` through `inferno`. |
//!
//! # Overhead
//! One scope (enter + exit) is two counter reads plus a few loads and stores to thread-local
//! memory: **about 25.7 ns on a 2-core x86_64 VM where one `rdtsc` alone costs ~10 ns, i.e.
//! 1.29 × the floor of two counter reads and a thread-local add** (the goal is 1.25 ×). Measure it on your
//! machine with `cargo bench -p tickscope --bench overhead`; every exit summary also prints the
//! figure measured in that process. A runtime-disabled scope costs one load and a branch.
//! Memory: ~26 KiB per thread that enters a scope, plus ~11.5 KiB per call site it touches
//! (mostly the percentile histogram), and 8 bytes of TLS per call site in every thread.
//!
//! # Async
//! `#[profile]` on an `async fn`, or [`future::FutureExt::profiled`] on any future, measures
//! each poll as a scope on the thread that runs it (busy time) and the future's first poll
//! to ready as its wall time, counting cancellations (dropped before ready) apart; the exit
//! summary shows busy and wall side by side. A future may move between threads: each poll
//! is counted where it ran, the wall time once. `scope!` itself stays thread-local: a scope
//! held across `.await` is refused by the borrow checker (its guard is not `Send`).
//!
//! # `tracing`
//! With the `tracing` feature, `tickscope::tracing::Layer` turns every `tracing` span into a
//! call site: its entries are scopes (busy time), its life from creation to close its wall
//! time; events become capture messages. See `tickscope::tracing` (feature-gated).

#![deny(missing_docs)]
// `unsafe` lives only where a module allows it below (and in the sampler's items that say
// so); everywhere else it is an error.
#![deny(unsafe_code)]
#![cfg_attr(not(feature = "enabled"), allow(dead_code, unused_imports))]

#[cfg(feature = "capture")]
pub mod capture;
#[allow(unsafe_code)] // the CPU counter (rdtsc, cntvct) and cpuid
pub mod clock;
mod config;
mod diag;
pub mod future;
#[cfg(feature = "sampler")]
mod pprof;
// Reached as `__private::protocol` (not a stable API).
#[doc(hidden)]
pub mod protocol;
mod runtime;
#[cfg(feature = "sampler")]
pub mod sampler;
mod scope;
mod state;
mod summary;
#[cfg(feature = "sampler")]
mod symbolize;
#[allow(unsafe_code)] // platform glue: libc calls, the .init_array entry
mod sys;
#[cfg(feature = "tracing")]
pub mod tracing;

#[cfg_attr(feature = "enabled", path = "imp/enabled.rs")]
#[cfg_attr(not(feature = "enabled"), path = "imp/disabled.rs")]
mod imp;

pub use clock::{now, system_time_ms, ticks_per_second, ClockSource, Ticks, Timer};
pub use config::{parse_interval, Config, Output, SummaryFormat};
pub use imp::{is_enabled, report, report_string, set_enabled, thread_bytes, Scope, COMPILED_IN};

/// Measures a function: the same as putting [`scope!()`](scope) at the top of its body.
///
/// `#[profile]` names the scope after the function (`Type::method` for methods);
/// `#[profile(name = "parse")]` names it; `#[profile(group = "alloc")]` adds it to a group.
/// On an `async fn` it measures the future the call returns, as
/// [`future::FutureExt::profiled`] does: each poll a scope, first poll to ready its wall
/// time. Refused on `const fn`, with a message saying why.
pub use tickscope_macros::profile;

/// Opens a scope that lasts until the end of the enclosing block.
///
/// - `scope!()` is named after the enclosing function (`Type::method` for methods);
/// - `scope!("name")` names it;
/// - `scope!(group = "alloc")` adds this call site to the group `alloc`: every call site of a
///   group is one row, and re-entering a group while it is open counts the call but not the
///   time twice — the API-profiler idea: put it in every public function of an API.
///
/// Without the `enabled` feature the macro expands to nothing.
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! scope {
    () => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__tickscope_function_name!(), Scope);
    };
    (group = $group:expr $(,)?) => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__private::Name::Static($group), Group);
    };
    ($name:expr $(,)?) => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__private::Name::Static($name), Scope);
    };
}

/// The call site's static, its per-thread slot cache, and the guard: what every form of
/// [`scope!`] expands to. Not a stable API.
#[cfg(feature = "enabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_enter {
    ($name:expr, $kind:ident) => {
        $crate::__private::enter_cached($crate::__tickscope_site!(Callsite, $name, $kind), {
            ::std::thread_local! {
                static __TICKSCOPE_SLOT: $crate::__private::SlotCache =
                    const { $crate::__private::SlotCache::new() };
            }
            &__TICKSCOPE_SLOT
        })
    };
}

/// A call site's static (`Callsite` for a scope, `AsyncSite` for a future) named `$name`,
/// of kind `$kind`, at the place the macro was used. Not a stable API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_site {
    ($ty:ident, $name:expr, $kind:ident) => {{
        static __TICKSCOPE_CALLSITE: $crate::__private::$ty = $crate::__private::$ty::new(
            $name,
            $crate::__private::Kind::$kind,
            file!(),
            line!(),
            module_path!(),
        );
        &__TICKSCOPE_CALLSITE
    }};
}

/// The name of the function the macro is used in, resolved at registration. Not a stable
/// API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_function_name {
    () => {
        $crate::__private::Name::Function({
            fn __tickscope_name() -> &'static str {
                fn f() {}
                $crate::__private::type_name_of(f)
            }
            __tickscope_name
        })
    };
}

/// `future` measured as a future call site: what `#[profile]` puts around an `async fn`'s
/// body. Not a stable API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_profiled {
    ((), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__tickscope_function_name!(), Scope, $fut)
    };
    ((group = $group:expr), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__private::Name::Static($group), Group, $fut)
    };
    (($name:expr), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__private::Name::Static($name), Scope, $fut)
    };
    (@site $name:expr, $kind:ident, $fut:expr) => {
        $crate::__private::profiled_at($crate::__tickscope_site!(AsyncSite, $name, $kind), $fut)
    };
}

/// Opens a scope that lasts until the end of the enclosing block.
///
/// The `enabled` feature is off: this expands to nothing.
#[cfg(not(feature = "enabled"))]
#[macro_export]
macro_rules! scope {
    ($($anything:tt)*) => {};
}

/// Marks the end of a frame (of a game loop, a request, a batch) in the running capture:
/// `frame!()` for the default frame kind, `frame!("render")` for a named one. `tickscope
/// report` then gives frame-time statistics (min, mean, p99, max). Costs one load and a branch
/// when no capture runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! frame {
    () => {
        $crate::frame!("frame")
    };
    ($name:expr $(,)?) => {{
        static __TICKSCOPE_MARKER: $crate::__private::Marker =
            $crate::__private::Marker::frame($name);
        $crate::__private::frame(&__TICKSCOPE_MARKER);
    }};
}

/// Records a counter's value in the running capture: `plot!("queue", len as f64)`. Each name
/// is one counter track on the timeline. The value expression is evaluated only while a
/// capture runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! plot {
    ($name:expr, $value:expr $(,)?) => {{
        static __TICKSCOPE_MARKER: $crate::__private::Marker =
            $crate::__private::Marker::counter($name);
        if $crate::__private::capturing() {
            $crate::__private::plot(&__TICKSCOPE_MARKER, ($value) as f64);
        }
    }};
}

/// Records a message in the running capture, formatted like `format!`
/// (`message!("loaded {} items", n)`), into a stack buffer: no allocation; messages longer than
/// `MAX_MESSAGE` (1024) bytes are cut. The arguments are evaluated only while a capture
/// runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! message {
    ($($arg:tt)+) => {
        if $crate::__private::capturing() {
            $crate::__private::message(::std::format_args!($($arg)+));
        }
    };
}

/// Marks a frame (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! frame {
    ($($anything:tt)*) => {};
}

/// Records a counter (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! plot {
    ($($anything:tt)*) => {};
}

/// Records a message (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! message {
    ($($anything:tt)*) => {};
}

/// What the macros expand to. **Not a stable API**: it may change in any release.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "capture")]
    pub use crate::capture::{frame, message, plot, Marker};
    pub use crate::future::{profiled_at, AsyncSite};
    pub use crate::imp::capturing;
    pub use crate::imp::{enter, enter_cached};
    pub use crate::scope::callsite::{type_name_of, Callsite, Kind, Name};
    pub use crate::scope::wall::TimedSite;
    pub use crate::scope::SlotCache;
    /// Output files opened as a careful tool opens them: every command's `-o`, the
    /// preload library's profiles, `record`'s private directory.
    pub use crate::sys::output;

    /// The effective user id.
    pub fn euid() -> u32 {
        crate::sys::euid()
    }

    /// The program `command` starts ends (`SIGTERM`) when this thread, the one that spawns
    /// it, ends: `tickscope record` killed by `SIGKILL` takes its program with it.
    pub fn end_with_parent(command: &mut std::process::Command) {
        crate::sys::end_with_parent(command)
    }

    /// A `TICKSCOPE_*` variable, ignored in a setuid or setgid process (with one warning):
    /// how the preload library reads its settings too.
    pub fn env_var(name: &str) -> Option<String> {
        crate::config::env_var(name)
    }

    /// Every later [`env_var`] answers from the `TICKSCOPE_*` variables as they are now (see
    /// `config::freeze_env`): what the preload library calls as it loads.
    pub fn freeze_env() {
        crate::config::freeze_env()
    }

    /// Prints one line of tickscope's own to the standard error the process had when
    /// [`keep_stderr`] ran (if it did), never into a file the program opened later.
    pub fn say(line: &str) {
        crate::diag::say(line)
    }

    /// Keeps a copy of the process's standard error now (above descriptor 2,
    /// close-on-exec) for [`say`]; if descriptor 2 is closed now, [`say`] prints nothing.
    pub fn keep_stderr() {
        crate::sys::keep_stderr()
    }

    /// Starts one of tickscope's own threads with the signals the program may send the
    /// process blocked (see `sys::spawn_quiet`).
    pub fn spawn_quiet<F, T>(
        builder: std::thread::Builder,
        f: F,
    ) -> std::io::Result<std::thread::JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::sys::spawn_quiet(builder, &[], f)
    }

    /// Asks the running sampler's drain thread to stop and run the function given to
    /// [`on_stop_request`] with `code` (non-zero): for a signal handler or `_exit`, where
    /// nothing that locks may run. False if no sampler runs in this process.
    /// Async-signal-safe.
    #[cfg(feature = "sampler")]
    pub fn request_stop(code: u32) -> bool {
        crate::sampler::request_stop(code)
    }

    /// A [`request_stop`] that came while another thread was stopping the sampler, too late
    /// for the drain thread: once, for the caller of that stop to answer after writing the
    /// profile.
    #[cfg(feature = "sampler")]
    pub fn take_unanswered_request() -> Option<u32> {
        crate::sampler::take_unanswered_request()
    }

    /// Leaves a request for the thread that is stopping the sampler to answer (see
    /// [`take_unanswered_request`]).
    #[cfg(feature = "sampler")]
    pub fn leave_unanswered(code: u32) {
        crate::sampler::leave_unanswered(code)
    }

    /// What the drain thread runs, on its own thread, when it stops at a [`request_stop`]
    /// (the first setting stays).
    #[cfg(feature = "sampler")]
    pub fn on_stop_request(f: fn(u32)) {
        crate::sampler::on_request(f)
    }

    /// The process's name as the kernel has it (its main thread's: the program's name after
    /// its exec, cut to 15 bytes): `PR_GET_NAME` on the main thread, `/proc/self/comm`
    /// elsewhere (the drain thread, writing the profile on a signal). Empty if neither can be
    /// read.
    #[cfg(feature = "sampler")]
    pub fn process_name() -> String {
        crate::sampler::procfs::thread_name(std::process::id() as i32).unwrap_or_default()
    }

    /// Frames in the shared library this code is linked into are named by its symbol table
    /// alone, never by its DWARF (libtickscope.so: see `symbolize::own_frames_by_symbols`).
    #[cfg(feature = "sampler")]
    pub fn own_frames_by_symbols() {
        crate::symbolize::own_frames_by_symbols()
    }

    /// In a fork child: whether the sampler's locks are free (none was held at the fork by a
    /// thread the child does not have), so that a sampler of the child's own can start and
    /// stop without waiting forever.
    #[cfg(feature = "sampler")]
    pub fn sampler_free_after_fork() -> bool {
        crate::sampler::free_after_fork()
    }

    /// The signal mask tickscope's own threads run with (see `sys::spawn_quiet`), for one
    /// started otherwise.
    pub fn quiet_mask() -> libc::sigset_t {
        crate::sys::quiet_mask(&[])
    }

    /// Sleeps while `word` holds `expected`, at most `timeout` (a futex; a signal or a wake
    /// ends it early). Async-signal-safe.
    pub fn futex_wait_while(
        word: &std::sync::atomic::AtomicU32,
        expected: u32,
        timeout: std::time::Duration,
    ) {
        crate::sys::futex_wait_while(word, expected, timeout)
    }

    /// Wakes every thread in [`futex_wait_while`] on `word`. Async-signal-safe.
    pub fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
        crate::sys::futex_wake_all(word)
    }

    /// Runs `f` with the calling thread known as one of tickscope's own (see
    /// `sys::own_threads`): a sampler started meanwhile samples it by frame pointers, as
    /// the drain thread (libtickscope's thread that starts a deferred sampler).
    pub fn as_own_thread<T>(f: impl FnOnce() -> T) -> T {
        let _ours = crate::sys::own_threads::Registered(crate::sys::own_threads::register(
            crate::sys::gettid() as i32,
        ));
        f()
    }

    /// True while the calling thread starts one of tickscope's own threads (see
    /// [`spawn_quiet`]): libtickscope's `pthread_create` does not have it armed at once.
    pub fn spawning_own_thread() -> bool {
        crate::sys::spawning_own_thread()
    }

    /// Moves a descriptor tickscope opened off 0, 1 and 2 (which are the program's), to
    /// the lowest free number from 3, close-on-exec; closes it on failure.
    pub fn above_stdio(fd: i32) -> std::io::Result<i32> {
        crate::sys::above_stdio(fd)
    }

    /// SIGINT, SIGTERM, SIGHUP and SIGQUIT stop ending the process; [`held_signal`] says
    /// which came (for `tickscope record`, which outlives the program it runs).
    pub fn hold_terminal_signals() -> std::io::Result<()> {
        crate::sys::hold_terminal_signals()
    }

    /// The last signal held, once: the signal, and whether a process sent it to this one
    /// alone (`kill`) rather than a terminal to its group (Ctrl-C).
    pub fn held_signal() -> Option<(i32, bool)> {
        crate::sys::held_signal()
    }

    /// Sends signal `sig` to process `pid`.
    pub fn signal_process(pid: u32, sig: i32) -> std::io::Result<()> {
        crate::sys::signal_process(pid, sig)
    }

    /// Sends signal `sig` to process group `pgid`.
    pub fn signal_group(pgid: u32, sig: i32) -> std::io::Result<()> {
        crate::sys::signal_group(pgid, sig)
    }

    /// True when this process's group is the foreground group of the terminal on its
    /// standard input, output or error (a Ctrl-C there reaches the whole group).
    pub fn in_terminal_foreground() -> bool {
        crate::sys::in_terminal_foreground()
    }

    /// The first of the standard descriptors that is a terminal whose foreground group is
    /// this process's group.
    pub fn foreground_terminal() -> Option<i32> {
        crate::sys::foreground_terminal()
    }

    /// The first of the standard descriptors that is a terminal.
    pub fn terminal() -> Option<i32> {
        crate::sys::terminal()
    }

    /// This process's group.
    pub fn own_group() -> u32 {
        crate::sys::own_group()
    }

    /// Makes `pgid` the foreground group of terminal `fd`, from the background too.
    pub fn give_terminal(fd: i32, pgid: u32) -> std::io::Result<()> {
        crate::sys::give_terminal(fd, pgid)
    }

    /// True for the signals that stop a background process for using its terminal
    /// (`SIGTTIN`, `SIGTTOU`).
    pub fn for_the_terminal(sig: i32) -> bool {
        sig == libc::SIGTTIN || sig == libc::SIGTTOU
    }

    /// Continues the stopped processes of group `pgid` (`SIGCONT`).
    pub fn continue_group(pgid: u32) -> std::io::Result<()> {
        crate::sys::signal_group(pgid, libc::SIGCONT)
    }

    pub use crate::sys::Waited;

    /// Runs `f`, then puts the calling thread's errno back as it was (a signal handler's
    /// duty to the code it interrupted). Async-signal-safe if `f` is.
    #[inline(always)]
    pub fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
        crate::sys::keeping_errno(f)
    }

    /// Waits for child `pid` to end or to stop.
    pub fn wait_job(pid: u32, before_reap: Option<&mut dyn FnMut()>) -> std::io::Result<Waited> {
        crate::sys::wait_job(pid, before_reap)
    }

    /// Waits for child `pid` to end without reaping it (a zombie, whose CPU clock can still
    /// be read); the caller reaps it after.
    pub fn wait_ended_unreaped(pid: u32) -> std::io::Result<()> {
        crate::sys::wait_ended_unreaped(pid)
    }

    /// Counts this process's `SIGCONT`s; each interrupts the [`wait_job`] of the calling
    /// thread, whichever thread the kernel hands it to.
    pub fn count_continues() -> std::io::Result<()> {
        crate::sys::count_continues()
    }

    /// How many `SIGCONT`s came since [`count_continues`].
    pub fn continues() -> u32 {
        crate::sys::continues()
    }

    /// Stops this process as a job stops, by `sig` (a terminal's stop signal) or `SIGSTOP`;
    /// returns once continued.
    pub fn stop_as(sig: i32) {
        crate::sys::stop_as(sig)
    }

    /// CPU time (ns) this process has used so far, all its threads together.
    pub fn process_cpu_ns() -> Option<u64> {
        crate::sys::process_cpu_ns()
    }

    /// The `record` ↔ library protocol: the environment and the marks of the lines.
    pub use crate::protocol;

    /// Writes `line` to the messages file `TICKSCOPE_MESSAGES` names, if that is where
    /// tickscope's messages go, and nowhere else. Async-signal-safe (`_exit` may run in a
    /// handler): system calls only, and no lock waited for.
    pub fn say_to_record_in_signal(line: &[u8]) {
        crate::sys::write_messages_file_in_signal(line)
    }

    /// A profile of fewer samples than this is warned of: its shares are mostly noise. Under
    /// `record`, the processes leave the judgment to `record`, which makes it on the run's
    /// profiles together.
    pub const FEW_SAMPLES: u64 = 100;

    /// CPU time (ns) of the children this process has waited for, and of theirs.
    pub fn children_cpu_ns() -> std::io::Result<u64> {
        crate::sys::children_cpu_ns()
    }

    /// The CPU time (user and system, ns) a `rusage` holds (`wait4`'s for a child).
    /// Async-signal-safe.
    pub fn rusage_cpu_ns(r: &libc::rusage) -> u64 {
        crate::sys::rusage_cpu_ns(r)
    }
}
