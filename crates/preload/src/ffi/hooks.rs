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
    ts::__private::freeze_env();
    find_real_signal_functions();
    // The library's own frames (its hooks) are named without reading its DWARF at exit.
    ts::__private::own_frames_by_symbols();
    let _ = catch_unwind(start_from_env);
}

fn start_from_env() {
    // The library's messages go to the standard error the program starts with, never into
    // a file the program opens later as descriptor 2.
    ts::__private::keep_stderr();
    let pid = std::process::id();
    let mut warn = |w: String| ts::__private::say(&format!("tickscope: {w}"));
    let Some((settings, extras)) =
        profile::settings_from_env(ts::__private::env_var, pid, parent_pid(), &mut warn)
    else {
        return;
    };
    if extras.root {
        // Programs this one execs profile into files of their own (see the crate docs).
        std::env::set_var(ts::__private::protocol::env::ROOT_PID, pid.to_string());
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
            (Some(_), Err(e)) => ts::__private::say(&format!(
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
        Err(e) => ts::__private::say(&format!(
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
        ts::__private::say(&format!(
            "tickscope: TICKSCOPE_CPUPROFILE={}: not profiling: {}",
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
            ts::__private::say(
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
            signal_owner() && (ts::__private::request_stop(sig as u32) || before_start(sig));
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
            deferred::leave_signal(sig) || ts::__private::request_stop(sig as u32)
        }
        // Started since the handler asked (a sampler may run now).
        deferred::Start::NotPending => ts::__private::request_stop(sig as u32),
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
        write_record_line(ts::__private::protocol::marks::UNSAMPLED);
    }
    // SAFETY: restores the mask `block_all` read (a pending signal arrives now).
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    start
}

/// Runs `f`, then puts the calling thread's errno back as it was: a handler, and what a
/// handler calls, must leave the interrupted code's errno alone. Async-signal-safe: the
/// core's, which its sampler's handler uses too.
use ts::__private::keeping_errno;
use ts::__private::protocol::{Line, Reaped};

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
        ts::__private::leave_unanswered(code);
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
    if let Some(code) = ts::__private::take_unanswered_request() {
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
    if !ts::__private::request_stop(sig as u32) {
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
    ts::__private::on_stop_request(on_request);
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

// ---- sigaction: the library's handler stands in for SIGINT's and SIGTERM's default -------
//
// A program that asks for SIGINT's or SIGTERM's default action (dash puts SIGTERM back to it
// as it starts, and SIGINT before it raises it again; Python's `signal.signal(SIGINT,
// SIG_DFL)`; bash's `trap - TERM`) would remove the handler that writes its profile, and a
// `kill` from outside (`timeout`, a supervisor, `record` passing one on) would end it
// unwritten. In the process that installed the handler, such a request leaves
// [`on_terminate`] in the kernel, standing in for the default: it writes the profile, then
// ends the process by the default action. The program is shown the default wherever the
// library's handler is the action (in its fork children too). Whether the handler stands
// in is read from the kernel each time, never remembered: `sigset`, `sysv_signal` (what
// `signal` is under `-std=c99`) or a raw system call may change the action behind the
// library's back.

/// libc's `sigaction` and `signal` (the next object's: this library's own are [`sigaction`]
/// and [`signal`]), found at load (or at the first call, if one comes before the load's
/// constructor), never in a signal handler.
static REAL_SIGACTION: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static REAL_SIGNAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// libc's `wait4` (this library's own is [`wait4`]), found with them.
static REAL_WAIT4: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not looked for yet; 1: looked for (found or not: never looked for again).
static LOOKED_FOR: AtomicU32 = AtomicU32::new(0);

type Sigaction = unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
type Signal = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// Finds libc's `sigaction` and `signal`, once: the next object's (this library preloaded,
/// or linked before libc), else glibc's own names for them (this library linked after libc,
/// whose functions then come first anyway).
fn find_real_signal_functions() {
    // Read before it is written: a shell calls `sigaction` around every fork, and a store,
    // even of the same value, is a copy-on-write fault on this page after each (fork
    // write-protects it): one more fault in the shell for every command it ran.
    if LOOKED_FOR.load(Relaxed) != 0 || LOOKED_FOR.swap(1, Relaxed) != 0 {
        return;
    }
    for (slot, next, own) in [
        (&REAL_SIGACTION, c"sigaction", c"__sigaction"),
        // `ssignal`: glibc's other name for `signal`, which this library does not define.
        (&REAL_SIGNAL, c"signal", c"ssignal"),
        // glibc has no other name for it: in the global scope, this library's own may come
        // first, which `reap` takes for none (the system call is then made directly).
        (&REAL_WAIT4, c"wait4", c"wait4"),
    ] {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name: libc's function, or null.
        let mut f = unsafe { libc::dlsym(libc::RTLD_NEXT, next.as_ptr()) };
        if f.is_null() {
            // SAFETY: as above, in the global scope.
            f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, own.as_ptr()) };
        }
        slot.store(f, Relaxed);
    }
}

/// libc's `sigaction` (what the kernel does, not what the program is shown); -1 with errno
/// ENOSYS if it was not found. Async-signal-safe once looked for at load.
fn real_sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int {
    find_real_signal_functions();
    let f = REAL_SIGACTION.load(Relaxed);
    if f.is_null() {
        set_errno(libc::ENOSYS);
        return -1;
    }
    // SAFETY: `f` is libc's sigaction (found by dlsym under that name), of this type.
    let f = unsafe { std::mem::transmute::<*mut c_void, Sigaction>(f) };
    // SAFETY: the arguments are the caller's, valid or null as sigaction(2) allows.
    unsafe { f(sig, act, old) }
}

/// The handler (or SIG_DFL, SIG_IGN) the kernel has for `sig` now. Async-signal-safe.
fn kernel_action(sig: c_int) -> Option<libc::sighandler_t> {
    // SAFETY: sigaction is plain data; all-zero is valid, and a null new action only reads.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    (real_sigaction(sig, std::ptr::null(), &mut now) == 0).then_some(now.sa_sigaction)
}

/// Sets `sig`'s action in the kernel to `handler` (SIG_DFL or SIG_IGN). Async-signal-safe.
fn set_action(sig: c_int, handler: libc::sighandler_t) {
    // SAFETY: sigaction is plain data; all-zero is valid.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = handler;
    real_sigaction(sig, &sa, std::ptr::null_mut());
}

/// In a fork child that starts a sampler of its own: the SIGINT/SIGTERM handler the parent
/// installed (which the child has) is the child's, as in a process that installed it.
/// The pipe the drain thread says "written" on is the parent's, shared with every other
/// fork child: another's profile written would end this one's wait at `_exit` (a pool's
/// second worker then left none). The child gets one of its own; if it cannot, the handler
/// stays the parent's (the child then dies of the signal as without a sampler). The
/// parent's ends stay open (close-on-exec): the program may have closed them and opened
/// files of its own under their numbers.
pub(super) fn own_signals_in_fork_child() {
    if EXIT_OWNER.load(Relaxed) == 0 {
        return;
    }
    let Ok((read, write)) = pipe_above_stdio() else {
        return;
    };
    EXIT_DONE.store(read, Relaxed);
    EXIT_DONE_WRITE.store(write, Relaxed);
    // A parent's thread that was on its way out as another forked is not in the child.
    EXITING.store(false, Relaxed);
    EXIT_OWNER.store(std::process::id(), Relaxed);
    if SIGNAL_OWNER.load(Relaxed) != 0 {
        SIGNAL_OWNER.store(std::process::id(), Relaxed);
    }
}

/// Whether this process installed the SIGINT/SIGTERM handler (or, a fork child, took it
/// over: [`own_signals_in_fork_child`]).
fn signal_owner() -> bool {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    (unsafe { libc::getpid() }) as u32 == SIGNAL_OWNER.load(Relaxed)
}

/// Whether this process's `_exit` writes its profile ([`EXIT_OWNER`]). Async-signal-safe.
fn exit_owner() -> bool {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    (unsafe { libc::getpid() }) as u32 == EXIT_OWNER.load(Relaxed)
}

/// What the program is shown for an action the kernel has: the default where it is the
/// library's handler.
fn as_shown(handler: libc::sighandler_t) -> libc::sighandler_t {
    if handler == on_terminate as *const () as usize {
        libc::SIG_DFL
    } else {
        handler
    }
}

/// Interposes `sigaction`: for SIGINT and SIGTERM, in the process that installed the
/// library's handler, a request for the default action installs that handler instead, and
/// the handler is shown as the default (see above). Anything else: libc's `sigaction`.
///
/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    if sig != libc::SIGINT && sig != libc::SIGTERM {
        return real_sigaction(sig, act, old);
    }
    // SAFETY: `act` is null or a valid sigaction, as the caller promises.
    let asks_default = unsafe { act.as_ref() }.is_some_and(|a| a.sa_sigaction == libc::SIG_DFL);
    let rc = if asks_default && signal_owner() {
        real_sigaction(sig, &terminate_action(), old)
    } else {
        real_sigaction(sig, act, old)
    };
    if rc == 0 {
        // SAFETY: `old` is null or a valid, writable sigaction, as the caller promises.
        if let Some(old) = unsafe { old.as_mut() } {
            if as_shown(old.sa_sigaction) != old.sa_sigaction {
                // SAFETY: sigaction is plain data; all-zero is SIG_DFL, no flags, no mask.
                *old = unsafe { std::mem::zeroed() };
            }
        }
    }
    rc
}

/// Interposes `signal`: a request of SIGINT's or SIGTERM's default goes through
/// [`sigaction`] (which stands in for it, in the process that installed the library's
/// handler); everything else to libc's `signal`. The library's handler is shown as the
/// default.
///
/// # Safety
/// As `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    if handler == libc::SIG_DFL && (sig == libc::SIGINT || sig == libc::SIGTERM) {
        // SAFETY: sigaction is plain data; all-zero is SIG_DFL, no flags, no mask.
        let default: libc::sigaction = unsafe { std::mem::zeroed() };
        let mut old = default;
        // SAFETY: both point at valid locals.
        return match unsafe { sigaction(sig, &default, &mut old) } {
            0 => old.sa_sigaction,
            _ => libc::SIG_ERR,
        };
    }
    find_real_signal_functions();
    let f = REAL_SIGNAL.load(Relaxed);
    if f.is_null() {
        set_errno(libc::ENOSYS);
        return libc::SIG_ERR;
    }
    // SAFETY: `f` is libc's signal (found by dlsym under that name), of this type.
    let f = unsafe { std::mem::transmute::<*mut c_void, Signal>(f) };
    // SAFETY: the caller's arguments, as signal(2) takes them.
    as_shown(unsafe { f(sig, handler) })
}

/// Interposes `bsd_signal`, glibc's other name for `signal`: as [`signal`].
///
/// # Safety
/// As `signal(2)`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    // SAFETY: the caller's arguments, as signal(2) takes them.
    unsafe { signal(sig, handler) }
}

/// Interposes `sysv_signal`: what glibc's does (a one-shot handler, no mask, no restart),
/// through [`sigaction`], so that a request of SIGINT's or SIGTERM's default is stood in for
/// as there. glibc's own reaches its `sigaction` inside libc, past this library.
///
/// # Safety
/// As `sysv_signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    if handler == libc::SIG_ERR || !(1..=64).contains(&sig) {
        set_errno(libc::EINVAL);
        return libc::SIG_ERR;
    }
    // SAFETY: sigaction is plain data; all-zero is no flags and an empty mask.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESETHAND | libc::SA_NODEFER;
    let mut old = act;
    // SAFETY: both point at valid locals.
    match unsafe { sigaction(sig, &act, &mut old) } {
        0 => old.sa_sigaction,
        _ => libc::SIG_ERR,
    }
}

