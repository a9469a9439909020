//! The C ABI of libtickscope (`include/tickscope.h`), the load-time constructor that reads
//! `TICKSCOPE_CPUPROFILE`, and the exit and signal hooks. All of this crate's `unsafe` is here.
//!
//! Every exported function runs its body under `catch_unwind`: a panic becomes
//! `TICKSCOPE_EPANIC` (or a zero value) and a message for `tickscope_last_error`, never an
//! unwind into C.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering::*};
use std::sync::{Mutex, Once};

use ts::__private::{Callsite, Kind, Name};
use ts::sampler::Mode;
use ts::{Scope, Timer};

use crate::profile::{self, Settings};
use crate::{Code, Failure};

/// Room for one message, NUL included; longer ones are cut (at a character boundary).
const ERROR_BYTES: usize = 512;

thread_local! {
    /// The calling thread's last failure, for `tickscope_last_error`: a fixed buffer, so a
    /// pointer the program holds stays valid (its text changes with the next failure).
    static LAST_ERROR: RefCell<[u8; ERROR_BYTES]> = const { RefCell::new([0; ERROR_BYTES]) };
}

/// Records `f` as the calling thread's last error; returns its code.
fn fail(f: Failure) -> c_int {
    let mut text = f.message.replace('\0', " ");
    while text.len() >= ERROR_BYTES {
        text.pop();
    }
    let _ = LAST_ERROR.try_with(|e| {
        let mut e = e.borrow_mut();
        e[..text.len()].copy_from_slice(text.as_bytes());
        e[text.len()] = 0;
    });
    f.code as c_int
}

fn panic_failure(p: Box<dyn std::any::Any + Send>) -> Failure {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    Failure::new(
        Code::Panic,
        format!("internal error in libtickscope: {what}"),
    )
}

/// Runs a fallible export: 0, or the failure's code.
fn call(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => crate::ffi::TICKSCOPE_OK,
        Ok(Err(e)) => fail(e),
        Err(p) => fail(panic_failure(p)),
    }
}

/// Runs an export that returns a value: `zero` when it fails.
fn value<T>(zero: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            fail(e);
            zero
        }
        Err(p) => {
            fail(panic_failure(p));
            zero
        }
    }
}

const TICKSCOPE_OK: c_int = 0;

fn null(what: &str) -> Failure {
    Failure::new(Code::Invalid, format!("{what} is a null pointer"))
}

/// The text of a C string, `None` for a null pointer.
///
/// # Safety
/// `s` is null or points to a NUL-terminated string that stays valid while the result is used.
unsafe fn text<'a>(s: *const c_char) -> Option<&'a CStr> {
    // SAFETY: the caller's contract.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) })
}

/// A C string copied into memory that lives as long as the process (call-site names).
fn leak(s: &CStr) -> &'static str {
    Box::leak(s.to_string_lossy().into_owned().into_boxed_str())
}

/// Why the calling thread's last failing call failed.
#[no_mangle]
pub extern "C" fn tickscope_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.as_ptr() as *const c_char)
        .unwrap_or(c"".as_ptr())
}

/// The library's version.
#[no_mangle]
pub extern "C" fn tickscope_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

// ---- Scopes ------------------------------------------------------------------------------

/// A C call site, as `tickscope.h` declares it.
#[repr(C)]
pub struct tickscope_callsite {
    name: *const c_char,
    file: *const c_char,
    function: *const c_char,
    line: c_int,
    kind: c_int,
    registered: *mut c_void,
}

/// Storage for an open [`Scope`], as `tickscope.h` declares it.
#[repr(C)]
pub struct tickscope_scope {
    opaque: [*mut c_void; 6],
}

const _: () = assert!(
    std::mem::size_of::<Scope>() <= std::mem::size_of::<tickscope_scope>()
        && std::mem::align_of::<Scope>() <= std::mem::align_of::<tickscope_scope>()
);

const KIND_SCOPE: c_int = 0;
const KIND_GROUP: c_int = 1;
const KIND_FUNCTION: c_int = 2;

/// Serialises the first use of C call sites (the Rust registry has its own lock; this one
/// keeps two threads from leaking two `Callsite`s for one C site).
static REGISTER: Mutex<()> = Mutex::new(());

