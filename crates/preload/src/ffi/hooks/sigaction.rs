//! The interposed `sigaction` and `signal` family: the library's handler stands in for SIGINT's
//! and SIGTERM's default.

use super::*;

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
pub(super) static REAL_SIGACTION: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
pub(super) static REAL_SIGNAL: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// libc's `wait4` (this library's own is [`wait4`]), found with them.
pub(super) static REAL_WAIT4: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// 0: not looked for yet; 1: looked for (found or not: never looked for again).
pub(super) static LOOKED_FOR: AtomicU32 = AtomicU32::new(0);

pub(super) type Sigaction =
    unsafe extern "C" fn(c_int, *const libc::sigaction, *mut libc::sigaction) -> c_int;
pub(super) type Signal = unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t;

/// Finds libc's `sigaction` and `signal`, once: the next object's (this library preloaded,
/// or linked before libc), else glibc's own names for them (this library linked after libc,
/// whose functions then come first anyway).
pub(super) fn find_real_signal_functions() {
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
pub(super) fn real_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
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
pub(super) fn kernel_action(sig: c_int) -> Option<libc::sighandler_t> {
    // SAFETY: sigaction is plain data; all-zero is valid, and a null new action only reads.
    let mut now: libc::sigaction = unsafe { std::mem::zeroed() };
    (real_sigaction(sig, std::ptr::null(), &mut now) == 0).then_some(now.sa_sigaction)
}

/// Sets `sig`'s action in the kernel to `handler` (SIG_DFL or SIG_IGN). Async-signal-safe.
pub(super) fn set_action(sig: c_int, handler: libc::sighandler_t) {
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
pub(in crate::ffi) fn own_signals_in_fork_child() {
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
pub(super) fn signal_owner() -> bool {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    (unsafe { libc::getpid() }) as u32 == SIGNAL_OWNER.load(Relaxed)
}

/// Whether this process's `_exit` writes its profile ([`EXIT_OWNER`]). Async-signal-safe.
pub(super) fn exit_owner() -> bool {
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    (unsafe { libc::getpid() }) as u32 == EXIT_OWNER.load(Relaxed)
}

/// What the program is shown for an action the kernel has: the default where it is the
/// library's handler.
pub(super) fn as_shown(handler: libc::sighandler_t) -> libc::sighandler_t {
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