/// Interposes `__sysv_signal`: what `signal` is in a program built for strict ISO C
/// (`gcc -std=c99`): as [`sysv_signal`].
///
/// # Safety
/// As `sysv_signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn __sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    // SAFETY: the caller's arguments, as sysv_signal(3) takes them.
    unsafe { sysv_signal(sig, handler) }
}

/// Interposes `sigset` (System V): what glibc's does, through [`sigaction`], so that a
/// request of SIGINT's or SIGTERM's default is stood in for as there. `SIG_HOLD` blocks the
/// signal; any other disposition is installed (no flags, no mask) and unblocks it. The
/// previous disposition is returned, `SIG_HOLD` if the signal was blocked.
///
/// # Safety
/// As `sigset(3)`.
#[no_mangle]
pub unsafe extern "C" fn sigset(sig: c_int, disp: libc::sighandler_t) -> libc::sighandler_t {
    const SIG_HOLD: libc::sighandler_t = 2;
    // SAFETY: sigset_t is plain data; sigemptyset fills it in.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    let mut was: libc::sigset_t = set;
    // SAFETY: `set` is a valid, writable sigset_t.
    if unsafe { libc::sigemptyset(&mut set) } != 0 || unsafe { libc::sigaddset(&mut set, sig) } != 0
    {
        return libc::SIG_ERR;
    }
    // SAFETY: sigaction is plain data; all-zero is no flags and an empty mask.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    let mut old = act;
    if disp == SIG_HOLD {
        // SAFETY: valid sets; the calling thread's mask, as sigprocmask(2) changes it.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut was) };
        if rc != 0 {
            // As glibc's sigprocmask: the error in errno.
            set_errno(rc);
            return libc::SIG_ERR;
        }
        // SAFETY: `was` was filled in above.
        if unsafe { libc::sigismember(&was, sig) } == 1 {
            return SIG_HOLD;
        }
        // SAFETY: a null action asks only for the current one, into a valid local.
        return match unsafe { sigaction(sig, std::ptr::null(), &mut old) } {
            0 => old.sa_sigaction,
            _ => libc::SIG_ERR,
        };
    }
    act.sa_sigaction = disp;
    // SAFETY: both point at valid locals.
    if unsafe { sigaction(sig, &act, &mut old) } != 0 {
        return libc::SIG_ERR;
    }
    // SAFETY: valid sets, as above.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, &mut was) };
    if rc != 0 {
        // As glibc's sigprocmask: the error in errno.
        set_errno(rc);
        return libc::SIG_ERR;
    }
    // SAFETY: `was` was filled in above.
    match unsafe { libc::sigismember(&was, sig) } {
        1 => SIG_HOLD,
        _ => old.sa_sigaction,
    }
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
        ts::__private::above_stdio(fds[0]),
        ts::__private::above_stdio(fds[1]),
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
        write_record_line(ts::__private::protocol::marks::FORK_CHILD);
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
    let Some(cpu) = ts::__private::process_cpu_ns() else {
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
    let children = ts::__private::children_cpu_ns().ok();
    let line = Line::process(mark.as_bytes(), pid, cpu, children, name);
    ts::__private::say_to_record_in_signal(line.bytes());
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

// ---- Reaping children ----------------------------------------------------------------------
// A process `record` runs writes its line (or profile) before it ends; the kernel's work as it
// ends (unmapping its memory: a tenth of a `/bin/true`'s CPU time) comes after, and only its
// parent learns of it, from the CPU time `wait4` gives as it reaps it. Under `record`, a
// profiled parent passes that on (see `REAPED_MARK`), whichever of the four calls it reaps
// with. `waitid` is left alone: it gives no CPU time finer than clock ticks.

type Wait4 = unsafe extern "C" fn(libc::pid_t, *mut c_int, c_int, *mut libc::rusage) -> libc::pid_t;

/// Interposes `wait4` (see above).
///
/// # Safety
/// As `wait4(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait4(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    reap(pid, status, options, usage)
}

/// Interposes `waitpid`: `wait4` without the CPU time, as glibc's.
///
/// # Safety
/// As `waitpid(2)`.
#[no_mangle]
pub unsafe extern "C" fn waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    reap(pid, status, options, std::ptr::null_mut())
}