/// The Rust call site behind a C one, created on first use.
///
/// # Safety
/// `site` is null or points to a `tickscope_callsite` with static storage duration whose
/// `registered` field only this library writes.
unsafe fn callsite(site: *mut tickscope_callsite) -> Result<&'static Callsite, Failure> {
    if site.is_null() {
        return Err(null("the call site"));
    }
    // SAFETY: `site` is valid (caller's contract): the field's address is in bounds.
    let field = unsafe { addr_of_mut!((*site).registered) };
    // SAFETY: `registered` is a pointer-sized, aligned field that every thread reads and
    // writes only through this atomic view, for as long as the process lives.
    let registered = unsafe { AtomicPtr::from_ptr(field) };
    let p = registered.load(Acquire);
    if !p.is_null() {
        // SAFETY: only `register` stores here: a leaked, never freed `Callsite`.
        return Ok(unsafe { &*(p as *const Callsite) });
    }
    // SAFETY: as above; `register` reads the site's other fields.
    unsafe { register(site, registered) }
}

/// # Safety
/// As [`callsite`]; `registered` is the site's `registered` field.
#[cold]
unsafe fn register(
    site: *mut tickscope_callsite,
    registered: &AtomicPtr<c_void>,
) -> Result<&'static Callsite, Failure> {
    let _lock = REGISTER.lock().unwrap_or_else(|p| p.into_inner());
    let p = registered.load(Acquire);
    if !p.is_null() {
        // SAFETY: a leaked `Callsite` stored by another thread under this lock.
        return Ok(unsafe { &*(p as *const Callsite) });
    }
    // SAFETY: `site` is valid (caller's contract). The reference lives only for the copies
    // below: `registered`, the one field that changes, is written only under REGISTER, which
    // this thread holds, and only after them.
    let s = unsafe { &*site };
    let read = |p: *const c_char| -> Option<&'static CStr> {
        // SAFETY: the header requires these to be null or NUL-terminated strings with
        // static storage (string literals, __FILE__, __func__).
        unsafe { text(p) }
    };
    let (name, file, function) = (read(s.name), read(s.file), read(s.function));
    let (line, kind) = (s.line, s.kind);
    let clean = |f: &CStr| -> &'static str {
        let name = crate::names::function_name(&f.to_string_lossy()).to_owned();
        Box::leak(name.into_boxed_str())
    };
    let (name, kind) = match (kind, name, function) {
        (KIND_SCOPE, Some(n), _) => (leak(n), Kind::Scope),
        (KIND_SCOPE, None, Some(f)) | (KIND_FUNCTION, _, Some(f)) => (clean(f), Kind::Scope),
        (KIND_SCOPE | KIND_FUNCTION, _, None) => return Err(null("the call site's name")),
        (KIND_GROUP, Some(n), _) => (leak(n), Kind::Group),
        (KIND_GROUP, None, _) => return Err(null("the group's name")),
        (k, _, _) => {
            return Err(Failure::new(
                Code::Invalid,
                format!("call site kind {k} is none of TICKSCOPE_KIND_*"),
            ))
        }
    };
    let file = file.map_or("<unknown>", leak);
    let module = function.map_or("", leak);
    let cs: &'static Callsite = Box::leak(Box::new(Callsite::new(
        Name::Static(name),
        kind,
        file,
        line.max(0) as u32,
        module,
    )));
    registered.store(cs as *const Callsite as *mut c_void, Release);
    Ok(cs)
}

/// Opens a scope of `site` on the calling thread, into `scope`.
///
/// # Safety
/// `site` as the header says (static storage); `scope` is null or writable storage for a
/// `tickscope_scope`.
#[no_mangle]
pub unsafe extern "C" fn tickscope_scope_begin(
    site: *mut tickscope_callsite,
    scope: *mut tickscope_scope,
) -> c_int {
    call(|| {
        if scope.is_null() {
            return Err(null("the scope"));
        }
        let out = scope as *mut Scope;
        // SAFETY: `scope` is writable storage (caller's contract) large and aligned enough
        // for a `Scope` (asserted above); an inert scope first, so that ending it is harmless
        // whatever happens below. Nothing is read or dropped.
        unsafe { out.write(Scope::inert()) };
        // SAFETY: the caller's contract for `site`.
        let cs = unsafe { callsite(site)? };
        let open = ts::__private::enter(cs);
        // SAFETY: as above; the inert scope written there needs no drop.
        unsafe { out.write(open) };
        Ok(())
    })
}

/// Closes a scope opened by [`tickscope_scope_begin`]; a second call does nothing.
///
/// # Safety
/// `scope` is null or was filled in by `tickscope_scope_begin` on this thread.
#[no_mangle]
pub unsafe extern "C" fn tickscope_scope_end(scope: *mut tickscope_scope) -> c_int {
    call(|| {
        if scope.is_null() {
            return Err(null("the scope"));
        }
        // SAFETY: `scope` holds a `Scope` written by `tickscope_scope_begin` (caller's
        // contract); it is replaced by an inert one, so it is dropped (closed) once.
        let open = unsafe { (scope as *mut Scope).replace(Scope::inert()) };
        drop(open);
        Ok(())
    })
}

