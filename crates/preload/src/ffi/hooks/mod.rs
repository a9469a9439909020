//! What runs without being called: the load-time constructor, the exit and signal hooks, and
//! `pthread_create`, which arms each new thread's timer before its start routine runs.

use super::*;

// ---- Load, exit, signals -----------------------------------------------------------------

/// Runs when the library is loaded (LD_PRELOAD or linked): starts the profile that
/// `TICKSCOPE_CPUPROFILE` asks for.
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

extern "C" fn on_load() {
    // The settings are what the program was started with: read later (at exit, on the
    // thread that starts a deferred sampler), they are not what the program may have made
    // of its environment since, nor read by `getenv` beside its `setenv`.
    tickscope_sys::env::freeze_env();
    find_real_signal_functions();
    // The library's own frames (its hooks) are named without reading its DWARF at exit.
    ts::sampler::host::own_frames_by_symbols();
    let _ = catch_unwind(heap::start_from_env);
    let _ = catch_unwind(start_from_env);
}

fn start_from_env() {
    // The library's messages go to the standard error the program starts with, never into
    // a file the program opens later as descriptor 2.
    tickscope_sys::stderr::keep_stderr(tickscope_sys::env::env_var(
        tickscope_fmt::protocol::env::MESSAGES,
    ));
    let pid = std::process::id();
    let mut warn = |w: String| tickscope_sys::stderr::say(&format!("tickscope: {w}"));
    let Some((settings, extras)) =
        profile::settings_from_env(tickscope_sys::env::env_var, pid, parent_pid(), &mut warn)
    else {
        return;
    };
    if extras.root {
        // Programs this one execs profile into files of their own (see the crate docs).
        std::env::set_var(tickscope_fmt::protocol::env::ROOT_PID, pid.to_string());
    }
    if extras.outside {
        // `record` samples this process from outside (see `profile::EnvExtras::outside`):
        // no sampler, thread or profile here. Its fork children still say they ran
        // unprofiled as they end (at exit, `_exit`, or SIGINT/SIGTERM), or sample
        // themselves with `--forks`.
        profile::claim(pid);
        write_at_exit();
        // A fork child that samples (`--forks`) takes `_exit`'s answer pipe over, as from
        // a sampled parent: made here for it (no thread; this process's `_exit` finds no
        // sampler to ask).
        let forks_pipe = match &extras.forks {
            Some(_) => write_at_underscore_exit(),
            None => Ok(()),
        };
        if extras.on_signals {
            write_on_signals();
        }
        match (&extras.forks, forks_pipe) {
            (Some(forks), Ok(())) => deferred::sample_fork_children(
                &settings,
                forks.base.clone(),
                forks.line_if_unsampled,
            ),
            (Some(_), Err(e)) => tickscope_sys::stderr::say(&format!(
                "tickscope: {e}: fork children are not sampled (they are counted)"
            )),
            (None, _) => {}
        }
        return;
    }
    // Under `record`, a program it exec'd starts its sampler a moment late, so that one that
    // ends first costs little (see `deferred`); the hooks go in first.
    let deferrable = settings.line_if_unsampled && extras.on_signals;
    if !deferrable && !start_with(settings.clone()) {
        return;
    }
    write_at_exit();
    match write_at_underscore_exit() {
        Ok(()) if extras.on_signals => write_on_signals(),
        Ok(()) => {}
        Err(e) => tickscope_sys::stderr::say(&format!(
            "tickscope: {e}: the profile is written at exit only (not at _exit{})",
            if extras.on_signals {
                " nor on SIGINT/SIGTERM"
            } else {
                ""
            }
        )),
    }
    if let Some(forks) = &extras.forks {
        deferred::sample_fork_children(&settings, forks.base.clone(), forks.line_if_unsampled);
    }
    if deferrable && !deferred::defer(settings.clone()) {
        start_with(settings);
    }
}

/// The parent's process id.
fn parent_pid() -> u32 {
    // SAFETY: getppid has no preconditions and cannot fail.
    unsafe { libc::getppid() as u32 }
}

