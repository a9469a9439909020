//! tickscope for C and C++, and for programs that cannot be changed.
//!
//! This crate builds `libtickscope.so` and `libtickscope.a`, whose C API is
//! `include/tickscope.h`: scopes (`TICKSCOPE_SCOPE`, `TICKSCOPE_FUNCTION`, `TICKSCOPE_API`),
//! the timer, the sampler and the capture, over the same core as the Rust crate, so the
//! per-thread interval lines and the exit summary are the same.
//!
//! Preloaded into any program, the library profiles its whole run:
//!
//! ```text
//! TICKSCOPE_CPUPROFILE=out.pb.gz LD_PRELOAD=/path/to/libtickscope.so ./prog args
//! ```
//!
//! | variable | meaning |
//! |---|---|
//! | `TICKSCOPE_CPUPROFILE=PATH` | profile from load to exit, written to `PATH` (pprof, gzipped) |
//! | `TICKSCOPE_CPUPROFILE_FREQUENCY=HZ` | samples per second of CPU time per thread (default 100) |
//! | `TICKSCOPE_CPUPROFILE_MODE=cpu\|wall` | CPU time (default) or wall-clock time |
//! | `TICKSCOPE_CPUPROFILE_SIGNALS=1` | also write the profile on `SIGINT`/`SIGTERM`, then die of the signal |
//! | `TICKSCOPE_CPUPROFILE_UNWIND=tables\|fp` | walk stacks by the unwind tables (default) or by frame pointers |
//! | `TICKSCOPE_CPUPROFILE_SIGNAL=RTMIN+4` | the signal the timers deliver (`PROF`, `RTMIN+N`, a number) |
//! | `TICKSCOPE_CPUPROFILE_QUIET=1` | no "profile written" line on stderr (warnings still appear) |
//! | `TICKSCOPE_CPUPROFILE_FORKS=1` | a fork child that does not exec profiles too, into `PATH.<pid>` as a program exec'd does (`record --forks`); each fork then starts a thread in its child |
//! | `TICKSCOPE_CPUPROFILE_START_DELAY_MS=MS` | under `record`, how long a program it execs waits before starting its sampler (default: one sampling period, at most 1 ms) |
//! | `TICKSCOPE_CPUPROFILE_OUTSIDE=PID` | `record` sets its own pid: the program whose parent that is (the one `record` started, and what it execs in its place) runs no sampler and no thread; `record` samples it from outside (`tickscope::sampler::Attached`) and writes its profile |
//! | `TICKSCOPE_HEAPPROFILE=PATH` | a heap profile (Go's four sample types), written to `PATH` at exit: `malloc` and the rest of its family are sampled every `TICKSCOPE_HEAP_RATE` bytes on average (512 KiB); a program exec'd writes `PATH.<pid>`; only where this library is preloaded |
//! | `TICKSCOPE_MESSAGES=PATH` | tickscope's messages appended to `PATH` (an existing file; `record` sets it) instead of stderr, with a line for `record` giving the CPU time the profile's writing took; a profile of few samples is not warned of there (`record` judges the run's profiles together) |
//!
//! - **Read as the library loads**: every `TICKSCOPE_*` variable is taken as the program was
//!   started with it. A program that changes its environment later (`clearenv`, `unsetenv`,
//!   a shell's `unset`) keeps its settings, and the library never calls `getenv` while the
//!   program's threads may be calling `setenv`.
//! - **setuid and setgid programs** (the kernel's `AT_SECURE`, as glibc's `secure_getenv`):
//!   every `TICKSCOPE_*` variable is ignored, with one warning, so that no user can make a
//!   privileged program write files of its choosing.
//! - **Messages** (warnings, "profile written") go to the standard error the process had
//!   when the library was loaded, never into a file the program later opens as descriptor
//!   2; if it was closed then, they are dropped.
//! - **Every thread** the program starts is sampled from its first instruction: the library
//!   interposes `pthread_create`, and a new thread has its timer armed before its start
//!   routine runs (threads made otherwise, by a raw `clone`, are found by the core sampler's
//!   poll of `/proc/self/task`; their time before that is in the profile as
//!   `[not sampled: ...]`). The CPU time the program used before the library was loaded and
//!   started is `[not sampled: before the profiler started]`: the profile's total is the
//!   process's CPU time, and nothing is lost silently.
//!   A thread that blocks the sampling signal (as xz's workers block every signal) is
//!   sampled through a perf ring instead, where perf events are permitted (its user stack
//!   walked by the kernel, no scope labels); time in system calls is each thread's
//!   `[kernel mode]` row with the perf source.
//! - **Written at exit**: `exit()` and a return from `main` (an `atexit` handler registered
//!   when the library loads, so it runs after the program's own), and `_exit`/`_Exit` (dash
//!   ends by it, Python's `os._exit` too: the sampler's drain thread writes the profile
//!   while `_exit` waits, at most 3 s). With `TICKSCOPE_CPUPROFILE_SIGNALS=1` (which
//!   `record` sets) also on `SIGINT`/`SIGTERM` when the program has not
//!   installed handlers of its own for them, or when its own handler ends the process by
//!   raising the signal again with the default action back (`raise`, or `kill` of its own
//!   pid: dash on Ctrl-C). A program that asks for their default action (`sigaction`,
//!   `signal`: dash does for SIGTERM as it starts; also `sysv_signal`, `sigset`,
//!   `bsd_signal`) keeps the library's handler, which writes
//!   the profile and then ends the process by the default action; the program is shown the
//!   default it asked for. While the profile is written on the way out, a further SIGINT
//!   or SIGTERM does not end the process first (it is ignored, or taken by the library's
//!   handler). `abort` and other fatal signals write nothing.
//! - **Signals**: the timers deliver `SIGRTMIN+4`, not `SIGPROF`, so a program with its own
//!   `SIGPROF` handler (its own profiler, `setitimer`) keeps working unchanged.
//! - **File descriptors**: each thread's timer is a perf task-clock event where the kernel
//!   permits one, and holds a descriptor (close-on-exec). The library takes at most a quarter
//!   of `RLIMIT_NOFILE`; further threads get a timer on their CPU clock. The library never
//!   takes descriptors 0-2, even when the program starts with them closed. A program that
//!   closes descriptors it did not open stops those threads' sampling (the profile counts
//!   the events and reports their time as not sampled); numbers it reuses are never touched.
//! - **fork**: a child that does not exec is not profiled and writes nothing (its CPU time
//!   is not in the parent's profile), unless `TICKSCOPE_CPUPROFILE_FORKS=1` (`record
//!   --forks`): then it profiles into `PATH.<pid>` as a program exec'd, its start deferred
//!   by one sampling period (at most 1 ms) on a small thread, as under `record`. Under `record` it says so as it ends (at `exit`,
//!   `_exit`, or SIGINT/SIGTERM): `record` prints how many fork children ran unprofiled,
//!   their names and CPU time, and how much CPU time no profile holds. A program exec'd by
//!   the profiled process inherits the environment and profiles into `PATH.<pid>`; under
//!   `record` (CPU time), one that ends before its first sample writes no file but a line
//!   with its pid, name and CPU time, which `record` counts and keeps as one row. Such a
//!   program starts its sampler a moment late: after one sampling period (at most 1 ms) on
//!   a small thread of the library's (made on the CPU the program starts on, and kept there
//!   while it waits), or at once when it starts a thread (which is then
//!   sampled from its first instruction); one that ends first starts none (most commands
//!   of a shell script: the start and stop were most of what each cost). The CPU time
//!   before the start is `[not sampled: before the profiler started]`.
//! - **Reaping children** (`wait4`, `waitpid`, `wait`, `wait3`, interposed: libc's, with
//!   the child's CPU time asked for where the caller did not ask): under `record`, each child
//!   reaped is said with the CPU time the kernel gave for it, its end included (unmapping
//!   its memory, a tenth of a `/bin/true`'s time), which the line it wrote before it ended
//!   cannot hold; `record` holds that whole figure for the programs that ended before their
//!   first sample and the fork children. `waitid` (CPU time in clock ticks only) is left
//!   alone; a child reaped with it, or by a parent not profiled, is held as its line says.
//! - **tickscope's own threads** (the drain thread, which also writes the profile on
//!   SIGINT/SIGTERM and `_exit`; a capture's threads) are sampled
//!   by their frame pointers into small perf rings, and are not armed as they start: they
//!   are found by the sampler's poll, if they live that long.
//! - **Stacks**: walked by the unwind tables (`.eh_frame`, DWARF CFI), as gperftools'
//!   libunwind and `perf --call-graph dwarf` walk them, so code built without frame pointers
//!   (nearly every program and library a distribution ships) has its callers. Where perf
//!   events are permitted, each thread's task-clock event copies its user registers and the
//!   top 16 KiB of its stack into a ring at each sample, no signal sent, and the library's
//!   drain thread walks the copy with `framehop`, loading a module's tables the first time a
//!   stack passes through it. Such samples carry no scope labels. A deeper stack is cut at
//!   16 KiB and counted as truncated. A ring is 260 KiB of locked memory: a thread that
//!   cannot get one (`RLIMIT_MEMLOCK`, `perf_event_mlock_kb`), and every thread where perf
//!   events are not permitted or in wall mode, is signalled and walked by frame pointers,
//!   and the profile's comments say how many. `TICKSCOPE_CPUPROFILE_UNWIND=fp` asks for
//!   frame pointers (and scope labels) everywhere. No frame is ever invented. Frames in
//!   this library itself (its hooks) are named from its symbol table, without files or
//!   lines: reading its DWARF cost each such process about 15 ms at exit.
//!
//! `tickscope record -- ./prog` sets all this up and prints the top functions.
//!
//! Every exported function catches panics: nothing unwinds into C. Functions that can fail
//! return `TICKSCOPE_OK` (0) or a negative code, and `tickscope_last_error()` says why.
#![deny(unsafe_code)]
#![warn(missing_docs)]

// Every FFI function and every `unsafe` block of this crate is in `ffi/`.
#[allow(unsafe_code)]
mod ffi;
mod names;
mod profile;

/// The codes the C API returns (`TICKSCOPE_E*` in the header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum Code {
    /// A null pointer, an empty string or an out-of-range number.
    Invalid = -1,
    /// Already running, or not running.
    State = -2,
    /// A file could not be written.
    Io = -3,
    /// Not possible on this system.
    Unsupported = -4,
    /// A bug in the library, caught at the boundary.
    Panic = -5,
}

/// A failed call: its code, and the message `tickscope_last_error()` returns.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}