/// What `__attribute__((cleanup))` calls.
///
/// # Safety
/// As [`tickscope_scope_end`].
#[no_mangle]
pub unsafe extern "C" fn tickscope_scope_cleanup_(scope: *mut tickscope_scope) {
    // SAFETY: the same contract.
    unsafe { tickscope_scope_end(scope) };
}

/// Recording on or off.
#[no_mangle]
pub extern "C" fn tickscope_set_enabled(on: c_int) -> c_int {
    call(|| {
        ts::set_enabled(on != 0);
        Ok(())
    })
}

/// 1 if scopes record now.
#[no_mangle]
pub extern "C" fn tickscope_is_enabled() -> c_int {
    value(0, || Ok(ts::is_enabled() as c_int))
}

/// Prints the summary now.
#[no_mangle]
pub extern "C" fn tickscope_report() -> c_int {
    call(|| {
        ts::report();
        Ok(())
    })
}

// ---- Timer -------------------------------------------------------------------------------

/// Storage for a [`Timer`], as `tickscope.h` declares it.
#[repr(C)]
pub struct tickscope_timer {
    opaque: [u64; 3],
}

const _: () = assert!(
    std::mem::size_of::<Timer>() <= std::mem::size_of::<tickscope_timer>()
        && std::mem::align_of::<Timer>() <= std::mem::align_of::<tickscope_timer>()
);

/// Starts a timer now.
///
/// # Safety
/// `timer` is null or writable storage for a `tickscope_timer`.
#[no_mangle]
pub unsafe extern "C" fn tickscope_timer_create(timer: *mut tickscope_timer) -> c_int {
    call(|| {
        if timer.is_null() {
            return Err(null("the timer"));
        }
        // SAFETY: writable storage, large and aligned enough (caller's contract, assert).
        unsafe { (timer as *mut Timer).write(Timer::start()) };
        Ok(())
    })
}

/// Restarts a timer now.
///
/// # Safety
/// As [`tickscope_timer_create`].
#[no_mangle]
pub unsafe extern "C" fn tickscope_timer_reset(timer: *mut tickscope_timer) -> c_int {
    // SAFETY: the same contract.
    unsafe { tickscope_timer_create(timer) }
}

/// Seconds since the start.
///
/// # Safety
/// `timer` is null or was filled in by `tickscope_timer_create`.
#[no_mangle]
pub unsafe extern "C" fn tickscope_timer_elapsed(timer: *const tickscope_timer) -> f64 {
    value(0.0, || {
        if timer.is_null() {
            return Err(null("the timer"));
        }
        // SAFETY: a `Timer` written by `tickscope_timer_create` (caller's contract); it is
        // `Copy`, plain numbers.
        let t = unsafe { (timer as *const Timer).read() };
        Ok(t.elapsed())
    })
}

/// Ticks since the start; with `reset`, restarts at the same reading.
///
/// # Safety
/// As [`tickscope_timer_elapsed`], and writable.
#[no_mangle]
pub unsafe extern "C" fn tickscope_timer_elapsed_ticks(
    timer: *mut tickscope_timer,
    reset: c_int,
) -> u64 {
    value(0, || {
        if timer.is_null() {
            return Err(null("the timer"));
        }
        // SAFETY: as in `tickscope_timer_elapsed`; the updated timer is written back.
        let t = unsafe { &mut *(timer as *mut Timer) };
        Ok(t.elapsed_ticks(reset != 0))
    })
}

/// The calibrated tick rate.
#[no_mangle]
pub extern "C" fn tickscope_ticks_per_second() -> u64 {
    value(0, || Ok(ts::ticks_per_second()))
}

/// The counter now.
#[no_mangle]
pub extern "C" fn tickscope_ticks() -> u64 {
    value(0, || Ok(ts::now()))
}

/// Milliseconds since 1970.
#[no_mangle]
pub extern "C" fn tickscope_system_time_ms() -> u64 {
    value(0, || Ok(ts::system_time_ms()))
}

// ---- Sampler -----------------------------------------------------------------------------

/// Starts sampling; the profile goes to `path`.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tickscope_sampler_start(hz: c_uint, path: *const c_char) -> c_int {
    // SAFETY: the same contract.
    unsafe { tickscope_sampler_start_mode(hz, path, 0) }
}