/// Starts the sampler the environment asked for (falling back to `SIGPROF` where there is
/// no per-thread timer); says why not if it cannot. True if it runs.
pub(super) fn start_with(mut settings: Settings) -> bool {
    let mut started = profile::start(&settings);
    if let Err(f) = &started {
        // No per-thread timer here: setitimer, which can only deliver SIGPROF.
        if f.code == Code::Unsupported && settings.signal != Some(libc::SIGPROF) {
            settings.signal = Some(libc::SIGPROF);
            started = profile::start(&settings);
        }
    }
    if let Err(f) = started {
        tickscope_sys::stderr::say(&format!(
            "tickscope: {}={}: not profiling: {}",
            tickscope_fmt::protocol::env::PROFILE,
            settings.path.display(),
            f.message
        ));
        return false;
    }
    true
}

/// Registers the exit hook once: a running sampler's profile is written when the program
/// exits (`exit()` or a return from `main`).
pub(super) fn write_at_exit() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `at_exit` is an `extern "C" fn()` that lives as long as the process (this
        // library is never unloaded while a sampler runs: it holds the signal handler).
        if unsafe { libc::atexit(at_exit) } != 0 {
            tickscope_sys::stderr::say(
                "tickscope: cannot register the exit hook; call tickscope_sampler_stop()",
            );
        }
    });
}

extern "C" fn at_exit() {
    let _ = catch_unwind(|| profile::finish("at exit"));
}

/// The pipe the drain thread answers `_exit` on once the profile is written: its read end
/// (where `_exit` waits) and its write end.
static EXIT_DONE: AtomicI32 = AtomicI32::new(-1);
static EXIT_DONE_WRITE: AtomicI32 = AtomicI32::new(-1);
/// `_exit`'s request to the drain thread (signals ask with their number).
const EXIT_REQUEST: u32 = 0x100;
/// How long `_exit` waits for the profile, at most (ms): a program that calls `_exit` from
/// a signal handler may have interrupted a lock the writing needs; it then ends without its
/// profile rather than hang.
const EXIT_WAIT_MS: u64 = 3000;
/// The process that installed the handlers, or a fork child that samples and took them over
/// (any other fork child dies of the signal directly). 0 without
/// `TICKSCOPE_CPUPROFILE_SIGNALS=1`.
static SIGNAL_OWNER: AtomicU32 = AtomicU32::new(0);
/// The process whose `_exit` writes its profile (the one that set up the drain thread's
/// answer to it, or a fork child that samples and took it over): any other goes straight out.
static EXIT_OWNER: AtomicU32 = AtomicU32::new(0);

/// SIGINT/SIGTERM: asks the sampler's drain thread to write the profile and end the process
/// by the signal ([`on_request`]). Async-signal-safe: `getpid`, atomics, `futex`, libc's
/// `sigaction`, `tgkill`, and errno preserved.
extern "C" fn on_terminate(sig: c_int) {
    keeping_errno(|| {
        let handed =
            signal_owner() && (ts::sampler::host::request_stop(sig as u32) || before_start(sig));
        // Handed over, the handler returns and the program runs on until the drain thread
        // ends the process. It does not wait here for that: the code it interrupted may
        // hold a lock the writing needs (malloc's main arena, where the sampler's tables
        // were allocated), and the wait would last its whole bound.
        if !handed {
            // A fork child (no sampler runs in it) or a sampler already stopped: die of the
            // signal as without us, a fork child saying first that it ran unprofiled (a
            // worker a pool terminates).
            report_fork_child();
            set_action(sig, libc::SIG_DFL);
            // What `raise` does, without this library's hook.
            signal_this_thread(sig);
        }
    })
}

/// [`on_terminate`] with no sampler running yet (its start deferred, see `deferred`): true if
/// the signal was left for the thread starting the sampler right now, or handed to the
/// sampler it has just started. Otherwise the handler ends the process by the signal, having
/// first said (where the start will now never happen) that the program ended before its
/// first sample. Async-signal-safe.
fn before_start(sig: c_int) -> bool {
    match end_pending_start() {
        deferred::Start::Ended => false,
        deferred::Start::Starting => {
            deferred::leave_signal(sig) || ts::sampler::host::request_stop(sig as u32)
        }
        // Started since the handler asked (a sampler may run now).
        deferred::Start::NotPending => ts::sampler::host::request_stop(sig as u32),
    }
}