/// Interposes `wait`: `wait4(-1, status, 0, NULL)`, as glibc's.
///
/// # Safety
/// As `wait(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait(status: *mut c_int) -> libc::pid_t {
    reap(-1, status, 0, std::ptr::null_mut())
}

/// Interposes `wait3`: `wait4(-1, ...)`, as glibc's.
///
/// # Safety
/// As `wait3(2)`.
#[no_mangle]
pub unsafe extern "C" fn wait3(
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    reap(-1, status, options, usage)
}

/// libc's `wait4` with the caller's arguments (the status and CPU time into buffers of ours
/// where the caller passed none); a child that ended is said to `record` with its CPU time.
/// Async-signal-safe (shells reap in their SIGCHLD handler): libc's `wait4` or the system
/// call, and a line written from the stack; errno as `wait4` left it.
fn reap(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    let mut own_status: c_int = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (integers and timevals only).
    let mut own_usage: libc::rusage = unsafe { std::mem::zeroed() };
    let status = if status.is_null() {
        &mut own_status
    } else {
        status
    };
    let usage = if usage.is_null() {
        &mut own_usage
    } else {
        usage
    };
    let f = REAL_WAIT4.load(Relaxed);
    let reaped = if f.is_null() || f == wait4 as *mut c_void {
        // SAFETY: wait4's system call with valid status and rusage buffers.
        unsafe {
            libc::syscall(
                libc::SYS_wait4,
                pid as libc::c_long,
                status,
                options as libc::c_long,
                usage,
            ) as libc::pid_t
        }
    } else {
        // SAFETY: `f` is libc's wait4 (found by dlsym under that name), of this type.
        let f = unsafe { std::mem::transmute::<*mut c_void, Wait4>(f) };
        // SAFETY: valid status and rusage buffers (the caller's, or ours).
        unsafe { f(pid, status, options, usage) }
    };
    if reaped > 0 {
        // SAFETY: wait4 wrote the status of the child it returned.
        let st = unsafe { *status };
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            keeping_errno(|| {
                // SAFETY: wait4 filled in the rusage of the child it reaped.
                let cpu = ts::__private::rusage_cpu_ns(unsafe { &*usage });
                let line = Line::reaped(Reaped {
                    pid: reaped as u32,
                    cpu_ns: cpu,
                });
                ts::__private::say_to_record_in_signal(line.bytes());
            });
        }
    }
    reaped
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
    if ts::__private::request_stop(EXIT_REQUEST) {
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

// ---- Threads: sampled from their first instruction ---------------------------------------

/// A thread's start routine and its argument, carried to [`thread_start`].
struct Start {
    routine: unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
}

/// The `pthread_create` this one stands in front of (libc's), found once.
static REAL_PTHREAD_CREATE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

/// libc's `pthread_create`, its start routine spelt with the unwinding ABI of the same
/// calling convention (see [`pthread_create`]).
pub(super) type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> c_int;

/// libc's `pthread_create` (the next object's), found once; `None` if there is none.
pub(super) fn real_pthread_create() -> Option<PthreadCreate> {
    let mut real = REAL_PTHREAD_CREATE.load(Relaxed);
    if real.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name: the next object's symbol,
        // libc's pthread_create (its default version), or null.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) };
        if real.is_null() {
            return None;
        }
        REAL_PTHREAD_CREATE.store(real, Relaxed);
    }
    // SAFETY: `real` is libc's pthread_create, whose signature PthreadCreate spells.
    Some(unsafe { std::mem::transmute::<*mut c_void, PthreadCreate>(real) })
}