/// Starts sampling CPU (`mode` 0) or wall-clock (1) time.
///
/// # Safety
/// `path` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tickscope_sampler_start_mode(
    hz: c_uint,
    path: *const c_char,
    mode: c_int,
) -> c_int {
    call(|| {
        // SAFETY: the caller's contract.
        let path = unsafe { text(path) }.ok_or_else(|| null("the profile path"))?;
        let mode = match mode {
            0 => Mode::Cpu,
            1 => Mode::Wall,
            m => {
                return Err(Failure::new(
                    Code::Invalid,
                    format!("mode {m} is neither TICKSCOPE_MODE_CPU nor TICKSCOPE_MODE_WALL"),
                ))
            }
        };
        profile::start(&Settings {
            hz,
            mode,
            path: PathBuf::from(OsStr::from_bytes(path.to_bytes())),
            signal: None,
            whole_process: false,
        })?;
        write_at_exit();
        Ok(())
    })
}

/// Stops sampling and writes the profile.
#[no_mangle]
pub extern "C" fn tickscope_sampler_stop() -> c_int {
    call(|| profile::stop().map(drop))
}

/// Writes the profile so far; sampling goes on.
#[no_mangle]
pub extern "C" fn tickscope_sampler_flush() -> c_int {
    call(|| profile::flush().map(drop))
}

// ---- Capture -----------------------------------------------------------------------------

/// Starts a capture to `sink`.
///
/// # Safety
/// `sink` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn tickscope_capture_start(sink: *const c_char) -> c_int {
    use ts::capture::{ErrorKind, Sink};
    call(|| {
        // SAFETY: the caller's contract.
        let s = unsafe { text(sink) }.ok_or_else(|| null("the capture sink"))?;
        let s = s.to_string_lossy();
        let sink = Sink::parse(&s).ok_or_else(|| {
            Failure::new(
                Code::Invalid,
                format!(
                    "capture sink {s:?}: expected PATH, tcp://HOST:PORT or flight:DURATION[:PATH]"
                ),
            )
        })?;
        let capture = ts::capture::start(sink).map_err(|e| {
            let code = match e.kind() {
                ErrorKind::AlreadyRunning => Code::State,
                ErrorKind::Io => Code::Io,
                ErrorKind::Unsupported => Code::Unsupported,
                _ => Code::Invalid,
            };
            Failure::new(code, e.to_string())
        })?;
        // C has no handle to drop: the capture runs until tickscope_capture_stop (the
        // process's capture, whoever started it) or the process's exit.
        std::mem::forget(capture);
        Ok(())
    })
}

/// Stops the capture.
#[no_mangle]
pub extern "C" fn tickscope_capture_stop() -> c_int {
    call(|| {
        ts::capture::stop()
            .map(drop)
            .ok_or_else(|| Failure::new(Code::State, "no capture is running"))
    })
}

// ---- Load, exit, signals -----------------------------------------------------------------

/// Runs when the library is loaded (LD_PRELOAD or linked): starts the profile that
/// `TICKSCOPE_CPUPROFILE` asks for.
#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

extern "C" fn on_load() {
    let _ = catch_unwind(start_from_env);
}

fn start_from_env() {
    // The library's messages go to the standard error the program starts with, never into
    // a file the program opens later as descriptor 2.
    ts::__private::keep_stderr();
    let pid = std::process::id();
    let mut warn = |w: String| ts::__private::say(&format!("tickscope: {w}"));
    let Some((mut settings, extras)) =
        profile::settings_from_env(ts::__private::env_var, pid, &mut warn)
    else {
        return;
    };
    if extras.root {
        // Programs this one execs profile into files of their own (see the crate docs).
        std::env::set_var("TICKSCOPE_CPUPROFILE_PID", pid.to_string());
    }
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
        return;
    }
    write_at_exit();
    if extras.on_signals {
        if let Err(e) = write_on_signals() {
            ts::__private::say(&format!(
                "tickscope: TICKSCOPE_CPUPROFILE_SIGNALS=1: {e}; the profile is written at exit only"
            ));
        }
    }
}