/// On the way out: a sampler start still waiting never happens ([`deferred::end_if_pending`])
/// and the line for `record` says the program ended before its first sample. Every signal
/// waits meanwhile, so that none ends the process between the two (the line would be lost).
/// Async-signal-safe.
pub(crate) fn end_pending_start() -> deferred::Start {
    let old = block_all();
    let start = deferred::end_if_pending();
    if start == deferred::Start::Ended {
        write_record_line(tickscope_fmt::protocol::marks::UNSAMPLED);
    }
    // SAFETY: restores the mask `block_all` read (a pending signal arrives now).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    start
}

use tickscope_fmt::protocol::{Line, Reaped};
/// Runs `f`, then puts the calling thread's errno back as it was: a handler, and what a
/// handler calls, must leave the interrupted code's errno alone. Async-signal-safe: the
/// core's, which its sampler's handler uses too.
use tickscope_sys::thread::keeping_errno;

mod heap;
mod reap;
mod sigaction;
mod threads;

pub(super) use sigaction::own_signals_in_fork_child;
use sigaction::*;
pub(super) use threads::real_pthread_create;

/// Sets the calling thread's errno.
fn set_errno(e: c_int) {
    // SAFETY: no preconditions: the calling thread's errno slot.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid and aligned.
    unsafe { *slot = e };
}

/// Takes `sig` off the calling thread's signal mask.
fn unblock(sig: c_int) {
    // SAFETY: sigset_t is plain data; all-zero is a valid value for sigemptyset to fill.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable sigset_t.
    unsafe { libc::sigemptyset(&mut set) };
    // SAFETY: as above; a signal number out of range only fails.
    unsafe { libc::sigaddset(&mut set, sig) };
    // SAFETY: `set` is valid for the call, which changes only this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) };
}

/// On the sampler's drain thread, once it has stopped at a request from [`on_terminate`] or
/// `_exit` ([`profile_before_exit`]): writes the profile, then answers `_exit`, or ends the
/// process by the signal as it would have ended without the profiler. (The drain thread
/// does what a thread of its own used to: one thread fewer in every profiled process, 0.18 ms
/// of each exec'd program's wall time on a 2-core VM.)
fn on_request(code: u32) {
    let why = match code {
        EXIT_REQUEST => "at _exit".to_string(),
        sig => format!("on signal {sig}"),
    };
    let stopped = catch_unwind(|| profile::finish_stopping(&why)).unwrap_or(true);
    if !stopped && profile::stopping() {
        // Another thread (the program's exit) is writing the profile: it answers once done.
        // If it finished meanwhile, whichever of the two takes the request answers it.
        ts::sampler::host::leave_unanswered(code);
        if profile::stopping() {
            return;
        }
        answer_unanswered();
        return;
    }
    answer(code);
}

/// Answers a request the drain thread left for the thread that stopped the sampler (see
/// [`on_request`]), if there is one.
pub(crate) fn answer_unanswered() {
    if let Some(code) = ts::sampler::host::take_unanswered_request() {
        answer(code);
    }
}

/// Once the profile is written: `_exit`'s answer, or the signal's default action (the
/// process ends as it would have without the profiler).
fn answer(code: u32) {
    if code == EXIT_REQUEST {
        exit_done();
        return;
    }
    let sig = code as c_int;
    // Only the handler asks with a signal, and only for these two.
    if sig != libc::SIGINT && sig != libc::SIGTERM {
        return;
    }
    // An `_exit` that came meanwhile waits for the profile too: written.
    exit_done();
    // Restores the default action ...
    set_action(sig, libc::SIG_DFL);
    // ... takes the signal off this thread's mask (tickscope's threads block it), so that
    // it lands whatever the program's threads block now (it had been taken inside `ppoll`'s
    // mask, say) ...
    unblock(sig);
    // ... and sends it again: the process ends as it would have without the profiler.
    // SAFETY: kill to our own pid (the system call: not this library's `kill`, which would
    // look for a profile to write); no memory is involved.
    unsafe {
        libc::syscall(
            libc::SYS_kill,
            std::process::id() as libc::c_long,
            sig as libc::c_long,
        )
    };
}

/// A SIGINT/SIGTERM left by [`on_terminate`] while the sampler was being started, on the
/// thread that started it: handed to the drain thread, or (no sampler: it failed to start)
/// answered here: the process ends by the signal.
pub(super) fn hand_over_signal(sig: c_int) {
    if !ts::sampler::host::request_stop(sig as u32) {
        answer(sig as u32);
    }
}