/// Interposes libc's `pthread_create` (this library is preloaded, or linked before libc): a
/// new thread arms its sampling timer before its start routine runs, so its whole CPU time is
/// sampled, where the sampler's 10 ms poll of `/proc/self/task` would find it late (and
/// later still on a busy machine). With no sampler running, the call goes straight to libc's.
///
/// # Safety
/// As `pthread_create(3)`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real_pthread_create() else {
        return libc::ENOSYS;
    };
    // SAFETY: the same function pointer with the unwinding ABI of the same calling
    // convention: a forced unwind (pthread_exit, cancellation) may pass through
    // `thread_start` into libc's frame, as it would without us.
    let routine = unsafe {
        std::mem::transmute::<
            extern "C" fn(*mut c_void) -> *mut c_void,
            unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
        >(routine)
    };
    // tickscope's own threads (a capture's, say) are found by the sampler's poll, if
    // they live that long: they mostly wait, and arming each at once cost every profiled
    // process a round trip to the drain thread.
    let own = ts::__private::spawning_own_thread();
    if !own {
        // A sampler whose start was deferred starts now, so that the new thread is armed
        // from its first instruction. Not waited for if another thread is starting it (that
        // start may wait for a lock this thread holds, the loader's in a constructor): the
        // sampler's poll then finds the new thread.
        deferred::start_now_if_pending(false);
    }
    if !ts::sampler::running_here() || own {
        // SAFETY: the caller's arguments, as given.
        return unsafe { real(thread, attr, routine, arg) };
    }
    let start = Box::into_raw(Box::new(Start { routine, arg }));
    // SAFETY: the caller's thread and attributes; `thread_start` takes ownership of `start`.
    let rc = unsafe { real(thread, attr, thread_start, start.cast()) };
    if rc != 0 {
        // No thread was made: the box is still ours.
        // SAFETY: allocated just above by Box::into_raw and not handed to any thread.
        drop(unsafe { Box::from_raw(start) });
    }
    rc
}

/// The new thread's first code: asks the sampler to arm its timer (and waits for it), then
/// runs the program's start routine. Holds nothing across that call (no destructor runs on
/// the way out), so pthread_exit and cancellation unwind through it as through libc's frame.
extern "C-unwind" fn thread_start(start: *mut c_void) -> *mut c_void {
    // SAFETY: `start` is the Box that pthread_create handed to this thread alone.
    let Start { routine, arg } = *unsafe { Box::from_raw(start.cast::<Start>()) };
    let _ = catch_unwind(ts::sampler::adopt_current_thread);
    // SAFETY: the program's start routine with its own argument, as libc would call it.
    unsafe { routine(arg) }
}