/// Registers the exit hook once: a running sampler's profile is written when the program
/// exits (`exit()` or a return from `main`).
fn write_at_exit() {
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

/// The pipe's write end: the signal handler's only way to the writer thread.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handlers (a fork child dies of the signal directly).
static SIGNAL_OWNER: AtomicU32 = AtomicU32::new(0);

/// SIGINT/SIGTERM: hands the signal to the writer thread. Async-signal-safe: `getpid`,
/// `write`, `signal`, `raise` only, and errno preserved.
extern "C" fn on_terminate(sig: c_int) {
    // SAFETY: no preconditions: the calling thread's errno slot.
    let slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid and aligned; saving errno is what a handler must do.
    let errno = unsafe { *slot };
    let fd = SIGNAL_PIPE.load(Relaxed);
    // SAFETY: getpid is async-signal-safe and has no preconditions.
    let here = unsafe { libc::getpid() } as u32 == SIGNAL_OWNER.load(Relaxed);
    let byte = sig as u8;
    // SAFETY: `write` of one byte from a local to the pipe (async-signal-safe); a full pipe
    // (signals already queued) or a bad descriptor only makes it fail.
    let handed = here && fd >= 0 && unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) } == 1;
    if !handed {
        // A fork child (no writer thread) or no pipe: die of the signal as without us.
        // SAFETY: `signal` is async-signal-safe; SIG_DFL is a valid disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        // SAFETY: `raise` is async-signal-safe.
        unsafe { libc::raise(sig) };
    }
    // SAFETY: as above: restores the interrupted code's errno.
    unsafe { *slot = errno };
}

/// With `TICKSCOPE_CPUPROFILE_SIGNALS=1`: SIGINT and SIGTERM write the profile, then the
/// process dies of the signal as it would have. Dispositions the program inherited as
/// ignored stay ignored; handlers the program installs later replace ours.
fn write_on_signals() -> std::io::Result<()> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Never descriptors 0-2, which a program started with them closed will open as its own
    // standard streams.
    let read_fd = ts::__private::above_stdio(fds[0]);
    let write_fd = ts::__private::above_stdio(fds[1]);
    let (read_fd, write_fd) = match (read_fd, write_fd) {
        (Ok(r), Ok(w)) => (r, w),
        (r, w) => {
            for fd in [&r, &w].into_iter().flatten() {
                // SAFETY: closes a pipe end this function opened and nothing else holds.
                unsafe { libc::close(*fd) };
            }
            return Err(r.and(w).expect_err("one of them failed"));
        }
    };
    std::thread::Builder::new()
        .name("tickscope-signals".into())
        .spawn(move || loop {
            let mut byte = 0u8;
            // SAFETY: reads one byte into a local from the pipe this thread owns.
            let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            if n != 1 {
                return;
            }
            let sig = byte as c_int;
            // Only the handler writes here, and only these two; anything else is not ours to
            // act on (the program closed our descriptor and reused its number).
            if sig != libc::SIGINT && sig != libc::SIGTERM {
                continue;
            }
            let _ = catch_unwind(|| profile::finish(&format!("on signal {sig}")));
            // SAFETY: restores the default action (a valid disposition) ...
            unsafe { libc::signal(sig, libc::SIG_DFL) };
            // ... and sends the signal again: the process ends as it would have without
            // the profiler.
            // SAFETY: kill to our own pid; no memory is involved.
            unsafe { libc::kill(std::process::id() as libc::pid_t, sig) };
        })?;
    SIGNAL_OWNER.store(std::process::id(), Relaxed);
    SIGNAL_PIPE.store(write_fd, Relaxed);
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is plain data; all-zero is valid, and a null new action only
        // reads the current one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) };
        if old.sa_sigaction != libc::SIG_DFL {
            continue;
        }
        // SAFETY: as above.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_terminate as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa.sa_mask` is a valid sigset_t to clear.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: installs a handler that is async-signal-safe (see `on_terminate`).
        unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
    }
    Ok(())
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
type PthreadCreate = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
    *mut c_void,
) -> c_int;

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
    let mut real = REAL_PTHREAD_CREATE.load(Relaxed);
    if real.is_null() {
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name: the next object's symbol,
        // libc's pthread_create (its default version), or null.
        real = unsafe { libc::dlsym(libc::RTLD_NEXT, c"pthread_create".as_ptr()) };
        if real.is_null() {
            return libc::ENOSYS;
        }
        REAL_PTHREAD_CREATE.store(real, Relaxed);
    }
    // SAFETY: `real` is libc's pthread_create, whose signature PthreadCreate spells.
    let real: PthreadCreate = unsafe { std::mem::transmute::<*mut c_void, PthreadCreate>(real) };
    // SAFETY: the same function pointer with the unwinding ABI of the same calling
    // convention: a forced unwind (pthread_exit, cancellation) may pass through
    // `thread_start` into libc's frame, as it would without us.
    let routine = unsafe {
        std::mem::transmute::<
            extern "C" fn(*mut c_void) -> *mut c_void,
            unsafe extern "C-unwind" fn(*mut c_void) -> *mut c_void,
        >(routine)
    };
    if !ts::sampler::running_here() {
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