/// Tells an `_exit` waiting in [`profile_before_exit`] that the profile is written.
fn exit_done() {
    let byte = 1u8;
    // SAFETY: writes one byte from a local to the pipe `_exit` waits on (a bad descriptor
    // only fails).
    unsafe {
        libc::write(
            EXIT_DONE_WRITE.load(Relaxed),
            (&byte as *const u8).cast(),
            1,
        )
    };
}

/// `_exit` and `_Exit` write the profile (through the drain thread, see [`_exit`]): the
/// pipe the drain thread answers on, and the drain thread's handler for the request.
fn write_at_underscore_exit() -> std::io::Result<()> {
    let (done_read, done_write) = pipe_above_stdio()?;
    ts::sampler::host::on_stop_request(on_request);
    EXIT_DONE_WRITE.store(done_write, Relaxed);
    EXIT_DONE.store(done_read, Relaxed);
    EXIT_OWNER.store(std::process::id(), Relaxed);
    Ok(())
}

/// With `TICKSCOPE_CPUPROFILE_SIGNALS=1`: SIGINT and SIGTERM write the profile, then the
/// process dies of the signal as it would have. Dispositions the program inherited as
/// ignored stay ignored; handlers the program installs later replace ours. After
/// [`write_at_underscore_exit`], whose request handler writes the profile for them too.
fn write_on_signals() {
    SIGNAL_OWNER.store(std::process::id(), Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        if kernel_action(sig) == Some(libc::SIG_DFL) {
            real_sigaction(sig, &terminate_action(), std::ptr::null_mut());
        }
    }
}

/// The action that writes the profile on SIGINT/SIGTERM: [`on_terminate`].
fn terminate_action() -> libc::sigaction {
    // SAFETY: sigaction is plain data; all-zero is valid.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_terminate as *const () as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: `sa.sa_mask` is a valid sigset_t to clear.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    sa
}

/// A pipe, close-on-exec, neither end on descriptors 0-2 (which a program started with them
/// closed will open as its own standard streams): (read end, write end).
fn pipe_above_stdio() -> std::io::Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    match (
        tickscope_sys::fd::above_stdio(fds[0]),
        tickscope_sys::fd::above_stdio(fds[1]),
    ) {
        (Ok(r), Ok(w)) => Ok((r, w)),
        (r, w) => {
            for fd in [&r, &w].into_iter().flatten() {
                // SAFETY: closes a pipe end this function opened and nothing else holds.
                unsafe { libc::close(*fd) };
            }
            Err(r.and(w).expect_err("one of them failed"))
        }
    }
}

/// Under `record` (messages to its file): a fork child of the profiled process that did not
/// exec (it inherited the sampler, with no timer of its own, so its CPU time is in no
/// profile) says so as it ends: its pid, name and CPU time, for `record` to count and name.
/// Once per process. Async-signal-safe, as `_exit` may be called from a handler: system
/// calls and a buffer on the stack only.
pub(crate) fn report_fork_child() {
    // The process that reported, not a flag: a `vfork` child shares this memory with its
    // parent, whose later children must still report.
    static REPORTED: AtomicU32 = AtomicU32::new(0);
    let owner = profile::owner();
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if owner == 0 || owner == pid {
        return;
    }
    // Signals wait until the line is written: a pool terminating its workers sends SIGTERM
    // while one is on its way out by `_exit`, and the handler's own report (which would find
    // this one begun) then dies with no line written.
    let old = block_all();
    if REPORTED.swap(pid, Relaxed) != pid {
        write_record_line(tickscope_fmt::protocol::marks::FORK_CHILD);
    }
    // SAFETY: restores the mask `block_all` read (a pending signal arrives now).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
}

/// Blocks every signal in the calling thread; returns the mask before. Async-signal-safe.
fn block_all() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; all-zero is a valid value for sigfillset to fill.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is a valid, writable sigset_t.
    unsafe { libc::sigfillset(&mut all) };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid for the call, which changes only this thread's mask.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut old) };
    old
}

/// A line for `record` (`mark`, then this process's id, CPU time and name), written to the
/// messages file. Async-signal-safe.
fn write_record_line(mark: &str) {
    // The process's CPU clock, as every other line for `record` (clock_gettime is
    // async-signal-safe).
    let Some(cpu) = tickscope_sys::clock::process_cpu_ns() else {
        return;
    };
    let mut name = [0u8; 17];
    // SAFETY: PR_GET_NAME writes at most 16 bytes into the 17-byte buffer.
    unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(16)];
    record_line(mark, cpu, name);
}

