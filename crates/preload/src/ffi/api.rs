//! The exported C API (`include/tickscope.h`): scopes, the timer, the sampler, the capture.

use super::*;

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
        // A sampler whose start the library deferred (under `record`) runs first: this one
        // is then refused as a second.
        crate::ffi::start_now_if_pending(true);
        profile::start(&Settings {
            hz,
            mode,
            path: PathBuf::from(OsStr::from_bytes(path.to_bytes())),
            signal: None,
            whole_process: false,
            unwind: ts::sampler::Unwind::Tables,
            line_if_unsampled: false,
        })?;
        write_at_exit();
        Ok(())
    })
}

/// Stops sampling and writes the profile.
#[no_mangle]
pub extern "C" fn tickscope_sampler_stop() -> c_int {
    call(|| {
        crate::ffi::start_now_if_pending(true);
        let stopped = profile::stop(false).map(drop);
        // A SIGINT/SIGTERM that came as this stopped the sampler ends the process now.
        crate::ffi::answer_unanswered();
        stopped
    })
}

/// Writes the profile so far; sampling goes on.
#[no_mangle]
pub extern "C" fn tickscope_sampler_flush() -> c_int {
    call(|| {
        crate::ffi::start_now_if_pending(true);
        profile::flush().map(drop)
    })
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