/// The one form of a line for `record` about this process, written to the messages file:
/// `mark`, then `pid=P cpu-ns=CPU children-ns=C name=NAME` (the name last: it may hold
/// spaces). Async-signal-safe: a buffer on the stack, `getpid`, `getrusage`, one `write`.
pub(crate) fn record_line(mark: &str, cpu: u64, name: &[u8]) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    // What the children it reaped used (in the figure its own parent gets as it reaps it,
    // from which `record` takes this process's own).
    let children = tickscope_sys::clock::children_cpu_ns().ok();
    let line = Line::process(mark.as_bytes(), pid, cpu, children, name);
    tickscope_sys::stderr::write_messages_file_in_signal(line.bytes());
}

/// Interposes `_exit` (dash ends by it, Python's `os._exit` too, and neither runs the exit
/// hooks): in the process that asked for the profile, with a sampler running, the profile
/// is written first, by the sampler's drain thread, while this one waits at most
/// [`EXIT_WAIT_MS`]; then the process ends as `_exit` ends it. The writing is never done
/// here: `_exit` is the way out of a signal handler, and the code it interrupted may hold a
/// lock the writing needs. SIGINT and SIGTERM with the default action are ignored while it
/// waits. Async-signal-safe: `getpid`, atomics, `futex`, libc's `sigaction`,
/// `clock_gettime`, `poll`, `exit_group`.
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    profile_before_exit();
    loop {
        // SAFETY: exit_group ends every thread of the process and does not return.
        unsafe { libc::syscall(libc::SYS_exit_group, status as libc::c_long) };
    }
}

/// `_Exit`, C99's name for [`_exit`] (a separate symbol a program may call).
#[no_mangle]
pub extern "C" fn _Exit(status: c_int) -> ! {
    _exit(status)
}

/// Interposes `raise`: a program that ends itself by SIGINT or SIGTERM after putting back
/// its default action (dash on Ctrl-C: its handler resets the signal and raises it again)
/// has its profile written first, as at [`_exit`]. Otherwise, and then, `raise` as glibc's:
/// the signal sent to the calling thread.
#[no_mangle]
pub extern "C" fn raise(sig: c_int) -> c_int {
    profile_before_own_signal(sig);
    signal_this_thread(sig)
}

/// Sends `sig` to the calling thread (`tgkill`), as glibc's `raise` does. Async-signal-safe.
fn signal_this_thread(sig: c_int) -> c_int {
    // SAFETY: getpid and gettid have no preconditions.
    let (pid, tid) = (unsafe { libc::getpid() }, unsafe { libc::gettid() });
    // SAFETY: tgkill has no memory arguments; an invalid signal only fails, errno set.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            pid as libc::c_long,
            tid as libc::c_long,
            sig as libc::c_long,
        ) as c_int
    }
}

/// Interposes `kill`: as [`raise`] for a signal a program sends its own process (Python
/// ends so after a KeyboardInterrupt: `kill(getpid(), SIGINT)` with the default action
/// back). Then `kill` itself.
#[no_mangle]
pub extern "C" fn kill(pid: libc::pid_t, sig: c_int) -> c_int {
    // SAFETY: getpid has no preconditions.
    if pid == unsafe { libc::getpid() } {
        profile_before_own_signal(sig);
    }
    // SAFETY: kill has no memory arguments; a wrong pid or signal only fails, errno set.
    unsafe { libc::syscall(libc::SYS_kill, pid as libc::c_long, sig as libc::c_long) as c_int }
}

/// Before SIGINT or SIGTERM is sent to this process by itself: if it will end the process
/// (the default action, or the library's handler standing in for it, and the calling
/// thread, which the kernel gives it to first, does not block it), the profile is written
/// as at `_exit` ([`profile_before_exit`]), and the kernel has the default action again for
/// the signal to end the process. A handler of the program's, an ignored or a blocked
/// signal, a fork child, or signals not asked for: nothing. Async-signal-safe, as the
/// callers are called from handlers.
fn profile_before_own_signal(sig: c_int) {
    if (sig != libc::SIGINT && sig != libc::SIGTERM) || SIGNAL_OWNER.load(Relaxed) == 0 {
        return;
    }
    if !signal_owner() {
        // A fork child that did not exec ends by the signal: said, under `record`. (Where
        // the library's handler is the action, the handler says it.)
        if kernel_action(sig) == Some(libc::SIG_DFL) {
            report_fork_child();
        }
        return;
    }
    // Ignored at once where the action is the default, before anything else is done (each
    // system call widens the window in which another of these signals, a second Ctrl-C,
    // would end the process unwritten). Where the library's handler stands in for the
    // default, it takes such a signal itself.
    let ignored = ignore_if_default(sig);
    if ignored.is_none() && kernel_action(sig) != Some(on_terminate as *const () as usize) {
        return;
    }
    // SAFETY: sigset_t is plain data; all-zero is valid for pthread_sigmask to fill.
    let mut mask: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: reads this thread's mask into a valid local (a null new set changes nothing).
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) };
    // SAFETY: `mask` is a valid sigset_t.
    let blocked = unsafe { libc::sigismember(&mask, sig) } == 1;
    if !blocked {
        // The caller is often a handler.
        keeping_errno(profile_before_exit);
    }
    match ignored {
        // The action as it was (the default).
        Some(old) => {
            real_sigaction(sig, &old, std::ptr::null_mut());
        }
        // The default the program was shown, now in the kernel, once the profile is
        // written; a blocked signal keeps the library's handler (it may reach another
        // thread, or this one later).
        None if !blocked => set_action(sig, libc::SIG_DFL),
        None => {}
    }
}

/// A thread of this process is on its way out through [`profile_before_exit`].
static EXITING: AtomicBool = AtomicBool::new(false);

/// Asks the drain thread to write the profile and waits for it (bounded); nothing in a fork
/// child (unless it samples too), with no sampler running, or when another thread is
/// already exiting.
///
/// The process is on its way out (by `_exit`, or by a signal it sends itself with the
/// default action back): a SIGINT or SIGTERM that would end it by that default action before
/// the profile is written (a second Ctrl-C; `record` passing on a signal sent to the whole
/// group) is ignored until then. Without the profiler the process would already be gone.
fn profile_before_exit() {
    // A fork child that did not exec: said, under `record`, and nothing written.
    report_fork_child();
    let done = EXIT_DONE.load(Relaxed);
    if done < 0 || !exit_owner() || EXITING.swap(true, Relaxed) {
        return;
    }
    let held = [libc::SIGINT, libc::SIGTERM].map(ignore_if_default);
    // A sampler whose start was deferred: none will start now (the line for `record` says
    // the program ended before its first sample), or one is starting: waited for.
    if end_pending_start() == deferred::Start::Starting {
        deferred::wait_started();
    }
    if ts::sampler::host::request_stop(EXIT_REQUEST) {
        wait_written(done);
    }
    for (sig, old) in [libc::SIGINT, libc::SIGTERM].into_iter().zip(held) {
        if let Some(old) = old {
            real_sigaction(sig, &old, std::ptr::null_mut());
        }
    }
}

/// Where `sig`'s action (in the kernel) is the default, ignores it and returns the action it
/// had. Async-signal-safe.
fn ignore_if_default(sig: c_int) -> Option<libc::sigaction> {
    // SAFETY: sigaction is plain data; all-zero is valid, and a null new action only reads.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    if real_sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
        return None;
    }
    // SAFETY: as above.
    let mut ignore: libc::sigaction = unsafe { std::mem::zeroed() };
    ignore.sa_sigaction = libc::SIG_IGN;
    (real_sigaction(sig, &ignore, std::ptr::null_mut()) == 0).then_some(old)
}

/// Waits (at most [`EXIT_WAIT_MS`]) for the drain thread to say, on the pipe `done`, that
/// the profile is written; a handler that runs meanwhile (a second signal) does not end the
/// wait. The byte is left in the pipe: any other waiter goes on too. Async-signal-safe:
/// `clock_gettime`, `poll`.
fn wait_written(done: c_int) {
    // Instant::now is clock_gettime (vDSO): no lock, no allocation.
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(EXIT_WAIT_MS);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return;
        }
        let mut p = libc::pollfd {
            fd: done,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one valid pollfd on the stack.
        match unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as c_int) } {
            -1 if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
            _ => return,
        }
    }
}
